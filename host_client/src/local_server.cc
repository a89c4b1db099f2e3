#include "crosstune/client/local_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace crosstune::client {

std::string FindServerBinary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path dir = self.parent_path();
    for (const auto& p : {dir / "crosstune-server", dir / ".." / "rpc_server" / "crosstune-server",
                          dir / ".." / ".." / "rpc_server" / "crosstune-server"}) {
      if (std::filesystem::is_regular_file(p, ec)) return p.lexically_normal().string();
    }
  }
  return "crosstune-server";  // from PATH
}

LocalServer::~LocalServer() { Stop(); }

Status LocalServer::Start(const LocalServerOptions& options) {
  std::vector<std::string> argv = {options.binary.empty() ? FindServerBinary() : options.binary,
                                   "--host", "127.0.0.1", "--port", "0"};
  if (options.exit_with_parent) argv.push_back("--exit-with-parent");
  argv.insert(argv.end(), options.args.begin(), options.args.end());
  return Start(argv, options.start_timeout, options.stderr_log);
}

Status LocalServer::Start(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const std::string& stderr_log, int pass_fd) {
  Stop();
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Status(ErrorCode::kIoError, std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (pass_fd >= 0) posix_spawn_file_actions_adddup2(&actions, pass_fd, 3);  // clears CLOEXEC
  if (!stderr_log.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so Stop() reaches the session children too.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int rc = posix_spawnp(&pid_, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    pid_ = -1;
    return Status(ErrorCode::kIoError, argv[0] + ": cannot start: " + std::strerror(rc));
  }
  stdout_fd_ = out[0];

  const std::string kPrefix = "listening on ";
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      Stop();
      return Status(ErrorCode::kTimeout, argv[0] + ": no 'listening on' line within " +
                                             std::to_string(timeout.count()) + " ms");
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char c;
    ssize_t n = read(stdout_fd_, &c, 1);
    if (n <= 0) {
      Stop();
      return Status(ErrorCode::kDisconnected, argv[0] + ": exited before listening");
    }
    if (c != '\n') {
      line += c;
      continue;
    }
    // "listening on HOST:PORT[ more]": the port is the first address's.
    auto at = line.find(kPrefix);
    if (at != std::string::npos) {
      std::string addr = line.substr(at + kPrefix.size());
      addr = addr.substr(0, addr.find(' '));
      auto colon = addr.rfind(':');
      int port = 0;
      if (colon != std::string::npos) {
        std::from_chars(addr.data() + colon + 1, addr.data() + addr.size(), port);
      }
      if (port <= 0 || port > 65535) {
        Stop();
        return Status(ErrorCode::kProtocolError, argv[0] + ": no port in '" + line + "'");
      }
      port_ = static_cast<uint16_t>(port);
      line_ = line;
      break;
    }
    line.clear();
  }
  // Keep the pipe drained so a chatty server never blocks on a full pipe.
  int fd = stdout_fd_;
  drain_ = std::thread([fd] {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
      ssize_t ignored = write(STDERR_FILENO, buf, static_cast<size_t>(n));
      (void)ignored;
    }
  });
  return Status::Ok();
}

void LocalServer::Stop() {
  if (pid_ > 0) {
    int group = pid_;
    kill(-group, SIGTERM);
    // Give it a moment to remove its workspaces, then make sure.
    bool reaped = false;
    for (int i = 0; i < 100 && !reaped; ++i) {
      reaped = waitpid(pid_, nullptr, WNOHANG) == pid_;
      if (!reaped) usleep(20'000);
    }
    // Session children left behind (the group outlives its leader while they run).
    kill(-group, SIGKILL);
    if (!reaped) waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  CloseOutput();
}

int LocalServer::Terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  int group = pid_;
  kill(pid_, SIGTERM);
  int status = -1;
  bool reaped = false;
  auto until = std::chrono::steady_clock::now() + grace;
  while (!reaped && std::chrono::steady_clock::now() < until) {
    reaped = waitpid(pid_, &status, WNOHANG) == pid_;
    if (!reaped) usleep(10'000);
  }
  kill(-group, SIGKILL);
  if (!reaped) {
    waitpid(pid_, nullptr, 0);
    status = -1;
  }
  pid_ = -1;
  CloseOutput();
  return status;
}

void LocalServer::Kill(int sig) {
  if (pid_ <= 0) return;
  kill(-pid_, sig);
  bool reaped = false;
  for (int i = 0; i < 250 && !reaped; ++i) {
    reaped = waitpid(pid_, nullptr, WNOHANG) == pid_;
    if (!reaped) usleep(20'000);
  }
  // Children left behind hold the output pipe open; they go too.
  kill(-pid_, SIGKILL);
  if (!reaped) waitpid(pid_, nullptr, 0);
  pid_ = -1;
  CloseOutput();
}

void LocalServer::CloseOutput() {
  if (drain_.joinable()) drain_.join();
  if (stdout_fd_ >= 0) {
    close(stdout_fd_);
    stdout_fd_ = -1;
  }
  port_ = 0;
  line_.clear();
}

}  // namespace crosstune::client
