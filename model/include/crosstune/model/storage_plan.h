// The storage plan of a compiled graph: which buffer (storage id) holds each value, reusing
// buffers whose values are dead, as TVM's graph runtime plans its memory.
//
// Every value that is not a constant lives from the node that produces it to its last consumer
// (graph outputs: to the end), both included, so a node never writes into one of its inputs'
// buffers. Values are placed largest first, each into the smallest buffer whose values all live
// apart from it, else a new one (greedy by size: a buffer is as large as its first value). Graph
// inputs and constants (params) get a storage id each that nothing else uses. Two values share a
// storage id only when their lifetimes do not overlap (what the executor checks at load).
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "crosstune/model/graph.h"

namespace crosstune::model {

struct StoragePlan {
  std::vector<int> storage_of;         // per value id; -1 for a value no node uses
  std::vector<int64_t> storage_bytes;  // per storage id
  std::vector<bool> is_param;          // per storage id
  int64_t activation_bytes = 0;        // buffers of non-constants (inputs and outputs included)
  int64_t param_bytes = 0;
};

StoragePlan PlanStorage(const Graph& g);

}  // namespace crosstune::model
