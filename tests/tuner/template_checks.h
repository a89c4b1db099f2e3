// Helpers for the kernel template tests: configs worth checking (the default, random samples and
// the extremes of each knob) and one DeviceRunner pass over them against the reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/measure.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner::testing {

// The default config, `samples` random valid ones, and for every knob a valid config at its
// first and its last choice (the smallest and largest tiles, blocks, unrolls), no index twice.
inline std::vector<uint64_t> ConfigsToCheck(const Task& task, int samples, uint64_t seed) {
  std::vector<uint64_t> out = {task.DefaultConfig().index()};
  const ConfigSpace& space = task.space();
  UniqueSampler sampler(space, seed);
  for (int i = 0; i < samples; ++i) {
    if (auto next = sampler.Next()) out.push_back(*next);
  }
  const auto& knobs = space.knobs();
  for (size_t k = 0; k < knobs.size(); ++k) {
    for (uint32_t want : {uint32_t{0}, static_cast<uint32_t>(knobs[k].size() - 1)}) {
      // A valid point with this choice: the default with the knob changed, else a scan.
      std::vector<uint32_t> choices = task.DefaultConfig().choices();
      choices[k] = want;
      auto index = space.IndexOf(choices);
      if (index.ok() && space.IsValid(space.Get(*index))) {
        out.push_back(*index);
        continue;
      }
      for (uint64_t i = 0; i < std::min<uint64_t>(space.size(), 1'000'000); ++i) {
        Config c = space.Get(i);
        if (c.choices()[k] == want && space.IsValid(c)) {
          out.push_back(i);
          break;
        }
      }
    }
  }
  std::set<uint64_t> seen;
  out.erase(
      std::remove_if(out.begin(), out.end(), [&](uint64_t i) { return !seen.insert(i).second; }),
      out.end());
  return out;
}

// The reference data with every input made non-negative (and the expected outputs computed from
// those), for templates whose epilogue is a ReLU: it maps NaN, and every negative sum, to 0, so
// with inputs of both signs an output element the kernel never computes can still match. Fails
// the test unless every expected output is above 0.
inline ReferenceData PositiveReference(const Task& task, uint64_t seed) {
  ReferenceData ref = ReferenceData::Make(task, seed);
  const auto specs = task.args();
  for (size_t a = 0; a < specs.size(); ++a) {
    if (specs[a].output) continue;
    for (float& x : ref.inputs[a]) x = std::fabs(x);
  }
  ref.expected = ref.inputs;
  task.Reference(ref.expected);
  for (size_t a = 0; a < specs.size(); ++a) {
    if (!specs[a].output) continue;
    const auto low = std::min_element(ref.expected[a].begin(), ref.expected[a].end());
    EXPECT_TRUE(low == ref.expected[a].end() || *low > 0)
        << task.id().Key() << ": " << specs[a].name << " has an output of " << *low;
  }
  return ref;
}

// Builds `indices` of `task` for the device and checks each one's answer there; one failure per
// bad config, naming the task and the config. With `positive`, on PositiveReference's data.
inline void ExpectConfigsMatchReference(builder::Builder& builder, const Task& task,
                                        const DeviceSpec& device, const msg::DeviceInfo& info,
                                        const std::vector<uint64_t>& indices,
                                        bool positive = false) {
  MeasureOptions options;
  options.timing.repeat = 1;
  options.timing.min_repeat_ms = 0;
  options.run_timeout_ms = 60'000;
  auto cands = BuildCandidates(builder, task, indices, info, options);
  ReferenceData ref = positive ? PositiveReference(task, 3) : ReferenceData::Make(task, 3);
  auto runner = DeviceRunner::Open(device, task, ref, options);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  for (const auto& c : cands) {
    Measurement m = (*runner)->Measure(c);
    EXPECT_EQ(m.error, TrialError::kOk)
        << device.name << " " << task.id().Key() << " " << task.space().Get(c.index).ToString()
        << ": " << TrialErrorName(m.error) << " " << m.message;
  }
}

// `inner`'s kernels built to split their work into `tasks` tasks run one after another
// (CT_TASKS): every task's share of the items and its own scratch, without threads.
class SplitIntoTasks final : public Task {
 public:
  SplitIntoTasks(const Task& inner, int tasks)
      : Task(inner.id(), inner.target(), inner.space()), inner_(inner), tasks_(tasks) {}
  std::string function() const override { return inner_.function(); }
  std::vector<ArgSpec> args() const override { return inner_.args(); }
  double flops() const override { return inner_.flops(); }
  Config DefaultConfig() const override { return space().Get(inner_.DefaultConfig().index()); }
  Status CheckLimits(const Config& c, const msg::DeviceInfo& d) const override {
    return inner_.CheckLimits(c, d);
  }
  std::string Generate(const Config& c) const override {
    return "#define CT_TASKS " + std::to_string(tasks_) + "\n" + inner_.Generate(c);
  }
  void Reference(HostArgs& args) const override { inner_.Reference(args); }
  void ZeroPadding(HostArgs& args) const override { inner_.ZeroPadding(args); }
  double rtol() const override { return inner_.rtol(); }
  double atol() const override { return inner_.atol(); }

 private:
  const Task& inner_;
  int tasks_;
};

