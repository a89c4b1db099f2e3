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
#include <iterator>
#include <thread>

namespace crosstune::testing {

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return "";
  return tmpl;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
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

}  // namespace crosstune::testing
