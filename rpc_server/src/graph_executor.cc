#include "crosstune/server/graph_executor.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "crosstune/server/call_slot.h"
#include "crosstune/tensor.h"

namespace crosstune::server {
namespace {

constexpr uint64_t kAlign = 64;

uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

DLTensor Describe(std::vector<int64_t>& shape, DLDataType dtype, void* data) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = dtype;
  t.shape = shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

std::string EntryShape(const graph::Graph& g, uint32_t entry) {
  std::string s = ShapeString(g.shape[entry]);
  return s.empty() ? "scalar" : s;
}

}  // namespace

Expected<std::unique_ptr<GraphExecutor>> GraphExecutor::Create(
    std::string name, graph::Graph graph, std::unique_ptr<pkg::ParamsFile> params,
    std::unique_ptr<Module> module, uint64_t max_storage_bytes) {
  std::unique_ptr<GraphExecutor> ex(new GraphExecutor());
  ex->name_ = std::move(name);
  ex->graph_ = std::move(graph);
  ex->params_ = std::move(params);
  ex->module_ = std::move(module);
  Status s = ex->Prepare(max_storage_bytes);
  if (!s.ok()) return Status(s.code(), ex->name_ + ": " + s.message());
  return ex;
}

GraphExecutor::~GraphExecutor() {
  if (arena_ != nullptr) ::munmap(arena_, static_cast<size_t>(arena_bytes_));
}

Status GraphExecutor::Prepare(uint64_t max_storage_bytes) {
  const graph::Graph& g = graph_;
  CT_RETURN_IF_ERROR(graph::ValidateGraph(g));
  if (module_->kind() != "cpu") {
    return Status(
        ErrorCode::kInvalidArgument,
        "the graph executor runs CPU libraries, this one is " + std::string(module_->kind()));
  }
  static const std::vector<pkg::ParamTensor> kNoParams;
  CT_RETURN_IF_ERROR(graph::CheckParams(g, params_ ? params_->tensors() : kNoParams));
  CT_RETURN_IF_ERROR(graph::CheckFunctions(g, module_->functions()));

  // Storage ids that hold a param are bound to params.bin; the others get a range of the arena.
  const size_t entries = g.num_entries();
  std::vector<bool> param_storage(g.storage_bytes.size(), false);
  const std::vector<uint32_t> param_nodes = graph::ParamNodes(g);
  for (uint32_t node : param_nodes) param_storage[g.storage_id[g.entry_id(node)]] = true;
  std::vector<uint64_t> offset(g.storage_bytes.size(), 0);
  // Sizes come from the file: each is checked against the limit before it is rounded or added.
  uint64_t total = 0;
  bool too_big = false;
  auto reserve = [&](uint64_t bytes) {
    if (too_big || bytes > max_storage_bytes || total > max_storage_bytes - bytes) {
      too_big = true;
      return uint64_t{0};
    }
    const uint64_t at = total;
    total += AlignUp(bytes);
    return at;
  };
  for (size_t sid = 0; sid < g.storage_bytes.size(); ++sid) {
    if (!param_storage[sid]) offset[sid] = reserve(std::max<uint64_t>(g.storage_bytes[sid], 1));
  }
  storage_bytes_ = total;
  uint64_t scratch_bytes = 0;
  for (const graph::Node& n : g.nodes) {
    scratch_bytes = std::max(scratch_bytes, n.scratch_bytes);
    flops_ += n.flops;
  }
  const uint64_t scratch_at = reserve(scratch_bytes);
  if (too_big || total > max_storage_bytes) {
    uint64_t want = 0;
    for (size_t sid = 0; sid < g.storage_bytes.size(); ++sid) {
      if (!param_storage[sid]) want += std::min<uint64_t>(g.storage_bytes[sid], uint64_t{1} << 62);
    }
    want += std::min<uint64_t>(scratch_bytes, uint64_t{1} << 62);
    return Status(ErrorCode::kLimitExceeded,
                  "the model needs " + std::to_string(want) +
                      " bytes of activations and scratch, over the session's limit of " +
                      std::to_string(max_storage_bytes) + " (--max-tensor-bytes)");
  }
  if (total > std::numeric_limits<size_t>::max()) {
    return Status(ErrorCode::kLimitExceeded, "the model's storage does not fit this address space");
  }
  if (total > 0) {
    // Populated now: first-touch faults stay out of the runs and their timing.
    void* p = ::mmap(nullptr, static_cast<size_t>(total), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      return Status(ErrorCode::kLimitExceeded,
                    "cannot allocate " + std::to_string(total) + " bytes of model storage");
    }
    arena_ = p;
    arena_bytes_ = total;
  }
  auto* base = static_cast<uint8_t*>(arena_);

  entries_.resize(entries);
  for (uint32_t e = 0; e < entries; ++e) {
    const uint32_t sid = g.storage_id[e];
    entries_[e] =
        Describe(graph_.shape[e], g.dltype[e], param_storage[sid] ? nullptr : base + offset[sid]);
  }
  for (uint32_t node : param_nodes) {
    const pkg::ParamTensor* p = params_->Find(g.nodes[node].name);
    // Read-only mapping: kernels take non-const tensors by the ABI, and a write faults.
    entries_[g.entry_id(node)].data = const_cast<void*>(params_->data(*p));
    params_bytes_ += p->nbytes;
    param_spans_.emplace_back(static_cast<const char*>(params_->data(*p)), p->nbytes);
  }

  // One packed argument list per node, laid out back to back.
  const auto& fns = module_->functions();
  size_t scratch_users = 0;
  for (const graph::Node& n : g.nodes) scratch_users += n.is_op() && n.scratch_bytes > 0;
  scratch_.reserve(scratch_users);  // no reallocation: args point into it
  scratch_shapes_.reserve(scratch_users);
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    const graph::Node& n = g.nodes[i];
    if (!n.is_op()) continue;
    Step step;
    step.node = i;
    for (size_t f = 0; f < fns.size(); ++f) {
      if (fns[f].name == n.func_name) step.function = f;
    }
    step.first_arg = args_.size();
    step.num_args = static_cast<int32_t>(n.num_args());
    auto tensor_arg = [&](DLTensor* t) {
      ct_arg a{};
      a.kind = CT_ARG_TENSOR;
      a.value.v_tensor = t;
      args_.push_back(a);
    };
    for (const graph::EntryRef& in : n.inputs) {
      tensor_arg(&entries_[g.entry_id(in)]);
      step.shapes += (step.shapes.empty() ? "" : ", ") + EntryShape(g, g.entry_id(in));
    }
    step.shapes += " ->";
    for (uint32_t k = 0; k < n.num_outputs; ++k) {
      tensor_arg(&entries_[g.entry_id(i, k)]);
      step.shapes += (k ? ", " : " ") + EntryShape(g, g.entry_id(i, k));
    }
    if (n.scratch_bytes > 0) {
      scratch_shapes_.push_back(static_cast<int64_t>(n.scratch_bytes));
      DLTensor t{};
      t.data = base + scratch_at;
      t.device = DLDevice{kDLCPU, 0};
      t.ndim = 1;
      t.dtype = DLDataType{kDLUInt, 8, 1};
      t.shape = &scratch_shapes_.back();
      scratch_.push_back(t);
      tensor_arg(&scratch_.back());
    }
    step.label = "'" + n.name + "' (" + n.func_name + ")";
    // The slot holds 127 bytes: keep the function, shorten the name.
    constexpr size_t kMaxLabel = sizeof(CallSlot::node) - 1;
    if (step.label.size() > kMaxLabel) {
      std::string tail = "...' (" + n.func_name + ")";
      if (tail.size() > kMaxLabel - 8) tail = "...'";
      step.label = step.label.substr(0, kMaxLabel - tail.size()) + tail;
    }
    steps_.push_back(std::move(step));
  }

