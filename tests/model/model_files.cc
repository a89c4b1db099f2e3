#include "model_files.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "crosstune/client/npy.h"
#include "crosstune/testing/support.h"

namespace crosstune::model::testing {
namespace {

namespace fs = std::filesystem;

const std::string& Dir() {
  static const crosstune::testing::TempDir dir("crosstune-models");
  return dir.path();
}

std::string Python() { return CT_MODEL_PYTHON; }
std::string Script(const std::string& name) { return std::string(CT_SCRIPTS_DIR) + "/" + name; }

// Runs onnx-reference.py once per model and seed; returns its folder.
std::string Reference(const std::string& model, int seed) {
  static std::map<std::pair<std::string, int>, std::string> done;
  auto key = std::make_pair(model, seed);
  if (auto it = done.find(key); it != done.end()) return it->second;
  const std::string dir = model + ".ref" + std::to_string(seed);
  auto r = crosstune::testing::RunCommand(
      Python() + " " + Script("onnx-reference.py") + " " + model + " --seed " +
      std::to_string(seed) + " --write-inputs " + dir + "/in --out-dir " + dir + "/out");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  done[key] = dir;
  return dir;
}

std::string First(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) return e.path().string();
  return "";
}

}  // namespace

std::string MakeModel(const std::string& file, const std::string& args) {
  const std::string path = Dir() + "/" + file;
  if (fs::exists(path)) return path;
  auto r = crosstune::testing::RunCommand(Python() + " " + Script("make-model.py") + " " + args +
                                          " -o " + path);
  EXPECT_EQ(r.exit_code, 0) << "make-model.py " << args << " (is the model venv installed? "
                            << "scripts/install-deps.sh)\n"
                            << r.out << r.err;
  return r.exit_code == 0 ? path : "";
}

std::string RunModelPython(const std::string& code, const std::string& args) {
  const std::string script = crosstune::testing::WriteFile(Dir() + "/snippet.py", code);
  auto r = crosstune::testing::RunCommand(Python() + " " + script + " " + args);
  EXPECT_EQ(r.exit_code, 0) << "the model venv's python (scripts/install-deps.sh)\n"
                            << r.out << r.err;
  return r.out;
}

std::vector<float> ReadNpyFloats(const std::string& path) {
  auto a = client::ReadNpy(path);
  EXPECT_TRUE(a.ok()) << path << ": " << a.status().message();
  if (!a.ok()) return {};
  std::vector<float> out(a->data.size() / 4);
  std::memcpy(out.data(), a->data.data(), out.size() * 4);
  return out;
}

std::vector<float> ReferenceOutput(const std::string& model, int seed) {
  return ReadNpyFloats(First(Reference(model, seed) + "/out"));
}

std::vector<float> SeededInput(const std::string& model, int seed) {
  return ReadNpyFloats(SeededInputPath(model, seed));
}

std::string SeededInputPath(const std::string& model, int seed) {
  return First(Reference(model, seed) + "/in");
}

double OutputStep(const std::string& model) {
  const std::string text = RunModelPython(
      "import sys, onnx\n"
      "from onnx import numpy_helper\n"
      "m = onnx.load(sys.argv[1])\n"
      "inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}\n"
      "last = [n for n in m.graph.node if n.output[0] == m.graph.output[0].name][0]\n"
      "assert last.op_type == 'DequantizeLinear', last.op_type\n"
      "print(float(inits[last.input[1]]))\n",
      model);
  return text.empty() ? 0.0 : std::stod(text);
}

}  // namespace crosstune::model::testing
