// The session fork server (rpc_server/src/fork_server.h) seen from outside: sessions come from it,
// not from the server, and when it dies nothing hangs.
#include <gtest/gtest.h>
#include <signal.h>

#include <vector>

#include "test_util.h"

namespace crosstune::testing {
namespace {

// Sessions are forked by the server's fork server, a process that never had a second thread. If
// it dies (the OOM killer, a stray kill), its sessions die with it, their clients and new ones
// get a clear error instead of a hang, and the server stays up to say so.
TEST(ForkServerTest, WhenTheForkServerDiesSessionsFailClearlyAndNothingHangs) {
  if (ForeignServer()) GTEST_SKIP() << "reads this host's /proc";
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto s = Connect(*server);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->Ping().ok());
  std::vector<ProcessInfo> sessions;
  ASSERT_TRUE(Eventually([&] { return (sessions = SessionProcesses(server->pid())).size() == 1; }));
  int forker = sessions[0].ppid;
  ASSERT_NE(forker, server->pid()) << "the session was forked by the server itself";
  EXPECT_EQ(Process(forker).threads, 1);
  ASSERT_EQ(::kill(forker, SIGKILL), 0);
  int session = sessions[0].pid;
  EXPECT_TRUE(Eventually([&] { return Process(session).pid == 0; }))
      << "session outlived its forker";
  EXPECT_FALSE(s->Ping().ok());
  auto next = client::Session::Connect(Options(*server));
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), ErrorCode::kInternal) << next.status().ToString();
  EXPECT_NE(next.status().message().find("fork server"), std::string::npos)
      << next.status().ToString();
  EXPECT_NE(Process(server->pid()).pid, 0) << "the server died with its fork server";
}

}  // namespace
}  // namespace crosstune::testing