  for (const std::string& in : g.inputs) {
    const uint32_t node = static_cast<uint32_t>(g.FindNode(in));
    const uint32_t e = g.entry_id(node);
    inputs_.push_back(Port{in, g.shape[e], g.dltype[e], *TensorBytes(g.shape[e], g.dltype[e]),
                           static_cast<uint8_t*>(entries_[e].data), false});
  }
  for (size_t h = 0; h < g.heads.size(); ++h) {
    const uint32_t e = g.entry_id(g.heads[h]);
    outputs_.push_back(Port{g.outputs[h], g.shape[e], g.dltype[e],
                            *TensorBytes(g.shape[e], g.dltype[e]),
                            static_cast<uint8_t*>(entries_[e].data), false});
  }
  return Status::Ok();
}

Expected<GraphExecutor::Port*> GraphExecutor::FindInput(std::string_view name) {
  for (Port& p : inputs_) {
    if (p.name == name) return &p;
  }
  std::string names;
  for (const Port& p : inputs_) names += (names.empty() ? "" : ", ") + p.name;
  return Status(ErrorCode::kNotFound,
                name_ + " has no input '" + std::string(name) + "' (its inputs: " + names + ")");
}

Expected<const GraphExecutor::Port*> GraphExecutor::FindOutput(std::string_view name,
                                                               int64_t index) const {
  if (name.empty()) {
    if (index < 0 || static_cast<size_t>(index) >= outputs_.size()) {
      return Status(ErrorCode::kNotFound, name_ + " has no output " + std::to_string(index) +
                                              " (it has " + std::to_string(outputs_.size()) + ")");
    }
    return &outputs_[static_cast<size_t>(index)];
  }
  for (const Port& p : outputs_) {
    if (p.name == name) return &p;
  }
  std::string names;
  for (const Port& p : outputs_) names += (names.empty() ? "" : ", ") + p.name;
  return Status(ErrorCode::kNotFound,
                name_ + " has no output '" + std::string(name) + "' (its outputs: " + names + ")");
}

