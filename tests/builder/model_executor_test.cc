// The graph executor end to end: a small network whose node kernels are C compiled by the real
// builder, its graph.json written through formats/graph.h and its params through ParamsWriter,
// packaged, uploaded to a real crosstune-server (127.0.0.1, port 0) and run through
// client::RemoteModel, with outputs checked against values computed here. Then every bad
// package and every bad request is refused with its own named error, and a node that crashes or
// hangs is named while the server keeps serving.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "crosstune/client/remote_model.h"
#include "crosstune/client/session.h"
#include "crosstune/crypto.h"
#include "crosstune/graph.h"
#include "crosstune/params.h"
#include "crosstune/testing/server_process.h"
#include "model_test_net.h"
#include "package_helpers.h"

namespace crosstune {
namespace {

namespace fs = std::filesystem;
using client::RemoteModel;
using client::Session;

constexpr DLDataType kF32{kDLFloat, 32, 1};

using testing::kHidden;
using testing::kIn;
using testing::NetGraph;
using testing::NetParams;
using testing::Weights;

class ModelExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("crosstune-model-exec-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "work");
    server_ = new ServerProcess();
    Status st = server_->Start({CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", "--work-dir",
                                (dir_ / "work").string()},
                               std::chrono::seconds(20));
    ASSERT_TRUE(st.ok()) << st.ToString();
    request_ = new builder::BuildRequest();
    request_->source = testing::kNetSource;
    request_->target = *builder::ParseTarget("x86-64");
    request_->name = "net";
    result_ = new builder::BuildResult(builder::BuildInProcess(*request_));
    ASSERT_TRUE(result_->ok()) << result_->status.ToString() << result_->diagnostics;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete request_;
    delete result_;
    fs::remove_all(dir_);
  }
  void SetUp() override { Connect(); }
  void Connect() {
    client::ConnectOptions o;
    o.server = server_->address();
    auto s = Session::Connect(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    session_ = std::move(*s);
  }
  static std::string Path(const std::string& name) { return (dir_ / name).string(); }

  // Packages the network library with this graph and these params.
  static std::string Package(const std::string& name, const graph::Graph& g,
                             const pkg::ParamsWriter* params) {
    std::string out = Path(name);
    auto m = builder::WriteBuildPackage(*request_, *result_, out, graph::GraphToJson(g),
                                        params ? params->Serialize() : "");
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return out;
  }

  Expected<RemoteModel> UploadAndLoad(const std::string& local) {
    const std::string remote = fs::path(local).filename().string();
    auto up = session_->Upload(local, remote);
    if (!up.ok()) return up.status();
    return RemoteModel::Load(session_.get(), remote);
  }

  // Loads the good network and sets its input.
  RemoteModel LoadGood(std::vector<float>* x) {
    static const std::string good = [] {
      pkg::ParamsWriter p = NetParams(Weights());
      return Package("good.ctpkg", NetGraph(), &p);
    }();
    auto m = UploadAndLoad(good);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    x->resize(kIn);
    for (int64_t i = 0; i < kIn; ++i) (*x)[i] = 0.5f * static_cast<float>(i) - 1.0f;
    if (m.ok()) {
      Status s = m->SetInput("x", x->data(), x->size() * 4);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    return m.ok() ? *m : RemoteModel();
  }

  void ExpectOutputs(RemoteModel& m, const std::vector<float>& x) {
    std::vector<float> want = testing::Reference(Weights(), x);
    std::vector<float> lo(2), hi(2);
    ASSERT_TRUE(m.GetOutput("lo", lo.data(), 8).ok());
    ASSERT_TRUE(m.GetOutput(1, hi.data(), 8).ok());
    EXPECT_FLOAT_EQ(lo[0], want[0]);
    EXPECT_FLOAT_EQ(lo[1], want[1]);
    EXPECT_FLOAT_EQ(hi[0], want[2]);
    EXPECT_FLOAT_EQ(hi[1], want[3]);
  }

  // The error of loading `g` with `params`, expected to fail.
  Status LoadError(const std::string& name, const graph::Graph& g,
                   const pkg::ParamsWriter* params) {
    auto m = UploadAndLoad(Package(name, g, params));
    EXPECT_FALSE(m.ok()) << name << " loaded";
    return m.ok() ? Status() : m.status();
  }

  static fs::path dir_;
  static ServerProcess* server_;
  static builder::BuildRequest* request_;
  static builder::BuildResult* result_;
  std::unique_ptr<Session> session_;
};
fs::path ModelExecutorTest::dir_;
ServerProcess* ModelExecutorTest::server_ = nullptr;
builder::BuildRequest* ModelExecutorTest::request_ = nullptr;
builder::BuildResult* ModelExecutorTest::result_ = nullptr;

TEST_F(ModelExecutorTest, RunsTheNetworkWithCheckedOutputs) {
  std::vector<float> x;
  RemoteModel m = LoadGood(&x);
  const msg::ModelInfo& info = m.info();
  ASSERT_EQ(info.inputs.size(), 1u);
  EXPECT_EQ(info.inputs[0].name, "x");
  EXPECT_EQ(info.inputs[0].shape, (std::vector<int64_t>{1, kIn}));
  EXPECT_EQ(info.inputs[0].dtype, "float32");
  ASSERT_EQ(info.outputs.size(), 2u);
  EXPECT_EQ(info.outputs[1].name, "hi");
  EXPECT_EQ(info.nodes, 4u);
  EXPECT_EQ(info.params, 2u);
  EXPECT_EQ(info.params_bytes, uint64_t{(kIn * kHidden + kHidden) * 4});
  auto run = m.Run();
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectOutputs(m, x);
  // A second input, a second run: the same buffers, new answers.
  for (float& v : x) v = -v;
  ASSERT_TRUE(m.SetInput("x", x.data(), x.size() * 4).ok());
  ASSERT_TRUE(m.Run(0, 2).ok());
  ExpectOutputs(m, x);
}

TEST_F(ModelExecutorTest, SendsInputsFromAndReadsOutputsIntoTheCallersBuffers) {
  std::vector<float> x;
  RemoteModel m = LoadGood(&x);
  const Session::CopyStats& stats = session_->copy_stats();
  EXPECT_EQ(stats.copies_in, 1u);
  EXPECT_EQ(stats.bytes_in, x.size() * 4);
  EXPECT_EQ(stats.last_in_source, x.data());
  ASSERT_TRUE(m.Run().ok());
  std::vector<float> hi(2);
  ASSERT_TRUE(m.GetOutput("hi", hi.data(), 8).ok());
  EXPECT_EQ(stats.copies_out, 1u);
  EXPECT_EQ(stats.bytes_out, 8u);
  EXPECT_EQ(stats.last_out_destination, hi.data());
}

TEST_F(ModelExecutorTest, SetsInputsAndReadsOutputsAsHostTensorsInPlace) {
  std::vector<float> x;
  RemoteModel m = LoadGood(&x);
  for (float& v : x) v = -v;
  int64_t in_shape[2] = {1, kIn};
  DLTensor in{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, in_shape, nullptr, 0};
  ASSERT_TRUE(m.SetInputHost("x", in).ok());
  EXPECT_EQ(session_->copy_stats().last_in_source, x.data());
  ASSERT_TRUE(m.Run().ok());
  std::vector<float> lo(2), hi(2);
  int64_t out_shape[2] = {1, 2};
  DLTensor lo_t{lo.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, out_shape, nullptr, 0};
  DLTensor hi_t{hi.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, out_shape, nullptr, 0};
  ASSERT_TRUE(m.GetOutputHost("lo", lo_t).ok());
  ASSERT_TRUE(m.GetOutputHost(1, hi_t).ok());
  EXPECT_EQ(session_->copy_stats().last_out_destination, hi.data());
  std::vector<float> want = testing::Reference(Weights(), x);
  EXPECT_FLOAT_EQ(lo[0], want[0]);
  EXPECT_FLOAT_EQ(hi[1], want[3]);

  // A strided view is refused before anything is sent; a wrong dtype or shape by name.
  int64_t strides[2] = {kIn, 2};
  int64_t half_shape[2] = {1, kIn / 2};
  DLTensor view{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, half_shape, strides, 0};
  Status s = m.SetInputHost("x", view);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not contiguous"), std::string::npos) << s.ToString();
  std::vector<int32_t> ints(2);
  DLTensor ints_t{ints.data(), {kDLCPU, 0}, 2, {kDLInt, 32, 1}, out_shape, nullptr, 0};
  s = m.GetOutputHost("lo", ints_t);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("output 'lo' is 1x2 f32"), std::string::npos) << s.ToString();
  DLTensor wrong_in{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, half_shape, nullptr, 0};
  s = m.SetInputHost("x", wrong_in);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.ToString();
  // The session goes on.
  ASSERT_TRUE(m.SetInputHost("x", in).ok());
  ASSERT_TRUE(m.Run().ok());
}

TEST_F(ModelExecutorTest, TimesRunsAndProfilesEveryNode) {
  std::vector<float> x;
  RemoteModel m = LoadGood(&x);
  client::TimeOptions t;
  t.timing.number = 3;
  t.timing.repeat = 4;
  auto time = m.Time(t);
  ASSERT_TRUE(time.ok()) << time.status().ToString();
  EXPECT_EQ(time->seconds_per_call.size(), 4u);
  for (double s : time->seconds_per_call) EXPECT_GT(s, 0);
  uint32_t threads = 0;
  auto profile = m.Profile(t, &threads);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  ASSERT_EQ(profile->size(), 4u);
  EXPECT_GE(threads, 1u);
  const msg::NodeProfile& dense = (*profile)[0];
  EXPECT_EQ(dense.name, "dense");
  EXPECT_EQ(dense.op_type, "dense");
  EXPECT_EQ(dense.function, "ct_dense");
  EXPECT_EQ(dense.shapes, "1x8, 8x4, 4 -> 1x4");
  EXPECT_EQ(dense.flops, uint64_t{2 * kIn * kHidden});
  EXPECT_EQ((*profile)[3].shapes, "1x4 -> 1x2, 1x2");
  for (const auto& p : *profile) {
    EXPECT_GT(p.median_seconds, 0) << p.name;
    EXPECT_GT(p.in_run_median_seconds, 0) << p.name;  // clocked within whole runs as well
    EXPECT_LE(p.min_seconds, p.median_seconds) << p.name;
    EXPECT_GE(p.number, 3u) << p.name;
  }
  // Profiling runs each node on the inputs a real run gives it: the outputs are a run's.
  ExpectOutputs(m, x);
}

TEST_F(ModelExecutorTest, RefusesUnknownInputAndOutputNames) {
  std::vector<float> x;
  RemoteModel m = LoadGood(&x);
  Status in = m.SetInput("data", x.data(), x.size() * 4);
  EXPECT_EQ(in.code(), ErrorCode::kNotFound);
  EXPECT_EQ(in.message(), "good.ctpkg has no input 'data' (its inputs: x)");
  Status shape = m.SetInput("x", {1, 4}, kF32, x.data(), 16);
  EXPECT_EQ(shape.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(shape.message(),
            "good.ctpkg: input 'x' is 1x8 float32 (32 bytes), got 1x4 float32 "
            "(16 bytes)");
  ASSERT_TRUE(m.Run().ok());
  float out[2];
  Status o = m.GetOutput("logits", out, sizeof(out));
  EXPECT_EQ(o.code(), ErrorCode::kNotFound);
  EXPECT_EQ(o.message(), "good.ctpkg has no output 'logits' (its outputs: lo, hi)");
  // The session is still fine after each refusal.
  ExpectOutputs(m, x);
}

TEST_F(ModelExecutorTest, RefusesToRunBeforeEveryInputIsSet) {
  pkg::ParamsWriter p = NetParams(Weights());
  auto m = UploadAndLoad(Package("unset.ctpkg", NetGraph(), &p));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto run = m->Run();
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().message(),
            "unset.ctpkg: input 'x' was never set; set every input before a run");
  float out[2];
  EXPECT_NE(m->GetOutput(0, out, 8).message().find("has not run yet"), std::string::npos);
}

TEST_F(ModelExecutorTest, RefusesATamperedParam) {
  pkg::ParamsWriter p = NetParams(Weights());
  const std::string good = Package("tamper-src.ctpkg", NetGraph(), &p);
  // One byte of a weight changed after packaging: the manifest's hash no longer matches.
  const Weights wt;
  const std::string w_bytes(reinterpret_cast<const char*>(wt.w.data()), wt.w.size() * 4);
  testing::RewritePackage(good, Path("tampered.ctpkg"),
                          [&](pkg::Manifest*, std::vector<pkg::PackageInput>* files) {
                            for (auto& f : *files) {
                              if (f.path != "params.bin") continue;
                              size_t at = f.data.find(w_bytes);
                              ASSERT_NE(at, std::string::npos);
                              f.data[at + 5] ^= 0x40;
                            }
                          });
  auto m = UploadAndLoad(Path("tampered.ctpkg"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kBadHash);
  EXPECT_NE(m.status().message().find("tampered.ctpkg: params.bin: SHA-256 mismatch"),
            std::string::npos)
      << m.status().message();
  // A param of another shape, packaged consistently: named by the graph check.
  pkg::ParamsWriter wrong = NetParams(Weights(), true, false, {kHidden, kIn});
  Status s = LoadError("wrong-shape.ctpkg", NetGraph(), &wrong);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "wrong-shape.ctpkg: param 'w' is 4x8xfloat32 in params.bin, the graph wants "
            "8x4xfloat32");
}

TEST_F(ModelExecutorTest, ListsMissingAndExtraParamsByName) {
  pkg::ParamsWriter missing = NetParams(Weights(), false);
  Status s = LoadError("missing.ctpkg", NetGraph(), &missing);
  EXPECT_EQ(s.message(), "missing.ctpkg: params.bin lacks 1 param the graph needs: b");
  pkg::ParamsWriter extra = NetParams(Weights(), true, true);
  s = LoadError("extra.ctpkg", NetGraph(), &extra);
  EXPECT_EQ(s.message(), "extra.ctpkg: params.bin holds 1 param the graph does not use: unused");
  s = LoadError("none.ctpkg", NetGraph(), nullptr);
  EXPECT_EQ(s.message(), "none.ctpkg: params.bin lacks 2 params the graph needs: w, b");
}

TEST_F(ModelExecutorTest, RefusesAGraphNamingAFunctionTheLibraryLacks) {
  pkg::ParamsWriter p = NetParams(Weights());
  graph::Graph g = NetGraph();
  g.nodes[4].func_name = "ct_gelu";
  Status s = LoadError("nofunc.ctpkg", g, &p);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "nofunc.ctpkg: node 4 'relu' calls 'ct_gelu', which the library does not have");
}

TEST_F(ModelExecutorTest, RefusesAWrongArity) {
  pkg::ParamsWriter p = NetParams(Weights());
  graph::Graph g = NetGraph();
  g.nodes[4].inputs.push_back({3, 0, 0});  // relu(h, h): three tensors for a "tt" function
  g.nodes[4].num_inputs = 2;
  Status s = LoadError("arity.ctpkg", g, &p);
  EXPECT_EQ(s.message(),
            "arity.ctpkg: node 4 'relu' calls 'ct_relu' with 3 tensors (2 in, 1 out), the "
            "library's signature is 'tt'");
}

TEST_F(ModelExecutorTest, RefusesAWrongArchLibrary) {
  builder::BuildRequest r = *request_;
  r.target = *builder::ParseTarget("cortex-a72");
  builder::BuildResult res = builder::BuildInProcess(r);
  ASSERT_TRUE(res.ok()) << res.status.ToString();
  pkg::ParamsWriter p = NetParams(Weights());
  auto m = builder::WriteBuildPackage(r, res, Path("arm.ctpkg"), graph::GraphToJson(NetGraph()),
                                      p.Serialize());
  ASSERT_TRUE(m.ok());
  auto model = UploadAndLoad(Path("arm.ctpkg"));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), ErrorCode::kWrongArch);
  EXPECT_EQ(model.status().message(), "arm.ctpkg: built for aarch64, device is x86_64");
}

