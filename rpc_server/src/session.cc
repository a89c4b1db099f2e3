#include "crosstune/server/session.h"

#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>

#include "crosstune/channel.h"
#include "crosstune/cpus.h"
#include "crosstune/crypto.h"
#include "crosstune/handshake.h"
#include "crosstune/server/call_slot.h"
#include "crosstune/server/device_info.h"
#include "crosstune/server/graph_executor.h"
#include "crosstune/server/module.h"
#include "crosstune/server/parallel_pool.h"
#include "crosstune/server/tensor_store.h"
#include "crosstune/server/time_evaluator.h"
#include "crosstune/server/workspace.h"
#include "crosstune/tensor.h"
#include "crosstune/text.h"
#include "crosstune/wire.h"
#include "cuda_backend.h"
#include "package_loader.h"
#include "receive_file.h"

namespace crosstune::server {
namespace {

using std::chrono::milliseconds;

// A refused bulk body this small is read and dropped so the session goes on; a larger one ends
// the session instead (reading gigabytes only to discard them helps nobody).
constexpr uint64_t kMaxDiscardBytes = uint64_t{256} << 20;

// Reply sent, or the transport broke (then the session ends).
using Outcome = Status;

class SessionHandler : public SessionRequestIo {
 public:
  SessionHandler(Channel channel, Workspace workspace, const SessionOptions& options,
                 CallSlot* slot)
      : ch_(std::move(channel)),
        ws_(std::move(workspace)),
        options_(options),
        slot_(slot),
        tensors_(options.max_tensor_bytes),
        default_threads_(options.threads ? static_cast<int>(options.threads) : UsableCpus()),
        pool_(options.max_threads ? static_cast<int>(options.max_threads)
                                  : std::max(UsableCpus(), default_threads_)) {
    // A forked session keeps its call timer armed across calls (call_slot.h), so a call costs
    // no timer system calls; without a slot (tests, in-process) the timer is set per call.
    lazy_timer_ = options_.guard_calls && slot_ != nullptr;
    if (lazy_timer_) InstallCallTimer(slot_);
    RegisterDefaultLoaders(loaders_);
    if (options_.add_loaders) options_.add_loaders(loaders_);
    if (options_.session_timeout.count() > 0) {
      session_deadline_ = Clock::now() + options_.session_timeout;
    }
  }

  Status Serve(const std::string& session_id) {
    ServerHandshakeOptions hs{options_.auth_secret, session_id, options_.accept_hello};
    auto hello = ServerHandshake(ch_, hs, DeadlineIn(options_.handshake_timeout));
    if (!hello.ok()) return hello.status();
    if (slot_) slot_->handshaken.store(1, std::memory_order_release);
    spdlog::info("session {}: {} connected", session_id, EscapeForLog(hello->peer_name));
    ch_.set_busy_poll(options_.busy_poll);
    for (;;) {
      // A client that sends nothing for the idle timeout gives its slot back.
      Deadline idle_deadline =
          options_.idle_timeout.count() > 0
              ? std::min(Clock::now() + options_.idle_timeout, session_deadline_)
              : session_deadline_;
      auto frame = ch_.ReadFrame(idle_deadline);
      if (!frame.ok()) {
        const Status& s = frame.status();
        if (s.code() == ErrorCode::kDisconnected) return Status::Ok();
        if (s.code() == ErrorCode::kTimeout && Clock::now() < session_deadline_) {
          Status t(ErrorCode::kTimeout, "session idle for " +
                                            std::to_string(options_.idle_timeout.count() / 1000) +
                                            " s (the server's --idle-timeout)");
          (void)ch_.SendError(0, t, DeadlineIn(milliseconds(500)));
          return t;
        }
        if (s.code() == ErrorCode::kTimeout) {
          Status t(ErrorCode::kTimeout,
                   "session ran past its " +
                       std::to_string(options_.session_timeout.count() / 1000) + " s limit");
          (void)ch_.SendError(0, t, DeadlineIn(milliseconds(500)));
          return t;
        }
        // Garbage or an oversize frame: we cannot find the next frame boundary, so say why and
        // close.
        (void)ch_.SendError(0, s, DeadlineIn(milliseconds(500)));
        return s;
      }
      bool done = false;
      Status st = Dispatch(*frame, &done);
      if (!st.ok()) return st;
      if (done) return Status::Ok();
    }
  }

  // After a fatal error: the client may still be sending (the rest of a garbage stream, a refused
  // body). Closing with unread bytes would answer with a reset that can destroy the error frame
  // before the client reads it, so stop sending and read until the client closes, for a second.
  void LingerBeforeClose() {
    if (!ch_.is_open()) return;
    ::shutdown(ch_.fd(), SHUT_WR);
    char buf[4096];
    Deadline until = DeadlineIn(milliseconds(1000));
    while (ch_.ReadBytes(buf, 1, until).ok()) {
      while (::recv(ch_.fd(), buf, sizeof(buf), MSG_DONTWAIT) > 0) {
      }
    }
  }

 private:
  template <typename T>
  Outcome Reply(uint32_t id, const T& value) {
    Status sent = ch_.Send(Opcode::kResult, id, value, IoDeadline());
    // Too large for a frame (the channel sent nothing): the client hears why instead.
    if (sent.code() == ErrorCode::kLimitExceeded) return ReplyError(id, sent);
    return sent;
  }
  Outcome ReplyError(uint32_t id, const Status& s) { return ch_.SendError(id, s, IoDeadline()); }
  template <typename T>
  Outcome ReplyOr(uint32_t id, const Expected<T>& v) {
    return v.ok() ? Reply(id, *v) : ReplyError(id, v.status());
  }
  Outcome ReplyStatus(uint32_t id, const Status& s) {
    return s.ok() ? Reply(id, msg::Empty{}) : ReplyError(id, s);
  }