Status GraphExecutor::CheckInputsSet() const {
  for (const Port& p : inputs_) {
    if (!p.set) {
      return Status(ErrorCode::kInvalidArgument,
                    name_ + ": input '" + p.name + "' was never set; set every input before a run");
    }
  }
  return Status::Ok();
}

Status GraphExecutor::NodeFailed(const Step& step, int32_t ret) const {
  std::string text = module_->LastError();
  return Status(ErrorCode::kKernelError, "node " + step.label + " of model '" + name_ +
                                             "' returned " + std::to_string(ret) +
                                             (text.empty() ? "" : ": " + text));
}

std::vector<std::span<const char>> GraphExecutor::Buffers() const {
  std::vector<std::span<const char>> out = param_spans_;
  if (arena_ != nullptr) out.emplace_back(static_cast<const char*>(arena_), arena_bytes_);
  return out;
}

std::vector<std::span<const char>> GraphExecutor::StepBuffers(size_t k) const {
  std::vector<std::span<const char>> out;
  const Step& step = steps_[k];
  for (int32_t a = 0; a < step.num_args; ++a) {
    const ct_arg& arg = args_[step.first_arg + static_cast<size_t>(a)];
    if (arg.kind != CT_ARG_TENSOR || arg.value.v_tensor == nullptr) continue;
    const DLTensor& t = *arg.value.v_tensor;
    auto bytes = TensorBytes(std::vector<int64_t>(t.shape, t.shape + t.ndim), t.dtype);
    if (bytes.ok()) out.emplace_back(static_cast<const char*>(t.data) + t.byte_offset, *bytes);
  }
  return out;
}

Status GraphExecutor::Run(CallSlot* slot, double* step_seconds) {
  // Outputs of a run that stopped half way are not a run's outputs.
  has_run_ = false;
  int32_t ret = 0;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& step = steps_[k];
    if (slot != nullptr) slot->SetNode(step.label.data(), step.label.size());
    const auto t0 =
        step_seconds ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    Status s =
        module_->Invoke(step.function, args_.data() + step.first_arg, step.num_args, 1, &ret);
    if (step_seconds) {
      step_seconds[k] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (!s.ok()) return s;
    if (ret != 0) return NodeFailed(step, ret);
  }
  has_run_ = true;
  return Status::Ok();
}

Status GraphExecutor::RunStep(size_t k, uint64_t times, CallSlot* slot) {
  const Step& step = steps_[k];
  if (slot != nullptr) slot->SetNode(step.label.data(), step.label.size());
  int32_t ret = 0;
  CT_RETURN_IF_ERROR(
      module_->Invoke(step.function, args_.data() + step.first_arg, step.num_args, times, &ret));
  if (ret != 0) return NodeFailed(step, ret);
  return Status::Ok();
}

}  // namespace crosstune::server
