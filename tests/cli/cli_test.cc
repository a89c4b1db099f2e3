// The `crosstune` command line end to end against a crosstune-server on loopback: output files,
// JSON output, and the one-line error + exit code 1 contract.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "crosstune/client/npy.h"
#include "crosstune/crypto.h"
#include "crosstune/package.h"
#include "crosstune/params.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"

namespace crosstune {
namespace {

using testing::CommandResult;

// This build's `crosstune`, or $CROSSTUNE_TEST_CLI (another build's, e.g. to watch a new test fail
// against the code before a change).
std::string CliBinary() {
  const char* e = std::getenv("CROSSTUNE_TEST_CLI");
  return e && *e ? e : CT_CLI;
}

// Runs `crosstune <args>` through the shell (arguments here are test-controlled, no user input).
CommandResult Crosstune(const std::string& args) {
  return testing::RunCommand(CliBinary() + " " + args);
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = ::testing::TempDir() + "/crosstune_cli_test_" + std::to_string(getpid());
    std::filesystem::create_directories(work_ + "/server");
    server_ = new ServerProcess();
    Status s = server_->Start({CT_SERVER, "--host", "127.0.0.1", "--port", "0",
                               "--exit-with-parent", "--work-dir", work_ + "/server"},
                              std::chrono::seconds(20));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    std::filesystem::remove_all(work_);
  }
  std::string server() const { return "--server " + server_->address(); }

  static ServerProcess* server_;
  static std::string work_;
};
ServerProcess* CliTest::server_ = nullptr;
std::string CliTest::work_;

TEST_F(CliTest, InfoAsJsonNamesTheArchitecture) {
  CommandResult r = Crosstune("info " + server() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["arch"].get<std::string>().empty());
  EXPECT_GE(j["cores"].get<int>(), 1);
}

TEST_F(CliTest, RunSavesTheLastTensorAsNpy) {
  std::string out = work_ + "/sum.npy";
  CommandResult r =
      Crosstune("run " + server() + " " + std::string(CT_HOST_KERNEL) +
                " --func vadd --arg 100xf32:ones --arg 100xf32:ones --arg 100xf32:zeros"
                " --out " +
                out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("vadd"), std::string::npos) << r.out;
  auto a = client::ReadNpy(out);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{100}));
  const float* f = reinterpret_cast<const float*>(a->data.data());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(f[i], 2.0f);
}

TEST_F(CliTest, RunReadsNpyInputsAndSavesTheNamedArgument) {
  std::vector<float> x = {1, 2, 3, 4};
  std::string in = work_ + "/x.npy", out = work_ + "/c.npy";
  ASSERT_TRUE(client::WriteNpy(in, {4}, DLDataType{kDLFloat, 32, 1}, x.data(), 16).ok());
  CommandResult r =
      Crosstune("run " + server() + " " + std::string(CT_HOST_KERNEL) + " --func vadd --arg " + in +
                " --arg " + in + " --arg 4xf32:random --out 2=" + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["function"], "vadd");
  EXPECT_EQ(j["outputs"][0]["arg"], 2);
  auto a = client::ReadNpy(out);
  ASSERT_TRUE(a.ok());
  const float* f = reinterpret_cast<const float*>(a->data.data());
  EXPECT_EQ(f[3], 8.0f);
}

