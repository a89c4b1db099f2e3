// crosstune::server::Server in this process (its fork server forked from the test), for what the
// binary cannot show: the hooks a test can hold up.
#include "crosstune/server/server.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "crosstune/client/session.h"
#include "crosstune/testing/support.h"

namespace crosstune::testing {
namespace {

// A gate a hook waits at until the test opens it (or the test ends: the destructor opens it, so
// a failed assertion cannot leave the server's threads waiting).
class Gate {
 public:
  ~Gate() { Open(); }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.wait(lock, [this] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

std::unique_ptr<client::Session> Connect(uint16_t port) {
  client::ConnectOptions o;
  o.server = "127.0.0.1:" + std::to_string(port);
  o.peer_name = "server-test";
  o.connect_timeout = std::chrono::seconds(10);
  o.request_timeout = std::chrono::seconds(20);
  auto s = client::Session::Connect(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Removing a finished session's workspace (seconds for one of thousands of files) ran on the
// thread that accepts connections: new clients waited for it. The hook below holds the removal
// up for as long as the test likes; a new session must be served meanwhile.
TEST(ServerTest, ANewSessionIsServedWhileAFinishedOnesWorkspaceIsRemoved) {
  ::signal(SIGPIPE, SIG_IGN);
  std::string work_dir = MakeTempDir();
  Gate gate;
  server::ServerOptions o;
  o.port = 0;
  o.work_dir = work_dir;
  o.remove_workspace = [&gate](const std::string& path) {
    gate.Wait();
    std::filesystem::remove_all(path);
  };
  server::Server server(o);
  ASSERT_TRUE(server.Listen().ok());
  std::thread run([&server] { server.Run(); });
  struct StopAtEnd {
    server::Server& server;
    std::thread& run;
    Gate& gate;
    ~StopAtEnd() {
      gate.Open();
      server.Stop();
      run.join();
    }
  } stop_at_end{server, run, gate};

  auto first = Connect(server.port());
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->UploadBytes("bytes", "f.bin").ok());
  ASSERT_TRUE(first->Close().ok());
  ASSERT_TRUE(Eventually([&] { return gate.waiting() == 1; })) << "its workspace was not removed";

  auto second = Connect(server.port());
  ASSERT_TRUE(second) << "a new session waited for the old workspace's removal";
  EXPECT_TRUE(second->Ping().ok());
  EXPECT_TRUE(second->Close().ok());

  gate.Open();
  EXPECT_TRUE(Eventually([&] { return std::filesystem::is_empty(work_dir); }))
      << "workspaces left in " << work_dir;
  std::filesystem::remove_all(work_dir);
}

}  // namespace
}  // namespace crosstune::testing
