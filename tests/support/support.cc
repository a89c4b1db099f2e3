#include "crosstune/testing/support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace crosstune::testing {

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return "";
  return tmpl;
}

TempDir::TempDir(const std::string& prefix) : path_(MakeTempDir(prefix)) {}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string SharedTestBuildCache() {
  const char* dir = std::getenv("CROSSTUNE_TEST_BUILD_CACHE");
  return dir ? dir : "";
}

std::string ReadFile(const std::string& path) {
  // In bulk, not through istreambuf_iterator: a byte at a time, this file's loop ran at ASan's
  // -O0 speed, half a minute for the asan tree's 160 MB CLI module (cli_light_test).
  std::ifstream f(path, std::ios::binary);
  std::ostringstream bytes;
  if (f) bytes << f.rdbuf();
  return std::move(bytes).str();
}

std::string WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

bool Eventually(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return cond();
}

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  std::string dir = MakeTempDir("crosstune-cmd");
  if (dir.empty()) return r;
  std::string err_file = dir + "/stderr";
  // The command lines are the tests' own text, never outside input.
  FILE* p = ::popen((command + " 2>" + err_file).c_str(), "r");  // NOLINT(cert-env33-c)
  if (p != nullptr) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
    int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = ReadFile(err_file);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

namespace {

// A TCP socket bound to 127.0.0.1 on a port the kernel picks; -1 on failure.
int BindLoopback(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

}  // namespace

ClosedPort::ClosedPort() { fd_ = BindLoopback(&port_); }

ClosedPort::~ClosedPort() {
  if (fd_ >= 0) ::close(fd_);
}

bool ListeningSocket::open() {
  if (fd_ >= 0) return true;
  fd_ = BindLoopback(&port_);
  if (fd_ >= 0 && ::listen(fd_, SOMAXCONN) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
  return fd_ >= 0;
}

ListeningSocket::~ListeningSocket() {
  if (fd_ >= 0) ::close(fd_);
}

ProcessInfo Process(int pid) {
  ProcessInfo info;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return info;
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
  auto close = text.rfind(')');
  if (close == std::string::npos) return info;
  std::istringstream rest(text.substr(close + 1));
  char state = 0;
  rest >> state >> info.ppid >> info.pgrp;
  if (!rest || state == 'Z' || state == 'X') return ProcessInfo{};
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0)
      info.threads = static_cast<int>(std::strtol(line.c_str() + 8, nullptr, 10));
  }
  info.pid = pid;
  return info;
}

std::vector<ProcessInfo> ListProcesses() {
  std::vector<ProcessInfo> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    ProcessInfo info = Process(static_cast<int>(std::strtol(name.c_str(), nullptr, 10)));
    if (info.pid > 0) out.push_back(info);
  }
  return out;
}

std::vector<ProcessInfo> SessionProcesses(int server_pid) {
  std::vector<ProcessInfo> all = ListProcesses();
  std::map<int, int> parent;
  for (const auto& p : all) parent[p.pid] = p.ppid;
  std::vector<ProcessInfo> out;
  for (const auto& p : all) {
    if (p.pid == server_pid || p.pgrp != p.pid) continue;
    for (int up = p.ppid; up > 1; up = parent.count(up) ? parent[up] : 0) {
      if (up == server_pid) {
        out.push_back(p);
        break;
      }
    }
  }
  return out;
}

std::string CpusAllowedList(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  const std::string key = "Cpus_allowed_list:";
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t start = line.find_first_not_of(" \t", key.size());
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace crosstune::testing
