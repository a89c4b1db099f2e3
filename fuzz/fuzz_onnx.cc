// An ONNX model as `crosstune import` and `compile` read it, from memory: the importer (shape
// inference and constant folding node by node), then the default passes and the storage plan,
// as compile runs them before any kernel is built. External data is refused (no folder), and the
// budget is kept under libFuzzer's -rss_limit_mb so that a refusal, not the limit, ends a large
// model.
#include <cstddef>
#include <cstdint>
#include <string>

#include "crosstune/model/onnx_import.h"
#include "crosstune/model/passes.h"
#include "crosstune/model/storage_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crosstune::model;  // NOLINT(google-build-using-namespace): one call site
  ImportOptions options;
  options.external_data = false;
  options.max_model_bytes = uint64_t{64} << 20;
  auto g = ImportOnnxBytes(std::string(reinterpret_cast<const char*>(data), size), "", options);
  if (!g.ok()) return 0;
  (void)Stats(*g);
  if (!RunPasses(*g, DefaultPasses()).ok()) return 0;
  (void)PlanStorage(*g);
  return 0;
}
