// Kernel templates and tasks.
//
// A template is a family of kernels: for concrete shapes and a target it makes a Task, which owns
// the config space and, for any config of it, the kernel source, plus everything needed to run
// and check it: argument shapes, a reference implementation, the FLOP count and device-limit
// checks made before any compile.
//
//   auto task = MakeTask("matmul", {512, 512, 512}, target);
//   Config c = task->space().Get(i);
//   if (Status s = task->CheckLimits(c, device); !s.ok()) ...    // InvalidConfig, no compile
//   std::string source = task->Generate(c);
//
// Thread-safety: a Task is immutable once made; its const methods may be called from any thread.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crosstune/builder/target.h"
#include "crosstune/messages_fwd.h"
#include "crosstune/status.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/space.h"

namespace crosstune::tuner {

struct ArgSpec {
  std::string name;
  std::vector<int64_t> shape;
  DLDataType dtype{kDLFloat, 32, 1};
  bool output = false;  // written by the kernel and checked against the reference
  // 0: the tensor has exactly `shape`. t > 0: its last t dimensions are shape's last t, and the
  // ones before them (any number) multiply to shape[0] (a [2, 64, 768] tensor for {128, 768}
  // with t = 1): how a 2-D kernel takes a transformer's 3-D or 4-D activations.
  int flat_tail = 0;
  uint64_t elements() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

// Host copies of a call's arguments, in ArgSpec order, each element's value as a float whatever
// the argument's dtype: int8, uint8 and int32 arguments hold whole numbers in their type's range
// (int32 ones within +-2^24, where a float is exact). ArgBytes and ArgValues convert to and from
// the tensor's bytes.
using HostArgs = std::vector<std::vector<float>>;

class Task {
 public:
  virtual ~Task() = default;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  const TaskId& id() const { return id_; }
  const builder::Target& target() const { return target_; }
  const ConfigSpace& space() const { return space_; }
  // Threads the generated kernel is made for and run with (1: single-threaded).
  int threads() const { return id_.threads; }
  // The function the generated module exports.
  virtual std::string function() const = 0;
  virtual std::vector<ArgSpec> args() const = 0;
  virtual double flops() const = 0;
  // The config an untuned user gets: reasonable for the target, always valid.
  virtual Config DefaultConfig() const = 0;
  // Checks against the device's limits (memory, ...) before compiling; InvalidArgument says which.
  virtual Status CheckLimits(const Config& config, const msg::DeviceInfo& device) const;
  // Kernel source (freestanding C for CPU targets) for one config.
  virtual std::string Generate(const Config& config) const = 0;
  // Bytes of working memory the config's kernel needs (packed copies, panels). 0: none. Otherwise
  // the kernel keeps them in the module by default; compiled with CT_SCRATCH_ARG defined it takes
  // them as one more tensor after args(), 64-byte aligned, contents undefined at each call (how a
  // model's executor gives all its nodes one scratch buffer).
  virtual int64_t ScratchBytes(const Config& /*config*/) const { return 0; }
  // Fills the output arguments of `args` from its inputs.
  virtual void Reference(HostArgs& args) const = 0;
  // Makes random inputs ones the kernel can be given: zeros where its layouts hold padding (the
  // lanes past the last channel of a blocked tensor). MakeInputs calls it.
  virtual void ZeroPadding(HostArgs& /*args*/) const {}
  // |got - want| <= atol + rtol * |want| for every element of every output.
  virtual double rtol() const { return 1e-4; }
  virtual double atol() const { return 1e-4; }
  // Features for cost models: the space's knob features plus derived loop features.
  virtual std::vector<float> Features(const Config& config) const {
    return space_.Features(config);
  }

 protected:
  // A template's task is its identity (template, shape, dtype, threads), its target and its
  // finished config space; configs point into the space, so a task is never copied or moved.
  Task(TaskId id, builder::Target target, ConfigSpace space)
      : id_(std::move(id)), target_(std::move(target)), space_(std::move(space)) {}

 private:
  TaskId id_;
  builder::Target target_;
  ConfigSpace space_;
};

// The first 16 hex digits of the SHA-256 of the source `task` generates for `config`: what a
// record says it measured, so a record made before the template's code generation changed is
// not taken for the same config (Record::generator).
std::string GeneratorHash(const Task& task, const Config& config);

// Whether `record` (of `task`) measured the code `task` generates for its config now: true for a
// record without a generator hash (older logs), false for one whose config is not in the space.
bool MadeByThisGenerator(const Task& task, const Record& record);

// What a task is besides its template, shape and target.
struct TaskOptions {
  int threads = 1;  // 1..4096
};

// "512,512,512" -> {512, 512, 512}; kInvalidArgument naming the text when it is not a
// comma-separated list of integers.
Expected<std::vector<int64_t>> ParseShape(const std::string& text);

// A kernel template as MakeTask knows it: one row of the table in templates/registry.cc (a new
// template is its own file plus one row there).
struct TemplateInfo {
  std::string name;   // "matmul"
  std::string shape;  // what --shape takes, "M,N,K"
  std::string help;   // what it computes, one line
};
// Every template, in the table's order.
const std::vector<TemplateInfo>& Templates();
// Their names ("matmul", "conv2d", "depthwise_conv2d", "dense").
const std::vector<std::string>& TemplateNames();

// A task of template `name` for `shape` (as TemplateInfo::shape says) on `target`.
// kInvalidArgument for an unknown template (listing the known ones), a wrong shape (with the
// template's usage), a tensor of over 2^32 elements (naming it) or a target the template cannot
// use.
Expected<std::unique_ptr<Task>> MakeTask(const std::string& name, const std::vector<int64_t>& shape,
                                         const builder::Target& target,
                                         const TaskOptions& options = {});

// Compares a kernel's outputs with the reference's. Ok, or a message naming the first bad element
// ("C[3,17] = 1.5, reference 2.25 (18 of 262144 elements differ)").
Status CompareOutputs(const Task& task, const HostArgs& got, const HostArgs& want);

// Random inputs (fixed by `seed`; zero where Task::ZeroPadding says), outputs zeroed: float32
// arguments uniform in [-1, 1), int8 and uint8 ones over their type's whole range, int32 ones in
// [-2^16, 2^16].
HostArgs MakeInputs(const Task& task, uint64_t seed);

// The bytes of a tensor of `spec`'s dtype holding `values` (float32, int8, uint8 or int32; a value
// outside an integer type's range saturates), and back: `bytes` holds spec.elements() elements.
std::vector<uint8_t> ArgBytes(const ArgSpec& spec, const std::vector<float>& values);
std::vector<float> ArgValues(const ArgSpec& spec, const std::vector<uint8_t>& bytes);
// What an output is filled with before a checked call, as bytes: NaN for float32 (no answer
// matches it), 0x5A in every byte for the integer types (only a reference of that value does).
std::vector<uint8_t> UnwrittenBytes(const ArgSpec& spec);

}  // namespace crosstune::tuner
