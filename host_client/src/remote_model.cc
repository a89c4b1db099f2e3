// The client side of the server's graph executor (remote_model.h).
#include "crosstune/client/remote_model.h"

#include <algorithm>

#include "crosstune/graph.h"
#include "crosstune/tensor.h"
#include "crosstune/wire.h"
#include "session_request.h"

namespace crosstune::client {
namespace {

using std::chrono::milliseconds;

// The per-node table of a profile; far above any real network's.
constexpr uint64_t kMaxProfileBytes = uint64_t{64} << 20;

}  // namespace

Expected<RemoteModel> RemoteModel::Load(Session* session, const std::string& remote_path) {
  if (session == nullptr) return Status(ErrorCode::kInvalidArgument, "no session");
  CT_ASSIGN_OR_RETURN(
      msg::ModelInfo info,
      session->Request<msg::ModelInfo>(Opcode::kLoadModel, msg::LoadModuleRequest{remote_path}));
  RemoteModel m;
  m.session_ = session;
  m.info_ = std::move(info);
  return m;
}

const msg::TensorInfo* RemoteModel::FindInput(const std::string& name) const {
  for (const auto& p : info_.inputs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

const msg::TensorInfo* RemoteModel::FindOutput(const std::string& name) const {
  for (const auto& p : info_.outputs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Status RemoteModel::SetInput(const std::string& name, const void* data, uint64_t nbytes) {
  // An unknown name goes to the server as it is: the server's refusal is the one that counts.
  const msg::TensorInfo* in = FindInput(name);
  if (in == nullptr) {
    return SetInput(name, {}, DLDataType{kDLFloat, 32, 1}, data, nbytes);
  }
  return SetInput(name, in->shape, *ParseDType(in->dtype), data, nbytes);
}

Status RemoteModel::SetInput(const std::string& name, const std::vector<int64_t>& shape,
                             DLDataType dtype, const void* data, uint64_t nbytes) {
  if (session_ == nullptr) return Status(ErrorCode::kInvalidArgument, "model handle is empty");
  // Name, shape, dtype and size are the server's to check: it refuses before it keeps a byte.
  msg::SetInputRequest req{info_.model_id, name, shape, graph::TvmDTypeName(dtype), nbytes};
  Session::CopyStats& stats = session_->copy_stats_;
  stats.copies_in++;
  stats.bytes_in += nbytes;
  stats.last_in_source = data;
  Channel& ch = session_->channel_;
  return session_
      ->RequestWithBytes<msg::Empty>(
          Opcode::kSetInput, req, nbytes,
          [&](Deadline deadline) { return ch.WriteBytes(data, nbytes, deadline); })
      .status();
}

Expected<msg::RunModelReply> RemoteModel::Run(uint32_t timeout_ms, uint32_t threads) {
  if (session_ == nullptr) return Status(ErrorCode::kInvalidArgument, "model handle is empty");
  msg::RunModelRequest req{info_.model_id, timeout_ms, threads};
  // The run's own time comes on top of the request timeout.
  auto extra = timeout_ms ? milliseconds(timeout_ms) : session_->options_.request_timeout;
  return session_->Request<msg::RunModelReply>(Opcode::kRunModel, req, extra);
}

Status RemoteModel::GetOutput(const std::string& name, void* data, uint64_t nbytes) {
  return GetOutputImpl(name, 0, data, nbytes);
}

Status RemoteModel::GetOutput(size_t index, void* data, uint64_t nbytes) {
  return GetOutputImpl("", static_cast<int64_t>(index), data, nbytes);
}

Status RemoteModel::GetOutputImpl(const std::string& name, int64_t index, void* data,
                                  uint64_t nbytes) {
  if (session_ == nullptr) return Status(ErrorCode::kInvalidArgument, "model handle is empty");
  // The server names unknown outputs; its header says how many bytes follow.
  CT_ASSIGN_OR_RETURN(msg::TensorInfo header,
                      session_->Request<msg::TensorInfo>(
                          Opcode::kGetOutput, msg::GetOutputRequest{info_.model_id, name, index},
                          milliseconds(nbytes / 1024)));
  Channel& ch = session_->channel_;
  const Deadline deadline =
      DeadlineIn(session_->options_.request_timeout + milliseconds(header.nbytes / 1024));
  if (header.nbytes != nbytes) {
    // The bytes are on their way: read past them so the session stays in step.
    if (!ch.Discard(header.nbytes, deadline).ok()) ch.Close();
    return Status(ErrorCode::kInvalidArgument,
                  "output '" + header.name + "' is " + ShapeString(header.shape) + " " +
                      header.dtype + " (" + std::to_string(header.nbytes) +
                      " bytes), the buffer holds " + std::to_string(nbytes));
  }
  // Straight from the socket into the caller's buffer.
  Session::CopyStats& stats = session_->copy_stats_;
  stats.copies_out++;
  stats.bytes_out += nbytes;
  stats.last_out_destination = data;
  Status s = ch.ReadBytes(data, nbytes, deadline);
  if (!s.ok()) ch.Close();
  return s;
}

std::chrono::milliseconds RemoteModel::TimeBudget(const TimeOptions& options,
                                                  uint64_t calls_per_round) const {
  // Warm-up plus every round (min_repeat_ms can make a round re-run a few times), each bounded by
  // the device's per-call limit; the server enforces that, this only keeps the client from giving
  // up first.
  milliseconds per_call =
      options.timeout_ms ? milliseconds(options.timeout_ms) : session_->options_.request_timeout;
  const TimingOptions& t = options.timing;
  uint64_t calls = uint64_t{t.repeat} * (uint64_t{t.number} + 4) * calls_per_round;
  return per_call * (1 + std::min<uint64_t>(calls, 1'000'000)) +
         milliseconds(uint64_t{t.repeat} * calls_per_round *
                      (t.cooldown_ms + 4ull * t.min_repeat_ms));
}

static msg::TimeModelRequest TimeRequest(uint32_t model_id, const TimeOptions& o) {
  return msg::TimeModelRequest{model_id, o.timing, o.timeout_ms, o.threads};
}

Expected<msg::TimeReply> RemoteModel::Time(const TimeOptions& options) {
  if (session_ == nullptr) return Status(ErrorCode::kInvalidArgument, "model handle is empty");
  // The reply comes after the rounds: polling for it would only compete with the run.
  session_->channel_.SkipBusyPollOnce();
  return session_->Request<msg::TimeReply>(Opcode::kTimeModel, TimeRequest(info_.model_id, options),
                                           TimeBudget(options, 1));
}

Expected<std::vector<msg::NodeProfile>> RemoteModel::Profile(const TimeOptions& options,
                                                             uint32_t* threads) {
  if (session_ == nullptr) return Status(ErrorCode::kInvalidArgument, "model handle is empty");
  session_->channel_.SkipBusyPollOnce();
  CT_ASSIGN_OR_RETURN(msg::ProfileHeader header,
                      session_->Request<msg::ProfileHeader>(
                          Opcode::kProfileModel, TimeRequest(info_.model_id, options),
                          TimeBudget(options, std::max(info_.nodes, 1u))));
  Channel& ch = session_->channel_;
  if (header.body_bytes > kMaxProfileBytes) {
    ch.Close();
    return Status(ErrorCode::kLimitExceeded,
                  "the server's profile is " + std::to_string(header.body_bytes) +
                      " bytes, over the client's limit of " + std::to_string(kMaxProfileBytes));
  }
  std::string body(static_cast<size_t>(header.body_bytes), '\0');
  Status s = ch.ReadBytes(
      body.data(), body.size(),
      DeadlineIn(session_->options_.request_timeout + milliseconds(header.body_bytes / 1024)));
  if (!s.ok()) {
    ch.Close();
    return s;
  }
  std::vector<msg::NodeProfile> nodes;
  try {
    msgpack::object_handle oh = msgpack::unpack(body.data(), body.size());
    oh.get().convert(nodes);
  } catch (const std::exception& e) {
    return Status(ErrorCode::kProtocolError, std::string("malformed profile: ") + e.what());
  }
  if (nodes.size() != header.nodes) {
    return Status(ErrorCode::kProtocolError, "profile lists " + std::to_string(nodes.size()) +
                                                 " nodes, its header " +
                                                 std::to_string(header.nodes));
  }
  if (threads != nullptr) *threads = header.threads;
  return nodes;
}

Status RemoteModel::Unload() {
  if (session_ == nullptr) return Status(ErrorCode::kInvalidArgument, "model handle is empty");
  Status s =
      session_->Request<msg::Empty>(Opcode::kUnloadModel, msg::ModelRef{info_.model_id}).status();
  if (s.ok()) session_ = nullptr;
  return s;
}

}  // namespace crosstune::client
