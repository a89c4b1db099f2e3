// A model package loaded into a session: set inputs by name, run the network on the device, read
// outputs, time runs and profile nodes (the server's graph executor, graph_executor.h there).
//
//   auto session = Session::Connect(options);
//   (*session)->Upload("m.ctpkg", "m.ctpkg");
//   auto model = RemoteModel::Load(session->get(), "m.ctpkg");
//   model->SetInput("input", x.data(), x.size() * 4);
//   model->Run();
//   model->GetOutput("logits", y.data(), y.size() * 4);
//
// Errors are one line naming what is wrong: the input ("m.ctpkg has no input 'data' (its inputs:
// input)"), the param ("params.bin lacks 1 param the graph needs: fc.bias"), or the node
// ("node 'layer1.0.conv1' (ct_n3_conv2d) of model 'm.ctpkg' died by SIGSEGV"). A crash or hang
// inside a node ends the session (RemoteCrash / Timeout); the server keeps serving others.
//
// Thread-safety: as Session; the handle points at its Session and must not outlive it.
#pragma once

#include <dlpack/dlpack.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "crosstune/client/session.h"
#include "crosstune/messages.h"
#include "crosstune/status.h"

namespace crosstune::client {

class RemoteModel {
 public:
  RemoteModel() = default;
  // Loads a .ctpkg already in the session's workspace. The server verifies it first (hashes,
  // build ids, triple and CPU features, graph, storage plan, params, functions).
  static Expected<RemoteModel> Load(Session* session, const std::string& remote_path);

  uint32_t id() const { return info_.model_id; }
  const msg::ModelInfo& info() const { return info_; }
  // The input or output of that name, or null.
  const msg::TensorInfo* FindInput(const std::string& name) const;
  const msg::TensorInfo* FindOutput(const std::string& name) const;

  // Copies `nbytes` bytes into input `name` on the device (once, straight into its storage). The
  // first form sends the input's own shape and dtype. The server refuses an unknown name
  // (NotFound, listing the inputs), another shape or dtype, or another size (InvalidArgument)
  // before it keeps a byte; the session goes on.
  Status SetInput(const std::string& name, const void* data, uint64_t nbytes);
  Status SetInput(const std::string& name, const std::vector<int64_t>& shape, DLDataType dtype,
                  const void* data, uint64_t nbytes);
  // A host tensor (C-ordered CPU memory: a numpy array's) as input `name`, sent from its own
  // memory with its own shape and dtype, which the server checks against the input's.
  // kInvalidArgument for a tensor that is not C-ordered CPU memory, before anything is sent.
  Status SetInputHost(const std::string& name, const DLTensor& host);
  // Runs every node once. `timeout_ms` bounds the whole run (0: the server's call timeout).
  Expected<msg::RunModelReply> Run(uint32_t timeout_ms = 0, uint32_t threads = 0);
  // Copies output `name` (or number `index`) into `data`, which holds `nbytes`: NotFound for a
  // name or index the model lacks, InvalidArgument when nbytes is not the output's size.
  Status GetOutput(const std::string& name, void* data, uint64_t nbytes);
  Status GetOutput(size_t index, void* data, uint64_t nbytes);
  // Output `name` (or number `index`) into a host tensor of its dtype and size, in place.
  Status GetOutputHost(const std::string& name, const DLTensor& host);
  Status GetOutputHost(size_t index, const DLTensor& host);
  // Whole runs under the time evaluator's rules (seconds per run, one entry per round).
  Expected<msg::TimeReply> Time(const TimeOptions& options);
  // Every operator node timed on its own, in graph order, under the same rules.
  Expected<std::vector<msg::NodeProfile>> Profile(const TimeOptions& options,
                                                  uint32_t* threads = nullptr);
  Status Unload();

 private:
  Status GetOutputImpl(const std::string& name, int64_t index, void* data, uint64_t nbytes);
  Status GetOutputHostImpl(const std::string& name, int64_t index, const DLTensor& host);
  std::chrono::milliseconds TimeBudget(const TimeOptions& options, uint64_t calls_per_round) const;

  Session* session_ = nullptr;
  msg::ModelInfo info_;
};

}  // namespace crosstune::client