TEST_F(ModelExecutorTest, RefusesOverlappingStorage) {
  pkg::ParamsWriter p = NetParams(Weights());
  graph::Graph g = NetGraph();
  g.storage_id[4] = 3;  // relu's output in h's buffer, which relu reads
  g.storage_id[5] = 4;
  Status s = LoadError("overlap.ctpkg", g, &p);
  EXPECT_EQ(s.message(), "overlap.ctpkg: graph.json: storage 3 holds dense and relu at once");
}

TEST_F(ModelExecutorTest, RefusesAModuleWithoutAGraph) {
  ASSERT_TRUE(builder::WriteBuildPackage(*request_, *result_, Path("plain.ctpkg")).ok());
  auto up = session_->Upload(Path("plain.ctpkg"), "plain.ctpkg");
  ASSERT_TRUE(up.ok());
  auto m = RemoteModel::Load(session_.get(), "plain.ctpkg");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("not a model package"), std::string::npos);
}

// A graph whose relu node calls `fn` instead.
graph::Graph WithFaultyNode(const std::string& name, const std::string& fn) {
  graph::Graph g = NetGraph();
  g.nodes[4].name = name;
  g.nodes[4].func_name = fn;
  return g;
}

TEST_F(ModelExecutorTest, NamesANodeThatCrashesAndTheServerKeepsServing) {
  pkg::ParamsWriter p = NetParams(Weights());
  auto m = UploadAndLoad(Package("crash.ctpkg", WithFaultyNode("boom", "ct_crash"), &p));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<float> x(kIn, 1.0f);
  ASSERT_TRUE(m->SetInput("x", x.data(), x.size() * 4).ok());
  auto run = m->Run();
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), ErrorCode::kRemoteCrash);
  EXPECT_EQ(run.status().message(),
            "node 'boom' (ct_crash) of model 'crash.ctpkg' died by SIGSEGV (segmentation fault)");
  // The session ended with its process; a new one on the same server runs the good network.
  Connect();
  RemoteModel good = LoadGood(&x);
  ASSERT_TRUE(good.Run().ok());
  ExpectOutputs(good, x);
}

