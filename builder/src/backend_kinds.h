// The backend of each device kind, one file each (backend_<kind>.cc); BackendFor (backend.cc)
// maps a TargetKind to them.
#pragma once

#include "crosstune/builder/backend.h"

namespace crosstune::builder {

const TargetBackend& CpuTargetBackend();
const TargetBackend& CudaTargetBackend();

}  // namespace crosstune::builder
