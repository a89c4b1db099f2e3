// What the compile tests share: a model compiled into a package with the real builder, the package
// uploaded to a real crosstune-server (native, or cross-built under qemu-user) and run there by the
// graph executor through client::RemoteModel, and outputs compared with onnxruntime's.
#pragma once

#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/builder/target.h"
#include "crosstune/model/compile.h"
#include "crosstune/model/passes.h"

namespace crosstune::model::testing {

// One builder pool for the test process (two workers).
builder::Builder& Pool();

// Imports `onnx`, runs `passes` and compiles for `target`; writes the package to `onnx` + suffix +
// ".ctpkg" and returns the result (its graph, nodes, counts). A failure is a test failure.
struct Compiled {
  CompileResult result;
  std::string package;
  bool ok = false;
};
Compiled CompileFile(const std::string& onnx, const builder::Target& target,
                     const std::vector<Pass>& passes, const std::string& suffix,
                     const CompileOptions& base = {});

// Uploads `package` to the server at `address`, loads it, sets its one input, runs it once and
// returns its first output ({} and a test failure when a step fails).
std::vector<float> RunOnServer(const std::string& address, const std::string& package,
                               const std::vector<float>& input);

// The device's target (TargetFromDevice of its Info()).
builder::Target TargetOf(const std::string& address);

// Prints "<what>: max abs error A, max rel error R" and expects every element within fp32
// tolerance (|d| <= 1e-4 + 1e-3 |want|).
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, const char* what);

}  // namespace crosstune::model::testing
