// crosstune-server as a system service: options from a config file (the Debian package's
// /etc/crosstune/server.conf) that flags override, and readiness reported to systemd (sd_notify
// over $NOTIFY_SOCKET) only once the server listens and the tracker has taken its registration.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "farm.h"

namespace crosstune::testing {
namespace {

// A unix datagram socket standing in for systemd's notification socket.
class NotifySocket {
 public:
  explicit NotifySocket(std::string path) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }
  // Everything received so far, messages separated by newlines.
  std::string Received() {
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      received_.append(buf, static_cast<size_t>(n));
      received_ += '\n';
    }
    return received_;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
  std::string received_;
};

// Sets an environment variable for the servers this test starts, and takes it away after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

TEST(ServerServiceTest, ReadsItsOptionsFromAConfigFileAndFlagsOverrideIt) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  std::string conf = farm.WriteFile("server.conf",
                                    "# a comment\n"
                                    "tracker = \"" +
                                        farm.tracker() +
                                        "\"\n"
                                        "key = \"from-config\"\n"
                                        "tag = [\"soc=bcm2711\", \"room=lab 2\"]\n"
                                        "work-dir = \"" +
                                        farm.Path("work") +
                                        "\"\n"
                                        "max-sessions = 3\n");
  ServerProcess server;
  ASSERT_TRUE(server
                  .Start({ServerBin(), "--config", conf, "--host", "127.0.0.1", "--port", "0",
                          "--key", "from-flag"},
                         std::chrono::seconds(10), farm.Path("server.log"))
                  .ok())
      << ReadFile(farm.Path("server.log"));
  ASSERT_TRUE(farm.WaitRegistered(1)) << ReadFile(farm.Path("server.log"));
  auto device = farm.Device(server.address());
  ASSERT_TRUE(device.is_object()) << farm.Summary().dump();
  EXPECT_EQ(device["key"], "from-flag");  // the flag wins over the file
  EXPECT_EQ(device["tags"]["soc"], "bcm2711");
  EXPECT_EQ(device["tags"]["room"], "lab 2");
  // The work dir came from the file too: the server's workspaces live there.
  EXPECT_TRUE(std::filesystem::is_directory(farm.Path("work")));
}

TEST(ServerServiceTest, RefusesAConfigFileWithAnUnknownOption) {
  Farm farm;
  std::string conf = farm.WriteFile("server.conf", "max-sesions = 3\n");
  // (`timeout`: a server that took the file would serve until killed.)
  auto r = RunCommand("timeout 30 '" + ServerBin() + "' --config '" + conf + "' --port 0");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("max-sesions"), std::string::npos) << r.err;
}

TEST(ServerServiceTest, RefusesAMissingConfigFile) {
  Farm farm;
  auto r = RunCommand("timeout 30 '" + ServerBin() + "' --config '" + farm.Path("absent.conf") +
                      "' --port 0");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("absent.conf"), std::string::npos) << r.err;
}

// The unit's ExecStartPre: the limits in the config become the unit's TasksMax and MemoryMax
// (systemctl here is a stand-in on PATH that records its arguments).
std::string AppliedLimits(Farm& farm, const std::string& conf) {
  std::string bin = farm.Path("bin");
  std::filesystem::create_directories(bin);
  WriteFile(bin + "/systemctl", "#!/bin/sh\necho \"$@\" > '" + farm.Path("systemctl.args") + "'\n");
  std::filesystem::permissions(bin + "/systemctl", std::filesystem::perms::owner_all);
  auto r = RunCommand("PATH='" + bin + ":/usr/bin:/bin' timeout 30 '" + ServerBin() +
                      "' --config '" + conf + "' --apply-systemd-limits crosstune-server.service");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return ReadFile(farm.Path("systemctl.args"));
}

