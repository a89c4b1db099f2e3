// The model compiler end to end on this machine: ONNX models compiled into one package each (one
// library, graph.json, params.bin), uploaded to a real crosstune-server (127.0.0.1, port 0), run
// there by the graph executor through client::RemoteModel or `crosstune run-model`, and their
// outputs checked against onnxruntime's (max abs and max rel error printed).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "compiled_model.h"
#include "crosstune/graph.h"
#include "crosstune/model/onnx_import.h"
#include "crosstune/model/tasks.h"
#include "crosstune/package.h"
#include "crosstune/params.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"
#include "crosstune/tuner/task.h"
#include "model_files.h"

namespace crosstune::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CompileFile;
using testing::ExpectClose;
using testing::MakeModel;
using testing::ReferenceOutput;
using testing::RunOnServer;
using testing::SeededInput;

// The passes that leave every operator as the model wrote it (no folding, no fusion).
std::vector<Pass> UnfusedPasses() {
  return {*FindPass("fold_constants"), *FindPass("remove_identity")};
}

class CompileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(crosstune::testing::MakeTempDir("crosstune-compile"));
    server_ = new ServerProcess();
    Status st = server_->Start(
        {CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", "--work-dir", *dir_ + "/work"},
        std::chrono::seconds(30));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    fs::remove_all(*dir_);
    delete dir_;
  }
  static builder::Target Target() {
    static const builder::Target t = testing::TargetOf(server_->address());
    return t;
  }

  static std::string* dir_;
  static ServerProcess* server_;
};
std::string* CompileTest::dir_ = nullptr;
ServerProcess* CompileTest::server_ = nullptr;