TEST_F(ModelExecutorTest, NamesANodeThatHangsAndTheServerKeepsServing) {
  pkg::ParamsWriter p = NetParams(Weights());
  auto m = UploadAndLoad(Package("hang.ctpkg", WithFaultyNode("spin", "ct_hang"), &p));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<float> x(kIn, 1.0f);
  ASSERT_TRUE(m->SetInput("x", x.data(), x.size() * 4).ok());
  auto run = m->Run(300);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), ErrorCode::kTimeout);
  EXPECT_EQ(run.status().message(), "model 'hang.ctpkg' ran past 300 ms, in node 'spin' (ct_hang)");
  Connect();
  RemoteModel good = LoadGood(&x);
  ASSERT_TRUE(good.Run().ok());
  ExpectOutputs(good, x);
}

TEST_F(ModelExecutorTest, NamesANodeThatHangsWhileProfiling) {
  pkg::ParamsWriter p = NetParams(Weights());
  auto m = UploadAndLoad(Package("hang2.ctpkg", WithFaultyNode("spin", "ct_hang"), &p));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<float> x(kIn, 1.0f);
  ASSERT_TRUE(m->SetInput("x", x.data(), x.size() * 4).ok());
  client::TimeOptions t;
  t.timeout_ms = 300;
  auto profile = m->Profile(t);
  ASSERT_FALSE(profile.ok());
  EXPECT_EQ(profile.status().code(), ErrorCode::kTimeout);
  EXPECT_NE(profile.status().message().find("in node 'spin' (ct_hang)"), std::string::npos)
      << profile.status().message();
}

TEST_F(ModelExecutorTest, NamesANodeWhoseKernelFailsAndTheSessionGoesOn) {
  pkg::ParamsWriter p = NetParams(Weights());
  auto m = UploadAndLoad(Package("fail.ctpkg", WithFaultyNode("picky", "ct_fail"), &p));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<float> x(kIn, 1.0f);
  ASSERT_TRUE(m->SetInput("x", x.data(), x.size() * 4).ok());
  auto run = m->Run();
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), ErrorCode::kKernelError);
  EXPECT_EQ(run.status().message(),
            "node 'picky' (ct_fail) of model 'fail.ctpkg' returned 5: the fail kernel always "
            "fails");
  // Not fatal: the same session loads and runs the good network.
  RemoteModel good = LoadGood(&x);
  ASSERT_TRUE(good.Run().ok());
  ExpectOutputs(good, x);
}

}  // namespace
}  // namespace crosstune
