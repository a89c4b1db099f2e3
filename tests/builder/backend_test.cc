#include "crosstune/builder/backend.h"

#include <gtest/gtest.h>

#include <string>

#include "crosstune/builder/builder.h"
#include "crosstune/testing/support.h"
#include "test_kernels.h"

namespace crosstune::builder {
namespace {

TEST(BackendTest, EveryKindHasOneBackendThatTargetsFind) {
  EXPECT_EQ(BackendFor(TargetKind::kCpu).kind(), "cpu");
  EXPECT_EQ(BackendFor(TargetKind::kCuda).kind(), "cuda");
  EXPECT_EQ(&ParseTarget("rpi4")->backend(), &BackendFor(TargetKind::kCpu));
  EXPECT_EQ(&ParseTarget("h100")->backend(), &BackendFor(TargetKind::kCuda));
}

TEST(BackendTest, SourceKindFollowsTheSourceExtension) {
  EXPECT_EQ(SourceKind("dir/k.cu"), TargetKind::kCuda);
  EXPECT_EQ(SourceKind("k.c"), TargetKind::kCpu);
  EXPECT_EQ(SourceKind("kernel"), TargetKind::kCpu);  // C is the default
  EXPECT_EQ(SourceKind("k.cu.c"), TargetKind::kCpu);
}

TEST(BackendTest, RefusesATargetWithoutWhatItCompilesFor) {
  Target cpu;  // no triple
  EXPECT_EQ(cpu.backend().CheckComplete(cpu).code(), ErrorCode::kInvalidArgument);
  Target cuda;
  cuda.kind = TargetKind::kCuda;  // no arch
  EXPECT_EQ(cuda.backend().CheckComplete(cuda).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(ParseTarget("h100")->backend().CheckComplete(*ParseTarget("h100")).ok());
  BuildRequest r;
  r.source = testing::kVaddSource;
  r.target = cpu;
  BuildResult b = BuildInProcess(r);  // the pool's check comes first; the compiler refuses too
  EXPECT_FALSE(b.ok());
}

TEST(BackendTest, TensorsLiveWhereTheKindsKernelsRun) {
  msg::DeviceInfo device;
  device.arch = "x86_64";
  device.cpu_model = "Some CPU";
  device.memory_bytes = uint64_t{64} << 30;
  msg::GpuInfo gpu;
  gpu.arch = "sm_90";
  gpu.name = "Some GPU";
  gpu.memory_bytes = uint64_t{4} << 30;
  device.gpus.push_back(gpu);

  const TargetBackend& cpu = BackendFor(TargetKind::kCpu);
  const TargetBackend& cuda = BackendFor(TargetKind::kCuda);
  EXPECT_EQ(cpu.tensor_device().device_type, kDLCPU);
  EXPECT_EQ(cuda.tensor_device().device_type, kDLCUDA);
  EXPECT_EQ(cpu.RunsOn(device).model, "Some CPU");
  EXPECT_EQ(cuda.RunsOn(device).arch, "sm_90");
  EXPECT_EQ(cuda.RunsOn(device).model, "Some GPU");
  // 5 GiB fits the host's memory, not the GPU's.
  EXPECT_TRUE(cpu.CheckTensorsFit(uint64_t{5} << 30, device, "x").ok());
  EXPECT_EQ(cuda.CheckTensorsFit(uint64_t{5} << 30, device, "x").code(), ErrorCode::kLimitExceeded);
  device.gpus.clear();  // no GPU reported: named by its CPU (its session refuses the tensors)
  EXPECT_EQ(cuda.RunsOn(device).model, "Some CPU");
}

// The manifest says what the backend compiled and how the library is stored.
TEST(BackendTest, PackagesNameTheBackendsCompilerAndLibrary) {
  const testing::TempDir tmp;
  const std::string& dir = tmp.path();
  BuildRequest r;
  r.name = "vadd";
  r.source = testing::kVaddSource;
  r.target = *ParseTarget("x86-64");
  BuildResult built = BuildInProcess(r);
  ASSERT_TRUE(built.ok()) << built.status.ToString();
  auto m = WriteBuildPackage(r, built, dir + "/cpu.ctpkg");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->kind, "cpu");
  EXPECT_EQ(m->compiler, "clang+lld");
  EXPECT_EQ(m->library, "lib/vadd.so");
  EXPECT_EQ(m->triple, "x86_64-linux-gnu");

  if (!HasNvrtc()) GTEST_SKIP() << "built without the CUDA toolkit (NVRTC)";
  r.source = testing::kCudaVaddSource;
  r.target = *ParseTarget("cuda -arch=sm_80");
  built = BuildInProcess(r);
  ASSERT_TRUE(built.ok()) << built.status.ToString();
  m = WriteBuildPackage(r, built, dir + "/cuda.ctpkg");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->kind, "cuda");
  EXPECT_EQ(m->compiler, "nvrtc");
  EXPECT_EQ(m->library, "lib/vadd.cubin");
  EXPECT_EQ(m->triple, "nvptx64-nvidia-cuda");
  EXPECT_EQ(m->cpu, "");
  EXPECT_FALSE(m->functions.empty());  // the launch geometry, from the kernel annotations
}

}  // namespace
}  // namespace crosstune::builder