TEST_F(CompileTest, PackageHoldsOneLibraryAValidGraphAndItsParams) {
  const std::string path = MakeModel("small_bn.onnx", "small --bn explicit");
  ASSERT_FALSE(path.empty());
  auto c = CompileFile(path, Target(), DefaultPasses(), "");
  ASSERT_TRUE(c.ok);
  auto pkg = pkg::OpenPackage(c.package);
  ASSERT_TRUE(pkg.ok()) << pkg.status().ToString();
  EXPECT_EQ(pkg->manifest.library, "lib/model.so");
  auto gr = graph::ParseGraph(GraphJson(c.result));
  ASSERT_TRUE(gr.ok()) << gr.status().ToString();
  EXPECT_TRUE(graph::ValidateGraph(*gr).ok()) << graph::ValidateGraph(*gr).ToString();
  auto params = ParamsBin(c.result);
  ASSERT_TRUE(params.ok());
  auto pf = pkg::ParamsFile::FromBuffer(params->data(), params->size());
  ASSERT_TRUE(pf.ok()) << pf.status().ToString();
  EXPECT_TRUE(graph::CheckParams(*gr, (*pf)->tensors()).ok());
  std::vector<msg::FunctionInfo> fns;
  for (const auto& f : pkg->manifest.functions) fns.push_back({f.name, f.signature});
  EXPECT_TRUE(graph::CheckFunctions(*gr, fns).ok()) << graph::CheckFunctions(*gr, fns).ToString();
  EXPECT_EQ(fns.size(), c.result.nodes.size()) << "one function per node";
  EXPECT_EQ(gr->inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(gr->outputs, std::vector<std::string>{"probs"});
  // Without records every task runs its template's default, and says so.
  EXPECT_EQ(c.result.tuned, 0);
  EXPECT_GT(c.result.defaults, 0);
  for (const auto& n : gr->nodes) {
    if (!n.is_op()) continue;
    ASSERT_TRUE(n.provenance.has_value()) << n.name;
    EXPECT_TRUE(n.provenance->is_default) << n.name;
  }
}

// Apply-history-best: a task's best record for this target and thread count is compiled in and
// named in the node's provenance; a slower record and a faster one for another target are not.
TEST_F(CompileTest, EachTaskGetsItsBestRecordForThisTarget) {
  const std::string path = MakeModel("small_bn.onnx", "small --bn explicit");
  ASSERT_FALSE(path.empty());
  auto g = ImportOnnx(path);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(RunPasses(*g, DefaultPasses()).ok());
  // A conv2d task with a relu, as compile looks it up (with its layout field).
  std::optional<NodeTask> first;
  for (const auto& l : ExtractTasks(*g)) {
    if (l.template_name == "conv2d" && (l.shape.size() <= 10 || l.shape[10] == 1)) {
      first = NodeTask{l.template_name, l.shape, {}};
      break;
    }
  }
  ASSERT_TRUE(first.has_value()) << "the small model has a conv2d task";
  auto task = tuner::MakeTask(first->template_name, first->shape, Target());
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  const tuner::Config fallback = (*task)->DefaultConfig();
  // A valid config that is not the default: the one the records pick.
  std::optional<tuner::Config> chosen;
  for (uint64_t i = (*task)->space().size(); i-- > 0 && !chosen;) {
    tuner::Config cfg = (*task)->space().Get(i);
    if (i != fallback.index() && (*task)->space().IsValid(cfg)) chosen = cfg;
  }
  ASSERT_TRUE(chosen.has_value());
  auto record = [&](const tuner::Config& cfg, double mean, const std::string& target) {
    tuner::Record r;
    r.task = (*task)->id();
    r.target = target;
    r.config_index = cfg.index();
    r.config_values = cfg.ToJson();
    r.costs = {mean};
    r.mean = mean;
    r.timestamp = "2026-11-30T10:00:00.000Z";
    return r;
  };
  CompileOptions o;
  o.records = {record(fallback, 2e-3, Target().ToString()),
               record(*chosen, 1e-3, Target().ToString()),
               record(fallback, 1e-4, "llvm -mtriple=aarch64-linux-gnu")};
  auto c = CompileFile(path, Target(), DefaultPasses(), ".tuned", o);
  ASSERT_TRUE(c.ok);
  EXPECT_GE(c.result.tuned, 1);
  auto gr = graph::ParseGraph(GraphJson(c.result));
  ASSERT_TRUE(gr.ok());
  int tuned_nodes = 0;
  for (const auto& n : gr->nodes) {
    if (!n.is_op() || !n.provenance || n.provenance->task != (*task)->id().Key()) continue;
    EXPECT_FALSE(n.provenance->is_default) << n.name;
    EXPECT_EQ(n.provenance->config_index, static_cast<int64_t>(chosen->index())) << n.name;
    EXPECT_DOUBLE_EQ(n.provenance->timestamp, 1796032800.0) << n.name;
    ++tuned_nodes;
  }
  EXPECT_EQ(tuned_nodes, c.result.tuned);
  // The tuned config computes the same network.
  ExpectClose(RunOnServer(server_->address(), c.package, SeededInput(path)), ReferenceOutput(path),
              "small, one task tuned, on the server, vs onnxruntime");

  // The devices of one key can differ: compiled for a kind of device, a task takes the best
  // record measured on that kind, not a faster one of another kind; without a kind, the fastest.
  tuner::Record mine = record(*chosen, 1e-3, Target().ToString());
  mine.device = tuner::DeviceId{"pi4-1", "x86_64", "this cpu", "rpi"};
  tuner::Record other = record(fallback, 1e-4, Target().ToString());
  other.device = tuner::DeviceId{"pi5-1", "x86_64", "other cpu", "rpi"};
  auto config_of_task = [&](const CompileOptions& opts) -> int64_t {
    auto compiled = CompileFile(path, Target(), DefaultPasses(), ".kind", opts);
    if (!compiled.ok) return -1;
    auto parsed = graph::ParseGraph(GraphJson(compiled.result));
    if (!parsed.ok()) return -1;
    for (const auto& n : parsed->nodes) {
      if (n.is_op() && n.provenance && n.provenance->task == (*task)->id().Key()) {
        return n.provenance->config_index;
      }
    }
    return -1;
  };
  CompileOptions kinds;
  kinds.records = {other, mine};
  kinds.device_kind = "x86_64/this cpu";
  EXPECT_EQ(config_of_task(kinds), static_cast<int64_t>(chosen->index()));
  kinds.device_kind = "x86_64/a cpu with no records";
  EXPECT_EQ(config_of_task(kinds), static_cast<int64_t>(fallback.index()));
  kinds.device_kind.clear();
  EXPECT_EQ(config_of_task(kinds), static_cast<int64_t>(fallback.index()));

  // A record of code the template now generates differently is not its config: the task takes
  // the next record, here none (-1: no node names the task, a default's provenance is
  // {"default": true}).
  tuner::Record old = record(*chosen, 1e-5, Target().ToString());
  old.generator = "0123456789abcdef";
  CompileOptions stale;
  stale.records = {old};
  EXPECT_EQ(config_of_task(stale), -1);
  old.generator = tuner::GeneratorHash(**task, *chosen);
  stale.records = {old};
  EXPECT_EQ(config_of_task(stale), static_cast<int64_t>(chosen->index()));
}

// The user's journey on ResNet-50 (width 16): import, compile without a log, run-model.
// This and BatchNormFoldingAndFusionKeepTheLogits run in the main tree only (the asan test preset
// excludes them): ResNet-50's compiles go to the builder's clang and its run to the generated
// kernels, neither instrumented. Under ASan the small models take the same host paths: the CLI's
// import (model_import_cli_test), compile and the server's graph executor
// (TuneModelResumesFromItsLogAndCompileTakesItsBest), folded BatchNorm and blocked layouts
// (BlockedAndNchwLayoutsComputeTheSameNetwork).
TEST_F(CompileTest, ResNet50Width16FromTheCommandLineMatchesOnnxRuntime) {
  const std::string path = MakeModel("r50w16.onnx", "resnet50 --width 16");
  ASSERT_FALSE(path.empty());
  const std::string cli = CT_CLI;
  auto imported = crosstune::testing::RunCommand(cli + " import " + path + " --json");
  ASSERT_EQ(imported.exit_code, 0) << imported.out << imported.err;
  const json j = json::parse(imported.out);
  EXPECT_EQ(j["inputs"][0]["name"], "input");
  EXPECT_EQ(j["outputs"][0]["name"], "logits");
  EXPECT_EQ(j["ops"]["Conv"], 53);
  EXPECT_GT(j["tasks"].size(), 15u);
  EXPECT_GT(j["activation_mb"].get<double>(), 0);

  const std::string package = *dir_ + "/r50w16.ctpkg";
  auto compiled =
      crosstune::testing::RunCommand(cli + " compile " + path + " --target auto --server " +
                                     server_->address() + " -o " + package);
  ASSERT_EQ(compiled.exit_code, 0) << compiled.out << compiled.err;
  EXPECT_NE(compiled.out.find("no --log: every task"), std::string::npos) << compiled.out;
  std::printf("%s", compiled.out.c_str());

  // The seeded input onnxruntime used, run on the server by the graph executor.
  const std::string input = testing::SeededInputPath(path);
  const std::string out = *dir_ + "/logits.npy";
  auto ran = crosstune::testing::RunCommand(cli + " run-model " + package + " --server " +
                                            server_->address() + " --input input=" + input +
                                            " --out " + out);
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  ExpectClose(testing::ReadNpyFloats(out), ReferenceOutput(path),
              "resnet50 w16, compiled by `crosstune compile`, run by `crosstune run-model`, vs "
              "onnxruntime");
}

// A network past the protocol's frame: the onnx wheel's light DenseNet-121 (730 nodes) links
// from 4 MiB of objects into a library of 2.8 MiB, each over the 1 MiB frame; they go through
// the builder's pool whole, and the package runs and matches onnxruntime. (Its weights are made
// by the model's ConstantOfShape nodes, folded here.)
TEST_F(CompileTest, DenseNet121FromTheOnnxWheelMatchesOnnxRuntime) {
  std::string path = testing::RunModelPython(
      "import os, onnx\n"
      "print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data', 'light',\n"
      "                   'light_densenet121.onnx'))\n",
      "");
  while (!path.empty() && path.back() == '\n') path.pop_back();
  ASSERT_TRUE(fs::exists(path)) << path;
  // A copy: the package is written beside the model, not into the wheel.
  const std::string copy = *dir_ + "/light_densenet121.onnx";
  fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
  path = copy;
  auto c = CompileFile(path, Target(), DefaultPasses(), "");
  ASSERT_TRUE(c.ok);
  EXPECT_GT(c.result.library.library.size(), size_t{1} << 20);
  ExpectClose(RunOnServer(server_->address(), c.package, SeededInput(path)), ReferenceOutput(path),
              "light_densenet121 from the onnx wheel, on the server, vs onnxruntime");
}

// Models of any size (issue 40, part 1): one linear Resize to 1,048,576 columns, whose generated
// kernel carries a table entry per column: a build request of 27 MB of source and a link request
// and library of 21 MB, far past the protocol's 1 MiB frame and over 16 MiB, through the
// builder's pool and uploaded to the server in chunks; the package runs and matches onnxruntime.
TEST_F(CompileTest, AWideUpsamplerWhoseBuildIsOver16MiBRunsAndMatchesOnnxRuntime) {
  const std::string path = MakeModel("wide_resize.onnx", "wide-resize");
  ASSERT_FALSE(path.empty());
  auto c = CompileFile(path, Target(), DefaultPasses(), "");
  ASSERT_TRUE(c.ok);
  EXPECT_GT(c.result.library.library.size(), size_t{16} << 20);
  ExpectClose(RunOnServer(server_->address(), c.package, SeededInput(path)), ReferenceOutput(path),
              "a 1,048,576-column linear Resize on the server vs onnxruntime");
}

// MobileNetV2 as exporters write it (ReLU6 as Clip with constant bounds, 17 depthwise convs,
// inverted residuals), at width multiplier 1.0: the package matches onnxruntime. Each Clip is
// its conv's relu6 activation, and the data stays blocked from the first conv to the global
// pool: the 17 depthwise convs run the depthwise_conv2d template's blocked kernel between the
// conv2d template's, with no layout transform and no Clip left. Not under ASan (the asan test
// preset excludes it): 21 s there, the compile path the small models take.
TEST_F(CompileTest, MobileNetV2MatchesOnnxRuntime) {
  const std::string path = MakeModel("mobilenetv2.onnx", "mobilenetv2");
  ASSERT_FALSE(path.empty());
  auto c = CompileFile(path, Target(), DefaultPasses(), "");
  ASSERT_TRUE(c.ok);
  int depthwise = 0, convs = 0;
  for (const CompiledNode& n : c.result.nodes) {
    if (n.has_task && n.task.template_name == "depthwise_conv2d") {
      ++depthwise;
      EXPECT_EQ(n.task.shape.back(), 1) << "blocked: " << n.function;
      EXPECT_NE(n.function.find("depthwise_conv2d"), std::string::npos) << "the template's kernel";
    } else if (n.has_task && n.task.template_name == "conv2d") {
      ++convs;
    }
  }
  EXPECT_EQ(depthwise, 17);
  EXPECT_EQ(convs, 35);
  for (const Node& n : c.result.graph.nodes) {
    EXPECT_NE(n.op, "LayoutTransform") << n.name;
    EXPECT_NE(n.op, "Clip") << n.name;
  }
  ExpectClose(RunOnServer(server_->address(), c.package, SeededInput(path)), ReferenceOutput(path),
              "MobileNetV2 on the server vs onnxruntime");
}

// An int8 copy of ResNet-50 (width 16) as onnxruntime's quantizer writes it (QDQ: uint8
// activations, int8 weights per channel): fuse_qdq_conv makes each conv a QLinearConv, the
// compiler each of those a conv2d_int8 kernel of NHWC uint8 data; the residual adds and their
// QuantizeLinear/DequantizeLinear nodes run as kernels on the NHWC data, and the logits match
// onnxruntime's int8 run within one quantization step of the output (the scale of the
// DequantizeLinear that writes it: a requantization that rounds a tie the other way moves an
// output by one step). Not under ASan (the asan test preset excludes it): 36 s there; the
// quantize kernels' own tests (libonnx-testdata's) run there.
TEST_F(CompileTest, Int8QdqResNetFromOnnxRuntimesQuantizerMatchesItWithinOneStep) {
  const std::string path = MakeModel("r50w16_int8.onnx", "resnet50 --width 16 --int8 per-channel");
  ASSERT_FALSE(path.empty());
  const double step = testing::OutputStep(path);
  ASSERT_GT(step, 0);
  auto c = CompileFile(path, Target(), DefaultPasses(), "");
  ASSERT_TRUE(c.ok);
  // Every conv runs the conv2d_int8 template's kernel, and NHWC data passes from conv to conv
  // and through the residual adds' DequantizeLinear, Add and QuantizeLinear: the only
  // transposes are the stem's input and output and the max-pool's output (it takes NCHW), and
  // the last block's output before the global pool.
  int int8_convs = 0, transposes = 0;
  for (const Node& n : c.result.graph.nodes) {
    int8_convs += n.op == "Conv2dInt8";
    transposes += n.op == "Transpose";
  }
  EXPECT_EQ(int8_convs, 53);
  int int8_kernels = 0;
  for (const CompiledNode& n : c.result.nodes)
    int8_kernels += n.has_task && n.task.template_name == "conv2d_int8";
  EXPECT_EQ(int8_kernels, 53);
  EXPECT_EQ(transposes, 4);
  const std::vector<float> got = RunOnServer(server_->address(), c.package, SeededInput(path));
  const std::vector<float> want = ReferenceOutput(path);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  size_t argmax_got = 0, argmax_want = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
    if (got[i] > got[argmax_got]) argmax_got = i;
    if (want[i] > want[argmax_want]) argmax_want = i;
  }
  std::printf(
      "int8 ResNet-50 w16 vs onnxruntime's int8 run: max abs error %.3g (one step %.3g); %d int8 "
      "convs, %d transposes\n",
      worst, step, int8_convs, transposes);
  EXPECT_LE(worst, step * (1 + 1e-4)) << "more than one quantization step from onnxruntime";
  EXPECT_EQ(argmax_got, argmax_want);
}

