// Whole models cross-deployed: crosstune-server cross-built for aarch64, armhf and riscv64 runs
// under qemu-user as a remote board; ResNet-50 (width 16) is compiled here for the target the board
// reports (NEON templates and generated kernels in one library), uploaded, run by the board's graph
// executor, and its logits checked against onnxruntime's on this machine. Skips with a message when
// qemu or a cross server is absent. qemu's speed is emulation speed: only answers are checked.
#include <gtest/gtest.h>

#include "compiled_model.h"
#include "crosstune/testing/qemu_board_test.h"
#include "model_files.h"

namespace crosstune::model {
namespace {

class QemuCompileTest : public crosstune::testing::QemuBoardTest {};

TEST_P(QemuCompileTest, ResNet50Width16MatchesOnnxRuntimeOnTheBoard) {
  const std::string path = testing::MakeModel("r50w16.onnx", "resnet50 --width 16");
  ASSERT_FALSE(path.empty());
  const builder::Target target = testing::TargetOf(address());
  ASSERT_FALSE(target.triple.empty());
  auto c = testing::CompileFile(path, target, DefaultPasses(), "." + board().name);
  ASSERT_TRUE(c.ok);
  EXPECT_GT(c.result.defaults, 0) << "the convs run their templates";
  const std::string what =
      "resnet50 w16 on qemu-" + board().name + " (" + target.ToString() + ") vs onnxruntime";
  testing::ExpectClose(testing::RunOnServer(address(), c.package, testing::SeededInput(path)),
                       testing::ReferenceOutput(path), what.c_str());
}

CT_INSTANTIATE_QEMU_BOARDS(QemuCompileTest);

}  // namespace
}  // namespace crosstune::model