  // After refusing a request whose body bytes are already on their way: drop them so the stream
  // stays in step, or end the session when there are too many.
  Outcome RefuseBody(uint32_t id, const Status& why, uint64_t body_bytes) {
    CT_RETURN_IF_ERROR(ReplyError(id, why));
    if (body_bytes > kMaxDiscardBytes) {
      return Status(why.code(), why.message() + " (connection closed rather than reading " +
                                    std::to_string(body_bytes) + " refused bytes)");
    }
    return ch_.Discard(body_bytes, IoDeadline(body_bytes));
  }

  // SessionRequestIo, for SessionOptions::handle_request.
  Channel& channel() override { return ch_; }
  Deadline IoDeadline(uint64_t bytes = 0) const override {
    // The io timeout plus a floor rate of 1 MiB/s for bulk bytes, never past the session's end.
    Deadline d = Clock::now() + options_.io_timeout + milliseconds(bytes / 1024);
    return std::min(d, session_deadline_);
  }
  void BeginGuarded(uint32_t request_id, const std::string& what, uint32_t limit_ms) override {
    GuardBegin(request_id, what, limit_ms, 1, false);
  }
  void EndGuarded(uint32_t limit_ms) override { GuardEnd(limit_ms); }
  const std::string& workspace_dir() const override { return ws_.root(); }

  Status Dispatch(const Frame& f, bool* done) {
    const uint32_t id = f.request_id;
    if (slot_) slot_->request_id = id;
    if (options_.handle_request) {
      if (std::optional<Status> handled = options_.handle_request(f, *this)) return *handled;
    }
    switch (f.op) {
      case Opcode::kPing:
        return Reply(id, msg::Empty{});
      case Opcode::kClose:
        *done = true;
        return Reply(id, msg::Empty{});
      case Opcode::kInfo:
        if (!info_) {
          info_ = options_.info ? *options_.info : CollectDeviceInfo();
          info_->max_tensor_bytes = options_.max_tensor_bytes;
        }
        return Reply(id, *info_);
      default:
        break;
    }
    if (options_.device_requests) return DispatchDeviceRequest(f);
    return RefuseRequest(f);
  }

  Outcome RefuseRequest(const Frame& f) {
    uint16_t op = static_cast<uint16_t>(f.op);
    std::string what = IsKnownOpcode(op) ? std::string(OpcodeName(f.op)) + " (opcode " +
                                               std::to_string(op) + ") is not a session request" +
                                               (options_.device_requests ? "" : " here")
                                         : "unknown opcode " + std::to_string(op);
    return ReplyError(f.request_id, Status(ErrorCode::kProtocolError, what));
  }

  // Files, modules, calls, tensors and models: what a device serves.
  Status DispatchDeviceRequest(const Frame& f) {
    const uint32_t id = f.request_id;
    switch (f.op) {
      case Opcode::kUpload:
        return HandleUpload(f);
      case Opcode::kDownload:
        return HandleDownload(f);
      case Opcode::kListFiles:
        return HandleListFiles(f);
      case Opcode::kRemoveFile: {
        auto ref = f.As<msg::FileRef>();
        if (!ref.ok()) return ReplyError(id, ref.status());
        return ReplyStatus(id, ws_.Remove(ref->path));
      }
      case Opcode::kLoadModule:
        return HandleLoad(f);
      case Opcode::kUnloadModule: {
        auto ref = f.As<msg::ModuleRef>();
        if (!ref.ok()) return ReplyError(id, ref.status());
        if (modules_.erase(ref->module_id) == 0) {
          return ReplyError(
              id, Status(ErrorCode::kNotFound, "no module " + std::to_string(ref->module_id)));
        }
        return Reply(id, msg::Empty{});
      }
      case Opcode::kListFunctions: {
        auto ref = f.As<msg::ModuleRef>();
        if (!ref.ok()) return ReplyError(id, ref.status());
        auto m = FindModule(ref->module_id);
        if (!m.ok()) return ReplyError(id, m.status());
        return Reply(id, Describe(ref->module_id, **m));
      }
      case Opcode::kCall:
        return HandleCall(f);
      case Opcode::kTimeCall:
        return HandleTime(f);
      case Opcode::kTensorAlloc: {
        auto req = f.As<msg::TensorAllocRequest>();
        if (!req.ok()) return ReplyError(id, req.status());
        return ReplyOr(id, tensors_.Alloc(*req));
      }
      case Opcode::kTensorFree: {
        auto ref = f.As<msg::TensorRef>();
        if (!ref.ok()) return ReplyError(id, ref.status());
        return ReplyStatus(id, tensors_.Free(ref->tensor_id));
      }
      case Opcode::kTensorCopyIn:
        return HandleCopyIn(f);
      case Opcode::kTensorCopyOut:
        return HandleCopyOut(f);
      case Opcode::kLoadModel:
        return HandleLoadModel(f);
      case Opcode::kUnloadModel: {
        auto ref = f.As<msg::ModelRef>();
        if (!ref.ok()) return ReplyError(id, ref.status());
        if (models_.erase(ref->model_id) == 0) {
          return ReplyError(
              id, Status(ErrorCode::kNotFound, "no model " + std::to_string(ref->model_id)));
        }
        return Reply(id, msg::Empty{});
      }
      case Opcode::kSetInput:
        return HandleSetInput(f);
      case Opcode::kRunModel:
        return HandleRunModel(f);
      case Opcode::kGetOutput:
        return HandleGetOutput(f);
      case Opcode::kTimeModel:
        return HandleTimeModel(f);
      case Opcode::kProfileModel:
        return HandleProfileModel(f);
      default:
        break;
    }
    return RefuseRequest(f);
  }

