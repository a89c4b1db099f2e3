// The `crosstune` command line end to end against a crosstune-server on loopback: output files,
// JSON output, and the one-line error + exit code 1 contract.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "crosstune/client/npy.h"
#include "server_process.h"

namespace crosstune {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `crosstune <args>` through the shell (arguments here are test-controlled, no user input).
Result Crosstune(const std::string& args) {
  std::string err_file = ::testing::TempDir() + "/cli_test_stderr_" + std::to_string(getpid());
  std::string cmd = std::string(CT_CLI) + " " + args + " 2>" + err_file;
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* e = std::fopen(err_file.c_str(), "r")) {
    while ((n = fread(buf, 1, sizeof(buf), e)) > 0) r.err.append(buf, n);
    std::fclose(e);
  }
  std::filesystem::remove(err_file);
  return r;
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_ = ::testing::TempDir() + "/crosstune_cli_test_" + std::to_string(getpid());
    std::filesystem::create_directories(work_ + "/server");
    server_ = new ServerProcess();
    Status s = server_->Start(
        {CT_SERVER, "--host", "127.0.0.1", "--port", "0", "--work-dir", work_ + "/server"},
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
  Result r = Crosstune("info " + server() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["arch"].get<std::string>().empty());
  EXPECT_GE(j["cores"].get<int>(), 1);
}

TEST_F(CliTest, RunSavesTheLastTensorAsNpy) {
  std::string out = work_ + "/sum.npy";
  Result r = Crosstune("run " + server() +
                       " " CT_HOST_KERNEL
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
  Result r = Crosstune("run " + server() + " " CT_HOST_KERNEL " --func vadd --arg " + in +
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
  Result r = Crosstune("bench " + server() +
                       " " CT_HOST_KERNEL
                       " --func matmul --arg 16x16xf32:random --arg 16x16xf32:random"
                       " --arg 16x16xf32:zeros --number 2 --repeat 3 --flops 8192 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["seconds_per_call"].size(), 3u);
  EXPECT_GE(j["number"].get<int>(), 2);
  EXPECT_GT(j["gflops"].get<double>(), 0);
}

TEST_F(CliTest, WrongArchKernelIsOneErrorLineAndExitCodeOne) {
  Result r = Crosstune("run " + server() +
                       " " CT_AARCH64_KERNEL
                       " --func vadd --arg 4xf32:ones --arg 4xf32:ones --arg 4xf32:zeros");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("crosstune: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("aarch64"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
}

TEST_F(CliTest, BadArgumentsAreOneErrorLine) {
  for (const std::string& args :
       {"run " + server() + " " CT_HOST_KERNEL " --func vadd --arg banana",
        "run " + server() + " " CT_HOST_KERNEL " --func nope --arg 1",
        "run " + server() + " " CT_HOST_KERNEL " --func vadd --arg 1",
        std::string("info --server 127.0.0.1:9 --timeout 5"), std::string("info"),
        std::string("frobnicate")}) {
    Result r = Crosstune(args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.err.rfind("crosstune: error: ", 0), 0u) << args << ": " << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace crosstune
