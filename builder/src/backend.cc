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

const TargetBackend* FindBackend(TargetKind kind) {
  for (const Row& row : kBackends) {
    if (row.kind == kind) return &row.backend();
  }
  return nullptr;
}

std::vector<TargetKind> TargetKinds() {
  std::vector<TargetKind> kinds;
  for (const Row& row : kBackends) kinds.push_back(row.kind);
  return kinds;
}

const TargetBackend& BackendFor(TargetKind kind) {
  const TargetBackend* backend = FindBackend(kind);
  if (backend == nullptr) std::abort();  // a TargetKind without a row above: a bug
  return *backend;
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
