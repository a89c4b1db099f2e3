// A CUDA package launched on a real GPU through crosstune-server's CUDA backend. Skips with the
// server's reason ("no CUDA driver", "no CUDA devices") where there is no GPU.
#include <gtest/gtest.h>

#include <filesystem>

#include "crosstune/builder/builder.h"
#include "crosstune/builder/compiler.h"
#include "crosstune/client/session.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"
#include "test_kernels.h"

namespace crosstune {
namespace {

namespace fs = std::filesystem;
using client::CallArg;

TEST(CudaLaunchTest, RunsVaddOnTheGpuWithCheckedAnswers) {
  if (!builder::HasNvrtc()) GTEST_SKIP() << "built without NVRTC";
  const testing::TempDir temp("crosstune-cuda-launch");
  const fs::path dir = temp.path();
  fs::create_directories(dir / "work");
  ServerProcess server;
  ASSERT_TRUE(server
                  .Start({CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0", "--exit-with-parent",
                          "--work-dir", (dir / "work").string()},
                         std::chrono::seconds(20))
                  .ok());
  client::ConnectOptions o;
  o.server = server.address();
  auto s = client::Session::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto info = (*s)->Info();
  ASSERT_TRUE(info.ok());
  if (info->gpus.empty()) {
    GTEST_SKIP() << "no GPU on this machine ("
                 << (info->gpu_status.empty() ? "none found" : info->gpu_status)
                 << "); the launch test runs where crosstune-server reports a GPU";
  }
  builder::BuildRequest r;
  r.source = testing::kCudaVaddSource;
  r.target = *builder::ParseTarget("cuda -arch=" + info->gpus[0].arch);
  r.name = "vadd";
  auto res = builder::BuildInProcess(r);
  ASSERT_TRUE(res.ok()) << res.status.ToString();
  std::string pkg = (dir / "gpu.ctpkg").string();
  ASSERT_TRUE(builder::WriteBuildPackage(r, res, pkg).ok());
  ASSERT_TRUE((*s)->Upload(pkg, "gpu.ctpkg").ok());
  auto mod = (*s)->LoadModule("gpu.ctpkg");
  ASSERT_TRUE(mod.ok()) << mod.status().ToString();
  EXPECT_EQ(mod->info().kind, "cuda");
  const int64_t n = 1000;
  std::vector<float> a(n, 1.0f), b(n), c(n);
  for (int64_t i = 0; i < n; ++i) b[i] = static_cast<float>(i);
  DLDataType f32{kDLFloat, 32, 1};
  DLDevice gpu{kDLCUDA, 0};
  auto ta = (*s)->AllocTensor({n}, f32, gpu);
  auto tb = (*s)->AllocTensor({n}, f32, gpu);
  auto tc = (*s)->AllocTensor({n}, f32, gpu);
  ASSERT_TRUE(ta.ok()) << ta.status().ToString();
  ASSERT_TRUE(tb.ok() && tc.ok());
  ASSERT_TRUE(ta->CopyFrom(a.data(), n * 4).ok());
  ASSERT_TRUE(tb->CopyFrom(b.data(), n * 4).ok());
  auto call = mod->Call(
      "vadd", {CallArg::Tensor(*ta), CallArg::Tensor(*tb), CallArg::Tensor(*tc), CallArg::Int(n)});
  ASSERT_TRUE(call.ok()) << call.status().ToString();
  ASSERT_TRUE(tc->CopyTo(c.data(), n * 4).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(c[i], 1.0f + static_cast<float>(i)) << i;
}

}  // namespace
}  // namespace crosstune
