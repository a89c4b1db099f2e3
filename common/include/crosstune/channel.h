// Channel: a blocking, framed connection over one socket, with a deadline on every wait.
// Used by the session child of crosstune-server and by the client library. Not thread-safe: one
// thread uses a Channel at a time.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "crosstune/frame.h"

namespace crosstune {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
inline Deadline NoDeadline() { return Deadline::max(); }
inline Deadline DeadlineIn(std::chrono::milliseconds ms) {
  return ms.count() <= 0 ? NoDeadline() : Clock::now() + ms;
}

class Channel {
 public:
  Channel() = default;
  explicit Channel(int fd) : fd_(fd) {}  // takes ownership of fd
  ~Channel();
  Channel(Channel&& other) noexcept;
  Channel& operator=(Channel&& other) noexcept;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Connects to host:port (names resolved); kDisconnected with the reason when it cannot.
  static Expected<Channel> Connect(const std::string& host, uint16_t port, Deadline deadline);
  // Parses "host:port" ("[::1]:9090" too).
  static Status ParseHostPort(const std::string& spec, std::string* host, uint16_t* port);

  bool is_open() const { return fd_ >= 0; }
  // false: frames read may hold strings that are not UTF-8 (trusted internal pipes only; see
  // DecodeFrameBody).
  void set_utf8_strings(bool on) { utf8_strings_ = on; }
  // The largest frame body Send sends (Limits::kMaxFrameBytes unless set): raised only on
  // trusted internal pipes whose reader takes larger frames (the builder's pool and its workers,
  // whose requests carry a whole network's objects).
  void set_max_send_frame_bytes(uint32_t bytes) { max_send_frame_bytes_ = bytes; }
  int fd() const { return fd_; }
  // Whether bytes already received wait in the read-ahead buffer. Code that polls fd() for input
  // must check this first: a frame read ahead is no longer in the socket.
  bool has_buffered_input() const { return rend_ > rbeg_; }
  int Release();  // gives up ownership of the fd
  void Close();

  // Busy polling: before a frame read blocks, check the socket for up to `window` (and never past
  // the read's deadline). A peer on another CPU then finds this side awake, and a round trip
  // skips the two cross-CPU wake-ups that dominate it (on this project's 2-vCPU host, 55 us
  // against 8 us for a small ping-pong). It is off when the process may use only one CPU: there
  // the spinning side would hold the CPU its peer needs. A poll that finds nothing backs off
  // (the next 1, 2, 4 .. 64 reads block at once) and one that finds a frame resets, so a peer
  // that answers slowly costs at most one window now and then. Zero (the default): off.
  void set_busy_poll(std::chrono::microseconds window);
  // The next frame read sleeps at once: for a reply known to take long (timing a kernel), where
  // polling could only take a CPU from the work being measured.
  void SkipBusyPollOnce() { poll_skip_ = std::max<uint32_t>(poll_skip_, 1); }
  // The window in effect: what was set, or zero when this process may run on one CPU only.
  std::chrono::microseconds busy_poll() const { return busy_poll_; }
  // Frame reads that found their bytes while polling, and polls that ran out (for tests and
  // benchmarks).
  struct BusyPollStats {
    uint64_t hits = 0;
    uint64_t misses = 0;
  };
  BusyPollStats busy_poll_stats() const { return poll_stats_; }

  // Peer closed -> kDisconnected; deadline passed -> kTimeout; bad bytes -> kProtocolError.
  Expected<Frame> ReadFrame(Deadline deadline, uint32_t max_frame_bytes = Limits::kMaxFrameBytes);
  Status WriteBytes(const void* data, size_t size, Deadline deadline);
  Status ReadBytes(void* data, size_t size, Deadline deadline);

