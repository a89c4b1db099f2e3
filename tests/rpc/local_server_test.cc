// client::LocalServer: the client library starting a crosstune-server on this machine, as
// `crosstune tune` without --server, the benchmarks and the tests do.
#include "crosstune/client/local_server.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "crosstune/client/session.h"
#include "crosstune/cpus.h"
#include "crosstune/testing/support.h"

namespace crosstune::testing {
namespace {

class LocalServerTest : public ::testing::Test {
 protected:
  void SetUp() override { work_dir_ = MakeTempDir("crosstune-local-server-test"); }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(work_dir_, ec);
  }
  client::LocalServerOptions Options() const {
    client::LocalServerOptions o;
    o.args = {"--work-dir", work_dir_};
    return o;
  }
  std::string work_dir_;
};

TEST_F(LocalServerTest, FindsTheServerOfThisBuildTreeAndServesASession) {
  // This test runs from <build>/tests/rpc: the server is <build>/rpc_server/crosstune-server.
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::equivalent(client::FindServerBinary(), CT_SERVER_BIN, ec))
      << client::FindServerBinary();
  client::LocalServer server;
  Status started = server.Start(Options());
  ASSERT_TRUE(started.ok()) << started.ToString();
  EXPECT_TRUE(server.running());
  EXPECT_NE(server.port(), 0);
  client::ConnectOptions co;
  co.server = server.address();
  auto session = client::Session::Connect(co);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto info = (*session)->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_FALSE(info->arch.empty());
  session->reset();
  const int pid = server.pid();
  server.Stop();
  EXPECT_FALSE(server.running());
  EXPECT_EQ(Process(pid).pid, 0) << "Stop() left the server running";
}

// crosstune-server --cpus: the server, its threads and its session children run on the CPUs
// given, and it offers only those (DeviceInfo.cores), so a tuning run's builds can have the rest.
TEST_F(LocalServerTest, ServerWithCpusRunsThereAndReportsThemAsItsCores) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const std::string cpu = std::to_string(allowed.back());
  client::LocalServerOptions o = Options();
  o.args.insert(o.args.end(), {"--cpus", cpu});
  client::LocalServer server;
  Status started = server.Start(o);
  ASSERT_TRUE(started.ok()) << started.ToString();
  EXPECT_EQ(CpusAllowedList(server.pid()), cpu);
  client::ConnectOptions co;
  co.server = server.address();
  auto session = client::Session::Connect(co);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  auto info = (*session)->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->cores, 1u);
  auto children = SessionProcesses(server.pid());
  ASSERT_EQ(children.size(), 1u);
  EXPECT_EQ(CpusAllowedList(children.front().pid), cpu);
}

TEST_F(LocalServerTest, ServerRefusesCpusItMayNotUseOrCannotRead) {
  const std::vector<int> allowed = AllowedCpus();
  int other = 0;
  while (std::find(allowed.begin(), allowed.end(), other) != allowed.end()) ++other;
  for (const std::string& bad : {std::to_string(other), std::string("1-0"), std::string("x")}) {
    CommandResult r = RunCommand(std::string(CT_SERVER_BIN) + " --port 0 --work-dir " + work_dir_ +
                                 " --cpus " + bad);
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_NE(r.err.find("crosstune-server: error: --cpus: "), std::string::npos) << r.err;
  }
}

TEST_F(LocalServerTest, NamesAProgramThatCannotStart) {
  client::LocalServerOptions o = Options();
  o.binary = work_dir_ + "/no-such-server";
  client::LocalServer server;
  Status s = server.Start(o);
  EXPECT_EQ(s.code(), ErrorCode::kIoError) << s.ToString();
  EXPECT_NE(s.message().find("no-such-server: cannot start"), std::string::npos) << s.ToString();
  EXPECT_FALSE(server.running());
}

TEST_F(LocalServerTest, NamesAProgramThatExitsBeforeListening) {
  client::LocalServerOptions o = Options();
  o.binary = "false";  // from PATH: exits at once, printing nothing
  client::LocalServer server;
  Status s = server.Start(o);
  EXPECT_EQ(s.code(), ErrorCode::kDisconnected) << s.ToString();
  EXPECT_NE(s.message().find("false: exited before listening"), std::string::npos) << s.ToString();
  EXPECT_FALSE(server.running());
}

// A process that starts a server and dies without stopping it (SIGKILL skips every destructor)
// takes the server with it: what keeps `crosstune tune` from leaving servers behind.
TEST_F(LocalServerTest, EndsWhenTheProcessThatStartedItDies) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t starter = ::fork();
  ASSERT_GE(starter, 0);
  if (starter == 0) {
    ::close(pipe_fds[0]);
    static client::LocalServer server;  // never destroyed: the process is killed
    int pid = server.Start(Options()).ok() ? server.pid() : -1;
    ssize_t n = ::write(pipe_fds[1], &pid, sizeof pid);
    (void)n;
    ::pause();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  int server_pid = -1;
  ASSERT_EQ(::read(pipe_fds[0], &server_pid, sizeof server_pid),
            static_cast<ssize_t>(sizeof server_pid));
  ::close(pipe_fds[0]);
  ASSERT_GT(server_pid, 0) << "the server did not start";
  EXPECT_EQ(Process(server_pid).pid, server_pid);
  ::kill(starter, SIGKILL);
  ::waitpid(starter, nullptr, 0);
  const bool ended = Eventually([&] { return Process(server_pid).pid == 0; });
  if (!ended) ::kill(-server_pid, SIGKILL);  // its process group: leave nothing behind
  EXPECT_TRUE(ended) << "the server outlived the process that started it";
}

}  // namespace
}  // namespace crosstune::testing
