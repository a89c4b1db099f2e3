// The measure pipeline against a real crosstune-server on loopback: the matmul template's code
// against its reference, and every trial error kind from a real cause.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>

#include "crosstune/builder/builder.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/loser_cutoff.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "template_checks.h"

namespace crosstune::tuner {
namespace {

// An 8x8 matmul task ("matmul" over A, B and C) and its reference; the tasks below generate it.
class Matmul8Task : public Task {
 public:
  using Task::Task;
  std::string function() const override { return "matmul"; }
  std::vector<ArgSpec> args() const override {
    return {{"A", {8, 8}}, {"B", {8, 8}}, {"C", {8, 8}, {kDLFloat, 32, 1}, true}};
  }
  double flops() const override { return 2.0 * 8 * 8 * 8; }
  void Reference(HostArgs& a) const override {
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) {
        double s = 0;
        for (int k = 0; k < 8; ++k) s += a[0][i * 8 + k] * a[1][k * 8 + j];
        a[2][i * 8 + j] = static_cast<float>(s);
      }
  }
};

// A naive matmul whose single knob picks a fault: what each trial error kind looks like when it
// really happens (a compiler error, a crash, a hang, a wrong result, a non-zero return, an output
// element left unwritten).
enum Fault : int64_t { kNone, kSyntax, kCrash, kHang, kWrong, kReturn, kUnwritten };

class FaultyTask final : public Matmul8Task {
 public:
  // With `no_wrong`, a constraint "no_wrong" refuses every fault but kNone.
  FaultyTask(builder::Target target, const std::vector<int64_t>& faults, bool no_wrong = false)
      : Matmul8Task(TaskId{"faulty_matmul", {8, 8, 8}, "float32"}, std::move(target),
                    Space(faults, no_wrong)) {}
  static ConfigSpace Space(const std::vector<int64_t>& faults, bool no_wrong) {
    ConfigSpace space;
    EXPECT_TRUE(space.AddCategorical("fault", faults).ok());
    if (no_wrong) {
      space.AddConstraint("no_wrong", [](const Config& c) { return c.Int("fault") == 0; });
    }
    return space;
  }
  Config DefaultConfig() const override { return space().Get(0); }
  std::string Generate(const Config& c) const override {
    return "#define FAULT " + std::to_string(c.Int("fault")) + "\n" + R"(
#include "crosstune/kernel_abi.h"
#if FAULT == 1
#error deliberate build failure
#endif
static int32_t matmul(const ct_arg* args, int32_t n) {
  const float* A = (const float*)args[0].value.v_tensor->data;
  const float* B = (const float*)args[1].value.v_tensor->data;
  float* C = (float*)args[2].value.v_tensor->data;
#if FAULT == 2
  *(volatile int*)0 = 1;
#elif FAULT == 3
  for (volatile int spin = 0;; ++spin) {}
#elif FAULT == 5
  return 7;
#endif
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      float s = 0;
      for (int k = 0; k < 8; ++k) s += A[i * 8 + k] * B[k * 8 + j];
#if FAULT == 6
      if (i * 8 + j == 19) continue;
#endif
      C[i * 8 + j] = s;
    }
#if FAULT == 4
  C[19] += 1.0f;
#endif
  return 0;
}
static const ct_function kFns[] = {{"matmul", matmul, "ttt"}};
CT_DEFINE_MODULE("faulty", kFns, 0)
)";
  }
};

// An 8x8 matmul computed `work` times over per call (each one kept by a compiler barrier): a
// config's time is its work, and every config gives the reference's answer.
class SlowTask final : public Matmul8Task {
 public:
  explicit SlowTask(builder::Target target, const std::vector<int64_t>& work)
      : Matmul8Task(TaskId{"slow_matmul", {8, 8, 8}, "float32"}, std::move(target), Space(work)) {}
  static ConfigSpace Space(const std::vector<int64_t>& work) {
    ConfigSpace space;
    EXPECT_TRUE(space.AddCategorical("work", work).ok());
    return space;
  }
  Config DefaultConfig() const override { return space().Get(0); }
  std::string Generate(const Config& c) const override {
    return "#define WORK " + std::to_string(c.Int("work")) + "\n" + R"(
#include "crosstune/kernel_abi.h"
static int32_t matmul(const ct_arg* args, int32_t n) {
  const float* A = (const float*)args[0].value.v_tensor->data;
  const float* B = (const float*)args[1].value.v_tensor->data;
  float* C = (float*)args[2].value.v_tensor->data;
  for (int rep = 0; rep < WORK; ++rep) {
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) {
        float s = 0;
        for (int k = 0; k < 8; ++k) s += A[i * 8 + k] * B[k * 8 + j];
        C[i * 8 + j] = s;
      }
    __asm__ volatile("" ::: "memory");
  }
  return 0;
}
static const ct_function kFns[] = {{"matmul", matmul, "ttt"}};
CT_DEFINE_MODULE("slow", kFns, 0)
)";
  }
};

