// The model pipeline every front end calls (crosstune/model/pipeline.h): Load and
// CompileToPackage on a model scripts/make-model.py writes, with real logs and the real builder.
// The CLI and the Python package are checked to go through them in python/tests/test_model.py
// (the same model and log through both give the same report and warnings).
#include "crosstune/model/pipeline.h"

#include <gtest/gtest.h>

#include <optional>

#include "crosstune/builder/target.h"
#include "crosstune/package.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/task.h"
#include "model_files.h"

namespace crosstune::model {
namespace {

using testing::MakeModel;

builder::Builder& Pool() {
  static auto b = builder::Builder::Create(
      {.workers = 2, .cache_dir = crosstune::testing::SharedTestBuildCache()});
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return **b;
}

const std::string& Dir() {
  static const crosstune::testing::TempDir dir("crosstune-pipeline");
  return dir.path();
}

std::string SmallModel() {
  static const std::string path = MakeModel("small.onnx", "small");
  return path;
}

// A device as a server reports it: x86_64 with no ISA feature (TargetFromDevice: LLVM's baseline
// cpu), so the package compiles on any x86_64 build machine.
msg::DeviceInfo ThisKindOfDevice() {
  msg::DeviceInfo d;
  d.arch = "x86_64";
  d.triple = "x86_64-linux-gnu";
  d.cpu_model = "this cpu";
  return d;
}

TEST(PipelineTest, LoadsAModelAsTheFileHoldsItAndAfterThePasses) {
  ASSERT_FALSE(SmallModel().empty());
  auto m = Load(SmallModel());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->name, "small");
  EXPECT_EQ(m->path, SmallModel());
  EXPECT_EQ(m->imported.ops.at("Conv"), 4);
  EXPECT_EQ(m->graph.nodes.size() < m->imported_nodes, true) << "the passes fuse nodes";
  int fused = 0;
  for (const Node& n : m->graph.nodes) fused += n.op == "FusedConv";
  EXPECT_EQ(fused, 4);
  const auto report = ImportReport(*m);
  EXPECT_EQ(report["ops"]["Conv"], 4);
  EXPECT_EQ(report["tasks"].size(), 5u);

  auto named = Load(SmallModel(), {.shapes = {{"input", {1, 3, 16, 16}}}, .name = "s2"});
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->name, "s2");
}

TEST(PipelineTest, RefusesBadShapesBudgetsAndOperatorsByName) {
  ASSERT_FALSE(SmallModel().empty());
  auto expect_invalid = [](const Expected<LoadedModel>& m, const std::string& words) {
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), ErrorCode::kInvalidArgument) << m.status().ToString();
    EXPECT_NE(m.status().message().find(words), std::string::npos) << m.status().ToString();
  };
  // Python's shapes= goes through the same checks as --shape flags: no zero, negative or empty
  // shape reaches the importer.
  expect_invalid(Load(SmallModel(), {.shapes = {{"input", {1, 3, 0, 16}}}}),
                 "shape of 'input' (1,3,0,16)");
  expect_invalid(Load(SmallModel(), {.shapes = {{"input", {1, -3, 16, 16}}}}), "from 1 to 2^31");
  expect_invalid(Load(SmallModel(), {.shapes = {{"input", {}}}}), "'input': no dimensions");
  expect_invalid(Load(SmallModel(), {.shapes = {{"image", {1, 3, 16, 16}}}}),
                 "not an input of the model (inputs: input)");
  expect_invalid(Load(SmallModel(), {.shapes = {{"input", {1, 3, 32, 32}}}}),
                 "dimension 2 is 16 in the model, not 32");
  expect_invalid(Load(SmallModel(), {.max_model_mb = 0}), "max model size 0 MiB");
  expect_invalid(Load(SmallModel(), {.max_model_mb = kMaxModelMb + 1}), "max model size");
  const std::string unsupported = MakeModel("unsupported.onnx", "unsupported");
  ASSERT_FALSE(unsupported.empty());
  expect_invalid(Load(unsupported), "operator Hardmax at node 'hardmax'");
  auto missing = Load(Dir() + "/missing.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound) << missing.status().ToString();
}

// A conv2d task of the small model as CompileToPackage looks it up for `target`, and two of its
// valid configs: the default and another.
struct ConvTask {
  std::unique_ptr<tuner::Task> task;
  tuner::Config fallback, other;
};
std::optional<ConvTask> FirstConvTask(const LoadedModel& m, const builder::Target& target) {
  for (const auto& l : ExtractTasks(m.graph)) {
    if (l.template_name != "conv2d") continue;
    auto task = tuner::MakeTask(l.template_name, l.shape, target);
    if (!task.ok()) continue;
    ConvTask t{std::move(*task), {}, {}};
    t.fallback = t.task->DefaultConfig();
    for (uint64_t i = t.task->space().size(); i-- > 0;) {
      tuner::Config c = t.task->space().Get(i);
      if (i != t.fallback.index() && t.task->space().IsValid(c)) {
        t.other = c;
        return t;
      }
    }
  }
  return std::nullopt;
}

