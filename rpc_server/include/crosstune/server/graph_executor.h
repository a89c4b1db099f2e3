// The graph executor: runs a model package's network (graph.json, formats/graph.h) with the
// kernels of its library and the params of its params.bin.
//
// Everything that can fail is checked in Create, XNNPACK-style, so a run is a plain loop: the
// graph's structure and storage plan (graph::ValidateGraph), every param present with its dtype
// and shape and nothing extra (graph::CheckParams), every node's function present with one
// tensor per argument (graph::CheckFunctions). Create then allocates every storage id once (one
// mapping, populated, 64-byte aligned ranges), binds the params' entries to the memory-mapped
// params.bin (used in place: no copy; the mapping is read-only, so a kernel writing a param
// faults and is named like any crash), builds one DLTensor per entry and one packed argument list
// per node. Run then calls the nodes back to back: no allocation, no lookup, no check.
//
// Crash and hang reporting reuses the session's call slot (call_slot.h): before each node the
// executor copies the node's prepared label into the slot, so when the session process dies the
// parent names the node ("node 'conv1' (ct_n1_conv2d) of model 'm.ctpkg' died by SIGSEGV").
//
// Thread-safety: used by the one session thread that created it. Kernels may use the session's
// thread pool (their crosstune_runtime_v1), bound when the library was loaded.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/graph.h"
#include "crosstune/kernel_abi.h"
#include "crosstune/params.h"
#include "crosstune/server/module.h"
#include "crosstune/status.h"

namespace crosstune::server {

struct CallSlot;

class GraphExecutor {
 public:
  // A graph input or output: its name (crosstune.inputs / crosstune.outputs) and its buffer.
  struct Port {
    std::string name;
    std::vector<int64_t> shape;
    DLDataType dtype{kDLFloat, 32, 1};
    uint64_t nbytes = 0;
    uint8_t* data = nullptr;
    bool set = false;  // inputs: written since load
  };
  // One node call, prepared at load.
  struct Step {
    uint32_t node = 0;    // index into graph().nodes
    size_t function = 0;  // index into the module's functions()
    size_t first_arg = 0;
    int32_t num_args = 0;
    std::string label;   // "'conv1' (ct_n1_conv2d)", shorter than CallSlot::node
    std::string shapes;  // "1x3x224x224, 64x3x7x7 -> 1x64x112x112"
  };

  // `name` is how messages show the package ("m.ctpkg"). The storage of all ids together must fit
  // `max_storage_bytes` (kLimitExceeded). Errors name the package and what is wrong.
  static Expected<std::unique_ptr<GraphExecutor>> Create(std::string name, graph::Graph graph,
                                                         std::unique_ptr<pkg::ParamsFile> params,
                                                         std::unique_ptr<Module> module,
                                                         uint64_t max_storage_bytes);
  ~GraphExecutor();
  GraphExecutor(const GraphExecutor&) = delete;
  GraphExecutor& operator=(const GraphExecutor&) = delete;

  const std::string& name() const { return name_; }
  const graph::Graph& graph() const { return graph_; }
  const Module& module() const { return *module_; }
  const std::vector<Port>& inputs() const { return inputs_; }
  const std::vector<Port>& outputs() const { return outputs_; }
  const std::vector<Step>& steps() const { return steps_; }
  // Bytes of activation storage allocated, and of params mapped.
  uint64_t storage_bytes() const { return storage_bytes_; }
  uint64_t params_bytes() const { return params_bytes_; }
  uint64_t flops() const { return flops_; }
  bool has_run() const { return has_run_; }
  // The memory a run reads and writes: the params it uses, then its activations and scratch.
  std::vector<std::span<const char>> Buffers() const;
  // The tensors step `k` takes.
  std::vector<std::span<const char>> StepBuffers(size_t k) const;

  // By name, strictly: kNotFound listing the names there are.
  Expected<Port*> FindInput(std::string_view name);
  // By name, or by index when `name` is empty.
  Expected<const Port*> FindOutput(std::string_view name, int64_t index) const;
  // kInvalidArgument naming the first input never set since load.
  Status CheckInputsSet() const;

  // Runs every node once, in order (`slot` may be null). A node's non-zero return stops the run:
  // kKernelError naming the node and the module's message.
  // With `step_seconds` (one per step), adds each step's wall time to its entry (profiling).
  Status Run(CallSlot* slot, double* step_seconds = nullptr);
  // Runs step `k` `times` times in a row (profiling; the graph's earlier steps must have run).
  Status RunStep(size_t k, uint64_t times, CallSlot* slot);

 private:
  GraphExecutor() = default;
  Status Prepare(uint64_t max_storage_bytes);
  Status NodeFailed(const Step& step, int32_t ret) const;

  std::string name_;
  graph::Graph graph_;
  std::unique_ptr<pkg::ParamsFile> params_;
  std::unique_ptr<Module> module_;
  // One anonymous mapping for all storage ids and the shared scratch buffer.
  void* arena_ = nullptr;
  uint64_t arena_bytes_ = 0;
  uint64_t storage_bytes_ = 0;
  uint64_t params_bytes_ = 0;
  std::vector<std::span<const char>> param_spans_;  // each param the graph uses, in the mapping
  uint64_t flops_ = 0;
  std::vector<DLTensor> entries_;  // one per graph entry
  std::vector<DLTensor> scratch_;  // one per step that takes scratch (its own 1-D shape)
  std::vector<int64_t> scratch_shapes_;
  std::vector<ct_arg> args_;
  std::vector<Step> steps_;
  std::vector<Port> inputs_;
  std::vector<Port> outputs_;
  bool has_run_ = false;
};

}  // namespace crosstune::server