// `tune --model` tunes the model's tasks and resumes from its log; `compile --log` then takes
// each task's best record, and the package still computes the model.
TEST_F(CompileTest, TuneModelResumesFromItsLogAndCompileTakesItsBest) {
  const std::string path = MakeModel("small.onnx", "small");
  ASSERT_FALSE(path.empty());
  const std::string cli = CT_CLI;
  const std::string log = *dir_ + "/small.jsonl";
  auto tune = [&](int trials, const std::string& more = "") {
    auto r = crosstune::testing::RunCommand(
        cli + " tune --model " + path + " --trials " + std::to_string(trials) +
        " --round 2 --tuner random --log " + log + " --server " + server_->address() +
        " --json --quiet" + more);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json();
  };
  const json first = tune(14);  // more than one round of 2 for some of its tasks
  ASSERT_TRUE(first.is_object());
  EXPECT_EQ(first["workload"], "small");
  EXPECT_GE(first["tasks"].size(), 2u);
  EXPECT_EQ(first["measured"], first["trials_in_log"]) << "a new log: every trial is measured";
  // Each task's search (tuner, cost model, records, reference) is opened once and kept for all
  // of its rounds.
  int rounds = 0;
  for (const auto& t : first["tasks"]) {
    rounds += t["rounds"].get<int>();
    EXPECT_EQ(t["opened"], 1) << t.dump();
  }
  EXPECT_GT(rounds, static_cast<int>(first["tasks"].size())) << first.dump();
  // The tuner's planning summed over the rounds: every trial but each task's default config was
  // proposed by it; one device, the default batch.
  EXPECT_EQ(first["planning"]["proposed"].get<int>(),
            first["measured"].get<int>() - static_cast<int>(first["tasks"].size()))
      << first.dump();
  EXPECT_GT(first["planning"]["seconds"].get<double>(), 0) << first.dump();
  EXPECT_EQ(first["batch"], 8) << first.dump();
  // A network's layers are timed cold unless the timing is given: caches flushed before each of
  // five single calls.
  EXPECT_EQ(first["timing"], json({{"number", 1},
                                   {"repeat", 5},
                                   {"min_repeat_ms", 0},
                                   {"cooldown_ms", 0},
                                   {"flush_cache", true}}))
      << first.dump();
  const int before = first["trials_in_log"];
  const json second = tune(before + 4, " --repeat 2");
  ASSERT_TRUE(second.is_object());
  EXPECT_EQ(second["timing"], json({{"number", 1},
                                    {"repeat", 2},
                                    {"min_repeat_ms", 50},
                                    {"cooldown_ms", 0},
                                    {"flush_cache", false}}))
      << "a timing flag given: the others keep their (template) defaults; " << second.dump();
  EXPECT_EQ(second["trials_in_log"], before + 4);
  EXPECT_EQ(second["measured"], 4) << "the trials in the log are not measured again";

  const std::string package = *dir_ + "/small_tuned.ctpkg";
  auto compiled = crosstune::testing::RunCommand(cli + " compile " + path + " --log " + log +
                                                 " --target auto --server " + server_->address() +
                                                 " -o " + package + " --json");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.out << compiled.err;
  const json c = json::parse(compiled.out);
  EXPECT_EQ(c["tuned"], c["tasks"]) << "every task of the model has records: " << compiled.out;
  EXPECT_EQ(c["defaults"], 0);
  ExpectClose(RunOnServer(server_->address(), package, SeededInput(path)), ReferenceOutput(path),
              "small, compiled with its tuned log, vs onnxruntime");
}

