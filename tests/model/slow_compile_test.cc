// Full-width ResNet-50 v1.5 (25.5 M params, 4.09 GMAC) compiled for this machine, run by the graph
// executor of a real crosstune-server (127.0.0.1, port 0), logits checked against onnxruntime's.
// Label slow: the model is 100 MB and its reference run and compile take minutes on a loaded host.
#include <gtest/gtest.h>

#include "compiled_model.h"
#include "crosstune/testing/server_process.h"
#include "crosstune/testing/support.h"
#include "model_files.h"

namespace crosstune::model {
namespace {

TEST(SlowCompileTest, FullWidthResNet50MatchesOnnxRuntime) {
  const std::string path = testing::MakeModel("resnet50.onnx", "resnet50");
  ASSERT_FALSE(path.empty());
  const crosstune::testing::TempDir temp("crosstune-slow-model");
  const std::string& dir = temp.path();
  ServerProcess server;
  Status st = server.Start({CT_SERVER_BIN, "--host", "127.0.0.1", "--port", "0",
                            "--exit-with-parent", "--work-dir", dir},
                           std::chrono::seconds(30));
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto c = testing::CompileFile(path, testing::TargetOf(server.address()), DefaultPasses(), "");
  ASSERT_TRUE(c.ok);
  std::printf("resnet50: %zu nodes, activations %.2f MB, params %.1f MB\n", c.result.nodes.size(),
              c.result.plan.activation_bytes / 1e6, c.result.plan.param_bytes / 1e6);
  testing::ExpectClose(
      testing::RunOnServer(server.address(), c.package, testing::SeededInput(path)),
      testing::ReferenceOutput(path),
      "resnet50 (full width), compiled, on the server, vs onnxruntime");
}

}  // namespace
}  // namespace crosstune::model