tuner::Record RecordOf(const ConvTask& t, const tuner::Config& c, double mean,
                       const std::string& target, const std::string& cpu) {
  tuner::Record r;
  r.task = t.task->id();
  r.target = target;
  r.device = tuner::DeviceId{"dev", "x86_64", cpu, "key"};
  r.config_index = c.index();
  r.config_values = c.ToJson();
  r.costs = {mean};
  r.mean = mean;
  r.timestamp = "2026-11-30T10:00:00.000Z";
  return r;
}

std::string WriteLog(const std::string& name, const std::vector<tuner::Record>& records,
                     const std::string& junk = "") {
  const std::string path = Dir() + "/" + name;
  std::string text = junk;
  for (const auto& r : records) text += r.ToJson().dump() + "\n";
  crosstune::testing::WriteFile(path, text);
  return path;
}

// The config the package's node of `t` runs: a record's config index, or -1 for the default.
int64_t ConfigOf(const CompiledPackage& p, const ConvTask& t) {
  for (const CompiledNode& n : p.result.nodes) {
    if (n.has_task && n.task_key == t.task->id().Key()) {
      return n.tuned ? static_cast<int64_t>(n.config_index) : -1;
    }
  }
  return -2;
}

// "auto" asks the device given for its target, and the device's kind (tuner::DeviceKind) picks
// the records measured on it over faster ones of another kind; without a device, the fastest.
// The log's unreadable line comes back as a warning value, and in the report.
TEST(PipelineTest, CompilesWithTheRecordsOfTheDevicesKindAndReturnsWarnings) {
  ASSERT_FALSE(SmallModel().empty());
  auto m = Load(SmallModel());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const msg::DeviceInfo device = ThisKindOfDevice();
  auto target = builder::TargetFromDevice(device);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  const std::string target_text = target->ToString();
  auto t = FirstConvTask(*m, *target);
  ASSERT_TRUE(t.has_value());
  const std::string log = WriteLog("kinds.jsonl",
                                   {RecordOf(*t, t->other, 2e-3, target_text, "this cpu"),
                                    RecordOf(*t, t->fallback, 1e-3, target_text, "other cpu")},
                                   "not JSON\n");

  PackageOptions o;
  o.device = device;
  o.log = log;
  o.out = Dir() + "/kinds.ctpkg";
  auto p = CompileToPackage(*m, o, &Pool());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->options.target.ToString(), target_text);
  EXPECT_EQ(p->options.device_kind, "x86_64/this cpu");
  EXPECT_EQ(ConfigOf(*p, *t), static_cast<int64_t>(t->other.index()))
      << "the record of this kind of device, not the faster one of another kind";
  ASSERT_EQ(p->warnings.size(), 1u);
  EXPECT_NE(p->warnings[0].find("kinds.jsonl:1: skipped a line that is not JSON"),
            std::string::npos)
      << p->warnings[0];
  EXPECT_EQ(p->report["warnings"], nlohmann::json(p->warnings));
  EXPECT_EQ(p->report["device_kind"], "x86_64/this cpu");
  EXPECT_EQ(p->report["log"], log);
  EXPECT_GE(p->report["tuned"].get<int>(), 1);
  EXPECT_TRUE(p->options.records.empty()) << "the records are not kept past the compile";
  auto opened = pkg::OpenPackage(o.out);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->manifest.build_id, p->manifest.build_id);

  // A target string asks no device: the fastest record of any kind.
  PackageOptions plain = o;
  plain.device.reset();
  plain.target = target_text;
  plain.out = Dir() + "/plain.ctpkg";
  auto q = CompileToPackage(*m, plain, &Pool());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->options.device_kind, "");
  EXPECT_EQ(ConfigOf(*q, *t), static_cast<int64_t>(t->fallback.index()));
}