TEST_F(CliTest, BenchReportsEveryRoundAsJson) {
  CommandResult r = Crosstune("bench " + server() + " " + std::string(CT_HOST_KERNEL) +
                              " --func matmul --arg 16x16xf32:random --arg 16x16xf32:random"
                              " --arg 16x16xf32:zeros --number 2 --repeat 3 --flops 8192 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["seconds_per_call"].size(), 3u);
  EXPECT_GE(j["number"].get<int>(), 2);
  EXPECT_GT(j["gflops"].get<double>(), 0);
}

TEST_F(CliTest, WrongArchKernelIsOneErrorLineAndExitCodeOne) {
  CommandResult r = Crosstune("run " + server() + " " + std::string(CT_AARCH64_KERNEL) +
                              " --func vadd --arg 4xf32:ones --arg 4xf32:ones --arg 4xf32:zeros");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("crosstune: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("aarch64"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
}

TEST_F(CliTest, BadArgumentsAreOneErrorLine) {
  testing::ClosedPort nowhere;
  for (const std::string& args :
       {"run " + server() + " " + std::string(CT_HOST_KERNEL) + " --func vadd --arg banana",
        "run " + server() + " " + std::string(CT_HOST_KERNEL) + " --func nope --arg 1",
        "run " + server() + " " + std::string(CT_HOST_KERNEL) + " --func vadd --arg 1",
        "info --server " + nowhere.address() + " --timeout 5", std::string("info"),
        std::string("frobnicate")}) {
    CommandResult r = Crosstune(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.err.rfind("crosstune: error: ", 0), 0u) << args << ": " << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << ": " << r.err;
  }
}

// --- the user's journey: build, inspect and run a package; files; the environment -------------

nlohmann::json Json(const CommandResult& r) { return nlohmann::json::parse(r.out, nullptr, false); }

// Tensors the device cannot hold are refused from the server's Info (its --max-tensor-bytes and
// memory) before the CLI allocates or fills them: 4 TiB used to end in std::bad_alloc (or an
// allocation that took the host's memory) before the server was ever asked.
TEST_F(CliTest, RunRefusesTensorsTheDeviceCannotHoldBeforeAllocatingThem) {
  const std::string call = " " + std::string(CT_HOST_KERNEL) +
                           " --func vadd --arg 1048576x1048576xf32:random --arg 4xf32:ones"
                           " --arg 4xf32:zeros";
  CommandResult r = Crosstune("run " + server() + call);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err,
            "crosstune: error: --arg: 4.0 TiB of tensors (4398046511136 bytes) is over the "
            "server's limit of 8.0 GiB per session (--max-tensor-bytes 8589934592)\n");
  // With the server's limit out of the way, the device's memory is the limit.
  ServerProcess roomy;
  Status s =
      roomy.Start({CT_SERVER, "--host", "127.0.0.1", "--port", "0", "--exit-with-parent",
                   "--work-dir", work_ + "/roomy", "--max-tensor-bytes", "1152921504606846976"},
                  std::chrono::seconds(20));
  ASSERT_TRUE(s.ok()) << s.ToString();
  r = Crosstune("run --server " + roomy.address() + call);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err.rfind("crosstune: error: --arg: 4.0 TiB of tensors (4398046511136 bytes) is "
                        "over the device's memory of ",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

TEST_F(CliTest, TuneRefusesAShapeWhoseTensorsTheDeviceCannotHold) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  // Inside the template's own limit (2^32 elements a tensor), far over the server's.
  CommandResult r =
      Crosstune("tune matmul --shape 60000,60000,60000 " + server() + " --trials 1 --workers 1 -q");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("matmul 60000,60000,60000 float32: A, B, C: 40.2 GiB of tensors "
                       "(43200000000 bytes) is over the server's limit of 8.0 GiB per "
                       "session (--max-tensor-bytes 8589934592)"),
            std::string::npos)
      << r.err;
}

// A log that is empty, a directory or a device is an error, fast: `log summary /dev/zero` used to
// read gigabytes and exit 0 with no output, and an empty log printed nothing. (`timeout` only
// keeps a broken build from hanging here.)
TEST_F(CliTest, LogCommandsRefuseAnEmptyOrUnreadableLog) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  const std::string empty = testing::WriteFile(work_ + "/empty.jsonl", "");
  const std::string dir = work_ + "/a-directory.jsonl";
  std::filesystem::create_directories(dir);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"log summary " + empty, empty + ": the log is empty (no records)"},
      {"log best " + empty, empty + ": the log is empty (no records)"},
      {"log summary " + dir, dir + ": is a directory"},
      {"log summary /dev/zero", "/dev/zero: not a regular file or a pipe"},
      {"export /dev/zero -o " + work_ + "/x.ctpkg", "/dev/zero: not a regular file or a pipe"},
  };
  for (const auto& [args, message] : cases) {
    CommandResult r = testing::RunCommand("timeout 120 " + CliBinary() + " " + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.out;
    EXPECT_EQ(r.err, "crosstune: error: " + message + "\n") << args;
  }
}