// TemplateOnServerTest's server, device and builder, with one DeviceRunner pass over candidates.
class PipelineTest : public testing::TemplateOnServerTest {
 protected:
  // Runs `indices` of `task` and expects one measurement each, every one a success (one failure
  // per bad config, naming the task and the config).
  void ExpectAllOk(const Task& task, const std::vector<uint64_t>& indices) {
    auto results = Run(task, indices);
    ASSERT_EQ(results.size(), indices.size());
    for (const auto& m : results) {
      EXPECT_EQ(m.error, TrialError::kOk)
          << task.id().Key() << " " << task.space().Get(m.index).ToString() << ": "
          << TrialErrorName(m.error) << " " << m.message;
      EXPECT_GT(m.mean, 0);
    }
  }

  // On `pool` when given, else on the suite's builder (whose cache a test run shares).
  std::vector<Measurement> Run(const Task& task, const std::vector<uint64_t>& indices,
                               MeasureOptions options = {}, builder::Builder* pool = nullptr) {
    options.timing.repeat = 1;
    options.timing.min_repeat_ms = 0;
    auto cands = BuildCandidates(pool ? *pool : *builder_, task, indices, info_, options);
    ReferenceData ref = ReferenceData::Make(task, 7);
    auto runner = DeviceRunner::Open(device_, task, ref, options);
    EXPECT_TRUE(runner.ok()) << runner.status().ToString();
    std::vector<Measurement> out;
    if (!runner.ok()) return out;
    for (const auto& c : cands) out.push_back((*runner)->Measure(c));
    return out;
  }
};

// This and ThreadedMatmulGivesTheReferencesAnswerAsOneThreadDoes run in the main tree only (the
// asan and tsan test presets exclude them): their time goes to compiles and generated kernels,
// which no sanitizer instruments; the host path they take is the other PipelineTest cases', and
// the server's thread pool is checked by the templates' TwoThreads tests.
TEST_F(PipelineTest, MatmulMatchesTheReferenceForManyShapesAndConfigs) {
  // Odd sizes that fill no tile, and one larger square.
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{37, 29, 19}, {64, 64, 64}, {96, 200, 130}, {1, 17, 5}}) {
    auto task = MakeTask("matmul", shape, target_);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    // The default and every knob at its first and last choice (the smallest and largest
    // tiles), where the edge handling differs most.
    ExpectAllOk(**task, testing::ConfigsToCheck(**task, 0, 11));
  }
}

// The groups field (a transformer's MatMul nodes): one group of rows that fill no tile, several
// groups of odd sizes (each its own A, B and C), on one thread and two.
TEST_F(PipelineTest, GroupedMatmulsMatchTheReference) {
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{37, 29, 19, 1}, {17, 13, 9, 3}, {5, 70, 33, 4}}) {
    for (int threads : {1, 2}) {
      if (threads > static_cast<int>(info_.cores)) continue;
      auto task = MakeTask("matmul", shape, target_, {.threads = threads});
      ASSERT_TRUE(task.ok()) << task.status().ToString();
      std::vector<uint64_t> indices = {(*task)->DefaultConfig().index()};
      UniqueSampler sampler((*task)->space(), 3);
      for (int i = 0; i < 3; ++i) indices.push_back(sampler.Next().value_or(0));
      ExpectAllOk(**task, indices);
    }
  }
}

