// Host tensors in calls and copies (session.h: HostArg, RemoteModule::CallHost / TimeHost,
// RemoteTensor::CopyFromHost / CopyToHost, RemoteModel::SetInputHost / GetOutputHost).
#include <string>
#include <vector>

#include "crosstune/client/remote_model.h"
#include "crosstune/client/session.h"
#include "crosstune/tensor.h"

namespace crosstune::client {

HostArg HostArg::Int(int64_t v) {
  HostArg a;
  a.kind = Kind::kInt;
  a.i = v;
  return a;
}

HostArg HostArg::Float(double v) {
  HostArg a;
  a.kind = Kind::kFloat;
  a.f = v;
  return a;
}

HostArg HostArg::Host(const DLTensor& tensor, bool copy_back) {
  HostArg a;
  a.kind = Kind::kHostTensor;
  a.host = tensor;
  a.copy_back = copy_back;
  return a;
}

HostArg HostArg::Remote(const RemoteTensor& tensor) {
  HostArg a;
  a.kind = Kind::kRemoteTensor;
  a.remote = &tensor;
  return a;
}

namespace {

// The shape of a host tensor, or why it cannot be sent as it lies in memory (`arg` names it).
Expected<std::vector<int64_t>> HostShape(const DLTensor& t, const std::string& arg) {
  if (t.device.device_type != kDLCPU) {
    return Status(ErrorCode::kInvalidArgument, arg + ": not in CPU memory");
  }
  if (t.ndim < 0 || t.ndim > Limits::kMaxTensorRank) {
    return Status(ErrorCode::kInvalidArgument, arg + ": rank " + std::to_string(t.ndim) +
                                                   " (at most " +
                                                   std::to_string(Limits::kMaxTensorRank) + ")");
  }
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  if (t.strides != nullptr) {
    // C order: the last dimension contiguous, each one before it spanning the ones after.
    // A dimension of extent 1 may carry any stride.
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (shape[d] != 1 && t.strides[d] != expected) {
        return Status(ErrorCode::kInvalidArgument,
                      arg + ": not contiguous in C order (a view or a transpose?); copy it first");
      }
      expected *= shape[d];
    }
  }
  if (t.data == nullptr && !shape.empty()) {
    bool empty = false;
    for (int64_t n : shape) empty = empty || n == 0;
    if (!empty) return Status(ErrorCode::kInvalidArgument, arg + ": no data");
  }
  return shape;
}

// The bytes of a host tensor that may be copied into or out of `tensor` as they lie.
Expected<uint64_t> HostCopyBytes(const DLTensor& host, const RemoteTensor& tensor) {
  CT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, HostShape(host, "the host array"));
  CT_ASSIGN_OR_RETURN(uint64_t nbytes, TensorBytes(shape, host.dtype));
  if (!(host.dtype == tensor.dtype()) || nbytes != tensor.nbytes()) {
    return Status(ErrorCode::kInvalidArgument,
                  "the host array is " + ShapeString(shape) + "x" + DTypeName(host.dtype) +
                      ", the tensor " + ShapeString(tensor.shape()) + "x" +
                      DTypeName(tensor.dtype()) + " (the dtype and element count must agree)");
  }
  return nbytes;
}

}  // namespace

Status RemoteTensor::CopyFromHost(const DLTensor& host) {
  CT_ASSIGN_OR_RETURN(uint64_t nbytes, HostCopyBytes(host, *this));
  return CopyFrom(static_cast<const char*>(host.data) + host.byte_offset, nbytes);
}

Status RemoteTensor::CopyToHost(const DLTensor& host) const {
  CT_ASSIGN_OR_RETURN(uint64_t nbytes, HostCopyBytes(host, *this));
  return CopyTo(static_cast<char*>(host.data) + host.byte_offset, nbytes);
}

Status RemoteModel::SetInputHost(const std::string& name, const DLTensor& host) {
  CT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, HostShape(host, "input '" + name + "'"));
  CT_ASSIGN_OR_RETURN(uint64_t nbytes, TensorBytes(shape, host.dtype));
  return SetInput(name, shape, host.dtype, static_cast<const char*>(host.data) + host.byte_offset,
                  nbytes);
}

Status RemoteModel::GetOutputHost(const std::string& name, const DLTensor& host) {
  return GetOutputHostImpl(name, 0, host);
}

Status RemoteModel::GetOutputHost(size_t index, const DLTensor& host) {
  return GetOutputHostImpl("", static_cast<int64_t>(index), host);
}

