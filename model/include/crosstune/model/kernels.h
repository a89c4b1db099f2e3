// Generated kernels for the nodes no template tunes (pools, softmax, concat, reshapes,
// elementwise, LRN, standalone BatchNormalization, generic convs and matrix products): freestanding
// C modules (kernel_abi.h) with the node's shapes and attributes compiled in, split over the
// server's threads with ct_parallel_for. One row per operator in model/src/kernels/registry.cc.
//
// A kernel's arguments are the node's present inputs in order, then its outputs (all tensors,
// float32, compact, in the plain layout of the value's shape).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "crosstune/model/graph.h"
#include "crosstune/status.h"

namespace crosstune::model {

struct GeneratedKernel {
  std::string source;     // one module with one function
  std::string function;   // its name in the module
  std::string signature;  // kernel_abi.h: one 't' per tensor
  int64_t scratch_bytes = 0;
};

// kInvalidArgument naming the node when no generator knows its operator.
Expected<GeneratedKernel> GenerateKernel(const Graph& g, const Node& n);
bool HasGeneratedKernel(const std::string& op);
// Whether the node's kernel takes its outputs' element types (every kernel but the copies,
// Concat and Transpose computes float32 only): kInvalidArgument naming the node and the type,
// what GenerateKernel would refuse, checked at import so that a model that imports compiles.
Status CheckKernelTypes(const Graph& g, const Node& n);

}  // namespace crosstune::model