  // --- Files ----------------------------------------------------------------------------------

  // Whether `size` more bytes at `path` (replacing what is there) fit the workspace quota: the
  // workspace's running total (Workspace::stored_bytes), not a walk over its files.
  Status CheckWorkspaceQuota(const std::string& path, uint64_t size) {
    const uint64_t used = ws_.StoredBytesBesides(path);
    const uint64_t limit = options_.max_workspace_bytes;
    if (size > limit || used > limit - size) {
      return Status(ErrorCode::kLimitExceeded,
                    "upload of '" + path + "' (" + std::to_string(size) +
                        " bytes) would fill the session's workspace past its limit of " +
                        std::to_string(limit) + " bytes (" + std::to_string(used) +
                        " in use; --max-workspace-bytes); remove files first");
    }
    return Status::Ok();
  }

  Outcome HandleUpload(const Frame& f) {
    auto req = f.As<msg::UploadRequest>();
    // Without a readable header we do not know how many bytes follow: the stream is lost.
    if (!req.ok()) {
      (void)ReplyError(f.request_id, req.status());
      return req.status();
    }
    if (req->size > options_.max_upload_bytes) {
      return RefuseBody(
          f.request_id,
          Status(ErrorCode::kLimitExceeded,
                 "upload of '" + req->path + "' is " + std::to_string(req->size) +
                     " bytes, over the server's limit of " +
                     std::to_string(options_.max_upload_bytes) + " (--max-upload-bytes)"),
          req->size);
    }
    if (Status quota = CheckWorkspaceQuota(req->path, req->size); !quota.ok()) {
      return RefuseBody(f.request_id, quota, req->size);
    }
    auto pending = ws_.CreateTemp(req->path);
    if (!pending.ok()) return RefuseBody(f.request_id, pending.status(), req->size);
    Sha256 sha;
    bool in_step = false;
    Status recv =
        ReceiveFile(ch_, pending->fd.get(), req->size, IoDeadline(req->size), &sha, &in_step);
    if (!recv.ok()) {
      ws_.Abort(*pending);
      if (!in_step) return recv;
      // The disk failed, not the connection: every byte was read, so answer and go on.
      return ReplyError(f.request_id, Status(ErrorCode::kIoError,
                                             "upload of '" + req->path + "': " + recv.message()));
    }
    std::string hex = sha.FinalHex();
    std::string want = req->sha256_hex;
    std::transform(want.begin(), want.end(), want.begin(), ::tolower);
    if (!want.empty() && want != hex) {
      ws_.Abort(*pending);
      return ReplyError(
          f.request_id,
          Status(ErrorCode::kBadHash, "upload of '" + req->path + "': SHA-256 mismatch, received " +
                                          hex + ", expected " + want + "; nothing kept"));
    }
    ws_.RememberHash(pending->fd.get(), pending->normalized, hex);
    Status commit = ws_.Commit(*pending);
    if (!commit.ok()) return ReplyError(f.request_id, commit);
    return Reply(f.request_id, msg::FileEntry{pending->normalized, req->size, hex});
  }

  // Sorted by path. Paged for a client that asks (each page well under the frame limit);
  // everything at once for one that does not, refused by Reply when it does not fit a frame.
  Outcome HandleListFiles(const Frame& f) {
    auto req = f.As<msg::ListFilesRequest>();
    if (!req.ok()) return ReplyError(f.request_id, req.status());
    auto files = ws_.List();
    if (!files.ok()) return ReplyError(f.request_id, files.status());
    auto by_path = [](const msg::FileEntry& a, const msg::FileEntry& b) { return a.path < b.path; };
    std::sort(files->begin(), files->end(), by_path);
    auto it = files->begin();
    if (!req->after.empty()) {
      it = std::upper_bound(files->begin(), files->end(), msg::FileEntry{req->after, 0, ""},
                            by_path);
    }
    constexpr size_t kPageBytes = Limits::kMaxFrameBytes / 4;
    msg::FileList reply;
    size_t bytes = 0;
    for (; it != files->end(); ++it) {
      // An entry's encoding: its strings and a few bytes of msgpack headers and size.
      size_t entry = it->path.size() + it->sha256_hex.size() + 32;
      if (req->paged && !reply.files.empty() && bytes + entry > kPageBytes) {
        reply.more = true;
        break;
      }
      bytes += entry;
      reply.files.push_back(std::move(*it));
    }
    return Reply(f.request_id, reply);
  }

  Outcome HandleDownload(const Frame& f) {
    auto ref = f.As<msg::FileRef>();
    if (!ref.ok()) return ReplyError(f.request_id, ref.status());
    auto file = ws_.OpenForRead(ref->path);
    if (!file.ok()) return ReplyError(f.request_id, file.status());
    auto hex = ws_.HashOf(file->fd.get(), file->normalized);
    if (!hex.ok()) return ReplyError(f.request_id, hex.status());
    CT_RETURN_IF_ERROR(Reply(f.request_id, msg::FileEntry{file->normalized, file->size, *hex}));
    // The header promised `size` bytes; if the file cannot deliver them the stream is broken
    // and the session ends.
    return ch_.SendFromFd(file->fd.get(), file->size, IoDeadline(file->size));
  }

  // --- Modules and calls ------------------------------------------------------------------------