Status RemoteModel::GetOutputHostImpl(const std::string& name, int64_t index,
                                      const DLTensor& host) {
  const std::string what =
      name.empty() ? "output " + std::to_string(index) : "output '" + name + "'";
  CT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, HostShape(host, "the array for " + what));
  CT_ASSIGN_OR_RETURN(uint64_t nbytes, TensorBytes(shape, host.dtype));
  // The dtype is checked here (the server's header says only the size): a float32 output read
  // into an int32 array of its size would be garbage.
  const msg::TensorInfo* out = nullptr;
  if (!name.empty()) {
    out = FindOutput(name);
  } else if (index >= 0 && static_cast<size_t>(index) < info_.outputs.size()) {
    out = &info_.outputs[static_cast<size_t>(index)];
  }
  if (out != nullptr) {
    auto want = ParseDType(out->dtype);
    if (want.ok() && !(*want == host.dtype)) {
      return Status(ErrorCode::kInvalidArgument,
                    what + " is " + ShapeString(out->shape) + " " + DTypeName(*want) +
                        ", the array " + ShapeString(shape) + " " + DTypeName(host.dtype));
    }
  }
  return GetOutputImpl(name, index, static_cast<char*>(host.data) + host.byte_offset, nbytes);
}

template <typename Reply, typename Fn>
Expected<Reply> RemoteModule::WithHostArgs(const std::vector<HostArg>& args, Fn&& call) {
  if (!session_) return Status(ErrorCode::kInvalidArgument, "module handle is empty");
  // Every host tensor is checked before anything is sent.
  std::vector<std::vector<int64_t>> shapes(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind == HostArg::Kind::kHostTensor) {
      CT_ASSIGN_OR_RETURN(shapes[i], HostShape(args[i].host, "argument " + std::to_string(i)));
    } else if (args[i].kind == HostArg::Kind::kRemoteTensor && args[i].remote == nullptr) {
      return Status(ErrorCode::kInvalidArgument, "argument " + std::to_string(i) + ": no tensor");
    }
  }
  std::vector<RemoteTensor> device(args.size());
  std::vector<bool> allocated(args.size(), false);
  // Frees what was allocated, whatever happens; the first error wins.
  auto free_all = [&](Status status) {
    for (size_t i = 0; i < device.size(); ++i) {
      if (!allocated[i]) continue;
      Status s = device[i].Free();
      if (status.ok() && !s.ok()) status = s;
    }
    return status;
  };
  std::vector<msg::Arg> wire;
  wire.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const HostArg& a = args[i];
    switch (a.kind) {
      case HostArg::Kind::kInt:
        wire.push_back(CallArg::Int(a.i));
        break;
      case HostArg::Kind::kFloat:
        wire.push_back(CallArg::Float(a.f));
        break;
      case HostArg::Kind::kRemoteTensor:
        wire.push_back(CallArg::Tensor(*a.remote));
        break;
      case HostArg::Kind::kHostTensor: {
        auto t = session_->AllocTensor(shapes[i], a.host.dtype);
        if (!t.ok()) return free_all(t.status());
        device[i] = std::move(t).value();
        allocated[i] = true;
        const auto* bytes = static_cast<const char*>(a.host.data) + a.host.byte_offset;
        if (Status s = device[i].CopyFrom(bytes, device[i].nbytes()); !s.ok()) return free_all(s);
        wire.push_back(CallArg::Tensor(device[i]));
        break;
      }
    }
  }
  Expected<Reply> reply = call(wire);
  if (!reply.ok()) return free_all(reply.status());
  for (size_t i = 0; i < args.size(); ++i) {
    const HostArg& a = args[i];
    if (a.kind != HostArg::Kind::kHostTensor || !a.copy_back) continue;
    auto* bytes = static_cast<char*>(a.host.data) + a.host.byte_offset;
    if (Status s = device[i].CopyTo(bytes, device[i].nbytes()); !s.ok()) return free_all(s);
  }
  if (Status s = free_all(Status::Ok()); !s.ok()) return s;
  return reply;
}

Expected<msg::CallReply> RemoteModule::CallHost(const std::string& function,
                                                const std::vector<HostArg>& args,
                                                uint32_t timeout_ms, uint32_t threads) {
  return WithHostArgs<msg::CallReply>(args, [&](const std::vector<msg::Arg>& wire) {
    return Call(function, wire, timeout_ms, threads);
  });
}

Expected<msg::TimeReply> RemoteModule::TimeHost(const std::string& function,
                                                const std::vector<HostArg>& args,
                                                const TimeOptions& options) {
  return WithHostArgs<msg::TimeReply>(
      args, [&](const std::vector<msg::Arg>& wire) { return Time(function, wire, options); });
}

}  // namespace crosstune::client