TEST_F(CliTest, BuildsForATargetStringAPresetAndAutoAndInspectsEach) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  const std::string cache = " --cache-dir " + work_ + "/cache-targets";
  CommandResult r = Crosstune("build " + std::string(CT_SAMPLE_SOURCE) +
                              " --target 'llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64' -o " +
                              work_ + "/x86.ctpkg" + cache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("wrote " + work_ + "/x86.ctpkg: ", 0), 0u) << r.out;
  auto x86 = Json(Crosstune("inspect " + work_ + "/x86.ctpkg --json"));
  ASSERT_TRUE(x86.is_object());
  EXPECT_EQ(x86["valid"], true) << x86.dump();
  EXPECT_EQ(x86["arch"], "x86_64");
  ASSERT_EQ(x86["functions"].size(), 2u) << x86.dump();
  EXPECT_EQ(x86["functions"][0]["name"], "vadd");
  EXPECT_EQ(x86["functions"][1]["name"], "matmul");

  r = Crosstune("build " + std::string(CT_SAMPLE_SOURCE) + " --target rpi4 -o " + work_ +
                "/rpi4.ctpkg" + cache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rpi = Json(Crosstune("inspect " + work_ + "/rpi4.ctpkg --json"));
  EXPECT_EQ(rpi["arch"], "aarch64") << rpi.dump();
  EXPECT_EQ(rpi["cpu"], "cortex-a72") << rpi.dump();
  // The text form names the same package.
  r = Crosstune("inspect " + work_ + "/rpi4.ctpkg");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("aarch64"), std::string::npos) << r.out;

  // --target auto asks the live server for its triple and features.
  auto device = Json(Crosstune("info " + server() + " --json"));
  r = Crosstune("build " + std::string(CT_SAMPLE_SOURCE) + " --target auto " + server() + " -o " +
                work_ + "/auto.ctpkg" + cache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("crosstune: target from the device: llvm -mtriple=" +
                       device["triple"].get<std::string>()),
            std::string::npos)
      << r.err;
  auto autopkg = Json(Crosstune("inspect " + work_ + "/auto.ctpkg --json"));
  EXPECT_EQ(autopkg["arch"], device["arch"]) << autopkg.dump();
  // ... and the package runs there.
  std::string out = work_ + "/auto-sum.npy";
  r = Crosstune(
      "run " + server() + " " + work_ +
      "/auto.ctpkg --func vadd --arg 8xf32:ones --arg 8xf32:ones --arg 8xf32:zeros --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto sum = client::ReadNpy(out);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(reinterpret_cast<const float*>(sum->data.data())[7], 2.0f);
}

TEST_F(CliTest, InspectOfACorruptedPackageSaysWhatIsWrongAndExitsOne) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  const std::string good = work_ + "/corrupt-src.ctpkg";
  CommandResult r = Crosstune("build " + std::string(CT_SAMPLE_SOURCE) + " --target x86-64 -o " +
                              good + " --cache-dir " + work_ + "/cache-corrupt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 4096u);
  // One flipped byte inside the library's data (the tar's last member before its end blocks),
  // and the same package cut short.
  std::string flipped = bytes;
  flipped[bytes.size() - 1024 - 700] ^= 0x5a;
  const std::string bad = work_ + "/corrupt.ctpkg", cut = work_ + "/cut.ctpkg";
  std::ofstream(bad, std::ios::binary) << flipped;
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  for (const std::string& path : {bad, cut}) {
    CommandResult j = Crosstune("inspect " + path + " --json");
    EXPECT_EQ(j.exit_code, 1) << path << ": " << j.out;
    auto doc = Json(j);
    ASSERT_TRUE(doc.is_object()) << path << ": " << j.out;
    EXPECT_EQ(doc["valid"], false) << doc.dump();
    EXPECT_FALSE(doc["error"].get<std::string>().empty()) << doc.dump();
    CommandResult t = Crosstune("inspect " + path);
    EXPECT_EQ(t.exit_code, 1);
    EXPECT_EQ(t.err.rfind("crosstune: error: " + path + ": ", 0), 0u) << t.err;
    EXPECT_EQ(t.err.find('\n'), t.err.size() - 1) << t.err;
  }
  EXPECT_EQ(Crosstune("inspect " + good).exit_code, 0);
}