  struct LoadedModule {
    std::unique_ptr<Module> module;
    std::string path;
  };

  Expected<Module*> FindModule(uint32_t id) {
    auto it = modules_.find(id);
    if (it == modules_.end()) {
      return Status(ErrorCode::kNotFound, "no module " + std::to_string(id) + " in this session");
    }
    return it->second.module.get();
  }

  static msg::ModuleInfo Describe(uint32_t id, const Module& m) {
    return msg::ModuleInfo{id, m.target(), m.functions(), std::string(m.kind())};
  }

  // What a loader is given for workspace file `path`, opened (the file must outlive the request).
  LoadRequest MakeLoadRequest(const std::string& path, const Workspace::OpenFile& file) {
    LoadRequest lr;
    lr.display_name = path;
    lr.abs_path = file.abs_path;
    lr.fd = file.fd.get();
    lr.workspace = &ws_;
    lr.runtime = pool_.runtime();
    char head[64];
    ssize_t n = ::pread(lr.fd, head, sizeof(head), 0);
    lr.head.assign(head, n > 0 ? static_cast<size_t>(n) : 0);
    return lr;
  }

  // Loading runs the library's constructors and its crosstune_module_v1(): uploaded code, under
  // the same limit and watchdog as a call.
  template <typename LoadFn>
  auto GuardedLoad(uint32_t request_id, const std::string& name, LoadFn&& load) {
    uint32_t limit = static_cast<uint32_t>(
        std::min<int64_t>(options_.call_timeout.count(), std::numeric_limits<uint32_t>::max()));
    if (slot_) slot_->BeginLoad(request_id, name, limit);
    StartTimer(limit);
    auto result = load();
    StopTimer(limit);
    if (slot_) slot_->End();
    return result;
  }

  Outcome HandleLoad(const Frame& f) {
    auto req = f.As<msg::LoadModuleRequest>();
    if (!req.ok()) return ReplyError(f.request_id, req.status());
    auto file = ws_.OpenForRead(req->path);
    if (!file.ok()) return ReplyError(f.request_id, file.status());
    LoadRequest lr = MakeLoadRequest(req->path, *file);
    auto module = GuardedLoad(f.request_id, req->path, [&] { return loaders_.Load(lr); });
    if (!module.ok()) return ReplyError(f.request_id, module.status());
    uint32_t id = next_module_id_++;
    msg::ModuleInfo info = Describe(id, **module);
    modules_[id] = LoadedModule{std::move(module).value(), file->normalized};
    spdlog::debug("loaded '{}' as module {} ({} functions)", EscapeForLog(req->path), id,
                  info.functions.size());
    return Reply(f.request_id, info);
  }

  // Resolves a call's module, function and arguments into packed args (in args_).
  Expected<size_t> Prepare(const msg::CallRequest& call, Module** module) {
    CT_ASSIGN_OR_RETURN(*module, FindModule(call.module_id));
    const auto& fns = (*module)->functions();
    size_t index = fns.size();
    for (size_t i = 0; i < fns.size(); ++i) {
      if (fns[i].name == call.function) {
        index = i;
        break;
      }
    }
    if (index == fns.size()) {
      std::string names;
      for (const auto& fn : fns) names += (names.empty() ? "" : ", ") + fn.name;
      return Status(ErrorCode::kNotFound, "module " + std::to_string(call.module_id) +
                                              " has no function '" + call.function +
                                              "' (it has: " + names + ")");
    }
    if (call.args.size() > static_cast<size_t>(Limits::kMaxCallArgs)) {
      return Status(ErrorCode::kLimitExceeded, "too many arguments");
    }
    CT_RETURN_IF_ERROR(CheckSignature(call.function, fns[index].signature, call.args));
    args_.resize(call.args.size());
    for (size_t i = 0; i < call.args.size(); ++i) {
      const msg::Arg& a = call.args[i];
      ct_arg& out = args_[i];
      out.reserved = 0;
      switch (static_cast<msg::ArgKind>(a.kind)) {
        case msg::ArgKind::kInt64:
          out.kind = CT_ARG_INT64;
          out.value.v_int64 = a.i;
          break;
        case msg::ArgKind::kFloat64:
          out.kind = CT_ARG_FLOAT64;
          out.value.v_float64 = a.f;
          break;
        case msg::ArgKind::kTensor: {
          CT_ASSIGN_OR_RETURN(DLTensor * t, tensors_.Get(a.tensor_id));
          out.kind = CT_ARG_TENSOR;
          out.value.v_tensor = t;
          break;
        }
      }
    }
    return index;
  }

  // Sizes the pool for a call: its own count, or the session's default.
  Status SetCallThreads(const msg::CallRequest& call) {
    if (call.threads > static_cast<uint32_t>(pool_.max_threads())) {
      return Status(ErrorCode::kInvalidArgument,
                    "threads must be 1.." + std::to_string(pool_.max_threads()) +
                        " on this server (its --max-threads), not " + std::to_string(call.threads));
    }
    pool_.SetThreads(call.threads ? static_cast<int>(call.threads) : default_threads_);
    return Status::Ok();
  }

  uint32_t CallLimitMs(const msg::CallRequest& call) const {
    return call.timeout_ms ? call.timeout_ms : static_cast<uint32_t>(options_.call_timeout.count());
  }