  // A frame whose body would exceed Limits::kMaxFrameBytes, or the limit set above (which the
  // peer would refuse, ending the connection) is not sent: kLimitExceeded, naming its size, and
  // the connection goes on.
  template <typename T>
  Status Send(Opcode op, uint32_t request_id, const T& payload, Deadline deadline) {
    std::string f = EncodeFrame(op, request_id, payload);
    CT_RETURN_IF_ERROR(CheckOutgoingFrame(op, f));
    return WriteBytes(f.data(), f.size(), deadline);
  }
  Status SendError(uint32_t request_id, const Status& status, Deadline deadline);

  // Sends a request and waits for its reply. A kError reply becomes its Status; a reply to another
  // request id is kProtocolError.
  template <typename Reply, typename Request>
  Expected<Reply> Call(Opcode op, const Request& req, Deadline deadline) {
    uint32_t id = next_request_id_++;
    CT_RETURN_IF_ERROR(Send(op, id, req, deadline));
    return ReadReply<Reply>(id, deadline);
  }
  template <typename Reply>
  Expected<Reply> ReadReply(uint32_t request_id, Deadline deadline) {
    CT_ASSIGN_OR_RETURN(Frame f, ReadFrame(deadline));
    CT_RETURN_IF_ERROR(CheckReply(f, request_id));
    return f.As<Reply>();
  }
  uint32_t NextRequestId() { return next_request_id_++; }

  // Streams exactly `size` bytes between the socket and a file descriptor in chunks, never holding
  // more than one chunk. `hasher`, when given, sees every byte (see crypto.h Sha256).
  class ByteSink {
   public:
    virtual ~ByteSink() = default;
    virtual void Update(const void* data, size_t size) = 0;
  };
  Status SendFromFd(int file_fd, uint64_t size, Deadline deadline, ByteSink* hasher = nullptr);
  Status ReceiveToFd(int file_fd, uint64_t size, Deadline deadline, ByteSink* hasher = nullptr);
  // Reads and discards `size` bytes (after a refused upload, so the stream stays in step).
  Status Discard(uint64_t size, Deadline deadline);

 private:
  static Status CheckReply(const Frame& f, uint32_t request_id);
  Status CheckOutgoingFrame(Opcode op, const std::string& frame) const;
  Status WaitFor(short events, Deadline deadline);
  // Copies up to `size` read-ahead bytes out; returns how many.
  size_t TakeBuffered(void* data, size_t size);
  // Receives until at least `want` (<= kReadAhead) bytes are buffered. It waits inside recv()
  // (the socket is put in blocking mode, its SO_RCVTIMEO bounding the wait), so a reply that is
  // not there yet costs one system call; each recv takes whatever else has arrived too.
  Status Fill(size_t want, Deadline deadline);
  // Puts the socket in blocking mode once and sets SO_RCVTIMEO for `deadline` when the current
  // setting does not fit; kTimeout when the deadline has passed.
  Status SetReceiveWait(Deadline deadline);
  // The busy poll before a blocking receive: > 0 bytes received (into the read-ahead buffer),
  // 0 the peer closed, -1 with errno set (EAGAIN: nothing came within the window).
  ssize_t PollReceive(Deadline deadline);
  // Reads `size` bytes straight from the socket (nothing buffered), for bulk bodies.
  Status ReadDirect(char* p, size_t size, Deadline deadline);

  static constexpr size_t kReadAhead = 64 * 1024;
  int fd_ = -1;
  std::unique_ptr<char[]> rbuf_;  // read-ahead: [rbeg_, rend_) not yet consumed
  size_t rbeg_ = 0;
  size_t rend_ = 0;
  int64_t rcvtimeo_us_ = 0;  // the socket's SO_RCVTIMEO as last set (0: none)
  bool blocking_ = false;    // O_NONBLOCK cleared
  uint32_t max_send_frame_bytes_ = Limits::kMaxFrameBytes;
  uint32_t next_request_id_ = 1;
  bool utf8_strings_ = true;
  std::chrono::microseconds busy_poll_{0};
  uint32_t poll_backoff_ = 0;  // reads to block at once after the last miss
  uint32_t poll_skip_ = 0;     // of those, still to come
  BusyPollStats poll_stats_;
};

}  // namespace crosstune
