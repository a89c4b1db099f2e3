// The CUDA templates on a real GPU through crosstune-server: checked configs of matmul and conv2d
// against the reference, and a short tuning run. Skips with the server's reason ("no CUDA
// driver", "no CUDA devices") where there is no GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crosstune/tuner/tune.h"
#include "template_checks.h"

namespace crosstune::tuner {
namespace {

class CudaGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        server_
            .Start({CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", "--exit-with-parent"},
                   std::chrono::seconds(20))
            .ok());
    device_.name = "local";
    device_.server = server_.address();
    client::ConnectOptions co;
    co.server = server_.address();
    auto session = client::Session::Connect(co);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    auto info = (*session)->Info();
    ASSERT_TRUE(info.ok());
    info_ = *info;
    if (info_.gpus.empty()) {
      GTEST_SKIP() << "no GPU on this machine ("
                   << (info_.gpu_status.empty() ? "none found" : info_.gpu_status)
                   << "); the CUDA template tests run where crosstune-server reports a GPU";
    }
    auto t = builder::TargetFromDevice(info_, builder::TargetKind::kCuda);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = *t;
    auto b = builder::Builder::Create({.workers = 2});
    ASSERT_TRUE(b.ok());
    builder_ = std::move(b).value();
  }

  std::unique_ptr<Task> Make(const std::string& name, const std::vector<int64_t>& shape) {
    auto task = MakeTask(name, shape, target_);
    EXPECT_TRUE(task.ok()) << task.status().ToString();
    return task.ok() ? std::move(task).value() : nullptr;
  }

  ServerProcess server_;
  DeviceSpec device_;
  msg::DeviceInfo info_;
  builder::Target target_;
  std::unique_ptr<builder::Builder> builder_;
};

TEST_F(CudaGpuTest, TheDeviceReportsItsLimits) {
  const msg::GpuInfo& g = info_.gpus[0];
  EXPECT_GE(g.max_threads_per_block, 1024u) << g.name;
  EXPECT_GE(g.max_shared_per_block, 48u * 1024) << g.name;
  EXPECT_GE(g.max_registers_per_block, 65536u) << g.name;
  EXPECT_GT(g.multiprocessors, 0u) << g.name;
  EXPECT_EQ(g.warp_size, 32u) << g.name;
}

TEST_F(CudaGpuTest, CheckedConfigsMatchTheReference) {
  for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"matmul", {512, 512, 512}},
           {"matmul", {67, 45, 33}},
           {"conv2d", {1, 64, 56, 56, 64, 3, 3, 1, 1}},
           {"conv2d", {1, 256, 56, 56, 64, 1, 1, 1, 0, 1}},
           {"conv2d", {2, 3, 9, 7, 5, 3, 3, 2, 1, 1}}}) {
    auto task = Make(name, shape);
    ASSERT_NE(task, nullptr);
    testing::ExpectConfigsMatchReference(*builder_, *task, device_, info_,
                                         testing::ConfigsToCheck(*task, 4, 31));
  }
}

TEST_F(CudaGpuTest, TunesMatmulWithCheckedAnswers) {
  auto task = Make("matmul", {1024, 1024, 1024});
  ASSERT_NE(task, nullptr);
  TuneOptions o;
  o.tuner = "xgb";
  o.trials = 32;
  o.measure.timing.repeat = 3;
  o.measure.timing.min_repeat_ms = 20;
  auto sum = Tune(*task, {device_}, *builder_, o);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->measured, 32);
  ASSERT_TRUE(sum->has_best);
  EXPECT_EQ(sum->errors.count(TrialError::kWrongAnswer), 0u);
  EXPECT_EQ(sum->errors.count(TrialError::kRuntimeError), 0u);
  EXPECT_EQ(sum->best.device.cpu, info_.gpus[0].name) << "a CUDA record names the GPU";
  std::printf("matmul 1024^3 on %s: default %.1f GFLOP/s, best of 32 trials %.1f GFLOP/s\n",
              info_.gpus[0].name.c_str(), sum->has_default ? sum->default_record.gflops() : 0.0,
              sum->best.gflops());
}

}  // namespace
}  // namespace crosstune::tuner
