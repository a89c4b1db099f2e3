// The client side of a crosstune-server session (session.h).
#include "crosstune/client/session.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "crosstune/client/tracker_client.h"
#include "crosstune/crypto.h"
#include "crosstune/handshake.h"
#include "session_request.h"

namespace crosstune::client {
namespace {

using std::chrono::milliseconds;

// Closes an fd on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

Status ErrnoStatus(const std::string& what) {
  int e = errno;
  return Status(e == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError,
                what + ": " + std::strerror(e));
}

// Transport failures: the byte stream can no longer be trusted.
bool IsTransportFailure(const Status& s) {
  switch (s.code()) {
    case ErrorCode::kDisconnected:
    case ErrorCode::kTimeout:
    case ErrorCode::kIoError:
    case ErrorCode::kProtocolError:
    case ErrorCode::kLimitExceeded:
      return true;
    default:
      return false;
  }
}

// Files at least this big are hashed while they are sent rather than in a pass before.
constexpr uint64_t kStreamHashMinBytes = uint64_t{8} << 20;

// Sends `size` bytes of `file_fd` while a helper thread hashes the chunks already sent, so reading,
// sending and hashing overlap. At most kBuffers chunks are held.
Status SendFileHashing(Channel& ch, int file_fd, uint64_t size, Deadline deadline, Sha256* sha) {
  constexpr size_t kBuffers = 6;
  struct Chunk {
    std::unique_ptr<char[]> data;  // Limits::kStreamChunkBytes, filled before it is read
    size_t size = 0;
  };
  std::vector<Chunk> chunks(kBuffers);
  std::deque<Chunk*> free_list, full;
  for (auto& c : chunks) {
    c.data = std::make_unique_for_overwrite<char[]>(Limits::kStreamChunkBytes);
    free_list.push_back(&c);
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread hasher([&] {
    for (;;) {
      Chunk* c = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !full.empty() || done; });
        if (full.empty()) return;
        c = full.front();
        full.pop_front();
      }
      sha->Update(c->data.get(), c->size);
      std::lock_guard<std::mutex> lock(mu);
      free_list.push_back(c);
      cv.notify_all();
    }
  });
  Status status;
  uint64_t left = size;
  while (left > 0 && status.ok()) {
    Chunk* c = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !free_list.empty(); });
      c = free_list.front();
      free_list.pop_front();
    }
    size_t want = static_cast<size_t>(std::min<uint64_t>(left, Limits::kStreamChunkBytes));
    c->size = 0;
    while (c->size < want) {
      ssize_t n = ::read(file_fd, c->data.get() + c->size, want - c->size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        status = n == 0 ? Status(ErrorCode::kIoError, "file ended early (changed while uploading?)")
                        : ErrnoStatus("read");
        break;
      }
      c->size += static_cast<size_t>(n);
    }
    if (status.ok()) status = ch.WriteBytes(c->data.get(), c->size, deadline);
    std::lock_guard<std::mutex> lock(mu);
    if (!status.ok()) {
      free_list.push_back(c);
      break;
    }
    left -= c->size;
    full.push_back(c);
    cv.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  }
  hasher.join();
  return status;
}

}  // namespace

// --- Arguments ------------------------------------------------------------------------------

msg::Arg CallArg::Int(int64_t v) {
  msg::Arg a;
  a.kind = static_cast<uint8_t>(msg::ArgKind::kInt64);
  a.i = v;
  return a;
}

msg::Arg CallArg::Float(double v) {
  msg::Arg a;
  a.kind = static_cast<uint8_t>(msg::ArgKind::kFloat64);
  a.f = v;
  return a;
}

msg::Arg CallArg::Tensor(const RemoteTensor& t) {
  msg::Arg a;
  a.kind = static_cast<uint8_t>(msg::ArgKind::kTensor);
  a.tensor_id = t.id();
  return a;
}

// --- Session ----------------------------------------------------------------------------------