  // Runs `times` calls under the watchdog: the page says what runs, the timer kills the process if
  // it runs too long, and the parent turns either death into the client's answer.
  Status Guarded(uint32_t request_id, const std::string& fn, uint32_t limit_ms, uint64_t times,
                 bool timing, Module* m, size_t index, int32_t* ret) {
    GuardBegin(request_id, fn, limit_ms, times, timing);
    Status s = m->Invoke(index, args_.data(), static_cast<int32_t>(args_.size()), times, ret);
    GuardEnd(limit_ms);
    return s;
  }
  void GuardBegin(uint32_t request_id, const std::string& fn, uint32_t limit_ms, uint64_t times,
                  bool timing) {
    if (slot_) slot_->Begin(request_id, fn, limit_ms, times, timing);
    StartTimer(uint64_t{limit_ms} * times);
  }
  void GuardEnd(uint32_t limit_ms) {
    StopTimer(limit_ms);
    if (slot_) slot_->End();
  }
  // After slot_->Begin: the watchdog for a limit of `ms` (0: none).
  void StartTimer(uint64_t ms) {
    if (!options_.guard_calls || ms == 0) return;
    if (lazy_timer_ && slot_ != nullptr) {  // lazy_timer_ implies a slot
      StartCallTimer(*slot_);
    } else {
      ArmCallTimer(ms);
    }
  }
  void StopTimer(uint64_t ms) {
    if (options_.guard_calls && ms != 0 && !lazy_timer_) ArmCallTimer(0);
  }

  Status KernelError(Module* m, const std::string& fn, int32_t ret) {
    std::string text = m->LastError();
    return Status(ErrorCode::kKernelError, "kernel '" + fn + "' returned " + std::to_string(ret) +
                                               (text.empty() ? "" : ": " + text));
  }

  Outcome HandleCall(const Frame& f) {
    auto call = f.As<msg::CallRequest>();
    if (!call.ok()) return ReplyError(f.request_id, call.status());
    Module* m = nullptr;
    auto index = Prepare(*call, &m);
    if (!index.ok()) return ReplyError(f.request_id, index.status());
    if (Status bad = SetCallThreads(*call); !bad.ok()) return ReplyError(f.request_id, bad);
    int32_t ret = 0;
    auto t0 = Clock::now();
    Status s = Guarded(f.request_id, call->function, CallLimitMs(*call), 1, false, m, *index, &ret);
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!s.ok()) return ReplyError(f.request_id, s);
    if (ret != 0) return ReplyError(f.request_id, KernelError(m, call->function, ret));
    return Reply(f.request_id,
                 msg::CallReply{ret, seconds, static_cast<uint32_t>(pool_.threads())});
  }

  // Checked before anything is sized by them.
  static Status CheckTiming(const TimingOptions& r) {
    if (r.repeat == 0 || r.repeat > Limits::kMaxTimeRepeat) {
      return Status(ErrorCode::kInvalidArgument, "repeat must be 1.." +
                                                     std::to_string(Limits::kMaxTimeRepeat) +
                                                     ", not " + std::to_string(r.repeat));
    }
    if (r.min_repeat_ms > Limits::kMaxTimeRoundMs || r.cooldown_ms > Limits::kMaxTimeRoundMs) {
      return Status(ErrorCode::kInvalidArgument, "min_repeat_ms and cooldown_ms must be at most " +
                                                     std::to_string(Limits::kMaxTimeRoundMs));
    }
    return Status::Ok();
  }

  // The host memory of a call's tensor arguments.
  std::vector<std::span<const char>> CallData(const msg::CallRequest& call) const {
    std::vector<std::span<const char>> out;
    for (const msg::Arg& a : call.args) {
      if (static_cast<msg::ArgKind>(a.kind) == msg::ArgKind::kTensor) {
        out.push_back(tensors_.HostBytes(a.tensor_id));
      }
    }
    return out;
  }

  Outcome HandleTime(const Frame& f) {
    auto req = f.As<msg::TimeRequest>();
    if (!req.ok()) return ReplyError(f.request_id, req.status());
    if (Status bad = CheckTiming(req->timing); !bad.ok()) return ReplyError(f.request_id, bad);
    Module* m = nullptr;
    auto index = Prepare(req->call, &m);
    if (!index.ok()) return ReplyError(f.request_id, index.status());
    if (Status bad = SetCallThreads(req->call); !bad.ok()) return ReplyError(f.request_id, bad);
    const std::string& fn = req->call.function;
    int32_t ret = 0;
    auto result = Evaluate(
        f.request_id, fn, req->timing, CallLimitMs(req->call),
        [&](uint64_t n) {
          CT_RETURN_IF_ERROR(
              m->Invoke(*index, args_.data(), static_cast<int32_t>(args_.size()), n, &ret));
          if (ret != 0) return KernelError(m, fn, ret);
          return Status::Ok();
        },
        CallData(req->call), {},
        std::isfinite(req->stop_above_s) ? std::max(0.0, req->stop_above_s) : 0.0);
    if (!result.ok()) return ReplyError(f.request_id, result.status());
    msg::TimeReply reply;
    reply.seconds_per_call = std::move(result->seconds_per_call);
    reply.number = static_cast<uint32_t>(std::min<uint64_t>(result->number, UINT32_MAX));
    reply.threads = static_cast<uint32_t>(pool_.threads());
    reply.stopped_early = result->stopped_early;
    return Reply(f.request_id, reply);
  }

  // --- Tensors --------------------------------------------------------------------------------