// Calls that bring no pool share one per worker count: its workers start once for the process
// (each compile started two before, about a tenth of a second each), and a release ends them.
TEST(PipelineTest, CompilesWithoutAPoolShareOneUntilReleased) {
  ASSERT_FALSE(SmallModel().empty());
  auto m = Load(SmallModel());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto target = builder::TargetFromDevice(ThisKindOfDevice());
  ASSERT_TRUE(target.ok());
  PackageOptions o;
  o.target = target->ToString();
  o.workers = 1;
  o.out = Dir() + "/shared-1.ctpkg";
  auto first = CompileToPackage(*m, o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto shared = SharedBuilder(1);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  const uint64_t built = (*shared)->stats().builds;
  EXPECT_GT(built, 0u) << "the first compile built on the shared pool";
  o.out = Dir() + "/shared-2.ctpkg";
  auto second = CompileToPackage(*m, o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(first->manifest.build_id, second->manifest.build_id);
  auto again = SharedBuilder(1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *shared) << "the same pool, not a new one";
  EXPECT_EQ((*again)->stats().builds, 2 * built) << "the second compile built there too";
  auto two = SharedBuilder(2);
  ASSERT_TRUE(two.ok());
  EXPECT_NE(*two, *shared) << "one pool per worker count";
  EXPECT_EQ((*two)->workers(), 2);

  ReleaseSharedBuilders();
  auto fresh = SharedBuilder(1);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->stats().builds, 0u) << "a new pool after the release";
  ReleaseSharedBuilders();
}

TEST(PipelineTest, WarnsOfRecordsItCannotUse) {
  ASSERT_FALSE(SmallModel().empty());
  auto m = Load(SmallModel());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto target = builder::TargetFromDevice(ThisKindOfDevice());
  ASSERT_TRUE(target.ok());
  auto t = FirstConvTask(*m, *target);
  ASSERT_TRUE(t.has_value());
  PackageOptions o;
  o.target = target->ToString();
  o.out = Dir() + "/warned.ctpkg";

  // Records of another target only: compiled on defaults, and said so.
  o.log = WriteLog("aarch64.jsonl",
                   {RecordOf(*t, t->other, 1e-3, "llvm -mtriple=aarch64-linux-gnu", "a72")});
  auto other = CompileToPackage(*m, o, &Pool());
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_EQ(other->warnings.size(), 1u);
  EXPECT_NE(other->warnings[0].find("none of its 1 records is for " + o.target), std::string::npos)
      << other->warnings[0];
  EXPECT_EQ(other->result.tuned, 0);

  // A record of code its template now generates differently is not used, and said so.
  tuner::Record stale = RecordOf(*t, t->other, 1e-3, o.target, "this cpu");
  stale.generator = "0123456789abcdef";
  o.log = WriteLog("stale.jsonl", {stale});
  auto old = CompileToPackage(*m, o, &Pool());
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  ASSERT_EQ(old->warnings.size(), 1u);
  EXPECT_NE(old->warnings[0].find("1 record(s) measured code their template now generates"),
            std::string::npos)
      << old->warnings[0];
  EXPECT_EQ(old->report["stale_records"], 1);
  EXPECT_EQ(ConfigOf(*old, *t), -1);
}

TEST(PipelineTest, RefusesBadOptionsAndLogsByName) {
  ASSERT_FALSE(SmallModel().empty());
  auto m = Load(SmallModel());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto expect_error = [&](const PackageOptions& o, ErrorCode code, const std::string& words) {
    auto p = CompileToPackage(*m, o, &Pool());
    ASSERT_FALSE(p.ok()) << words;
    EXPECT_EQ(p.status().code(), code) << p.status().ToString();
    EXPECT_NE(p.status().message().find(words), std::string::npos) << p.status().ToString();
  };
  PackageOptions o;
  o.out = Dir() + "/refused.ctpkg";
  expect_error(o, ErrorCode::kInvalidArgument, "target 'auto' needs a device");
  o.target = "x86-avx2";
  PackageOptions bad = o;
  bad.threads = 0;
  expect_error(bad, ErrorCode::kInvalidArgument, "threads 0");
  bad = o;
  bad.out.clear();
  expect_error(bad, ErrorCode::kInvalidArgument, "no package path");
  bad = o;
  bad.layouts = "nhwc";
  expect_error(bad, ErrorCode::kInvalidArgument, "nhwc");
  bad = o;
  bad.target = "cuda -arch=sm_90";
  expect_error(bad, ErrorCode::kInvalidArgument, "CPU targets only");
  bad = o;
  bad.log = Dir() + "/no-such.jsonl";
  expect_error(bad, ErrorCode::kNotFound, "no-such.jsonl");
  // The model given as the log by mistake: not one line is a record.
  bad = o;
  bad.log = WriteLog("not-a-log.txt", {}, "hello\nworld\n");
  expect_error(bad, ErrorCode::kInvalidArgument,
               "not-a-log.txt: not a log of tuning records: " + bad.log + ":1: skipped a line");
  // An empty log (a run not started yet) is no error: every task takes its default.
  bad = o;
  bad.log = WriteLog("empty.jsonl", {});
  auto empty = CompileToPackage(*m, bad, &Pool());
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->warnings.empty());
}

}  // namespace
}  // namespace crosstune::model
