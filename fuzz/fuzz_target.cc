// Target strings ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon",
// "cuda -arch=sm_90", presets) as the CLI, the build cache and tuning records give them to the
// builder: parsed, validated against LLVM's CPU and feature tables, written back and parsed again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "crosstune/builder/target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crosstune::builder;
  auto t = ParseTarget(std::string(reinterpret_cast<const char*>(data), size));
  if (!t.ok()) return 0;
  // A target the parser accepts must write back as a string that parses to the same target.
  std::string text = t->ToString();
  auto again = ParseTarget(text);
  if (!again.ok() || again->ToString() != text) std::abort();
  (void)t->Arch();
  (void)RequiredFeatures(*t);
  (void)Cc1TargetArgs(*t);
  return 0;
}
