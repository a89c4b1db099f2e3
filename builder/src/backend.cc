#include "crosstune/builder/backend.h"

#include <cstdlib>

#include "backend_kinds.h"

namespace crosstune::builder {
namespace {

// One row per device kind.
struct Row {
  TargetKind kind;
  const TargetBackend& (*backend)();
};
constexpr Row kBackends[] = {
    {TargetKind::kCpu, CpuTargetBackend},
    {TargetKind::kCuda, CudaTargetBackend},
};

}  // namespace

const TargetBackend& BackendFor(TargetKind kind) {
  for (const Row& row : kBackends) {
    if (row.kind == kind) return row.backend();
  }
  std::abort();  // a TargetKind without a row above: a bug
}

const TargetBackend& Target::backend() const { return BackendFor(kind); }

TargetKind SourceKind(std::string_view file_name) {
  for (const Row& row : kBackends) {
    std::string_view ext = row.backend().source_extension();
    if (file_name.size() >= ext.size() && file_name.substr(file_name.size() - ext.size()) == ext) {
      return row.kind;
    }
  }
  return TargetKind::kCpu;
}

}  // namespace crosstune::builder
