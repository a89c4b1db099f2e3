// crosstune-build-worker serving builds over loopback, a second "host" on this machine: the same
// package bytes as the local pool for the same candidates, a crashing compile that ends only its
// own session, a wrong secret refused by name while the worker goes on serving, and a worker that
// registers with a real tracker under its build key and is leased like a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../tracker/farm.h"
#include "crosstune/builder/builder.h"
#include "crosstune/client/session.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/remote_builder.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {
namespace {

using testing::Farm;

std::vector<std::string> WorkerArgv(std::vector<std::string> extra) {
  std::vector<std::string> argv = {
      CT_BUILD_WORKER_BIN, "--host", "127.0.0.1",         "--port", "0",
      "--cores",           "2",      "--exit-with-parent"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// The worker's own description of this machine, and a target for it.
struct Machine {
  msg::DeviceInfo info;
  builder::Target target;
};
Machine Describe(const std::string& address, const std::string& secret = "") {
  client::ConnectOptions co;
  co.server = address;
  co.auth_secret = secret;
  auto session = client::Session::Connect(co);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  auto info = (*session)->Info();
  EXPECT_TRUE(info.ok());
  (void)(*session)->Close();
  auto target = builder::TargetFromDevice(*info);
  EXPECT_TRUE(target.ok());
  return {*info, *target};
}

std::unique_ptr<RemoteBuilder> ConnectWorker(const std::string& address,
                                             const std::string& secret = "") {
  RemoteBuilderOptions o;
  o.connect.server = address;
  o.connect.auth_secret = secret;
  auto rb = RemoteBuilder::Connect(o);
  EXPECT_TRUE(rb.ok()) << rb.status().ToString();
  return rb.ok() ? std::move(rb).value() : nullptr;
}

TEST(BuildWorker, BuildsTheSamePackageBytesAsTheLocalPool) {
  ServerProcess worker;
  ASSERT_TRUE(worker.Start(WorkerArgv({}), std::chrono::seconds(30)).ok());
  Machine m = Describe(worker.address());
  EXPECT_EQ(m.info.cores, 2u) << "Info names the builds it runs at once";
  EXPECT_FALSE(m.info.build_targets.empty());
  auto remote = ConnectWorker(worker.address());
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->slots(), 2);
  auto local = builder::Builder::Create({.workers = 1});
  ASSERT_TRUE(local.ok());

  auto task = MakeTask("matmul", {48, 48, 48}, m.target);
  ASSERT_TRUE(task.ok());
  std::vector<uint64_t> indices;
  for (uint64_t i = 0; i < 6; ++i) indices.push_back(i * 7 % (*task)->space().size());
  MeasureOptions mo;
  auto here = BuildCandidates(**local, **task, indices, m.info, mo);
  auto there = BuildCandidates(*remote, **task, indices, m.info, mo);
  ASSERT_EQ(here.size(), there.size());
  int built = 0;
  for (size_t i = 0; i < here.size(); ++i) {
    EXPECT_EQ(here[i].error, there[i].error) << there[i].message;
    if (here[i].error != TrialError::kOk) continue;
    ++built;
    EXPECT_FALSE(there[i].library.empty());
    EXPECT_TRUE(here[i].library == there[i].library)
        << "candidate " << indices[i] << ": " << here[i].library.size() << " bytes here, "
        << there[i].library.size() << " there";
  }
  EXPECT_GT(built, 0);
  EXPECT_FALSE(remote->lost());
}

TEST(BuildWorker, ACrashingOrHangingCompileEndsOnlyItsSessionAndTheWorkerGoesOnServing) {
  ServerProcess worker;
  ASSERT_TRUE(worker.Start(WorkerArgv({}), std::chrono::seconds(30)).ok());
  Machine m = Describe(worker.address());
  auto remote = ConnectWorker(worker.address());
  ASSERT_TRUE(remote);
  builder::BuildRequest crash;
  crash.source = "int x;";
  crash.target = m.target;
  crash.object_only = true;
  crash.debug_action = builder::BuildRequest::DebugAction::kCrash;
  builder::BuildResult r = remote->Build(crash);
  EXPECT_EQ(r.status.code(), ErrorCode::kBuildError) << r.status.ToString();
  EXPECT_NE(r.status.message().find("SIGSEGV"), std::string::npos) << r.status.message();
  EXPECT_FALSE(remote->lost()) << "a crash is the build's, not a lost worker";

  builder::BuildRequest hang = crash;
  hang.debug_action = builder::BuildRequest::DebugAction::kHang;
  hang.timeout = std::chrono::milliseconds(300);
  builder::BuildResult late = remote->Build(hang);
  EXPECT_EQ(late.status.code(), ErrorCode::kTimeout) << late.status.ToString();
  EXPECT_FALSE(remote->lost()) << "a build past its limit is the build's, not a lost worker";

  builder::BuildRequest fine = crash;
  fine.debug_action = builder::BuildRequest::DebugAction::kNone;
  builder::BuildResult ok = remote->Build(fine);
  EXPECT_TRUE(ok.ok()) << ok.status.ToString();
  EXPECT_FALSE(ok.library.empty());
}

TEST(BuildWorker, AWrongSecretIsRefusedByNameAndTheWorkerGoesOnServing) {
  Farm dir;  // a scratch directory
  const std::string secret_file = dir.WriteFile("secret", "right-secret\n");
  ServerProcess worker;
  ASSERT_TRUE(
      worker.Start(WorkerArgv({"--auth-token-file", secret_file}), std::chrono::seconds(30)).ok());
  RemoteBuilderOptions o;
  o.connect.server = worker.address();
  o.connect.auth_secret = "wrong-secret";
  auto refused = RemoteBuilder::Connect(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnauthorized) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find(worker.address()), std::string::npos)
      << "names the worker: " << refused.status().message();
  o.connect.auth_secret.clear();
  EXPECT_EQ(RemoteBuilder::Connect(o).status().code(), ErrorCode::kUnauthorized);

  Machine m = Describe(worker.address(), "right-secret");
  auto remote = ConnectWorker(worker.address(), "right-secret");
  ASSERT_TRUE(remote);
  builder::BuildRequest req;
  req.source = "int x;";
  req.target = m.target;
  req.object_only = true;
  EXPECT_TRUE(remote->Build(req).ok());
}

TEST(BuildWorker, RegistersUnderItsBuildKeyAndIsLeasedLikeADevice) {
  Farm farm;
  ASSERT_TRUE(farm.StartTracker());
  ServerProcess worker;
  ASSERT_TRUE(worker
                  .Start(WorkerArgv({"--tracker", farm.tracker(), "--key", "builders"}),
                         std::chrono::seconds(30), farm.Path("worker.log"))
                  .ok());
  ASSERT_TRUE(farm.WaitRegistered(1));
  nlohmann::json summary = farm.Summary();
  ASSERT_EQ(summary["devices"].size(), 1u);
  const nlohmann::json& d = summary["devices"][0];
  EXPECT_EQ(d["key"], "builders");
  EXPECT_EQ(d["state"], "free");
  EXPECT_EQ(d["tags"]["role"], "build-worker") << d.dump(2);

  // Without the lease token the worker refuses (it serves only its lease holder).
  RemoteBuilderOptions o;
  o.connect.server = worker.address();
  EXPECT_FALSE(RemoteBuilder::Connect(o).ok());

  client::TrackerOptions to;
  to.tracker = farm.tracker();
  to.peer_name = "build-worker-test";
  auto pool = DevicePool::FromTracker(to, "builders", 0, std::chrono::seconds(10), "",
                                      std::chrono::seconds(30));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  ASSERT_EQ((*pool)->devices().size(), 1u);
  o.connect.lease_token = (*pool)->devices()[0].lease_token;
  auto remote = RemoteBuilder::Connect(o);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ((*remote)->slots(), 2);
  builder::BuildRequest req;
  req.source = "int x;";
  req.target = *builder::ParseTarget("llvm -mtriple=x86_64-linux-gnu");
  req.object_only = true;
  builder::BuildResult r = (*remote)->Build(req);
  EXPECT_TRUE(r.ok()) << r.status.ToString();
}

}  // namespace
}  // namespace crosstune::tuner