// Blocked layouts (the default: weights packed here, activations NCHWc between convs) and NCHW
// everywhere compute the same network; params.bin holds the packed weights, and the graph's
// inputs and outputs keep their NCHW shapes.
TEST_F(CompileTest, BlockedAndNchwLayoutsComputeTheSameNetwork) {
  const std::string path = MakeModel("small_bn.onnx", "small --bn explicit");
  ASSERT_FALSE(path.empty());
  CompileOptions nchw;
  nchw.layouts = Layouts::kNchw;
  auto blocked = CompileFile(path, Target(), DefaultPasses(), ".blocked");
  auto plain = CompileFile(path, Target(), DefaultPasses(), ".nchw", nchw);
  ASSERT_TRUE(blocked.ok && plain.ok);
  // The conv2d template takes every blocked conv (none falls back to a generated kernel).
  EXPECT_EQ(blocked.result.untemplated, 0);
  EXPECT_EQ(blocked.result.defaults, plain.result.defaults);
  int packed = 0;
  for (const Value& v : blocked.result.graph.values) packed += !v.layout.empty();
  EXPECT_GT(packed, 0) << "the convs of blocked data read packed weights";
  for (const Value& v : plain.result.graph.values) EXPECT_TRUE(v.layout.empty()) << v.name;
  auto params = ParamsBin(blocked.result);
  ASSERT_TRUE(params.ok());
  auto pf = pkg::ParamsFile::FromBuffer(params->data(), params->size());
  ASSERT_TRUE(pf.ok()) << pf.status().ToString();
  int packed_params = 0;
  for (const auto& t : (*pf)->tensors()) packed_params += t.shape.size() == 5;
  EXPECT_EQ(packed_params, packed);
  auto gr = graph::ParseGraph(GraphJson(blocked.result));
  ASSERT_TRUE(gr.ok());
  EXPECT_EQ(gr->inputs, std::vector<std::string>{"input"});
  EXPECT_EQ(gr->outputs, std::vector<std::string>{"probs"});
  const std::vector<float> x = SeededInput(path);
  const std::vector<float> a = RunOnServer(server_->address(), blocked.package, x);
  const std::vector<float> b = RunOnServer(server_->address(), plain.package, x);
  ExpectClose(a, b, "small explicit BN: blocked layouts vs NCHW");
  ExpectClose(a, ReferenceOutput(path), "small explicit BN, blocked layouts, vs onnxruntime");
}

