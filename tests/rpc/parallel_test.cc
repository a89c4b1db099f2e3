// The parallel launch the server gives modules (kernel_abi.h's ct_runtime): threads per call and
// per session, real concurrency, the same answer with 1 and N threads, nested launches, errors
// and crashes inside tasks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace crosstune::testing {
namespace {

using client::CallArg;

class ParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer({"--threads", "2", "--max-threads", "4"});
    ASSERT_TRUE(server_);
    session_ = Connect(*server_);
    ASSERT_TRUE(session_);
    auto up = session_->Upload(CT_PARALLEL_KERNEL, "parallel.so");
    ASSERT_TRUE(up.ok()) << up.status().ToString();
    auto m = session_->LoadModule("parallel.so");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    module_ = *m;
  }

  int64_t NumThreads(uint32_t threads) {
    auto t = session_->AllocTensor({1}, DLDataType{kDLInt, 64, 1});
    EXPECT_TRUE(t.ok());
    auto r = module_.Call("num_threads", {CallArg::Tensor(*t)}, 0, threads);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    int64_t n = -1;
    EXPECT_TRUE(t->CopyTo(&n, sizeof n).ok());
    if (r.ok()) {
      EXPECT_EQ(r->threads, static_cast<uint32_t>(n));
    }
    return n;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<client::Session> session_;
  client::RemoteModule module_;
};

TEST_F(ParallelTest, ACallGetsTheThreadsItAsksForOrTheServersDefault) {
  EXPECT_EQ(NumThreads(0), 2);  // --threads 2
  EXPECT_EQ(NumThreads(1), 1);
  EXPECT_EQ(NumThreads(3), 3);
  EXPECT_EQ(NumThreads(4), 4);
  // Past --max-threads: a clear error, and the session goes on.
  auto t = session_->AllocTensor({1}, DLDataType{kDLInt, 64, 1});
  ASSERT_TRUE(t.ok());
  auto r = module_.Call("num_threads", {CallArg::Tensor(*t)}, 0, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("--max-threads"), std::string::npos) << r.status().message();
  EXPECT_EQ(NumThreads(2), 2);
}

TEST_F(ParallelTest, TasksRunAtTheSameTimeOnTheThreadsOfTheCall) {
  // Each task waits for all the others: this passes only when they really run at once.
  for (uint32_t threads : {2u, 3u}) {
    auto r = module_.Call("rendezvous", {CallArg::Int(threads)}, 0, threads);
    EXPECT_TRUE(r.ok()) << threads << " threads: " << r.status().ToString();
  }
  // One thread cannot meet itself: the kernel gives up and says so.
  auto alone = module_.Call("rendezvous", {CallArg::Int(2)}, 0, 1);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.status().code(), ErrorCode::kKernelError);
  EXPECT_NE(alone.status().message().find("did not all run at the same time"), std::string::npos);
}

TEST_F(ParallelTest, TheTimeEvaluatorReportsTheThreadsItUsed) {
  client::TimeOptions opt;
  opt.timing.number = 2;
  opt.timing.repeat = 2;
  opt.threads = 3;  // not the server's --threads 2, so the request's count is what is reported
  auto r = module_.Time("rendezvous", {CallArg::Int(3)}, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->threads, 3u);
  EXPECT_EQ(r->seconds_per_call.size(), 2u);
  opt.threads = 0;
  auto d = module_.Time("rendezvous", {CallArg::Int(1)}, opt);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->threads, 2u);
}

TEST_F(ParallelTest, OneAndManyThreadsGiveTheSameAnswerWithNestedLaunches) {
  const int n = 100003, tasks = 13;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  auto tin = session_->AllocTensor({n}, DLDataType{kDLFloat, 32, 1});
  auto tout = session_->AllocTensor({tasks}, DLDataType{kDLFloat, 64, 1});
  ASSERT_TRUE(tin.ok() && tout.ok());
  ASSERT_TRUE(tin->CopyFrom(in.data(), in.size() * 4).ok());
  std::vector<double> want(tasks);
  for (int t = 0; t < tasks; ++t) {
    // The kernel's shares: the outer split, each cut in three by the nested launch.
    int64_t lo = int64_t{n} * t / tasks, hi = int64_t{n} * (t + 1) / tasks;
    double sum = 0;
    for (int k = 0; k < 3; ++k) {
      for (int64_t j = lo + (hi - lo) * k / 3; j < lo + (hi - lo) * (k + 1) / 3; ++j) {
        sum += static_cast<double>(in[j]) * static_cast<double>(j % 7);
      }
    }
    want[t] = sum;
  }
  for (uint32_t threads : {1u, 2u, 4u}) {
    std::vector<double> zero(tasks, -1.0), got(tasks);
    ASSERT_TRUE(tout->CopyFrom(zero.data(), zero.size() * 8).ok());
    auto r =
        module_.Call("partial_sums", {CallArg::Tensor(*tin), CallArg::Tensor(*tout)}, 0, threads);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(tout->CopyTo(got.data(), got.size() * 8).ok());
    for (int t = 0; t < tasks; ++t) EXPECT_EQ(got[t], want[t]) << threads << " threads, task " << t;
  }
}

TEST_F(ParallelTest, AFailingTaskFailsTheCallWithTheModulesText) {
  for (uint32_t threads : {1u, 2u}) {
    for (int64_t bad : {0, 5, 7}) {
      auto r = module_.Call("fail_one", {CallArg::Int(bad)}, 0, threads);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), ErrorCode::kKernelError);
      EXPECT_NE(r.status().message().find("returned 9: fail_one: a task failed"), std::string::npos)
          << r.status().message();
    }
    EXPECT_TRUE(module_.Call("fail_one", {CallArg::Int(-1)}, 0, threads).ok());
  }
}

TEST_F(ParallelTest, ACrashInATaskIsReportedAndTheServerGoesOn) {
  auto r = module_.Call("crash_in_task", {}, 0, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kRemoteCrash) << r.status().ToString();
  EXPECT_NE(r.status().message().find("SIGSEGV"), std::string::npos) << r.status().message();
  ExpectServerAnswers(*server_);
}

TEST(ParallelRuntime, AModuleWhoseRuntimeSymbolIsNotAPointerIsRefused) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto session = Connect(*server);
  ASSERT_TRUE(session);
  ASSERT_TRUE(session->Upload(CT_BAD_RUNTIME_KERNEL, "bad_runtime.so").ok());
  auto m = session->LoadModule("bad_runtime.so");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("crosstune_runtime_v1 must be a writable pointer variable"),
            std::string::npos)
      << m.status().message();
  EXPECT_TRUE(session->Ping().ok());
}

}  // namespace
}  // namespace crosstune::testing