// `inner`'s kernels as a model's executor runs them (CT_SCRATCH_ARG): working memory is one more
// tensor after the output, `bytes` long (the most any config to check needs), which the runner
// fills with random values as it does every input: a kernel that reads scratch it did not write
// in the same call (padding it expects to be zero) gets a wrong answer.
class WithScratchArg final : public Task {
 public:
  WithScratchArg(const Task& inner, int64_t bytes)
      : Task(inner.id(), inner.target(), inner.space()), inner_(inner), bytes_(bytes) {}
  std::string function() const override { return inner_.function(); }
  std::vector<ArgSpec> args() const override {
    std::vector<ArgSpec> a = inner_.args();
    a.push_back({"scratch", {(bytes_ + 3) / 4}});
    return a;
  }
  double flops() const override { return inner_.flops(); }
  Config DefaultConfig() const override { return space().Get(inner_.DefaultConfig().index()); }
  Status CheckLimits(const Config& c, const msg::DeviceInfo& d) const override {
    return inner_.CheckLimits(c, d);
  }
  std::string Generate(const Config& c) const override {
    return "#define CT_SCRATCH_ARG 1\n" + inner_.Generate(c);
  }
  void Reference(HostArgs& args) const override {
    std::vector<float> scratch = std::move(args.back());
    args.pop_back();
    inner_.Reference(args);
    args.push_back(std::move(scratch));
  }
  void ZeroPadding(HostArgs& args) const override {
    std::vector<float> scratch = std::move(args.back());
    args.pop_back();
    inner_.ZeroPadding(args);
    args.push_back(std::move(scratch));
  }
  double rtol() const override { return inner_.rtol(); }
  double atol() const override { return inner_.atol(); }

 private:
  const Task& inner_;
  int64_t bytes_;
};

#ifdef CT_SERVER_BIN
// A local crosstune-server (CT_SERVER_BIN) per test and one builder per suite.
class TemplateOnServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto b = builder::Builder::Create(
        {.workers = 2, .cache_dir = crosstune::testing::SharedTestBuildCache()});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    builder_ = std::move(b).value().release();
  }
  static void TearDownTestSuite() {
    delete builder_;
    builder_ = nullptr;
  }
  void SetUp() override {
    // --exit-with-parent: a test binary killed mid-run (SIGPIPE into `head`, a timeout) does not
    // leave its server running.
    Status s =
        server_.Start({CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", "--exit-with-parent"},
                      std::chrono::seconds(20));
    ASSERT_TRUE(s.ok()) << s.ToString();
    device_.name = "local";
    device_.server = server_.address();
    client::ConnectOptions co;
    co.server = server_.address();
    auto session = client::Session::Connect(co);
    ASSERT_TRUE(session.ok());
    auto info = (*session)->Info();
    ASSERT_TRUE(info.ok());
    info_ = *info;
    auto t = builder::TargetFromDevice(info_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = *t;
  }

  // The template's configs worth checking (ConfigsToCheck) for `shape`, run on the server.
  void CheckTemplate(const std::string& name, const std::vector<int64_t>& shape, int samples) {
    auto task = MakeTask(name, shape, target_);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    ExpectConfigsMatchReference(*builder_, **task, device_, info_,
                                ConfigsToCheck(**task, samples, 17));
  }

  // As CheckTemplate with every input non-negative (PositiveReference): for ReLU templates, where
  // an output the kernel leaves unwritten or computes from NaN would otherwise pass as a 0.
  void CheckPositiveOutputs(const std::string& name, const std::vector<int64_t>& shape,
                            int samples) {
    auto task = MakeTask(name, shape, target_);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    ExpectConfigsMatchReference(*builder_, **task, device_, info_,
                                ConfigsToCheck(**task, samples, 17), /*positive=*/true);
  }

  // For a relu6 shape (activation 2): CheckPositiveOutputs, after checking that the non-negative
  // data's outputs lie on both sides of 6 (more than 10 of each), so the clamp is exercised.
  void CheckClampsAtSix(const std::string& name, const std::vector<int64_t>& shape, int samples) {
    auto task = MakeTask(name, shape, target_);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    const ReferenceData ref = PositiveReference(**task, 3);
    const std::vector<float>& out = ref.expected.back();
    EXPECT_GT(std::count(out.begin(), out.end(), 6.0f), 10);
    EXPECT_GT(std::count_if(out.begin(), out.end(), [](float x) { return x > 0 && x < 6; }), 10);
    CheckPositiveOutputs(name, shape, samples);
  }

  // As CheckTemplate for a task of `threads` threads: the server runs each call on that many.
  void CheckThreads(const std::string& name, const std::vector<int64_t>& shape, int threads) {
    auto task = MakeTask(name, shape, target_, {threads});
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    ExpectConfigsMatchReference(*builder_, **task, device_, info_, ConfigsToCheck(**task, 3, 29));
  }

  // As CheckTemplate, with the work split into `tasks` tasks run one after another.
  void CheckSplit(const std::string& name, const std::vector<int64_t>& shape, int tasks) {
    auto task = MakeTask(name, shape, target_);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    SplitIntoTasks split(**task, tasks);
    ExpectConfigsMatchReference(*builder_, split, device_, info_, ConfigsToCheck(split, 2, 23));
  }

  // As CheckTemplate, each config's kernel taking its scratch from a buffer of other values
  // (WithScratchArg), sized by the task's ScratchBytes(); `threads` as CheckThreads.
  void CheckScratchArg(const std::string& name, const std::vector<int64_t>& shape, int threads) {
    auto task = MakeTask(name, shape, target_, {threads});
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    const auto indices = ConfigsToCheck(**task, 3, 31);
    int64_t bytes = 0;
    for (uint64_t i : indices) {
      bytes = std::max(bytes, (*task)->ScratchBytes((*task)->space().Get(i)));
    }
    ASSERT_GT(bytes, 0) << name << " keeps no scratch";
    WithScratchArg with(**task, bytes);
    ExpectConfigsMatchReference(*builder_, with, device_, info_, indices);
  }

  static inline builder::Builder* builder_ = nullptr;
  ServerProcess server_;
  DeviceSpec device_;
  msg::DeviceInfo info_;
  builder::Target target_;
};
#endif  // CT_SERVER_BIN

}  // namespace crosstune::tuner::testing