Expected<std::unique_ptr<Session>> Session::Connect(const ConnectOptions& options) {
  std::string host;
  uint16_t port = 0;
  CT_RETURN_IF_ERROR(Channel::ParseHostPort(options.server, &host, &port));
  CT_ASSIGN_OR_RETURN(Channel ch,
                      Channel::Connect(host, port, DeadlineIn(options.connect_timeout)));
  msg::Hello hello;
  hello.role = static_cast<uint8_t>(PeerRole::kClient);
  hello.peer_name = options.peer_name.empty() ? DefaultPeerName() : options.peer_name;
  hello.lease_token = options.lease_token;
  auto reply = ClientHandshake(ch, hello, options.auth_secret, DeadlineIn(options.connect_timeout));
  if (!reply.ok()) {
    Status s = reply.status();
    return Status(s.code(), options.server + ": " + s.message());
  }
  std::unique_ptr<Session> session(new Session());
  session->channel_ = std::move(ch);
  session->channel_.set_busy_poll(options.busy_poll);
  session->options_ = options;
  session->hello_ = std::move(reply).value();
  return session;
}

Session::~Session() {
  // Close encodes and sends a frame, which may allocate; a destructor must not throw, and a
  // session that cannot say goodbye is simply dropped (the server sees the hang-up).
  try {
    if (channel_.is_open()) (void)Close();
  } catch (...) {
    channel_.Close();
  }
}

Status Session::Ping() { return Request<msg::Empty>(Opcode::kPing, msg::Empty{}).status(); }

Expected<msg::DeviceInfo> Session::Info() {
  return Request<msg::DeviceInfo>(Opcode::kInfo, msg::Empty{});
}

Status Session::Close() {
  if (!channel_.is_open()) return Status::Ok();
  auto r = Request<msg::Empty>(Opcode::kClose, msg::Empty{}, milliseconds(0));
  channel_.Close();
  if (!r.ok() && r.status().code() == ErrorCode::kDisconnected) return Status::Ok();
  return r.status();
}

