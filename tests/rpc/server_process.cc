#include "server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace crosstune::testing {

std::string MakeTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/ct-rpc-test-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return "";
  return tmpl;
}

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& args,
                                                    std::string* error, const std::string& binary) {
  auto p = std::unique_ptr<ServerProcess>(new ServerProcess());
  p->work_dir_ = MakeTempDir();
  // CROSSTUNE_TEST_SERVER / CROSSTUNE_TEST_SERVER_PREFIX run the same tests against another
  // build, e.g. the aarch64 server under "qemu-aarch64 -L /usr/aarch64-linux-gnu".
  const char* env_bin = std::getenv("CROSSTUNE_TEST_SERVER");
  std::string bin = !binary.empty() ? binary : env_bin && *env_bin ? env_bin : CT_SERVER_BIN;
  std::vector<std::string> argv;
  if (const char* prefix = std::getenv("CROSSTUNE_TEST_SERVER_PREFIX")) {
    std::string word;
    for (const char* p = prefix;; ++p) {
      if (*p == ' ' || *p == '\0') {
        if (!word.empty()) argv.push_back(word);
        word.clear();
        if (*p == '\0') break;
      } else {
        word += *p;
      }
    }
  }
  std::vector<std::string> own = {bin, "--host", "127.0.0.1", "--work-dir", p->work_dir_};
  if (std::find(args.begin(), args.end(), "--port") == args.end()) {
    own.insert(own.end(), {"--port", "0"});
  }
  argv.insert(argv.end(), own.begin(), own.end());
  argv.insert(argv.end(), args.begin(), args.end());
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    *error = "pipe failed";
    return nullptr;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    *error = "fork failed";
    return nullptr;
  }
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execvp(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  p->pid_ = pid;
  p->stdout_fd_ = out[0];
  // Read the first line, with a generous limit so a loaded machine does not fail the test.
  std::string line;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (line.find('\n') == std::string::npos) {
    pollfd pfd{out[0], POLLIN, 0};
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    until - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0 || ::poll(&pfd, 1, left) <= 0) {
      *error = "server printed no listening line";
      return nullptr;
    }
    char buf[256];
    ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n <= 0) {
      *error = "server exited before listening: " + line;
      return nullptr;
    }
    line.append(buf, static_cast<size_t>(n));
  }
  const std::string prefix = "crosstune-server: listening on ";
  if (line.rfind(prefix, 0) != 0) {
    *error = "unexpected first line: " + line;
    return nullptr;
  }
  auto colon = line.rfind(':');
  p->port_ = static_cast<uint16_t>(std::atoi(line.c_str() + colon + 1));
  return p;
}

bool ServerProcess::alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

int ServerProcess::Terminate() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 3000; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  std::error_code ec;
  if (!work_dir_.empty()) std::filesystem::remove_all(work_dir_, ec);
}

std::vector<std::string> ServerProcess::Workspaces() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(work_dir_, ec)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

bool ServerProcess::WaitForNoWorkspaces(double seconds) const {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (Workspaces().empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Workspaces().empty();
}

}  // namespace crosstune::testing
