// Cross-deployment for real: crosstune-server cross-built for aarch64, armhf and riscv64 runs
// under qemu-user as a remote board; kernels are cross-compiled for it here (clang freestanding +
// ld.lld -shared), uploaded, run, and their results checked against a host reference.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "crosstune/client/session.h"
#include "crosstune/testing/qemu_board_test.h"

extern char** environ;

namespace crosstune {
namespace {

using client::CallArg;
using client::RemoteTensor;
using client::Session;

constexpr DLDataType kF32{kDLFloat, 32, 1};

int RunProgram(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Cross-compiles the sample kernel (vadd, matmul) the way a user without the builder would:
// clang for the board's triple, freestanding, then ld.lld -shared.
// TODO(builder): build through the builder library instead.
std::string CompileSampleKernel(const std::vector<std::string>& target_flags,
                                const std::string& dir, const std::string& tag) {
  std::string obj = dir + "/sample_" + tag + ".o";
  std::string so = dir + "/sample_" + tag + ".so";
  std::vector<std::string> cc = {CT_KERNEL_CLANG};
  cc.insert(cc.end(), target_flags.begin(), target_flags.end());
  for (std::string flag : {"-ffreestanding", "-nostdlib", "-fPIC", "-O3", "-c"}) cc.push_back(flag);
  cc.push_back(std::string("-I") + CT_KERNEL_COMMON_INCLUDE);
  cc.push_back(std::string("-I") + CT_KERNEL_DLPACK_INCLUDE);
  cc.insert(cc.end(), {CT_SAMPLE_KERNEL, "-o", obj});
  if (RunProgram(cc) != 0) return "";
  if (RunProgram({CT_KERNEL_LLD, "-shared", obj, "-o", so}) != 0) return "";
  return so;
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

RemoteTensor Upload(Session& s, const std::vector<int64_t>& shape, const std::vector<float>& data) {
  auto t = s.AllocTensor(shape, kF32);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return {};
  Status st = t->CopyFrom(data.data(), data.size() * sizeof(float));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return *t;
}

class QemuSampleTest : public testing::QemuBoardTest {
 protected:
  // Compiles the sample kernel for the board, uploads and loads it.
  client::RemoteModule LoadSample() {
    std::string so = CompileSampleKernel(board().clang_target, scratch_dir(), board().name);
    EXPECT_FALSE(so.empty()) << "could not cross-compile the sample kernel for " << board().name;
    auto f = session().Upload(so, "sample.so");
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    auto m = session().LoadModule("sample.so");
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? *m : client::RemoteModule();
  }
};

TEST_P(QemuSampleTest, ReportsTheBoardsArchitecture) {
  auto info = session().Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->arch, board().uname);
  EXPECT_GE(info->cores, 1u);
}

TEST_P(QemuSampleTest, RunsCrossCompiledVaddAndMatchesHost) {
  client::RemoteModule m = LoadSample();
  ASSERT_NE(m.id(), 0u);
  const size_t n = 1000;  // not a multiple of the vector width: the tail loop runs too
  std::vector<float> a = Random(n, 1), b = Random(n, 2);
  RemoteTensor ta = Upload(session(), {int64_t(n)}, a);
  RemoteTensor tb = Upload(session(), {int64_t(n)}, b);
  RemoteTensor tc = Upload(session(), {int64_t(n)}, std::vector<float>(n, 0));
  auto r = m.Call("vadd", {CallArg::Tensor(ta), CallArg::Tensor(tb), CallArg::Tensor(tc)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<float> c(n);
  ASSERT_TRUE(tc.CopyTo(c.data(), n * sizeof(float)).ok());
  for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(c[i], a[i] + b[i]) << "at " << i;
}

TEST_P(QemuSampleTest, RunsCrossCompiledMatmulAndMatchesHost) {
  client::RemoteModule m = LoadSample();
  ASSERT_NE(m.id(), 0u);
  const int64_t M = 17, K = 24, N = 9;
  std::vector<float> a = Random(M * K, 3), b = Random(K * N, 4);
  RemoteTensor ta = Upload(session(), {M, K}, a);
  RemoteTensor tb = Upload(session(), {K, N}, b);
  RemoteTensor tc = Upload(session(), {M, N}, std::vector<float>(M * N, 7));
  auto r = m.Call("matmul", {CallArg::Tensor(ta), CallArg::Tensor(tb), CallArg::Tensor(tc)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<float> c(M * N);
  ASSERT_TRUE(tc.CopyTo(c.data(), c.size() * sizeof(float)).ok());
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (int64_t p = 0; p < K; ++p) ref += double(a[i * K + p]) * b[p * N + j];
      ASSERT_NEAR(c[i * N + j], ref, 1e-4) << "at " << i << "," << j;
    }
  }
}

// On a 32-bit board a 64-bit size must never be cut to 32 bits on its way to mmap: 4 GiB + 1 MiB
// (under the default 8 GiB tensor limit) once mapped 1 MiB and then copied out of bounds.
TEST_P(QemuSampleTest, RefusesATensorLargerThanA32BitAddressSpace) {
  if (std::string(board().uname) != "armv7l") GTEST_SKIP() << "a 32-bit board's case";
  auto t =
      session().AllocTensor({(int64_t{4} << 30) + (int64_t{1} << 20)}, DLDataType{kDLUInt, 8, 1});
  ASSERT_FALSE(t.ok()) << "a 4 GiB + 1 MiB tensor was allocated on a 32-bit board";
  EXPECT_EQ(t.status().code(), ErrorCode::kLimitExceeded) << t.status().ToString();
  EXPECT_NE(t.status().message().find("32-bit address space"), std::string::npos)
      << t.status().ToString();
  EXPECT_TRUE(session().Ping().ok());
}

TEST_P(QemuSampleTest, RefusesAnX86KernelWithWrongArchBeforeLoading) {
  std::string so = CompileSampleKernel({"--target=x86_64-linux-gnu"}, scratch_dir(), "x86_64");
  ASSERT_FALSE(so.empty());
  ASSERT_TRUE(session().Upload(so, "x86.so").ok());
  auto m = session().LoadModule("x86.so");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kWrongArch) << m.status().ToString();
  EXPECT_NE(m.status().message().find("x86"), std::string::npos) << m.status().ToString();
  // The session is still usable afterwards: the server refused the file, it did not crash.
  EXPECT_TRUE(session().Ping().ok());
}

CT_INSTANTIATE_QEMU_BOARDS(QemuSampleTest);

}  // namespace
}  // namespace crosstune