// inspect --json prints JSON whatever bytes the error quotes: a member whose name is not UTF-8
// used to make nlohmann's dump() throw, so nothing but an error line came out.
TEST_F(CliTest, InspectJsonIsValidJsonWhenTheErrorQuotesBytesThatAreNotUtf8) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  const std::string good = work_ + "/utf8-src.ctpkg";
  CommandResult r = Crosstune("build " + std::string(CT_SAMPLE_SOURCE) + " --target x86-64 -o " +
                              good + " --cache-dir " + work_ + "/cache-utf8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto members = pkg::ListTar(good);
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  const std::string bytes = testing::ReadFile(good);
  std::vector<pkg::PackageInput> files;
  for (const auto& m : *members) files.push_back({m.path, bytes.substr(m.offset, m.size), ""});
  files.push_back({"extra-\xff\xfe.bin", "x", ""});
  const std::string bad = work_ + "/not-utf8.ctpkg";
  ASSERT_TRUE(pkg::WriteTar(bad, files).ok());
  r = Crosstune("inspect " + bad + " --json");
  EXPECT_EQ(r.exit_code, 1);
  auto doc = Json(r);
  ASSERT_TRUE(doc.is_object()) << r.out << r.err;
  EXPECT_EQ(doc["valid"], false);
  EXPECT_EQ(doc["error"], "extra-\xef\xbf\xbd\xef\xbf\xbd.bin: not listed in the manifest")
      << r.out;
}

// A manifest whose functions are not the library's (hashes all right) is invalid to inspect as
// to the server: both apply pkg::CheckLibraryFunctions, inspect to the table it reads from the
// library's image. inspect used to call it valid.
TEST_F(CliTest, InspectRefusesAManifestWhoseFunctionsDifferFromTheLibrarysAsTheServerDoes) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  const std::string good = work_ + "/fns-src.ctpkg";
  CommandResult r = Crosstune("build " + std::string(CT_SAMPLE_SOURCE) + " --target x86-64 -o " +
                              good + " --cache-dir " + work_ + "/cache-fns");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto members = pkg::ListTar(good);
  ASSERT_TRUE(members.ok()) << members.status().ToString();
  const std::string bytes = testing::ReadFile(good);
  std::vector<pkg::PackageInput> files;
  for (const auto& m : *members) {
    std::string data = bytes.substr(m.offset, m.size);
    if (m.path == pkg::kManifestPath) {
      auto manifest = pkg::ManifestFromJson(data);
      ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
      ASSERT_EQ(manifest->functions.at(1).name, "matmul");
      manifest->functions[1].name = "gemm";
      data = pkg::ManifestToJson(*manifest);
    }
    files.push_back({m.path, data, ""});
  }
  const std::string bad = work_ + "/other-functions.ctpkg";
  ASSERT_TRUE(pkg::WriteTar(bad, files).ok());
  const std::string why =
      "lib/sample.so: the library's functions differ from the manifest's: function 1 is "
      "'matmul' (ttt) in the library, 'gemm' (ttt) in the manifest";
  r = Crosstune("inspect " + bad + " --json");
  EXPECT_EQ(r.exit_code, 1);
  auto doc = Json(r);
  ASSERT_TRUE(doc.is_object()) << r.out << r.err;
  EXPECT_EQ(doc["valid"], false) << r.out;
  EXPECT_EQ(doc["error"], why) << r.out;
  r = Crosstune("inspect " + bad);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "crosstune: error: " + bad + ": " + why + "\n");
  r = Crosstune("run " + server() + " " + bad +
                " --func vadd --arg 4xf32:ones --arg 4xf32:ones --arg 4xf32:zeros");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("the library's functions differ from the manifest's: function 1 is "
                       "'matmul' (ttt) in the library, 'gemm' (ttt) in the manifest"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(Crosstune("inspect " + good).exit_code, 0);
}

