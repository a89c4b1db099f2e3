// The tracker with real crosstune-server processes on loopback: grants, lease tokens enforced by
// the server, disconnects, dead and flaky servers, restart, auth and admin.
#include <gtest/gtest.h>
#include <signal.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "crosstune/client/session.h"
#include "farm.h"

namespace crosstune::testing {
namespace {

using namespace std::chrono_literals;

Status Connect(const std::string& server, const std::string& token) {
  auto s = LeasedSession(server, token);
  if (!s.ok()) return s.status();
  return (*s)->Ping();
}

class TrackerFarmTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(farm_.StartTracker()); }
  Farm farm_;
};

TEST_F(TrackerFarmTest, GrantsARegisteredServerWhichAcceptsOnlyTheCurrentToken) {
  int s = farm_.StartServer("cpu", {"--tag", "rack=a"});
  ASSERT_GE(s, 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto dev = farm_.Device(farm_.server_addr(s));
  ASSERT_FALSE(dev.is_null());
  EXPECT_EQ(dev["tags"]["rack"], "a");
  EXPECT_EQ(dev["state"], "free");

  auto c = farm_.Client();
  ASSERT_TRUE(c);
  auto req = Hold("cpu");
  req.constraints = {"rack=a"};
  auto grant = c->RequestDevice(req);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  EXPECT_EQ(grant->address, farm_.server_addr(s));

  EXPECT_TRUE(Connect(grant->address, grant->lease_token).ok());
  Status forged = Connect(grant->address, std::string(grant->lease_token.size(), 'f'));
  EXPECT_EQ(forged.code(), ErrorCode::kUnauthorized) << forged.ToString();
  Status none = Connect(grant->address, "");
  EXPECT_EQ(none.code(), ErrorCode::kUnauthorized) << none.ToString();
  EXPECT_NE(none.message().find("--tracker"), std::string::npos) << none.message();

  // Released: the old token is stale and refused.
  ASSERT_TRUE(c->Release(grant->lease_token).ok());
  EXPECT_TRUE(Eventually([&] {
    return Connect(grant->address, grant->lease_token).code() == ErrorCode::kUnauthorized;
  }));
  auto summary = farm_.Summary();
  ASSERT_FALSE(summary["history"].empty());
  EXPECT_EQ(summary["history"][0]["outcome"], "released");
}

TEST_F(TrackerFarmTest, ReportsARequestNoDeviceCouldEverMatch) {
  ASSERT_GE(farm_.StartServer("cpu"), 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto c = farm_.Client();
  auto req = Hold("cpu");
  req.constraints = {"arch=riscv64"};
  auto grant = c->RequestDevice(req);
  ASSERT_FALSE(grant.ok());
  EXPECT_EQ(grant.status().code(), ErrorCode::kNoDevice) << grant.status().ToString();
}

TEST_F(TrackerFarmTest, QueuesASecondClientAndHandsOverWhenTheFirstDisconnects) {
  ASSERT_GE(farm_.StartServer("cpu"), 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto first = farm_.Client("first");
  auto g1 = first->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(g1.ok());

  auto second = farm_.Client("second");
  std::vector<msg::QueueUpdate> updates;
  auto req = Hold("cpu");
  req.on_queue_update = [&](const msg::QueueUpdate& u) {
    updates.push_back(u);
    first.reset();  // the holder goes away while the second waits
  };
  auto g2 = second->RequestDevice(req);
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  ASSERT_FALSE(updates.empty());
  EXPECT_EQ(updates[0].position, 1u);
  EXPECT_NE(g2->lease_token, g1->lease_token);
  EXPECT_TRUE(Connect(g2->address, g2->lease_token).ok());
  EXPECT_EQ(Connect(g1->address, g1->lease_token).code(), ErrorCode::kUnauthorized);
}

TEST_F(TrackerFarmTest, CancelledRequestLeavesTheQueue) {
  ASSERT_GE(farm_.StartServer("cpu"), 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto holder = farm_.Client("holder");
  ASSERT_TRUE(holder->RequestDevice(Hold("cpu")).ok());
  auto waiter = farm_.Client("waiter");
  auto req = Hold("cpu", 60s);
  req.on_queue_update = [&](const msg::QueueUpdate&) { waiter->CancelRequest(); };
  auto g = waiter->RequestDevice(req);
  EXPECT_EQ(g.status().code(), ErrorCode::kBusy) << g.status().ToString();
  auto keys = farm_.Summary()["keys"];
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_TRUE(keys[0]["queue"].empty()) << keys.dump();
}

TEST_F(TrackerFarmTest, ExpiredLeaseIsRefusedAndRenewedLeaseIsKept) {
  ASSERT_GE(farm_.StartServer("cpu"), 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto c = farm_.Client();
  auto req = Hold("cpu");
  req.hold = 1500ms;
  auto grant = c->RequestDevice(req);
  ASSERT_TRUE(grant.ok());
  double granted_at = farm_.Summary()["uptime_seconds"].get<double>();  // tracker's clock
  // Renewed past its first expiry (by the tracker's clock), it still works.
  c->StartAutoRenew(grant->lease_token, 300ms);
  EXPECT_TRUE(Eventually(
      [&] { return farm_.Summary()["uptime_seconds"].get<double>() > granted_at + 2 * 1.5; }));
  EXPECT_TRUE(c->renew_status().ok()) << c->renew_status().ToString();
  EXPECT_EQ(farm_.Device(grant->address)["state"], "leased");
  EXPECT_TRUE(Connect(grant->address, grant->lease_token).ok());
  // Unrenewed, it expires and the server refuses the token.
  c->StopAutoRenew();
  EXPECT_TRUE(Eventually([&] {
    return Connect(grant->address, grant->lease_token).code() == ErrorCode::kUnauthorized;
  }));
  EXPECT_EQ(c->Renew(grant->lease_token).status().code(), ErrorCode::kNotFound);
}

TEST_F(TrackerFarmTest, OneSessionGrantEndsWithItsSessionAndUnclaimedGrantsReturn) {
  ASSERT_GE(farm_.StartServer("cpu"), 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto c = farm_.Client();
  auto req = Hold("cpu");
  req.multi_session = false;
  auto g1 = c->RequestDevice(req);
  ASSERT_TRUE(g1.ok());
  ASSERT_TRUE(Connect(g1->address, g1->lease_token).ok());  // the session opens and closes
  auto g2 = c->RequestDevice(req);                          // free again at once
  ASSERT_TRUE(g2.ok()) << g2.status().ToString();
  // Nobody opens a session with g2: it goes back to the pool by itself.
  auto other = farm_.Client("other");
  auto g3 = other->RequestDevice(req);
  ASSERT_TRUE(g3.ok()) << g3.status().ToString();
  auto summary = farm_.Summary();
  bool unclaimed = false;
  for (auto& h : summary["history"]) {
    if (h["outcome"].get<std::string>().find("unclaimed") == 0) unclaimed = true;
  }
  EXPECT_TRUE(unclaimed) << summary["history"].dump();
}

// A child forked from a process with threads inherits the locks those threads held at that moment,
// held forever (malloc's, spdlog's, OpenSSL's). A server registered with a tracker runs the link's
// thread, so its sessions must come from a process that never had a second thread.
TEST_F(TrackerFarmTest, SessionsAreForkedByASingleThreadedProcessNotByTheServer) {
  int s = farm_.StartServer("cpu");
  ASSERT_GE(s, 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto c = farm_.Client();
  ASSERT_TRUE(c);
  auto grant = c->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  auto session = LeasedSession(grant->address, grant->lease_token);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_TRUE((*session)->Ping().ok());

  int server_pid = farm_.server(s).pid();
  ProcessInfo server = Process(server_pid);
  ASSERT_GE(server.threads, 2) << "the server runs no tracker-link thread: the test proves nothing";
  std::vector<ProcessInfo> sessions;
  ASSERT_TRUE(Eventually([&] { return (sessions = SessionProcesses(server_pid)).size() == 1; }));
  ProcessInfo forker = Process(sessions[0].ppid);
  EXPECT_NE(forker.pid, server_pid) << "the session was forked by the multi-threaded server";
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer's runtime restarts its own background thread in every forked child, so the
  // fork server has one more thread than it started; that thread takes none of our locks.
  constexpr int kForkerThreads = 2;
#else
  constexpr int kForkerThreads = 1;
#endif
  EXPECT_EQ(forker.threads, kForkerThreads) << "the session was forked by process " << forker.pid
                                            << " with " << forker.threads << " threads";
  EXPECT_TRUE((*session)->Ping().ok());
}

TEST_F(TrackerFarmTest, DropsADeadServer) {
  int s = farm_.StartServer("cpu");
  ASSERT_GE(s, 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  farm_.server(s).Kill(SIGKILL);
  EXPECT_TRUE(farm_.WaitRegistered(0));
}

TEST_F(TrackerFarmTest, QuarantinesAServerWhoseAddressDoesNotAnswer) {
  // Registered with an address where nothing listens: every client fails to reach it.
  ClosedPort nowhere;
  int s = farm_.StartServer("cpu", {"--custom-addr", nowhere.address()});
  ASSERT_GE(s, 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto c = farm_.Client();
  auto req = Hold("cpu", 3s);
  req.multi_session = false;
  for (int i = 0; i < 3; ++i) {
    auto g = c->RequestDevice(req);
    ASSERT_TRUE(g.ok()) << "round " << i << ": " << g.status().ToString();
    Status st = Connect(g->address, g->lease_token);
    ASSERT_EQ(st.code(), ErrorCode::kDisconnected) << st.ToString();
    ASSERT_TRUE(c->Release(g->lease_token, msg::Outcome::kUnreachable, st.message()).ok());
  }
  auto dev = farm_.Device(nowhere.address());
  ASSERT_FALSE(dev.is_null());
  EXPECT_EQ(dev["state"], "quarantined");
  EXPECT_EQ(dev["infra_failures"], 3);
  // Its self-checks keep failing (the address still does not answer): no grant.
  auto g = c->RequestDevice(req);
  EXPECT_EQ(g.status().code(), ErrorCode::kTimeout) << g.status().ToString();
  EXPECT_EQ(farm_.Device(nowhere.address())["state"], "quarantined");
}

TEST_F(TrackerFarmTest, ReadmitsAQuarantinedServerThatPassesItsSelfCheck) {
  int s = farm_.StartServer("cpu");
  ASSERT_GE(s, 0);
  ASSERT_TRUE(farm_.WaitRegistered(1));
  auto c = farm_.Client();
  auto req = Hold("cpu", 3s);
  for (int i = 0; i < 3; ++i) {
    auto g = c->RequestDevice(req);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    // Reported unreachable (a network blip): counts towards quarantine.
    ASSERT_TRUE(c->Release(g->lease_token, msg::Outcome::kUnreachable, "blip").ok());
  }
  // The server's self-check and the tracker's probe of its address both pass: back in the pool.
  EXPECT_TRUE(Eventually([&] {
    auto d = farm_.Device(farm_.server_addr(s));
    return d.is_object() && d["infra_failures"] == 3 && d["consecutive_failures"] == 0 &&
           d["state"] == "free";
  })) << farm_.Summary().dump();
  EXPECT_TRUE(c->RequestDevice(req).ok());
}

// A server whose session fork server died can serve no one: it withdraws from the tracker at once
// (no client is granted a device that refuses it), stays away, and says why, both in its log and
// to a client that dials it directly. A second server of the key goes on serving.
TEST_F(TrackerFarmTest, AServerWhoseForkServerDiedLeavesThePool) {
  int s = farm_.StartServer("cpu");
  int other = farm_.StartServer("cpu");
  ASSERT_GE(s, 0);
  ASSERT_GE(other, 0);
  ASSERT_TRUE(farm_.WaitRegistered(2));
  auto c = farm_.Client();
  auto req = Hold("cpu", 3s);
  // Hold both, find the first server's lease, and kill its fork server under a live session.
  auto g1 = c->RequestDevice(req);
  auto g2 = c->RequestDevice(req);
  ASSERT_TRUE(g1.ok() && g2.ok());
  auto& mine = g1->address == farm_.server_addr(s) ? *g1 : *g2;
  auto& theirs = g1->address == farm_.server_addr(s) ? *g2 : *g1;
  ASSERT_EQ(mine.address, farm_.server_addr(s));
  {
    auto session = LeasedSession(mine.address, mine.lease_token);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    std::vector<ProcessInfo> sessions;
    ASSERT_TRUE(Eventually(
        [&] { return (sessions = SessionProcesses(farm_.server(s).pid())).size() == 1; }));
    ASSERT_EQ(::kill(sessions[0].ppid, SIGKILL), 0);  // the fork server
    EXPECT_TRUE(Eventually([&] { return !(*session)->Ping().ok(); }));
  }
  // The device leaves the pool; the server process lives on and logs why.
  EXPECT_TRUE(Eventually([&] { return farm_.Device(farm_.server_addr(s)).is_null(); }))
      << farm_.Summary().dump();
  EXPECT_NE(Process(farm_.server(s).pid()).pid, 0) << "the server died with its fork server";
  EXPECT_TRUE(Eventually([&] {
    return farm_.server_log(s).find("withdrawn from") != std::string::npos;
  })) << farm_.server_log(s);
  auto direct = LeasedSession(farm_.server_addr(s), mine.lease_token);
  ASSERT_FALSE(direct.ok());
  EXPECT_NE(direct.status().message().find("fork server"), std::string::npos)
      << direct.status().ToString();
  // Only the other server is granted from now on, and it works.
  ASSERT_TRUE(c->Release(theirs.lease_token, msg::Outcome::kOk, "").ok());
  for (int i = 0; i < 3; ++i) {
    auto g = c->RequestDevice(req);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(g->address, farm_.server_addr(other));
    {
      auto session = LeasedSession(g->address, g->lease_token);
      EXPECT_TRUE(session.ok()) << session.status().ToString();
    }
    ASSERT_TRUE(c->Release(g->lease_token, msg::Outcome::kOk, "").ok());
  }
  // It stayed away all that time (its link would have re-registered within half a second).
  EXPECT_TRUE(farm_.Device(farm_.server_addr(s)).is_null()) << farm_.Summary().dump();
}

TEST_F(TrackerFarmTest, RestartedTrackerKeepsRunningLeasesAndServersReRegister) {
  Farm farm;
  std::string db = farm.Path("tracker.sqlite");
  ASSERT_TRUE(farm.StartTracker({"--db", db}, /*held_port=*/true));
  ASSERT_GE(farm.StartServer("cpu"), 0);
  ASSERT_GE(farm.StartServer("cpu"), 0);
  ASSERT_GE(farm.StartServer("canary"), 0);
  ASSERT_TRUE(farm.WaitRegistered(3));
  // One holder renews in the background (as `crosstune lease` does), the other re-attaches by hand.
  auto auto_holder = farm.Client("auto-holder");
  auto ga = auto_holder->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(ga.ok());
  auto_holder->StartAutoRenew(ga->lease_token, 300ms);
  auto manual_holder = farm.Client("manual-holder");
  auto gm = manual_holder->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(gm.ok());
  // A third holder (of another key) never comes back: its lease ending tells when the re-attach
  // window closed.
  auto gone_holder = farm.Client("gone-holder");
  auto gg = gone_holder->RequestDevice(Hold("canary"));
  ASSERT_TRUE(gg.ok());

  uint16_t port = farm.tracker_port();
  farm.KillTracker(SIGKILL);  // the farm still holds the listening socket, and so the port
  // While the tracker is down the servers keep honouring the leases they were told about.
  EXPECT_TRUE(Connect(ga->address, ga->lease_token).ok());
  gone_holder.reset();
  ASSERT_TRUE(farm.StartTracker({"--db", db, "--startup-grace-s", "5", "--reattach-s", "3"},
                                /*held_port=*/true));
  ASSERT_EQ(farm.tracker_port(), port);
  ASSERT_TRUE(farm.WaitRegistered(3));
  EXPECT_TRUE(Eventually([&] {
    return farm.Device(ga->address)["state"] == "leased" &&
           farm.Device(gm->address)["state"] == "leased";
  })) << farm.Summary().dump();

  // Someone else asks: neither leased device is handed out.
  auto other = farm.Client("other");
  auto g2 = other->RequestDevice(Hold("cpu", 1500ms));
  EXPECT_EQ(g2.status().code(), ErrorCode::kTimeout) << g2.status().ToString();

  // The manual holder re-attaches with its token on a new connection.
  manual_holder.reset();
  auto again = farm.Client("manual-holder");
  auto info = again->Renew(gm->lease_token);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->address, gm->address);

  // Past the re-attach window (the tracker ended the lease nobody re-attached to), both leases
  // live on: both holders re-attached.
  auto history_has = [&](const std::string& holder, const std::string& outcome) {
    auto summary = farm.Summary();
    for (const auto& h : summary["history"]) {
      if (h["holder"] == holder && h["outcome"] == outcome) return true;
    }
    return false;
  };
  EXPECT_TRUE(Eventually([&] {
    return history_has("gone-holder", "holder did not re-attach after a tracker restart");
  })) << farm.Summary().dump();
  EXPECT_TRUE(auto_holder->renew_status().ok()) << auto_holder->renew_status().ToString();
  EXPECT_EQ(farm.Device(ga->address)["holder"], "auto-holder");
  EXPECT_EQ(farm.Device(gm->address)["holder"], "manual-holder");
  EXPECT_TRUE(Connect(ga->address, ga->lease_token).ok());
  EXPECT_TRUE(Connect(gm->address, gm->lease_token).ok());
}

TEST_F(TrackerFarmTest, AdminCanDrainUndrainAndKickWithTheAdminTokenOnly) {
  Farm farm;
  std::string admin = farm.WriteFile("admin", "admin-secret\n");
  ASSERT_TRUE(farm.StartTracker({"--admin-token-file", admin}));
  int s = farm.StartServer("cpu");
  ASSERT_TRUE(farm.WaitRegistered(1));
  std::string dev = farm.server_addr(s);
  auto c = farm.Client();
  auto grant = c->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(grant.ok());

  auto admin_client = farm.Client("admin");
  EXPECT_EQ(admin_client->Admin("kick", dev, "wrong").code(), ErrorCode::kUnauthorized);
  ASSERT_TRUE(admin_client->Admin("drain", dev, "admin-secret").ok());
  ASSERT_TRUE(admin_client->Admin("kick", dev, "admin-secret").ok());
  EXPECT_TRUE(Eventually([&] {
    return Connect(grant->address, grant->lease_token).code() == ErrorCode::kUnauthorized;
  }));
  EXPECT_EQ(farm.Device(dev)["state"], "drained");
  auto g2 = c->RequestDevice(Hold("cpu", 1s));
  EXPECT_EQ(g2.status().code(), ErrorCode::kTimeout);
  ASSERT_TRUE(admin_client->Admin("undrain", dev, "admin-secret").ok());
  EXPECT_TRUE(c->RequestDevice(Hold("cpu")).ok());
}

TEST_F(TrackerFarmTest, KickEndsTheSessionRunningOnTheLease) {
  Farm farm;
  std::string admin = farm.WriteFile("admin", "admin-secret\n");
  ASSERT_TRUE(farm.StartTracker({"--admin-token-file", admin}));
  int s = farm.StartServer("cpu");
  ASSERT_TRUE(farm.WaitRegistered(1));
  auto c = farm.Client();
  auto grant = c->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(grant.ok());
  client::ConnectOptions o;
  o.server = grant->address;
  o.lease_token = grant->lease_token;
  o.request_timeout = 5s;
  auto session = client::Session::Connect(o);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_TRUE((*session)->Ping().ok());
  ASSERT_TRUE(farm.Client("admin")->Admin("kick", farm.server_addr(s), "admin-secret").ok());
  Status ping;
  EXPECT_TRUE(Eventually([&] {
    ping = (*session)->Ping();
    return !ping.ok();
  }));
  EXPECT_EQ(ping.code(), ErrorCode::kUnauthorized) << ping.ToString();
  EXPECT_NE(ping.message().find("kicked"), std::string::npos) << ping.ToString();
}

TEST(TrackerAuthTest, RefusesUnauthenticatedClientsAndServers) {
  Farm farm;
  std::string secret_file = farm.WriteFile("secret", "farm-secret\n");
  std::string wrong_file = farm.WriteFile("wrong", "not-the-secret\n");
  ASSERT_TRUE(farm.StartTracker({"--auth-token-file", secret_file}));
  // A server with the wrong secret never registers; one with the right one does.
  int wrong_server = farm.StartServer("cpu", {"--auth-token-file", wrong_file});
  ASSERT_GE(wrong_server, 0);
  ASSERT_GE(farm.StartServer("cpu", {"--auth-token-file", secret_file}), 0);
  ASSERT_TRUE(farm.WaitRegistered(1, "farm-secret"));
  // The tracker has answered the wrong server's attempt (the text the README documents).
  EXPECT_TRUE(Eventually([&] {
    return farm.server_log(wrong_server).find("authentication failed") != std::string::npos;
  })) << farm.server_log(wrong_server);
  EXPECT_EQ(farm.Summary("farm-secret")["devices"].size(), 1u);

  client::TrackerOptions o;
  o.tracker = farm.tracker();
  auto none = client::TrackerClient::Connect(o);
  EXPECT_EQ(none.status().code(), ErrorCode::kUnauthorized);
  EXPECT_NE(none.status().message().find("peer requires authentication"), std::string::npos)
      << none.status().ToString();
  o.auth_secret = "not-the-secret";
  auto wrong = client::TrackerClient::Connect(o);
  EXPECT_EQ(wrong.status().code(), ErrorCode::kUnauthorized);
  EXPECT_NE(wrong.status().message().find("authentication failed"), std::string::npos)
      << wrong.status().ToString();
  o.auth_secret = "farm-secret";
  auto right = client::TrackerClient::Connect(o);
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  EXPECT_TRUE((*right)->RequestDevice(Hold("cpu")).ok());
}

// The grant policy with real clients: alice holds both devices and waits for a third, then bob
// asks for one. The device alice gives back goes to alice under the default policy (she asked
// first) and to bob under --policy fair-share (he holds none).
class GrantPolicyFarmTest : public ::testing::TestWithParam<const char*> {
 protected:
  Farm farm_;
};

TEST_P(GrantPolicyFarmTest, AFreedDeviceGoesToWhoThePolicySays) {
  const std::string policy = GetParam();
  ASSERT_TRUE(farm_.StartTracker({"--policy", policy}));
  ASSERT_GE(farm_.StartServer("cpu"), 0);
  ASSERT_GE(farm_.StartServer("cpu"), 0);
  ASSERT_TRUE(farm_.WaitRegistered(2));
  EXPECT_EQ(farm_.Summary()["policy"], policy);

  auto alice = farm_.Client("alice");
  ASSERT_TRUE(alice);
  auto g1 = alice->RequestDevice(Hold("cpu"));
  auto g2 = alice->RequestDevice(Hold("cpu"));
  ASSERT_TRUE(g1.ok() && g2.ok());

  auto queued = [&](size_t n) {
    return Eventually([&] {
      auto keys = farm_.Summary()["keys"];
      return keys.size() == 1 && keys[0]["queue"].size() == n;
    });
  };
  std::mutex mu;
  std::vector<std::string> granted;  // holders, in grant order
  auto wait_as = [&](const std::string& name) {
    return std::jthread([&, name] {
      auto c = farm_.Client(name);
      auto g = c ? c->RequestDevice(Hold("cpu", 30s)) : Expected<msg::Grant>(Status::Ok());
      std::lock_guard<std::mutex> lock(mu);
      granted.push_back(g.ok() && c ? name : name + " failed: " + g.status().ToString());
      if (c && g.ok()) (void)c->Release(g->lease_token);
    });
  };
  std::jthread alice_again = wait_as("alice");
  ASSERT_TRUE(queued(1));
  std::jthread bob = wait_as("bob");
  ASSERT_TRUE(queued(2));
  auto queue = farm_.Summary()["keys"][0]["queue"];
  std::string first = policy == "fair-share" ? "bob" : "alice";
  std::string second = policy == "fair-share" ? "alice" : "bob";
  EXPECT_EQ(queue[0]["holder"], first) << queue.dump();

  ASSERT_TRUE(alice->Release(g1->lease_token).ok());
  EXPECT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return !granted.empty();
  }));
  ASSERT_TRUE(alice->Release(g2->lease_token).ok());
  alice_again.join();
  bob.join();
  EXPECT_EQ(granted, (std::vector<std::string>{first, second}));
}

INSTANTIATE_TEST_SUITE_P(Policies, GrantPolicyFarmTest, ::testing::Values("priority", "fair-share"),
                         [](const auto& info) {
                           return std::string(info.param) == "fair-share" ? "FairShare"
                                                                          : "Priority";
                         });

TEST(GrantPolicyFlagTest, AnUnknownPolicyIsRefusedNamingTheKnownOnes) {
  auto r = RunCommand(TrackerBin() + " --port 0 --policy lottery");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown grant policy 'lottery' (known: priority, fair-share)"),
            std::string::npos)
      << r.out << r.err;
}

}  // namespace
}  // namespace crosstune::testing