TEST(ServerServiceTest, AppliesTheTaskAndMemoryLimitsOfItsConfigToItsUnit) {
  Farm farm;
  std::string conf =
      farm.WriteFile("server.conf", "systemd-tasks-max = 300\nsystemd-memory-max = 1073741824\n");
  EXPECT_EQ(AppliedLimits(farm, conf),
            "set-property --runtime -- crosstune-server.service TasksMax=300 "
            "MemoryMax=1073741824\n");
}

TEST(ServerServiceTest, TheShippedConffileIsValid) {
  Farm farm;
  // packaging/server.conf as the Debian package installs it.
  EXPECT_EQ(AppliedLimits(farm, CROSSTUNE_SERVER_CONF),
            "set-property --runtime -- crosstune-server.service TasksMax=512 "
            "MemoryMax=8589934592\n");
}

TEST(ServerServiceTest, TellsSystemdItIsReadyOnlyOnceRegisteredWithItsTracker) {
  Farm farm;
  NotifySocket notify(farm.Path("notify.sock"));
  ASSERT_TRUE(notify.bound());
  // The tracker's port is bound and listening, but nothing accepts until the tracker starts
  // on it: the server's first registration cannot complete.
  ListeningSocket tracker_socket;
  ASSERT_TRUE(tracker_socket.open());
  std::string tracker = "127.0.0.1:" + std::to_string(tracker_socket.port());
  ServerProcess server;
  {
    ScopedEnv env("NOTIFY_SOCKET", notify.path());
    ASSERT_TRUE(server
                    .Start({ServerBin(), "--host", "127.0.0.1", "--port", "0", "--tracker", tracker,
                            "--key", "svc"},
                           std::chrono::seconds(10), farm.Path("server.log"))
                    .ok());
  }
  // Listening, and the first registration has failed (the handshake waited in vain).
  ASSERT_TRUE(Eventually(
      [&] {
        return ReadFile(farm.Path("server.log")).find("reconnecting in") != std::string::npos;
      },
      std::chrono::seconds(30)))
      << ReadFile(farm.Path("server.log"));
  EXPECT_EQ(notify.Received().find("READY=1"), std::string::npos) << notify.Received();

  ServerProcess tracker_process;
  ASSERT_TRUE(tracker_process
                  .Start({TrackerBin(), "--host", "127.0.0.1", "--listen-fd", "3", "--http-port",
                          "0", "--startup-grace-s", "0"},
                         std::chrono::seconds(10), farm.Path("tracker.log"), tracker_socket.fd())
                  .ok());
  ASSERT_TRUE(Eventually([&] { return notify.Received().find("READY=1") != std::string::npos; },
                         std::chrono::seconds(30)))
      << notify.Received() << ReadFile(farm.Path("server.log"));
  std::string got = notify.Received();
  EXPECT_NE(got.find("STATUS=registered with " + tracker +
                     " as 127.0.0.1:" + std::to_string(server.port())),
            std::string::npos)
      << got;
  // A clean stop says so.
  server.Terminate();
  EXPECT_NE(notify.Received().find("STOPPING=1"), std::string::npos) << notify.Received();
}

TEST(ServerServiceTest, WithoutATrackerIsReadyOnceListening) {
  Farm farm;
  NotifySocket notify(farm.Path("notify.sock"));
  ASSERT_TRUE(notify.bound());
  ServerProcess server;
  {
    ScopedEnv env("NOTIFY_SOCKET", notify.path());
    ASSERT_TRUE(server
                    .Start({ServerBin(), "--host", "127.0.0.1", "--port", "0"},
                           std::chrono::seconds(10), farm.Path("server.log"))
                    .ok());
  }
  ASSERT_TRUE(Eventually([&] { return notify.Received().find("READY=1") != std::string::npos; }))
      << ReadFile(farm.Path("server.log"));
  EXPECT_NE(notify.Received().find("STATUS=listening on port " + std::to_string(server.port())),
            std::string::npos)
      << notify.Received();
}

}  // namespace
}  // namespace crosstune::testing