TEST_F(CliTest, RunAndBenchUploadUnderTheNameGivenWithAs) {
  const std::string call = " " + std::string(CT_HOST_KERNEL) +
                           " --func vadd --arg 8xf32:ones --arg 8xf32:ones"
                           " --arg 8xf32:zeros";
  CommandResult r = Crosstune("run " + server() + call + " --as kernels/v1.so --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Crosstune("bench " + server() + call + " --as kernels/v2.so --number 1 --repeat 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A name that leaves the workspace is refused by the server: one error line naming it.
  for (const std::string& cmd : {std::string("run"), std::string("bench")}) {
    r = Crosstune(cmd + " " + server() + call + " --as ../outside.so");
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_EQ(r.err.rfind("crosstune: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("../outside.so"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

TEST_F(CliTest, BuildCacheAnswersTheSameBuildAndNoCacheCompilesAgain) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  const std::string args = "build " + std::string(CT_SAMPLE_SOURCE) + " --target x86-64 -o " +
                           work_ + "/cached.ctpkg --cache-dir " + work_ + "/cache-hits";
  CommandResult first = Crosstune(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find(", built in "), std::string::npos) << first.out;
  CommandResult second = Crosstune(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find(", cached in "), std::string::npos) << second.out;
  CommandResult forced = Crosstune(args + " --no-cache");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find(", built in "), std::string::npos) << forced.out;
  // A different flag is a different build.
  CommandResult flagged = Crosstune(args + " --flag -DUNUSED=1");
  ASSERT_EQ(flagged.exit_code, 0) << flagged.err;
  EXPECT_NE(flagged.out.find(", built in "), std::string::npos) << flagged.out;
}

TEST_F(CliTest, ShipsGraphAndParamsInThePackage) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  // One node: out = x + weight through the sample library's vadd (2x2 float32 each).
  std::string graph = testing::WriteFile(work_ + "/graph.json", R"({
    "nodes": [
      {"op": "null", "name": "x", "inputs": []},
      {"op": "null", "name": "weight", "inputs": []},
      {"op": "tvm_op", "name": "add", "inputs": [[0, 0, 0], [1, 0, 0]],
       "attrs": {"func_name": "vadd", "num_inputs": "2", "num_outputs": "1",
                 "flatten_data": "0"}}],
    "arg_nodes": [0, 1],
    "node_row_ptr": [0, 1, 2, 3],
    "heads": [[2, 0, 0]],
    "attrs": {"dltype": ["list_str", ["float32", "float32", "float32"]],
              "storage_id": ["list_int", [0, 1, 2]],
              "shape": ["list_shape", [[2, 2], [2, 2], [2, 2]]]},
    "crosstune": {"version": 1, "inputs": ["x"], "outputs": ["add"],
                  "storage_bytes": [16, 16, 16]}})");
  pkg::ParamsWriter w;
  std::vector<float> weights = {1, 2, 3, 4};
  ASSERT_TRUE(w.Add("weight", DLDataType{kDLFloat, 32, 1}, {2, 2}, weights.data(), 16).ok());
  ASSERT_TRUE(w.Write(work_ + "/params.bin").ok());
  CommandResult r =
      Crosstune("build " + std::string(CT_SAMPLE_SOURCE) + " --target x86-64 --no-cache --graph " +
                graph + " --params " + work_ + "/params.bin -o " + work_ + "/model.ctpkg");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto m = Json(Crosstune("inspect " + work_ + "/model.ctpkg --json"));
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["valid"], true) << m.dump();
  std::vector<std::string> paths;
  for (const auto& f : m["files"]) paths.push_back(f["path"].get<std::string>());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "graph.json"), paths.end()) << m.dump();
  EXPECT_NE(std::find(paths.begin(), paths.end(), "params.bin"), paths.end()) << m.dump();
  // The server verifies and loads it like any package.
  r = Crosstune("run " + server() + " " + work_ +
                "/model.ctpkg --func vadd --arg 4xf32:ones --arg 4xf32:ones --arg 4xf32:zeros");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CliTest, APackageWhoseParamsIndexIsBrokenIsInvalidToInspectAsToTheServer) {
  if (!CT_HAVE_BUILD_COMMAND) GTEST_SKIP() << "this build has no compiler module (no builder)";
  // Hashes all match (the packager hashes what it is given); the params index lies about a
  // tensor's size. inspect used to call this valid while the server refused it.
  pkg::ParamsWriter w;
  std::vector<float> weights = {1, 2, 3, 4};
  ASSERT_TRUE(w.Add("weight", DLDataType{kDLFloat, 32, 1}, {2, 2}, weights.data(), 16).ok());
  std::string bytes = w.Serialize();
  const size_t at = bytes.find("\"nbytes\":16");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 12, "\"nbytes\":61");  // same length: the index size stays right
  std::string params = testing::WriteFile(work_ + "/bad-params.bin", bytes);
  const std::string pkg = work_ + "/bad-params.ctpkg";
  CommandResult r = Crosstune("build " + std::string(CT_SAMPLE_SOURCE) +
                              " --target x86-64 --no-cache --params " + params + " -o " + pkg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto m = Json(Crosstune("inspect " + pkg + " --json"));
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["valid"], false) << m.dump();
  EXPECT_NE(m["error"].get<std::string>().find("params.bin"), std::string::npos) << m.dump();
  r = Crosstune("run " + server() + " " + pkg +
                " --func vadd --arg 4xf32:ones --arg 4xf32:ones --arg 4xf32:zeros");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("params.bin"), std::string::npos) << r.err;
}