TEST_F(CompileTest, ImportRefusesAnUnsupportedOperatorByNodeName) {
  const std::string path = MakeModel("unsupported.onnx", "unsupported");
  ASSERT_FALSE(path.empty());
  auto r = crosstune::testing::RunCommand(std::string(CT_CLI) + " import " + path);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("operator Hardmax at node 'hardmax'"), std::string::npos) << r.err;
}

// BatchNormalization folded into the convs and conv + bias + residual + relu fused give the
// logits of the same network compiled operator by operator.
TEST_F(CompileTest, BatchNormFoldingAndFusionKeepTheLogits) {
  const std::string path = MakeModel("r50w16_bn.onnx", "resnet50 --width 16 --bn explicit");
  ASSERT_FALSE(path.empty());
  auto fused = CompileFile(path, Target(), DefaultPasses(), ".fused");
  auto unfused = CompileFile(path, Target(), UnfusedPasses(), ".unfused");
  ASSERT_TRUE(fused.ok && unfused.ok);
  auto count = [](const CompileResult& r, const std::string& op) {
    int n = 0;
    for (const Node& node : r.graph.nodes) n += node.op == op;
    return n;
  };
  EXPECT_EQ(count(fused.result, "BatchNormalization"), 0);
  EXPECT_EQ(count(fused.result, "FusedConv"), 53);
  EXPECT_EQ(count(unfused.result, "BatchNormalization"), 53);
  EXPECT_EQ(count(unfused.result, "Conv"), 53);
  const std::vector<float> x = SeededInput(path);
  const std::vector<float> a = RunOnServer(server_->address(), fused.package, x);
  const std::vector<float> b = RunOnServer(server_->address(), unfused.package, x);
  ExpectClose(a, b, "resnet50 w16 explicit BN: folded and fused vs operator by operator");
  ExpectClose(a, ReferenceOutput(path),
              "resnet50 w16 explicit BN, folded and fused, vs onnxruntime");
}

}  // namespace
}  // namespace crosstune::model
