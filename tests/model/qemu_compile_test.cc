// Whole models cross-deployed: crosstune-server cross-built for aarch64 and armhf runs under
// qemu-user as a remote board; ResNet-50 (width 16) is compiled here for the target the board
// reports (NEON templates and generated kernels in one library), uploaded, run by the board's graph
// executor, and its logits checked against onnxruntime's on this machine. Skips with a message when
// qemu or a cross server is absent. qemu's speed is emulation speed: only answers are checked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "compiled_model.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"
#include "model_files.h"

namespace crosstune::model {
namespace {

struct Board {
  const char* name;
  const char* qemu;
  const char* sysroot;
  const char* server;
};

class QemuCompileTest : public ::testing::TestWithParam<Board> {};

TEST_P(QemuCompileTest, ResNet50Width16MatchesOnnxRuntimeOnTheBoard) {
  const Board& b = GetParam();
  if (std::string(b.qemu).empty() || ::access(b.qemu, X_OK) != 0) {
    GTEST_SKIP() << "qemu-user for " << b.name
                 << " is missing; scripts/install-deps.sh installs it";
  }
  if (std::string(b.server).empty() || ::access(b.server, X_OK) != 0) {
    GTEST_SKIP() << "no cross-built crosstune-server for " << b.name << " at '" << b.server
                 << "' (CROSSTUNE_CROSS_SERVERS builds it)";
  }
  const std::string path = testing::MakeModel("r50w16.onnx", "resnet50 --width 16");
  ASSERT_FALSE(path.empty());
  const std::string dir =
      crosstune::testing::MakeTempDir(std::string("crosstune-qemu-model-") + b.name);
  ServerProcess server;
  // The board's libraries from the cross sysroot only: on a host that also has the board's libc
  // as a multiarch package (libc6:arm64), the guest's loader finds that one through the host's
  // ld.so.cache, another build than the sysroot's loader, and the server dies.
  Status st = server.Start(
      {b.qemu, "-L", b.sysroot, "-E", std::string("LD_LIBRARY_PATH=") + b.sysroot + "/lib",
       b.server, "--host", "127.0.0.1", "--port", "0", "--work-dir", dir},
      std::chrono::seconds(60));
  ASSERT_TRUE(st.ok()) << st.ToString();
  const builder::Target target = testing::TargetOf(server.address());
  ASSERT_FALSE(target.triple.empty());
  auto c = testing::CompileFile(path, target, DefaultPasses(), std::string(".") + b.name);
  ASSERT_TRUE(c.ok);
  EXPECT_GT(c.result.defaults, 0) << "the convs run their templates";
  const std::string what =
      "resnet50 w16 on qemu-" + std::string(b.name) + " (" + target.ToString() + ") vs onnxruntime";
  testing::ExpectClose(
      testing::RunOnServer(server.address(), c.package, testing::SeededInput(path)),
      testing::ReferenceOutput(path), what.c_str());
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Boards, QemuCompileTest,
    ::testing::Values(Board{"aarch64", CT_QEMU_AARCH64, "/usr/aarch64-linux-gnu",
                            CT_SERVER_AARCH64},
                      Board{"armhf", CT_QEMU_ARM, "/usr/arm-linux-gnueabihf", CT_SERVER_ARMHF}),
    [](const ::testing::TestParamInfo<Board>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace crosstune::model