// A packed B (the fifth field: a model's constant weight in column panels, matmul_layout.h):
// columns that fill no vector (N 29 and 70), fewer columns than a vector (N 3), every register
// tile width (1 to 4 vectors, so the last tile reads the panels' zero padding) and cache blocks
// that split K and N, on one thread and two.
TEST_F(PipelineTest, PackedWeightMatmulsMatchTheReference) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{37, 29, 19, 1, 1},
                                     {5, 70, 33, 1, 1},
                                     {9, 3, 40, 1, 1},
                                     {64, 200, 130, 1, 1}}) {
    for (int threads : {1, 2}) {
      if (threads > static_cast<int>(info_.cores)) continue;
      auto task = MakeTask("matmul", shape, target_, {.threads = threads});
      ASSERT_TRUE(task.ok()) << task.status().ToString();
      const auto b = (*task)->args()[1].shape;
      ASSERT_EQ(b.size(), 3u);
      EXPECT_EQ(b[1], shape[2]);
      EXPECT_EQ(b[0] % 12, 0);
      std::vector<uint64_t> indices = {(*task)->DefaultConfig().index()};
      nlohmann::json want = (*task)->DefaultConfig().ToJson();
      for (int nv = 1; nv <= 4; ++nv) {
        want["nv"] = nv;
        want["mr"] = 2;
        want["tile_k"] = (*task)->space().FindKnob("tile_k")->values.front();
        want["tile_n"] = (*task)->space().FindKnob("tile_n")->values.front();
        auto c = (*task)->space().FromJson(want);
        if (c.ok() && (*task)->space().IsValid(*c)) indices.push_back(c->index());
      }
      if (shape[1] > 48) {
        EXPECT_EQ(indices.size(), 5u) << "a register tile width is missing";
      }
      UniqueSampler sampler((*task)->space(), 5);
      for (int i = 0; i < 2; ++i) indices.push_back(sampler.Next().value_or(0));
      ExpectAllOk(**task, indices);
    }
  }
  // Packed only with one group, and 0 or 1.
  EXPECT_FALSE(MakeTask("matmul", {8, 8, 8, 2, 1}, target_).ok());
  EXPECT_FALSE(MakeTask("matmul", {8, 8, 8, 1, 2}, target_).ok());
}

TEST_F(PipelineTest, ThreadedMatmulGivesTheReferencesAnswerAsOneThreadDoes) {
  if (info_.cores < 2) GTEST_SKIP() << "one core: a two-thread task is refused by CheckLimits";
  // Row shares that do not split evenly into MR panels, and fewer panels than threads (M = 1).
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{37, 29, 19}, {96, 200, 130}, {1, 17, 5}, {130, 64, 300}}) {
    auto one = MakeTask("matmul", shape, target_);
    auto two = MakeTask("matmul", shape, target_, {.threads = 2});
    ASSERT_TRUE(one.ok() && two.ok()) << two.status().ToString();
    EXPECT_EQ((*two)->threads(), 2);
    EXPECT_NE((*one)->id().Key(), (*two)->id().Key());
    std::vector<uint64_t> indices = {(*two)->DefaultConfig().index()};
    UniqueSampler sampler((*two)->space(), 5);
    for (int i = 0; i < 5; ++i) indices.push_back(sampler.Next().value_or(0));
    EXPECT_NE((*two)->Generate((*two)->space().Get(indices[0])).find("#define THREADS 2"),
              std::string::npos);
    for (const auto* task : {&**one, &**two}) ExpectAllOk(*task, indices);
  }
  // More threads than the device has cores: refused before any compile.
  auto many =
      MakeTask("matmul", {64, 64, 64}, target_, {.threads = static_cast<int>(info_.cores) + 1});
  ASSERT_TRUE(many.ok());
  auto refused = Run(**many, {(*many)->DefaultConfig().index()});
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].error, TrialError::kInvalidConfig) << refused[0].message;
  EXPECT_NE(refused[0].message.find("cores"), std::string::npos) << refused[0].message;
}

TEST_F(PipelineTest, EveryTrialErrorKindComesFromARealCause) {
  FaultyTask task(target_, {kNone, kSyntax, kCrash, kHang, kWrong, kReturn});
  MeasureOptions options;
  options.run_timeout_ms = 300;
  auto results = Run(task, {0, 1, 2, 3, 4, 5, 0}, options);
  ASSERT_EQ(results.size(), 7u);
  EXPECT_EQ(results[0].error, TrialError::kOk) << results[0].message;
  EXPECT_EQ(results[1].error, TrialError::kBuildError);
  EXPECT_NE(results[1].message.find("deliberate build failure"), std::string::npos)
      << results[1].message;
  EXPECT_EQ(results[2].error, TrialError::kRemoteCrash);
  EXPECT_NE(results[2].message.find("SIGSEGV"), std::string::npos) << results[2].message;
  EXPECT_NE(results[2].message.find("matmul"), std::string::npos) << results[2].message;
  EXPECT_EQ(results[3].error, TrialError::kRunTimeout) << results[3].message;
  EXPECT_EQ(results[4].error, TrialError::kWrongAnswer);
  EXPECT_NE(results[4].message.find("C[2,3]"), std::string::npos) << results[4].message;
  EXPECT_EQ(results[5].error, TrialError::kRuntimeError);
  // After a crash and a hang ended two sessions, the runner reconnected and still measures.
  EXPECT_EQ(results[6].error, TrialError::kOk) << results[6].message;

  // Refused before the compiler: a config outside the space's constraints.
  FaultyTask constrained(target_, {kNone, kWrong}, /*no_wrong=*/true);
  auto refused = Run(constrained, {1});
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].error, TrialError::kInvalidConfig);
  EXPECT_NE(refused[0].message.find("no_wrong"), std::string::npos) << refused[0].message;
}

