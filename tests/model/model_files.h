// Models for the model tests, written by scripts/make-model.py with the model venv's python, and
// onnxruntime's outputs for them (scripts/onnx-reference.py): made once per test process in a
// temporary folder, never committed.
#pragma once

#include <string>
#include <vector>

namespace crosstune::model::testing {

// The path of `make-model.py ARGS -o <dir>/<file>` (made on first use; "" and a test failure
// when the script fails, with its output).
std::string MakeModel(const std::string& file, const std::string& args);

// onnxruntime's first output for `model` on seeded inputs (the same inputs SeededInput gives).
std::vector<float> ReferenceOutput(const std::string& model, int seed = 1);
// The seeded input onnx-reference.py used for `model`'s first input (uniform in [-1, 1)).
std::vector<float> SeededInput(const std::string& model, int seed = 1);
// The .npy file that holds it.
std::string SeededInputPath(const std::string& model, int seed = 1);

// The .npy file's float32 data (a C-order array).
std::vector<float> ReadNpyFloats(const std::string& path);

// Runs `code` with the model venv's python (its onnx and onnxruntime) and ARGS; its stdout, and a
// test failure with its output when it fails.
std::string RunModelPython(const std::string& code, const std::string& args);

// One quantization step of a QDQ model's output: the scale of the DequantizeLinear that writes
// its first output (0 and a test failure when another node writes it).
double OutputStep(const std::string& model);

}  // namespace crosstune::model::testing
