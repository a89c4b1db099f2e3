// Builder packages on the emulated boards: crosstune-server cross-built for aarch64 / armhf /
// riscv64 runs under qemu-user; the builder compiles the kernel for the board's target in-process,
// packages it, and the board verifies, loads and runs it with checked answers. Skips with a message
// when qemu or a cross server is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "crosstune/client/remote_model.h"
#include "crosstune/client/session.h"
#include "crosstune/graph.h"
#include "crosstune/testing/qemu_board_test.h"
#include "model_test_net.h"
#include "package_helpers.h"

namespace crosstune {
namespace {

namespace fs = std::filesystem;
using client::CallArg;

class QemuPackageTest : public testing::QemuBoardTest {};

TEST_P(QemuPackageTest, BoardRunsBuiltPackageWithCheckedAnswers) {
  const fs::path dir = scratch_dir();
  std::string pkg_path = (dir / "vadd.ctpkg").string();
  testing::BuildPackage(board().builder_target, pkg_path);
  client::Session* dev = &session();
  ASSERT_TRUE(dev->Upload(pkg_path, "vadd.ctpkg").ok());
  auto mod = dev->LoadModule("vadd.ctpkg");
  ASSERT_TRUE(mod.ok()) << mod.status().ToString();
  const int64_t n = 256;
  std::vector<float> a(n), bv(n), c(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    bv[i] = 3.0f;
  }
  DLDataType f32{kDLFloat, 32, 1};
  auto ta = dev->AllocTensor({n}, f32);
  auto tb = dev->AllocTensor({n}, f32);
  auto tc = dev->AllocTensor({n}, f32);
  ASSERT_TRUE(ta.ok() && tb.ok() && tc.ok());
  ASSERT_TRUE(ta->CopyFrom(a.data(), n * 4).ok());
  ASSERT_TRUE(tb->CopyFrom(bv.data(), n * 4).ok());
  auto r = mod->Call(
      "vadd", {CallArg::Tensor(*ta), CallArg::Tensor(*tb), CallArg::Tensor(*tc), CallArg::Int(n)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(tc->CopyTo(c.data(), n * 4).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(c[i], static_cast<float>(i) + 3.0f) << i;
  // The board refuses a package for the host's architecture, by name.
  std::string x86 = (dir / "x86.ctpkg").string();
  testing::BuildPackage("x86-64", x86);
  ASSERT_TRUE(dev->Upload(x86, "x86.ctpkg").ok());
  auto wrong = dev->LoadModule("x86.ctpkg");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), ErrorCode::kWrongArch);
  EXPECT_NE(wrong.status().message().find("built for x86_64, device is"), std::string::npos);
}

// The graph executor on the board: the test network (model_test_net.h) built for the board's
// target, run with checked outputs, and profiled node by node.
TEST_P(QemuPackageTest, BoardRunsAModelPackageWithCheckedOutputs) {
  const fs::path dir = scratch_dir();
  builder::BuildRequest r;
  r.source = testing::kNetSource;
  r.target = *builder::ParseTarget(board().builder_target);
  r.name = "net";
  builder::BuildResult res = builder::BuildInProcess(r);
  ASSERT_TRUE(res.ok()) << res.status.ToString() << res.diagnostics;
  const std::string pkg_path = (dir / "net.ctpkg").string();
  pkg::ParamsWriter p = testing::NetParams(testing::Weights());
  ASSERT_TRUE(builder::WriteBuildPackage(r, res, pkg_path, graph::GraphToJson(testing::NetGraph()),
                                         p.Serialize())
                  .ok());
  client::Session* dev = &session();
  ASSERT_TRUE(dev->Upload(pkg_path, "net.ctpkg").ok());
  auto model = client::RemoteModel::Load(dev, "net.ctpkg");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<float> x(testing::kIn);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.3f * static_cast<float>(i) - 1.1f;
  ASSERT_TRUE(model->SetInput("x", x.data(), x.size() * 4).ok());
  auto run = model->Run(0, 2);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::vector<float> want = testing::Reference(testing::Weights(), x);
  std::vector<float> lo(2), hi(2);
  ASSERT_TRUE(model->GetOutput("lo", lo.data(), 8).ok());
  ASSERT_TRUE(model->GetOutput("hi", hi.data(), 8).ok());
  // fp32 tolerance, not ULPs: the board's compiler may contract a multiply and an add into one
  // FMA where the host's reference does not, and an output near zero after cancellation then
  // differs by a few 1e-10 (aarch64: 2.2699905e-05 against 2.2699582e-05).
  auto tol = [](float v) { return 1e-6f + 1e-5f * std::fabs(v); };
  EXPECT_NEAR(lo[0], want[0], tol(want[0]));
  EXPECT_NEAR(lo[1], want[1], tol(want[1]));
  EXPECT_NEAR(hi[0], want[2], tol(want[2]));
  EXPECT_NEAR(hi[1], want[3], tol(want[3]));
  auto profile = model->Profile(client::TimeOptions{});
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  EXPECT_EQ(profile->size(), 4u);
}

CT_INSTANTIATE_QEMU_BOARDS(QemuPackageTest);

}  // namespace
}  // namespace crosstune
