// The model commands of the `crosstune` binary end to end: run-model, bench-model, inspect and
// params import|export, on a small network built here with the real builder (model_test_net.h)
// and a real crosstune-server on loopback.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "crosstune/builder/builder.h"
#include "crosstune/client/npy.h"
#include "crosstune/graph.h"
#include "crosstune/params.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"
#include "crosstune/tvm_params.h"
#include "model_test_net.h"

namespace crosstune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::kHidden;
using testing::kIn;

CommandResult Crosstune(const std::string& args) {
  return testing::RunCommand(std::string(CT_CLI) + " " + args);
}

class ModelCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = ::testing::TempDir() + "/crosstune_model_cli_" + std::to_string(getpid());
    fs::create_directories(work_ + "/server");
    server_ = new ServerProcess();
    Status s = server_->Start(
        {CT_SERVER, "--host", "127.0.0.1", "--port", "0", "--work-dir", work_ + "/server"},
        std::chrono::seconds(20));
    ASSERT_TRUE(s.ok()) << s.ToString();
    builder::BuildRequest r;
    r.source = testing::kNetSource;
    r.target = *builder::ParseTarget("x86-64");
    r.name = "net";
    builder::BuildResult res = builder::BuildInProcess(r);
    ASSERT_TRUE(res.ok()) << res.status.ToString() << res.diagnostics;
    pkg::ParamsWriter p = testing::NetParams(testing::Weights());
    auto m = builder::WriteBuildPackage(r, res, Path("net.ctpkg"),
                                        graph::GraphToJson(testing::NetGraph()), p.Serialize());
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    graph::Graph bad = testing::NetGraph();
    bad.storage_id[4] = 3;
    bad.storage_id[5] = 4;
    ASSERT_TRUE(builder::WriteBuildPackage(r, res, Path("overlap.ctpkg"), graph::GraphToJson(bad),
                                           p.Serialize())
                    .ok());
    x_.resize(kIn);
    for (int64_t i = 0; i < kIn; ++i) x_[i] = 0.25f * static_cast<float>(i) - 0.9f;
    ASSERT_TRUE(
        client::WriteNpy(Path("x.npy"), {1, kIn}, testing::kNetF32, x_.data(), x_.size() * 4).ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    fs::remove_all(work_);
  }
  static std::string Path(const std::string& name) { return work_ + "/" + name; }
  std::string server() const { return "--server " + server_->address(); }

  static ServerProcess* server_;
  static std::string work_;
  static std::vector<float> x_;
};
ServerProcess* ModelCliTest::server_ = nullptr;
std::string ModelCliTest::work_;
std::vector<float> ModelCliTest::x_;