TEST_F(CliTest, UploadsUnderAnotherNameAndEachCommandHasAFreshWorkspace) {
  CommandResult r = Crosstune("upload " + server() + " " + std::string(CT_HOST_KERNEL) +
                              " --as renamed.so --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto f = Json(r);
  EXPECT_EQ(f["path"], "renamed.so") << r.out;
  EXPECT_EQ(f["size"], std::filesystem::file_size(CT_HOST_KERNEL));
  EXPECT_EQ(f["sha256"], *Sha256FileHex(CT_HOST_KERNEL));
  // The next command is a new session: its workspace starts empty (README, "Using it").
  r = Crosstune("ls " + server() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json(r), nlohmann::json::array()) << r.out;
  for (const std::string& cmd : {"download " + server() + " renamed.so " + work_ + "/back.so",
                                 "rm " + server() + " renamed.so"}) {
    r = Crosstune(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_EQ(r.err.rfind("crosstune: error: ", 0), 0u) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("renamed.so"), std::string::npos) << cmd << ": " << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << cmd << ": " << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(work_ + "/back.so"));
}

TEST_F(CliTest, TakesTheServerFromCrosstuneServer) {
  CommandResult r = testing::RunCommand("CROSSTUNE_SERVER=" + server_->address() + " " +
                                        std::string(CT_CLI) + " info --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Json(r)["server"], server_->address()) << r.out;
}

TEST(CliAuthTest, ReadsTheSecretFromCrosstuneAuthTokenFile) {
  std::string dir = testing::MakeTempDir("crosstune-cli-auth");
  testing::WriteFile(dir + "/secret", "farm-secret\n");
  testing::WriteFile(dir + "/wrong", "guess\n");
  std::filesystem::create_directories(dir + "/ws");
  ServerProcess server;
  Status s = server.Start({CT_SERVER, "--host", "127.0.0.1", "--port", "0", "--exit-with-parent",
                           "--work-dir", dir + "/ws", "--auth-token-file", dir + "/secret"},
                          std::chrono::seconds(20));
  ASSERT_TRUE(s.ok()) << s.ToString();
  const std::string info = std::string(CT_CLI) + " info --json --server " + server.address();
  // The README's texts for a missing and a wrong secret.
  CommandResult none = testing::RunCommand(info);
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("peer requires authentication"), std::string::npos) << none.err;
  CommandResult wrong = testing::RunCommand("CROSSTUNE_AUTH_TOKEN_FILE=" + dir + "/wrong " + info);
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("authentication failed"), std::string::npos) << wrong.err;
  CommandResult right = testing::RunCommand("CROSSTUNE_AUTH_TOKEN_FILE=" + dir + "/secret " + info);
  EXPECT_EQ(right.exit_code, 0) << right.err;
  EXPECT_FALSE(Json(right)["arch"].get<std::string>().empty()) << right.out;
  server.Stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace crosstune