TEST_F(PipelineTest, AnOutputElementLeftUnwrittenAfterAGoodCandidateIsAWrongAnswer) {
  // One runner, so one session and the same output tensor: the good candidate leaves the right
  // answer in C[2,3], which the faulty one never writes. The NaN written into every output before
  // the checked call is what tells them apart.
  FaultyTask task(target_, {kNone, kUnwritten});
  auto results = Run(task, {0, 1});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].error, TrialError::kOk) << results[0].message;
  EXPECT_EQ(results[1].error, TrialError::kWrongAnswer) << results[1].message;
  EXPECT_NE(results[1].message.find("C[2,3]"), std::string::npos) << results[1].message;
}

TEST_F(PipelineTest, BuildTimeoutAndLoadErrorAreTheirOwnKinds) {
  FaultyTask task(target_, {kNone});
  MeasureOptions options;
  options.build_timeout = std::chrono::milliseconds(1);
  // A builder without a cache: a cached build (an earlier test's, in a run that shares one)
  // would come back at once.
  auto uncached = builder::Builder::Create({.workers = 1});
  ASSERT_TRUE(uncached.ok()) << uncached.status().ToString();
  auto slow = Run(task, {0}, options, uncached->get());
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].error, TrialError::kBuildTimeout) << slow[0].message;

  // A module for another architecture: refused by the server's loader.
  auto other = builder::ParseTarget(target_.Arch() == "aarch64" ? "x86-64" : "aarch64");
  ASSERT_TRUE(other.ok());
  FaultyTask foreign(*other, {kNone});
  auto wrong_arch = Run(foreign, {0});
  ASSERT_EQ(wrong_arch.size(), 1u);
  EXPECT_EQ(wrong_arch[0].error, TrialError::kLoadError) << wrong_arch[0].message;
  EXPECT_NE(wrong_arch[0].message.find("WrongArch"), std::string::npos) << wrong_arch[0].message;
}

TEST_F(PipelineTest, AKilledServerIsReportedAsALostDevice) {
  FaultyTask task(target_, {kNone});
  MeasureOptions options;
  auto cands = BuildCandidates(*builder_, task, {0, 0}, info_, options);
  ReferenceData ref = ReferenceData::Make(task, 7);
  auto runner = DeviceRunner::Open(device_, task, ref, options);
  ASSERT_TRUE(runner.ok());
  EXPECT_EQ((*runner)->Measure(cands[0]).error, TrialError::kOk);
  server_.Stop();
  Measurement m = (*runner)->Measure(cands[1]);
  EXPECT_EQ(m.error, TrialError::kDeviceLost) << m.message;
}