  Outcome HandleCopyIn(const Frame& f) {
    auto req = f.As<msg::TensorCopy>();
    if (!req.ok()) {
      (void)ReplyError(f.request_id, req.status());
      return req.status();
    }
    auto dst = tensors_.Range(req->tensor_id, req->offset, req->nbytes);
    if (!dst.ok()) return RefuseBody(f.request_id, dst.status(), req->nbytes);
    Deadline deadline = IoDeadline(req->nbytes);
    if (!dst->on_gpu) {
      // Straight from the socket into tensor memory.
      CT_RETURN_IF_ERROR(ch_.ReadBytes(dst->data, req->nbytes, deadline));
      return Reply(f.request_id, msg::Empty{});
    }
    // Device memory: through a host staging chunk. A failed copy still reads every byte so the
    // stream stays in step.
    Status copy;
    for (uint64_t done = 0; done < req->nbytes;) {
      size_t n =
          static_cast<size_t>(std::min<uint64_t>(req->nbytes - done, StagingBuffer().size()));
      CT_RETURN_IF_ERROR(ch_.ReadBytes(staging_.data(), n, deadline));
      if (copy.ok()) copy = CudaCopyToDevice(dst->data + done, staging_.data(), n);
      done += n;
    }
    return copy.ok() ? Reply(f.request_id, msg::Empty{}) : ReplyError(f.request_id, copy);
  }

  Outcome HandleCopyOut(const Frame& f) {
    auto req = f.As<msg::TensorCopy>();
    if (!req.ok()) return ReplyError(f.request_id, req.status());
    auto src = tensors_.Range(req->tensor_id, req->offset, req->nbytes);
    if (!src.ok()) return ReplyError(f.request_id, src.status());
    Deadline deadline = IoDeadline(req->nbytes);
    if (!src->on_gpu) {
      CT_RETURN_IF_ERROR(Reply(f.request_id, *req));
      return ch_.WriteBytes(src->data, req->nbytes, deadline);
    }
    // The first chunk is fetched before the header so a failing device is a clean error; a failure
    // after the header has promised bytes can only end the session.
    size_t first = static_cast<size_t>(std::min<uint64_t>(req->nbytes, StagingBuffer().size()));
    Status copy = CudaCopyToHost(staging_.data(), src->data, first);
    if (!copy.ok()) return ReplyError(f.request_id, copy);
    CT_RETURN_IF_ERROR(Reply(f.request_id, *req));
    for (uint64_t done = 0;;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(req->nbytes - done, staging_.size()));
      CT_RETURN_IF_ERROR(ch_.WriteBytes(staging_.data(), n, deadline));
      done += n;
      if (done >= req->nbytes) return Status::Ok();
      n = static_cast<size_t>(std::min<uint64_t>(req->nbytes - done, staging_.size()));
      CT_RETURN_IF_ERROR(CudaCopyToHost(staging_.data(), src->data + done, n));
    }
  }

  // --- Models -----------------------------------------------------------------------------------

  Expected<GraphExecutor*> FindModel(uint32_t id) {
    auto it = models_.find(id);
    if (it == models_.end()) {
      return Status(ErrorCode::kNotFound, "no model " + std::to_string(id) + " in this session");
    }
    return it->second.get();
  }

  static msg::TensorInfo PortInfo(const GraphExecutor::Port& p) {
    return msg::TensorInfo{p.name, p.shape, graph::TvmDTypeName(p.dtype), p.nbytes};
  }

  uint64_t ModelStorageInUse() const {
    uint64_t used = 0;
    for (const auto& [id, m] : models_) used += m->storage_bytes();
    return used;
  }

  Outcome HandleLoadModel(const Frame& f) {
    auto req = f.As<msg::LoadModuleRequest>();
    if (!req.ok()) return ReplyError(f.request_id, req.status());
    auto file = ws_.OpenForRead(req->path);
    if (!file.ok()) return ReplyError(f.request_id, file.status());
    LoadRequest lr = MakeLoadRequest(req->path, *file);
    // Activations of all models of the session share the tensor limit.
    const uint64_t used = ModelStorageInUse();
    const uint64_t budget = options_.max_tensor_bytes > used ? options_.max_tensor_bytes - used : 0;
    auto model = GuardedLoad(f.request_id, req->path, [&] { return LoadModelPackage(lr, budget); });
    if (!model.ok()) return ReplyError(f.request_id, model.status());
    const GraphExecutor& m = **model;
    msg::ModelInfo info;
    info.model_id = next_model_id_++;
    info.target = m.module().target();
    for (const auto& p : m.inputs()) info.inputs.push_back(PortInfo(p));
    for (const auto& p : m.outputs()) info.outputs.push_back(PortInfo(p));
    info.nodes = static_cast<uint32_t>(m.steps().size());
    info.storage_bytes = m.storage_bytes();
    info.params = static_cast<uint32_t>(graph::ParamNodes(m.graph()).size());
    info.params_bytes = m.params_bytes();
    info.flops = m.flops();
    models_[info.model_id] = std::move(model).value();
    spdlog::debug("loaded model '{}' as {} ({} nodes)", EscapeForLog(req->path), info.model_id,
                  info.nodes);
    return Reply(f.request_id, info);
  }

  Outcome HandleSetInput(const Frame& f) {
    auto req = f.As<msg::SetInputRequest>();
    // Without a readable header we do not know how many bytes follow: the stream is lost.
    if (!req.ok()) {
      (void)ReplyError(f.request_id, req.status());
      return req.status();
    }
    auto model = FindModel(req->model_id);
    if (!model.ok()) return RefuseBody(f.request_id, model.status(), req->nbytes);
    auto port = (*model)->FindInput(req->name);
    if (!port.ok()) return RefuseBody(f.request_id, port.status(), req->nbytes);
    GraphExecutor::Port& in = **port;
    const std::string want = ShapeString(in.shape) + " " + graph::TvmDTypeName(in.dtype);
    const std::string got = ShapeString(req->shape) + " " + req->dtype;
    if (want != got || req->nbytes != in.nbytes) {
      return RefuseBody(f.request_id,
                        Status(ErrorCode::kInvalidArgument,
                               (*model)->name() + ": input '" + in.name + "' is " + want + " (" +
                                   std::to_string(in.nbytes) + " bytes), got " + got + " (" +
                                   std::to_string(req->nbytes) + " bytes)"),
                        req->nbytes);
    }
    // Straight from the socket into the input's storage: the one copy.
    CT_RETURN_IF_ERROR(ch_.ReadBytes(in.data, in.nbytes, IoDeadline(in.nbytes)));
    in.set = true;
    return Reply(f.request_id, msg::Empty{});
  }