// Uploads. Small files are hashed in a pass before sending and the header carries the SHA-256,
// which the server checks before it keeps anything. Large files are hashed while they stream (the
// header's hash left empty) and the server's hash of what it stored, in the reply, is compared
// here: on a mismatch the file is removed again and the upload fails BadHash. Either way no
// mismatched file survives and the whole file is never in memory.
Expected<msg::FileEntry> Session::Upload(const std::string& local_path,
                                         const std::string& remote_path) {
  int fd = ::open(local_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(local_path);
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(local_path);
  if (!S_ISREG(st.st_mode)) return Status(ErrorCode::kInvalidArgument, local_path + ": not a file");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  const bool stream_hash = size >= kStreamHashMinBytes;
  msg::UploadRequest req{remote_path, size, ""};
  if (!stream_hash) {
    CT_ASSIGN_OR_RETURN(req.sha256_hex, Sha256FileHex(local_path));
  }
  Sha256 sha;
  auto entry = RequestWithBytes<msg::FileEntry>(Opcode::kUpload, req, size, [&](Deadline deadline) {
    Status s = stream_hash ? SendFileHashing(channel_, fd, size, deadline, &sha)
                           : channel_.SendFromFd(fd, size, deadline);
    if (s.ok()) return s;
    return Status(s.code(), "upload of " + local_path + ": " + s.message());
  });
  if (!entry.ok()) return entry.status();
  if (stream_hash) {
    std::string mine = sha.FinalHex();
    if (entry->sha256_hex != mine) {
      (void)RemoveFile(entry->path);
      return Status(ErrorCode::kBadHash, "upload of " + local_path + ": SHA-256 mismatch, sent " +
                                             mine + ", server stored " + entry->sha256_hex +
                                             "; removed");
    }
  }
  return entry;
}

Expected<msg::FileEntry> Session::UploadBytes(std::string_view data,
                                              const std::string& remote_path) {
  msg::UploadRequest req{remote_path, data.size(), Sha256Hex(data)};
  return RequestWithBytes<msg::FileEntry>(
      Opcode::kUpload, req, data.size(),
      [&](Deadline deadline) { return channel_.WriteBytes(data.data(), data.size(), deadline); });
}

Expected<msg::FileEntry> Session::Download(const std::string& remote_path,
                                           const std::string& local_path) {
  CT_ASSIGN_OR_RETURN(msg::FileEntry entry,
                      Request<msg::FileEntry>(Opcode::kDownload, msg::FileRef{remote_path}));
  // The bytes follow the header whatever happens here, so a local failure still has to read
  // them (or drop the connection).
  std::string part = local_path + ".part";
  int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  Deadline deadline = DeadlineIn(options_.request_timeout + milliseconds(entry.size / 1024));
  if (fd < 0) {
    Status open_error = ErrnoStatus(part);
    if (!channel_.Discard(entry.size, deadline).ok()) channel_.Close();
    return open_error;
  }
  Sha256 sha;
  Status s = channel_.ReceiveToFd(fd, entry.size, deadline, &sha);
  if (::close(fd) != 0 && s.ok()) s = ErrnoStatus(part);
  if (!s.ok()) {
    if (IsTransportFailure(s)) channel_.Close();
    ::unlink(part.c_str());
    return s;
  }
  std::string hex = sha.FinalHex();
  if (hex != entry.sha256_hex) {
    ::unlink(part.c_str());
    return Status(ErrorCode::kBadHash, "download of '" + remote_path + "': SHA-256 mismatch, got " +
                                           hex + ", server said " + entry.sha256_hex);
  }
  if (::rename(part.c_str(), local_path.c_str()) != 0) {
    Status e = ErrnoStatus("rename " + part);
    ::unlink(part.c_str());
    return e;
  }
  return entry;
}

Expected<std::vector<msg::FileEntry>> Session::ListFiles() {
  // Page by page: a workspace of thousands of files does not fit one frame. A server that does
  // not page answers the first request with everything (and `more` false).
  std::vector<msg::FileEntry> files;
  msg::ListFilesRequest req;
  req.paged = true;
  for (;;) {
    CT_ASSIGN_OR_RETURN(msg::FileList page, Request<msg::FileList>(Opcode::kListFiles, req));
    if (page.more && (page.files.empty() || page.files.back().path <= req.after)) {
      return Status(ErrorCode::kProtocolError, "the server's file list does not advance");
    }
    bool more = page.more;
    if (more) req.after = page.files.back().path;
    files.insert(files.end(), std::make_move_iterator(page.files.begin()),
                 std::make_move_iterator(page.files.end()));
    if (!more) return files;
  }
}

Status Session::RemoveFile(const std::string& remote_path) {
  return Request<msg::Empty>(Opcode::kRemoveFile, msg::FileRef{remote_path}).status();
}

Expected<RemoteModule> Session::LoadModule(const std::string& remote_path) {
  CT_ASSIGN_OR_RETURN(
      msg::ModuleInfo info,
      Request<msg::ModuleInfo>(Opcode::kLoadModule, msg::LoadModuleRequest{remote_path}));
  RemoteModule m;
  m.session_ = this;
  m.info_ = std::move(info);
  return m;
}

Expected<RemoteTensor> Session::AllocTensor(const std::vector<int64_t>& shape, DLDataType dtype,
                                            DLDevice device) {
  msg::TensorAllocRequest req;
  req.shape = shape;
  req.dtype_code = dtype.code;
  req.dtype_bits = dtype.bits;
  req.dtype_lanes = dtype.lanes;
  req.device_type = static_cast<int32_t>(device.device_type);
  req.device_id = device.device_id;
  CT_ASSIGN_OR_RETURN(msg::TensorRef ref, Request<msg::TensorRef>(Opcode::kTensorAlloc, req));
  RemoteTensor t;
  t.session_ = this;
  t.id_ = ref.tensor_id;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.nbytes_ = ref.nbytes;
  return t;
}

// --- Modules ----------------------------------------------------------------------------------

Expected<msg::CallReply> RemoteModule::Call(const std::string& function,
                                            const std::vector<msg::Arg>& args, uint32_t timeout_ms,
                                            uint32_t threads) {
  if (!session_) return Status(ErrorCode::kInvalidArgument, "module handle is empty");
  msg::CallRequest req{info_.module_id, function, args, timeout_ms, threads};
  // The kernel's own time comes on top of the request timeout.
  auto extra = timeout_ms ? milliseconds(timeout_ms) : session_->options_.request_timeout;
  return session_->Request<msg::CallReply>(Opcode::kCall, req, extra);
}

Expected<msg::TimeReply> RemoteModule::Time(const std::string& function,
                                            const std::vector<msg::Arg>& args,
                                            const TimeOptions& options) {
  if (!session_) return Status(ErrorCode::kInvalidArgument, "module handle is empty");
  msg::TimeRequest req;
  req.call = msg::CallRequest{info_.module_id, function, args, options.timeout_ms, options.threads};
  req.timing = options.timing;
  req.stop_above_s = options.stop_above_s;
  const TimingOptions& t = options.timing;
  // Warm-up plus every round (min_repeat_ms can make a round re-run a few times), each bounded by
  // the device's per-call limit; the server enforces that, this only keeps the client from giving
  // up first.
  milliseconds per_call =
      options.timeout_ms ? milliseconds(options.timeout_ms) : session_->options_.request_timeout;
  uint64_t rounds = uint64_t{t.repeat} * (uint64_t{t.number} + 4);
  milliseconds extra = per_call * (1 + std::min<uint64_t>(rounds, 1'000'000)) +
                       milliseconds(uint64_t{t.repeat} * (t.cooldown_ms + 4ull * t.min_repeat_ms));
  // The reply comes after the rounds: polling for it would only compete with the kernel being
  // timed when the device is this machine.
  session_->channel_.SkipBusyPollOnce();
  return session_->Request<msg::TimeReply>(Opcode::kTimeCall, req, extra);
}

Status RemoteModule::Unload() {
  if (!session_) return Status(ErrorCode::kInvalidArgument, "module handle is empty");
  Status s = session_->Request<msg::Empty>(Opcode::kUnloadModule, msg::ModuleRef{info_.module_id})
                 .status();
  if (s.ok()) session_ = nullptr;
  return s;
}

// --- Tensors ----------------------------------------------------------------------------------

Status RemoteTensor::CopyFrom(const void* data, uint64_t nbytes) {
  if (nbytes != nbytes_) {
    return Status(
        ErrorCode::kInvalidArgument,
        "copy of " + std::to_string(nbytes) + " bytes into a tensor of " + std::to_string(nbytes_));
  }
  return CopyFrom(data, 0, nbytes);
}

Status RemoteTensor::CopyTo(void* data, uint64_t nbytes) const {
  if (nbytes != nbytes_) {
    return Status(ErrorCode::kInvalidArgument, "copy of a tensor of " + std::to_string(nbytes_) +
                                                   " bytes into " + std::to_string(nbytes));
  }
  return CopyTo(data, 0, nbytes);
}

Status RemoteTensor::CopyFrom(const void* data, uint64_t offset, uint64_t nbytes) {
  if (!session_) return Status(ErrorCode::kInvalidArgument, "tensor handle is empty");
  Session::CopyStats& stats = session_->copy_stats_;
  stats.copies_in++;
  stats.bytes_in += nbytes;
  stats.last_in_source = data;
  // Header, then the bytes straight from the caller's buffer.
  Channel& ch = session_->channel_;
  return session_
      ->RequestWithBytes<msg::Empty>(
          Opcode::kTensorCopyIn, msg::TensorCopy{id_, offset, nbytes}, nbytes,
          [&](Deadline deadline) { return ch.WriteBytes(data, nbytes, deadline); })
      .status();
}

Status RemoteTensor::CopyTo(void* data, uint64_t offset, uint64_t nbytes) const {
  if (!session_) return Status(ErrorCode::kInvalidArgument, "tensor handle is empty");
  Session::CopyStats& stats = session_->copy_stats_;
  stats.copies_out++;
  stats.bytes_out += nbytes;
  stats.last_out_destination = data;
  CT_ASSIGN_OR_RETURN(msg::TensorCopy header,
                      session_->Request<msg::TensorCopy>(Opcode::kTensorCopyOut,
                                                         msg::TensorCopy{id_, offset, nbytes},
                                                         milliseconds(nbytes / 1024)));
  Channel& ch = session_->channel_;
  if (header.nbytes != nbytes) {
    ch.Close();
    return Status(ErrorCode::kProtocolError, "server announced " + std::to_string(header.nbytes) +
                                                 " bytes, asked for " + std::to_string(nbytes));
  }
  // Straight from the socket into the caller's buffer.
  Status s = ch.ReadBytes(
      data, nbytes, DeadlineIn(session_->options_.request_timeout + milliseconds(nbytes / 1024)));
  if (!s.ok()) ch.Close();
  return s;
}

Status RemoteTensor::Free() {
  if (!session_) return Status::Ok();
  Status s =
      session_->Request<msg::Empty>(Opcode::kTensorFree, msg::TensorRef{id_, nbytes_}).status();
  if (s.ok()) session_ = nullptr;
  return s;
}

}  // namespace crosstune::client
