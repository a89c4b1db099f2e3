// The client side of a crosstune-server session: connect, move files, load modules, allocate remote
// tensors, call and time functions. Model packages: remote_model.h.
//
// Thread-safety: a Session and the RemoteModule/RemoteTensor handles it hands out are used by one
// thread at a time. Handles point at their Session and must not outlive it. On a lost connection
// every call fails with kDisconnected; none hangs past its deadline.
#pragma once

#include <dlpack/dlpack.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/channel.h"
#include "crosstune/messages.h"
#include "crosstune/status.h"
#include "crosstune/timing.h"

namespace crosstune::client {

struct ConnectOptions {
  std::string server;       // "host:port"
  std::string auth_secret;  // shared secret for the HMAC challenge; empty: none
  std::string lease_token;  // from the tracker; empty: none
  std::string peer_name;    // shown in server logs; default user@host
  std::chrono::milliseconds connect_timeout{10'000};
  // Deadline for each request's reply. Calls and timing also get the kernel's own time, so
  // TimeOptions/Call timeouts extend this for those requests.
  std::chrono::milliseconds request_timeout{60'000};
  // Before blocking for a reply, poll the socket this long (Channel::set_busy_poll): a server on
  // another CPU then answers without two cross-CPU wake-ups. 0: off; off anyway when this
  // process may use only one CPU.
  std::chrono::microseconds busy_poll{50};
};

class Session;

class RemoteTensor {
 public:
  RemoteTensor() = default;
  uint32_t id() const { return id_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  DLDataType dtype() const { return dtype_; }
  DLDevice device() const { return device_; }
  uint64_t nbytes() const { return nbytes_; }

  // Streams host bytes in / out (nbytes must equal this tensor's size, or use the offset forms).
  Status CopyFrom(const void* data, uint64_t nbytes);
  Status CopyTo(void* data, uint64_t nbytes) const;
  Status CopyFrom(const void* data, uint64_t offset, uint64_t nbytes);
  Status CopyTo(void* data, uint64_t offset, uint64_t nbytes) const;
  // Streams a host tensor in / out straight from / into its memory. It must be C-ordered CPU
  // memory of this tensor's dtype and element count (its shape may differ); kInvalidArgument
  // otherwise, before anything is sent.
  Status CopyFromHost(const DLTensor& host);
  Status CopyToHost(const DLTensor& host) const;
  Status Free();

 private:
  friend class Session;
  Session* session_ = nullptr;
  uint32_t id_ = 0;
  std::vector<int64_t> shape_;
  DLDataType dtype_{kDLFloat, 32, 1};
  DLDevice device_{kDLCPU, 0};
  uint64_t nbytes_ = 0;
};

// One argument of a call.
struct CallArg {
  static msg::Arg Int(int64_t v);
  static msg::Arg Float(double v);
  static msg::Arg Tensor(const RemoteTensor& t);
};

// One argument of a call whose tensors live in this process's memory (RemoteModule::CallHost):
// each host tensor is copied to a device tensor allocated for the call, read straight from the
// caller's buffer, and after the call copied back into that buffer straight from the socket;
// nothing is staged in between. A remote tensor (a RemoteTensor the caller keeps) is passed as
// it is.
struct HostArg {
  enum class Kind : uint8_t { kInt, kFloat, kHostTensor, kRemoteTensor };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  double f = 0;
  // kHostTensor: CPU memory in C order (strides null or those of C order); `data` must stay
  // valid through the call. copy_back false: an input the call must not write back (read-only).
  DLTensor host{};
  bool copy_back = true;
  const RemoteTensor* remote = nullptr;  // kRemoteTensor; must belong to the module's session

  static HostArg Int(int64_t v);
  static HostArg Float(double v);
  static HostArg Host(const DLTensor& tensor, bool copy_back = true);
  static HostArg Remote(const RemoteTensor& tensor);
};

struct TimeOptions {
  TimingOptions timing;
  uint32_t timeout_ms = 0;  // per call on the device; 0: the server's default
  uint32_t threads = 0;     // for the module's parallel loops; 0: the server's --threads
  // Stop after a round once even the fastest round took more than this per call (the reply's
  // stopped_early); 0: every round (msg::TimeRequest). Kernel calls only, not models.
  double stop_above_s = 0;
};

class RemoteModule {
 public:
  RemoteModule() = default;
  uint32_t id() const { return info_.module_id; }
  const msg::ModuleInfo& info() const { return info_; }
  // KernelError when the kernel returns non-zero; RemoteCrash / Timeout as the server reports.
  // `threads` sizes the module's parallel loops (0: the server's --threads).
  Expected<msg::CallReply> Call(const std::string& function, const std::vector<msg::Arg>& args,
                                uint32_t timeout_ms = 0, uint32_t threads = 0);
  Expected<msg::TimeReply> Time(const std::string& function, const std::vector<msg::Arg>& args,
                                const TimeOptions& options);
  // Call and Time with host tensors (HostArg): the device tensors are allocated for the call and
  // freed after it, also when it fails. kInvalidArgument for a host tensor that is not C-ordered
  // CPU memory (nothing is sent then).
  Expected<msg::CallReply> CallHost(const std::string& function, const std::vector<HostArg>& args,
                                    uint32_t timeout_ms = 0, uint32_t threads = 0);
  Expected<msg::TimeReply> TimeHost(const std::string& function, const std::vector<HostArg>& args,
                                    const TimeOptions& options);
  Status Unload();

 private:
  friend class Session;
  // Allocates and fills the device tensors of `args`, runs `call` with the wire arguments, copies
  // back and frees (host_call.cc).
  template <typename Reply, typename Fn>
  Expected<Reply> WithHostArgs(const std::vector<HostArg>& args, Fn&& call);
  Session* session_ = nullptr;
  msg::ModuleInfo info_;
};

class Session {
 public:
  static Expected<std::unique_ptr<Session>> Connect(const ConnectOptions& options);
  ~Session();  // sends Close when still connected

  const msg::HelloReply& hello() const { return hello_; }
  // The "host:port" this session is connected to (the granted device when it came from a tracker).
  const std::string& server() const { return options_.server; }

  Status Ping();
  Expected<msg::DeviceInfo> Info();

  // Remote paths are relative to the session workspace. Uploads stream in chunks and are SHA-256
  // checked: small ones by the server against the hash in the request, files of 8 MiB and more
  // here, hashed while they stream, against the server's hash of what it stored (a mismatch
  // removes the file). BadHash either way, and no mismatched file is kept. Downloads are checked
  // here. Refusals come back as the server's error (LimitExceeded, InvalidArgument for a path
  // outside the workspace).
  Expected<msg::FileEntry> Upload(const std::string& local_path, const std::string& remote_path);
  Expected<msg::FileEntry> UploadBytes(std::string_view data, const std::string& remote_path);
  Expected<msg::FileEntry> Download(const std::string& remote_path, const std::string& local_path);
  Expected<std::vector<msg::FileEntry>> ListFiles();
  Status RemoveFile(const std::string& remote_path);

  Expected<RemoteModule> LoadModule(const std::string& remote_path);
  Expected<RemoteTensor> AllocTensor(const std::vector<int64_t>& shape, DLDataType dtype,
                                     DLDevice device = DLDevice{kDLCPU, 0});

  // Ends the session; the server removes its workspace.
  Status Close();
  bool connected() const { return channel_.is_open(); }
  // Replies this session found while busy polling, and polls that ran out (ConnectOptions::
  // busy_poll).
  Channel::BusyPollStats busy_poll_stats() const { return channel_.busy_poll_stats(); }

  // Tensor copies of this session (tensors' copies, model inputs set and outputs read): how many,
  // their bytes, and where in this process's memory the last copy in read from and the last copy
  // out wrote to. A caller (the Python package's tests) sees from them that its buffer was sent
  // from and received into in place.
  struct CopyStats {
    uint64_t copies_in = 0, copies_out = 0;
    uint64_t bytes_in = 0, bytes_out = 0;
    const void* last_in_source = nullptr;
    const void* last_out_destination = nullptr;
  };
  const CopyStats& copy_stats() const { return copy_stats_; }

 private:
  friend class RemoteModule;
  friend class RemoteModel;
  friend class RemoteTensor;
  Session() = default;
  // Sends a request and reads its reply; a transport failure closes the channel.
  template <typename Reply, typename Request>
  Expected<Reply> Request(Opcode op, const Request& req, std::chrono::milliseconds extra = {});
  // Sends `header`, then `size` raw bytes through `send_body(deadline)`, and reads the reply.
  template <typename Reply, typename Header, typename SendBody>
  Expected<Reply> RequestWithBytes(Opcode op, const Header& header, uint64_t size,
                                   SendBody&& send_body);

  Channel channel_;
  ConnectOptions options_;
  msg::HelloReply hello_;
  CopyStats copy_stats_;
};

}  // namespace crosstune::client