TEST_F(PipelineTest, ARunWhoseTrialsAllFailEndsWithTheCommonestErrorAndItsMessage) {
  FaultyTask task(target_, {kSyntax, kReturn});
  TuneOptions options;
  options.tuner = "random";
  options.trials = 2;
  options.batch = 2;
  options.measure.timing.repeat = 1;
  auto result = Tune(task, {device_}, *builder_, options);
  ASSERT_FALSE(result.ok());
  const std::string msg = result.status().message();
  EXPECT_NE(msg.find("all 2 trials failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("commonest:"), std::string::npos) << msg;
  EXPECT_TRUE(msg.find("BuildError (1): ") != std::string::npos ||
              msg.find("RuntimeError (1): ") != std::string::npos)
      << msg;
}

// A tuner that calls `first` when asked for its first batch, then proposes as `inner` does: in
// Run(), after the devices were opened and before any candidate is measured.
class FirstProposalHook final : public Tuner {
 public:
  FirstProposalHook(std::unique_ptr<Tuner> inner, std::function<void()> first)
      : inner_(std::move(inner)), first_(std::move(first)) {}
  std::string name() const override { return inner_->name(); }
  std::vector<uint64_t> NextBatch(int n) override {
    if (auto f = std::exchange(first_, nullptr)) f();
    return inner_->NextBatch(n);
  }
  void Update(const std::vector<TrialResult>& results) override { inner_->Update(results); }

 private:
  std::unique_ptr<Tuner> inner_;
  std::function<void()> first_;
};

TEST_F(PipelineTest, DevicesLostInOneBatchEachReportTheirOwnLoss) {
  // Two devices whose servers stop once the run has opened them: both device threads find their
  // device gone in the first batch, at about the same time, and each reports its own loss (the
  // tsan preset runs this: the reports once read the run's last loss, which the other device's
  // thread could be writing).
  ServerProcess second;
  Status started =
      second.Start({CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", "--exit-with-parent"},
                   std::chrono::seconds(20));
  ASSERT_TRUE(started.ok()) << started.ToString();
  DeviceSpec other = device_;
  other.name = "second";
  other.server = second.address();
  FaultyTask task(target_, {kNone, kWrong, kReturn});
  TuneOptions options;
  options.trials = 3;
  options.batch = 3;
  options.include_default = false;
  options.measure.timing.repeat = 1;
  options.measure.timing.min_repeat_ms = 0;
  options.make_tuner = [&](const ConfigSpace& space,
                           const TunerOptions& topt) -> Expected<std::unique_ptr<Tuner>> {
    CT_ASSIGN_OR_RETURN(std::unique_ptr<Tuner> inner, MakeTuner("grid", space, topt));
    return std::unique_ptr<Tuner>(new FirstProposalHook(std::move(inner), [&] {
      server_.Stop();
      second.Stop();
    }));
  };
  std::mutex mu;
  std::map<std::string, std::string> lost;  // device name -> why, as on_device_lost heard it
  options.on_device_lost = [&](const DeviceSpec& d, const Status& why) {
    std::string message = why.message();
    std::lock_guard<std::mutex> lock(mu);
    lost[d.name] = std::move(message);
  };
  auto result = Tune(task, {device_, other}, *builder_, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::kDisconnected) << result.status().ToString();
  // Each names its own server (the one it could not reach again), not the other's.
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_NE(lost["local"].find(device_.server), std::string::npos) << lost["local"];
  EXPECT_NE(lost["second"].find(other.server), std::string::npos) << lost["second"];
}

TEST_F(PipelineTest, EveryRecordOfTheRunReachesOnRecordBeforeTheProgressThatCountsIt) {
  FaultyTask task(target_, {kNone, kWrong, kReturn});
  TuneOptions options;
  options.tuner = "grid";
  options.trials = 3;
  options.batch = 3;
  options.include_default = false;
  options.measure.timing.repeat = 1;
  options.measure.timing.min_repeat_ms = 0;
  const crosstune::testing::TempDir dir;
  options.log_path = dir.path() + "/records.jsonl";
  std::vector<Record> seen;
  int progress_calls = 0, counted_unseen = 0;
  options.on_record = [&](const Record& r) { seen.push_back(r); };
  options.on_progress = [&](const TuneProgress& p) {
    ++progress_calls;
    if (p.measured > static_cast<int>(seen.size())) ++counted_unseen;
  };
  auto result = Tune(task, {device_}, *builder_, options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  auto log = ReadLog(options.log_path);
  ASSERT_TRUE(log.ok());
  ASSERT_EQ(seen.size(), 3u);
  ASSERT_EQ(log->records.size(), 3u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].ToJson(), log->records[i].ToJson());
  std::multiset<TrialError> kinds;
  for (const auto& r : seen) kinds.insert(r.error);
  EXPECT_EQ(kinds, (std::multiset<TrialError>{TrialError::kOk, TrialError::kRuntimeError,
                                              TrialError::kWrongAnswer}));
  EXPECT_GT(progress_calls, 0);
  EXPECT_EQ(counted_unseen, 0);
}

TEST(CommonestFailure, NamesTheCommonestKindOnlyWhenEveryTrialFailed) {
  auto rec = [](TrialError e) {
    Record r;
    r.error = e;
    return r;
  };
  std::vector<Record> records = {rec(TrialError::kBuildError), rec(TrialError::kWrongAnswer),
                                 rec(TrialError::kWrongAnswer)};
  EXPECT_EQ(CommonestFailure(records), TrialError::kWrongAnswer);
  EXPECT_NE(AllFailedStatus(records).message().find("commonest: WrongAnswer (2)"),
            std::string::npos);
  records.push_back(rec(TrialError::kBuildError));  // a tie: the first kind in TrialError order
  EXPECT_EQ(CommonestFailure(records), TrialError::kBuildError);
  records.push_back(rec(TrialError::kOk));
  EXPECT_EQ(CommonestFailure(records), std::nullopt);
  EXPECT_TRUE(AllFailedStatus(records).ok());
  EXPECT_EQ(CommonestFailure({}), std::nullopt);
}

TEST_F(PipelineTest, PinnedKnobsAreNeverSearched) {
  auto task = MakeTask("matmul", {24, 24, 24}, target_);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  const crosstune::testing::TempDir temp;
  const std::string& dir = temp.path();
  TuneOptions options;
  options.tuner = "grid";
  options.trials = 4;
  options.batch = 4;
  options.measure.timing.repeat = 1;
  options.measure.timing.min_repeat_ms = 0;
  options.log_path = dir + "/pinned.jsonl";
  // The default config has unroll_k 4: pinned to 2, it is not measured either.
  options.pins = {{"unroll_k", 2}, {"order", {"jr", "ir"}}};
  ASSERT_EQ((*task)->DefaultConfig().Int("unroll_k"), 4);
  auto result = Tune(**task, {device_}, *builder_, options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->measured, 4);
  EXPECT_FALSE(result->has_default);
  auto log = ReadLog(options.log_path);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->records.size(), 4u);
  for (const auto& r : log->records) {
    EXPECT_EQ(r.config_values["unroll_k"], 2) << r.config_values.dump();
    EXPECT_EQ(r.config_values["order"], nlohmann::json({"jr", "ir"})) << r.config_values.dump();
  }

  // A pin the template does not have ends the run before anything is measured.
  options.log_path = dir + "/bad.jsonl";
  options.pins = {{"unrol_k", 2}};
  auto bad = Tune(**task, {device_}, *builder_, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no knob 'unrol_k'"), std::string::npos)
      << bad.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(options.log_path));
}

// stop_losers: once three configs were timed in full, one slower than the best by more than the
// noise allows is timed for one round of three and recorded as stopped early; the best never is.
// Without it every config gets every round.
TEST_F(PipelineTest, ClearLosersAreTimedForOneRoundAndRecordedAsStoppedEarly) {
  // Four configs of about the same work, then four of eight times as much, in the grid's order.
  SlowTask task(target_, {200, 201, 202, 203, 1600, 1601, 1602, 1603});
  const crosstune::testing::TempDir dir;
  for (const bool stop : {true, false}) {
    SCOPED_TRACE(stop ? "stop_losers" : "no stop_losers");
    TuneOptions options;
    options.tuner = "grid";
    options.trials = 8;
    options.batch = 8;
    options.include_default = false;
    options.stop_losers = stop;
    options.measure.timing.repeat = 3;
    options.measure.timing.min_repeat_ms = 20;
    options.log_path = dir.path() + (stop ? "/stop.jsonl" : "/all.jsonl");
    auto result = Tune(task, {device_}, *builder_, options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    auto log = ReadLog(options.log_path);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ASSERT_EQ(log->records.size(), 8u);
    ASSERT_TRUE(result->has_best);
    EXPECT_FALSE(result->best.stopped_early);
    EXPECT_EQ(result->best.costs.size(), 3u);
    int stopped = 0;
    for (const Record& r : log->records) {
      ASSERT_TRUE(r.ok()) << r.message;
      stopped += r.stopped_early;
      if (r.stopped_early) {
        EXPECT_EQ(r.costs.size(), 1u);
        EXPECT_GT(r.mean, result->best.mean * (1 + LoserCutoff::kMinMargin));
      } else {
        EXPECT_EQ(r.costs.size(), 3u);
      }
      if (stop && r.config_values["work"].get<int64_t>() >= 1600) {
        EXPECT_TRUE(r.stopped_early) << "a config eight times the best's work, timed in full";
      }
    }
    EXPECT_EQ(result->stopped_early, stopped);
    if (!stop) {
      EXPECT_EQ(stopped, 0);
    }
  }
}

}  // namespace
}  // namespace crosstune::tuner