TEST_F(ModelCliTest, RunModelSavesNamedOutputsWithTheRightValues) {
  CommandResult r =
      Crosstune("run-model " + Path("net.ctpkg") + " " + server() + " --input x=" + Path("x.npy") +
                " --out lo=" + Path("lo.npy") + " --out hi=" + Path("hi.npy") + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  EXPECT_EQ(j["model"]["nodes"], 4);
  EXPECT_EQ(j["outputs"].size(), 2u);
  const std::vector<float> want = testing::Reference(testing::Weights(), x_);
  auto lo = client::ReadNpy(Path("lo.npy"));
  auto hi = client::ReadNpy(Path("hi.npy"));
  ASSERT_TRUE(lo.ok() && hi.ok());
  EXPECT_EQ(lo->shape, (std::vector<int64_t>{1, 2}));
  const auto* l = reinterpret_cast<const float*>(lo->data.data());
  const auto* h = reinterpret_cast<const float*>(hi->data.data());
  EXPECT_FLOAT_EQ(l[0], want[0]);
  EXPECT_FLOAT_EQ(l[1], want[1]);
  EXPECT_FLOAT_EQ(h[0], want[2]);
  EXPECT_FLOAT_EQ(h[1], want[3]);
}

TEST_F(ModelCliTest, RunModelRefusesUnknownNamesAndMissingInputsInOneLine) {
  for (const std::string& args :
       {"--input data=" + Path("x.npy"), std::string(),
        "--input x=" + Path("x.npy") + " --out " + Path("y.npy"),
        "--input x=" + Path("x.npy") + " --out logits=" + Path("y.npy")}) {
    CommandResult r = Crosstune("run-model " + Path("net.ctpkg") + " " + server() + " " + args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("crosstune: error: ", 0), 0u) << r.err;
  }
  CommandResult unknown = Crosstune("run-model " + Path("net.ctpkg") + " " + server() +
                                    " --input data=" + Path("x.npy"));
  EXPECT_NE(unknown.err.find("no input 'data' (its inputs: x)"), std::string::npos) << unknown.err;
  CommandResult missing = Crosstune("run-model " + Path("net.ctpkg") + " " + server());
  EXPECT_NE(missing.err.find("input 'x' (1x8 float32) is not given"), std::string::npos)
      << missing.err;
}

TEST_F(ModelCliTest, RunModelNamesTheStorageOverlapOfABadPackage) {
  CommandResult r = Crosstune("run-model " + Path("overlap.ctpkg") + " " + server() +
                              " --input x=" + Path("x.npy"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("storage 3 holds dense and relu at once"), std::string::npos) << r.err;
}

TEST_F(ModelCliTest, BenchModelReportsEndToEndNodesAndOverhead) {
  CommandResult r = Crosstune("bench-model " + Path("net.ctpkg") + " " + server() +
                              " --number 2 --repeat 3 --profile --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  EXPECT_EQ(j["seconds_per_run"].size(), 3u);
  EXPECT_GT(j["median_s"].get<double>(), 0);
  ASSERT_EQ(j["nodes"].size(), 4u);
  EXPECT_EQ(j["nodes"][0]["name"], "dense");
  EXPECT_EQ(j["nodes"][0]["op_type"], "dense");
  EXPECT_EQ(j["nodes"][0]["function"], "ct_dense");
  EXPECT_EQ(j["nodes"][0]["shapes"], "1x8, 8x4, 4 -> 1x4");
  EXPECT_TRUE(j["nodes"][0].contains("gflops"));
  double share = 0, in_run = 0, alone = 0;
  for (const auto& n : j["nodes"]) {
    share += n["share"].get<double>();
    EXPECT_GT(n["median_us"].get<double>(), 0) << n;  // within whole runs
    EXPECT_GT(n["alone_median_us"].get<double>(), 0) << n;
    in_run += n["median_us"].get<double>() * 1e-6;
    alone += n["alone_median_us"].get<double>() * 1e-6;
  }
  EXPECT_NEAR(share, 1.0, 1e-9);
  EXPECT_NEAR(j["node_sum_s"].get<double>(), in_run, 1e-9);
  EXPECT_NEAR(j["alone_sum_s"].get<double>(), alone, 1e-9);
  EXPECT_NEAR(j["overhead_s"].get<double>(),
              j["median_s"].get<double>() - j["node_sum_s"].get<double>(), 1e-12);
  CommandResult text = Crosstune("bench-model " + Path("net.ctpkg") + " " + server() +
                                 " --number 1 --repeat 2 --profile");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::printf("%s", text.out.c_str());  // the table as a user sees it, in the test log
  EXPECT_NE(text.out.find("per-run overhead"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("ct_square"), std::string::npos) << text.out;
}

TEST_F(ModelCliTest, InspectShowsTheGraphAndEveryNodesProvenance) {
  CommandResult r = Crosstune("inspect " + Path("net.ctpkg"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::printf("%s", r.out.c_str());
  EXPECT_NE(r.out.find("inputs    x 1x8 float32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("outputs   lo 1x2 float32, hi 1x2 float32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("configs   1 tuned, 3 template defaults"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dense 1,8,4 config 17"), std::string::npos) << r.out;
  CommandResult j = Crosstune("inspect --json " + Path("net.ctpkg"));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto model = json::parse(j.out)["model"];
  EXPECT_TRUE(model["valid"].get<bool>());
  EXPECT_EQ(model["nodes"], 4);
  EXPECT_EQ(model["params"], 2);
  EXPECT_EQ(model["node_list"][0]["provenance"]["config_index"], 17);
  EXPECT_TRUE(model["node_list"][1]["provenance"]["default"].get<bool>());
  // The server's checks, on the host: the overlapping plan is invalid here too.
  CommandResult bad = Crosstune("inspect " + Path("overlap.ctpkg"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("storage 3 holds dense and relu at once"), std::string::npos) << bad.err;
}

TEST_F(ModelCliTest, ParamsImportAndExportRoundTripThroughATvmBlob) {
  CommandResult exp =
      Crosstune("params export " + Path("net.ctpkg") + " -o " + Path("net.params") + " --json");
  ASSERT_EQ(exp.exit_code, 0) << exp.err;
  EXPECT_EQ(json::parse(exp.out)["params"], 2);
  CommandResult imp =
      Crosstune("params import " + Path("net.params") + " -o " + Path("params.bin") + " --json");
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  // The params.bin inside the package and the one made from the blob hold the same tensors.
  pkg::ParamsWriter w = testing::NetParams(testing::Weights());
  EXPECT_EQ(testing::ReadFile(Path("params.bin")), w.Serialize());
  CommandResult again =
      Crosstune("params export " + Path("params.bin") + " -o " + Path("again.params"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(testing::ReadFile(Path("again.params")), testing::ReadFile(Path("net.params")));
  // A broken blob is one error line naming the file.
  testing::WriteFile(Path("cut.params"), testing::ReadFile(Path("net.params")).substr(0, 50));
  CommandResult cut = Crosstune("params import " + Path("cut.params") + " -o " + Path("p2.bin"));
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_NE(cut.err.find("cut.params: TVM params blob: truncated"), std::string::npos) << cut.err;
}

}  // namespace
}  // namespace crosstune