  // Sizes the pool and checks the time request's numbers, as for calls.
  Status SetModelThreads(uint32_t threads) {
    msg::CallRequest call;
    call.threads = threads;
    return SetCallThreads(call);
  }

  uint32_t ModelLimitMs(uint32_t timeout_ms) const {
    return timeout_ms ? timeout_ms : static_cast<uint32_t>(options_.call_timeout.count());
  }

  Outcome HandleRunModel(const Frame& f) {
    auto req = f.As<msg::RunModelRequest>();
    if (!req.ok()) return ReplyError(f.request_id, req.status());
    auto model = FindModel(req->model_id);
    if (!model.ok()) return ReplyError(f.request_id, model.status());
    GraphExecutor* m = *model;
    if (Status s = m->CheckInputsSet(); !s.ok()) return ReplyError(f.request_id, s);
    if (Status bad = SetModelThreads(req->threads); !bad.ok()) return ReplyError(f.request_id, bad);
    const uint32_t limit = ModelLimitMs(req->timeout_ms);
    auto t0 = Clock::now();
    GuardBegin(f.request_id, m->name(), limit, 1, false);
    Status s = m->Run(slot_);
    GuardEnd(limit);
    double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!s.ok()) return ReplyError(f.request_id, s);
    return Reply(f.request_id,
                 msg::RunModelReply{0, seconds, static_cast<uint32_t>(pool_.threads())});
  }

  Outcome HandleGetOutput(const Frame& f) {
    auto req = f.As<msg::GetOutputRequest>();
    if (!req.ok()) return ReplyError(f.request_id, req.status());
    auto model = FindModel(req->model_id);
    if (!model.ok()) return ReplyError(f.request_id, model.status());
    auto port = (*model)->FindOutput(req->name, req->index);
    if (!port.ok()) return ReplyError(f.request_id, port.status());
    if (!(*model)->has_run()) {
      return ReplyError(f.request_id, Status(ErrorCode::kInvalidArgument,
                                             (*model)->name() + " has not run yet: no outputs"));
    }
    const GraphExecutor::Port& out = **port;
    CT_RETURN_IF_ERROR(Reply(f.request_id, PortInfo(out)));
    return ch_.WriteBytes(out.data, out.nbytes, IoDeadline(out.nbytes));
  }

  static double Median(std::vector<double> s) {
    if (s.empty()) return 0;
    std::sort(s.begin(), s.end());
    return s.size() % 2 ? s[s.size() / 2] : (s[s.size() / 2 - 1] + s[s.size() / 2]) / 2;
  }

  // TimeModel and ProfileModel share the checks of TimeCall.
  Expected<GraphExecutor*> PrepareTiming(const msg::TimeModelRequest& r) {
    CT_RETURN_IF_ERROR(CheckTiming(r.timing));
    CT_ASSIGN_OR_RETURN(GraphExecutor * m, FindModel(r.model_id));
    CT_RETURN_IF_ERROR(m->CheckInputsSet());
    CT_RETURN_IF_ERROR(SetModelThreads(r.threads));
    return m;
  }

  // Runs the time evaluator over `run(n)` with the watchdog armed per batch, as HandleTime does.
  // The time evaluator over run(n). The watchdog is armed once per batch, before the evaluator
  // starts its clock, and disarmed after it stops: only the calls themselves are timed. The
  // warm-up is one ordinary call; rounds get the limit per call times their length. `label` runs
  // after each arming (a model names its node in the slot there).
  // With the cache flush asked for, the calls' own `data` is evicted from the caches before each
  // round where the CPU allows it (EvictLines), and the default hooks' buffer is written through
  // elsewhere.
  Expected<TimeEvaluatorResult> Evaluate(uint32_t request_id, const std::string& what,
                                         const TimingOptions& opt, uint32_t limit,
                                         const std::function<Status(uint64_t)>& run,
                                         std::vector<std::span<const char>> data,
                                         const std::function<void()>& label = {},
                                         double stop_above_s = 0) {
    if (!hooks_) hooks_ = DefaultTimeEvaluatorHooks();
    bool warm_up = true;
    TimeEvaluatorHooks hooks = *hooks_;
    if (opt.flush_cache && CanEvictLines()) {
      hooks.flush_cache = [&data] {
        for (std::span<const char> bytes : data) EvictLines(bytes);
      };
    }
    hooks.before_batch = [&](uint64_t n) {
      GuardBegin(request_id, what, limit, n, !warm_up);
      if (label) label();
    };
    hooks.after_batch = [&] {
      GuardEnd(limit);
      warm_up = false;
    };
    return RunTimeEvaluator(opt, hooks, run, stop_above_s);
  }

  Outcome HandleTimeModel(const Frame& f) {
    auto req = f.As<msg::TimeModelRequest>();
    if (!req.ok()) return ReplyError(f.request_id, req.status());
    auto model = PrepareTiming(*req);
    if (!model.ok()) return ReplyError(f.request_id, model.status());
    GraphExecutor* m = *model;
    auto result = Evaluate(
        f.request_id, m->name(), req->timing, ModelLimitMs(req->timeout_ms),
        [&](uint64_t n) -> Status {
          for (uint64_t i = 0; i < n; ++i) CT_RETURN_IF_ERROR(m->Run(slot_));
          return Status::Ok();
        },
        m->Buffers());
    if (!result.ok()) return ReplyError(f.request_id, result.status());
    msg::TimeReply reply;
    reply.seconds_per_call = std::move(result->seconds_per_call);
    reply.number = static_cast<uint32_t>(std::min<uint64_t>(result->number, UINT32_MAX));
    reply.threads = static_cast<uint32_t>(pool_.threads());
    return Reply(f.request_id, reply);
  }

  // First whole runs with every node's time clocked within them (as cold as a run leaves the
  // caches: what the run spends there, so the nodes' medians sum to about a run's time), then each
  // node timed on its own, in graph order, after the nodes before it have run: its inputs are then
  // the ones a real run gives it, and running it again rewrites the same outputs.
  Outcome HandleProfileModel(const Frame& f) {
    auto req = f.As<msg::TimeModelRequest>();
    if (!req.ok()) return ReplyError(f.request_id, req.status());
    auto model = PrepareTiming(*req);
    if (!model.ok()) return ReplyError(f.request_id, model.status());
    GraphExecutor* m = *model;
    const size_t steps = m->steps().size();
    std::vector<std::vector<double>> in_run(steps);
    std::vector<double> batch(steps);
    bool warm_up = true;
    auto runs = Evaluate(
        f.request_id, m->name(), req->timing, ModelLimitMs(req->timeout_ms),
        [&](uint64_t n) -> Status {
          std::fill(batch.begin(), batch.end(), 0.0);
          for (uint64_t i = 0; i < n; ++i) {
            CT_RETURN_IF_ERROR(m->Run(slot_, batch.data()));
          }
          for (size_t k = 0; k < steps && !warm_up && n > 0; ++k) {
            in_run[k].push_back(batch[k] / static_cast<double>(n));
          }
          warm_up = false;
          return Status::Ok();
        },
        m->Buffers());
    if (!runs.ok()) return ReplyError(f.request_id, runs.status());
    std::vector<msg::NodeProfile> nodes;
    nodes.reserve(steps);
    for (size_t k = 0; k < m->steps().size(); ++k) {
      const GraphExecutor::Step& step = m->steps()[k];
      const graph::Node& node = m->graph().nodes[step.node];
      auto result = Evaluate(
          f.request_id, m->name(), req->timing, ModelLimitMs(req->timeout_ms),
          [&](uint64_t n) { return m->RunStep(k, n, slot_); }, m->StepBuffers(k),
          [&] {
            if (slot_) slot_->SetNode(step.label.data(), step.label.size());
          });
      if (!result.ok()) return ReplyError(f.request_id, result.status());
      std::vector<double> s = result->seconds_per_call;
      std::sort(s.begin(), s.end());
      msg::NodeProfile p;
      p.name = node.name;
      p.op_type = node.op_type;
      p.function = node.func_name;
      p.shapes = step.shapes;
      p.median_seconds = Median(s);
      p.min_seconds = s.empty() ? 0 : s.front();
      p.max_seconds = s.empty() ? 0 : s.back();
      p.number = result->number;
      p.flops = node.flops;
      p.in_run_median_seconds = Median(in_run[k]);
      nodes.push_back(std::move(p));
    }
    // The table can outgrow a frame: it follows the header as bulk bytes.
    msgpack::sbuffer body;
    msgpack::pack(body, nodes);
    msg::ProfileHeader header{static_cast<uint32_t>(nodes.size()), body.size(),
                              static_cast<uint32_t>(pool_.threads())};
    CT_RETURN_IF_ERROR(Reply(f.request_id, header));
    return ch_.WriteBytes(body.data(), body.size(), IoDeadline(body.size()));
  }

  std::vector<char>& StagingBuffer() {
    if (staging_.empty()) staging_.resize(size_t{8} << 20);
    return staging_;
  }

  Channel ch_;
  Workspace ws_;
  const SessionOptions& options_;
  CallSlot* slot_;
  bool lazy_timer_ = false;
  Deadline session_deadline_ = NoDeadline();
  LoaderRegistry loaders_;
  TensorStore tensors_;
  int default_threads_;
  ParallelPool pool_;  // before the modules (declared below), which point at it
  std::map<uint32_t, LoadedModule> modules_;
  uint32_t next_module_id_ = 1;
  std::map<uint32_t, std::unique_ptr<GraphExecutor>> models_;  // after the pool, as modules
  uint32_t next_model_id_ = 1;
  std::vector<ct_arg> args_;
  std::vector<char> staging_;  // host side of device tensor copies, allocated on first use
  std::optional<msg::DeviceInfo> info_;
  std::optional<TimeEvaluatorHooks> hooks_;
};

}  // namespace

Status RunSession(int fd, const std::string& workspace_dir, const std::string& session_id,
                  const SessionOptions& options, CallSlot* slot) {
  Channel ch(fd);
  auto ws = Workspace::Open(workspace_dir);
  if (!ws.ok()) {
    (void)ch.SendError(0, ws.status(), DeadlineIn(std::chrono::milliseconds(500)));
    return ws.status();
  }
  SessionHandler handler(std::move(ch), std::move(ws).value(), options, slot);
  Status s = handler.Serve(session_id);
  if (!s.ok()) handler.LingerBeforeClose();
  return s;
}

}  // namespace crosstune::server
