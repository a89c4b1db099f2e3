#include "crosstune/channel.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "crosstune/cpus.h"

namespace crosstune {
namespace {

int PollTimeoutMs(Deadline deadline) {
  if (deadline == NoDeadline()) return -1;
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(left);
}

// The most one recv() of a bulk body asks for, and one send() offers. A receive that asks for the
// whole rest of a large body keeps copying while the peer keeps sending and only then gives the
// socket back (window updates, freed buffers), so the sender stalls in turns and the buffers go
// cold: on loopback 64-256 MiB moved at 0.5-0.7 of a plain 1 MiB-chunk stream that way, and
// at 0.9-1.4 of it with 32 KiB receives and 1 MiB sends.
constexpr size_t kMaxReceiveBytes = 32 * 1024;
constexpr size_t kMaxSendBytes = 1024 * 1024;

// A hint to the CPU inside a spin loop (it eases the sibling hyperthread and saves power).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && __ARM_ARCH >= 7)
  asm volatile("yield");
#endif
}

Status Errno(const char* what) {
  int e = errno;
  if (e == EPIPE || e == ECONNRESET || e == ENOTCONN) {
    return Status(ErrorCode::kDisconnected, std::string("connection lost: ") + std::strerror(e));
  }
  return Status(ErrorCode::kIoError, std::string(what) + ": " + std::strerror(e));
}

}  // namespace

Channel::~Channel() { Close(); }

Channel::Channel(Channel&& other) noexcept
    : fd_(other.fd_),
      rbuf_(std::move(other.rbuf_)),
      rbeg_(other.rbeg_),
      rend_(other.rend_),
      rcvtimeo_us_(other.rcvtimeo_us_),
      blocking_(other.blocking_),
      max_send_frame_bytes_(other.max_send_frame_bytes_),
      next_request_id_(other.next_request_id_),
      utf8_strings_(other.utf8_strings_),
      busy_poll_(other.busy_poll_),
      poll_backoff_(other.poll_backoff_),
      poll_skip_(other.poll_skip_),
      poll_stats_(other.poll_stats_) {
  other.fd_ = -1;
  other.rbeg_ = other.rend_ = 0;
}

Channel& Channel::operator=(Channel&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    rbuf_ = std::move(other.rbuf_);
    rbeg_ = other.rbeg_;
    rend_ = other.rend_;
    rcvtimeo_us_ = other.rcvtimeo_us_;
    blocking_ = other.blocking_;
    max_send_frame_bytes_ = other.max_send_frame_bytes_;
    next_request_id_ = other.next_request_id_;
    utf8_strings_ = other.utf8_strings_;
    busy_poll_ = other.busy_poll_;
    poll_backoff_ = other.poll_backoff_;
    poll_skip_ = other.poll_skip_;
    poll_stats_ = other.poll_stats_;
    other.fd_ = -1;
    other.rbeg_ = other.rend_ = 0;
  }
  return *this;
}

int Channel::Release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Channel::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  rbeg_ = rend_ = 0;
  rcvtimeo_us_ = 0;
  blocking_ = false;
}

Status Channel::ParseHostPort(const std::string& spec, std::string* host, uint16_t* port) {
  std::string h, p;
  if (!spec.empty() && spec[0] == '[') {
    auto close = spec.find(']');
    if (close == std::string::npos || close + 1 >= spec.size() || spec[close + 1] != ':') {
      return Status(ErrorCode::kInvalidArgument, "bad address '" + spec + "', expected [v6]:port");
    }
    h = spec.substr(1, close - 1);
    p = spec.substr(close + 2);
  } else {
    auto colon = spec.rfind(':');
    if (colon == std::string::npos) {
      return Status(ErrorCode::kInvalidArgument, "bad address '" + spec + "', expected host:port");
    }
    h = spec.substr(0, colon);
    p = spec.substr(colon + 1);
  }
  char* end = nullptr;
  long v = std::strtol(p.c_str(), &end, 10);
  if (h.empty() || p.empty() || *end != '\0' || v <= 0 || v > 65535) {
    return Status(ErrorCode::kInvalidArgument, "bad address '" + spec + "', expected host:port");
  }
  *host = h;
  *port = static_cast<uint16_t>(v);
  return Status::Ok();
}

Expected<Channel> Channel::Connect(const std::string& host, uint16_t port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port_str = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), port_str.c_str(), &hints, &res);
  if (rc != 0) {
    return Status(ErrorCode::kDisconnected, "cannot resolve " + host + ": " + ::gai_strerror(rc));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    Channel ch(fd);
    int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last_error = std::strerror(errno);
      continue;
    }
    Status w = ch.WaitFor(POLLOUT, deadline);
    if (!w.ok()) {
      last_error = w.message();
      if (w.code() == ErrorCode::kTimeout) {
        ::freeaddrinfo(res);
        return Status(ErrorCode::kTimeout, "connecting to " + host + ":" + port_str + " timed out");
      }
      continue;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      last_error = std::strerror(err);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::freeaddrinfo(res);
    return ch;
  }
  ::freeaddrinfo(res);
  return Status(ErrorCode::kDisconnected,
                "cannot connect to " + host + ":" + port_str + ": " + last_error);
}

Status Channel::WaitFor(short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd_, events, 0};
    int rc = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (rc > 0) return Status::Ok();  // errors and hang-ups surface in the next read/write
    if (rc == 0) return Status(ErrorCode::kTimeout, "deadline passed waiting for the peer");
    if (errno != EINTR) return Errno("poll");
  }
}

Status Channel::WriteBytes(const void* data, size_t size, Deadline deadline) {
  if (fd_ < 0) return Status(ErrorCode::kDisconnected, "channel is closed");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd_, p, std::min(size, kMaxSendBytes), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      CT_RETURN_IF_ERROR(WaitFor(POLLOUT, deadline));
      continue;
    }
    return Errno("send");
  }
  return Status::Ok();
}

size_t Channel::TakeBuffered(void* data, size_t size) {
  size_t n = std::min(size, rend_ - rbeg_);
  if (n == 0) return 0;
  std::memcpy(data, rbuf_.get() + rbeg_, n);
  rbeg_ += n;
  if (rbeg_ == rend_) rbeg_ = rend_ = 0;
  return n;
}

Status Channel::SetReceiveWait(Deadline deadline) {
  if (!blocking_) {
    // Waits happen inside recv() itself (one system call where poll() and recv() were two);
    // every other read and write passes MSG_DONTWAIT and does not block.
    int flags = ::fcntl(fd_, F_GETFL, 0);
    if (flags < 0) return Errno("fcntl");
    if ((flags & O_NONBLOCK) != 0 && ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      return Errno("fcntl");
    }
    blocking_ = true;
  }
  int64_t want_us = 0;  // 0: wait without limit
  if (deadline != NoDeadline()) {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return Status(ErrorCode::kTimeout, "deadline passed waiting for the peer");
    want_us = left.count();
    // The socket's limit is kept while it is neither past what is left (allowing 2%, at least
    // 2 ms, of lateness) nor under half of it, so calls under one timeout set it once.
    int64_t slack = std::max<int64_t>(2000, want_us / 50);
    if (rcvtimeo_us_ > 0 && rcvtimeo_us_ <= want_us + slack && rcvtimeo_us_ >= want_us / 2) {
      return Status::Ok();
    }
  } else if (rcvtimeo_us_ == 0) {
    return Status::Ok();
  }
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(want_us / 1'000'000);
  tv.tv_usec = static_cast<suseconds_t>(want_us % 1'000'000);
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) return Errno("setsockopt");
  rcvtimeo_us_ = want_us;
  return Status::Ok();
}

void Channel::set_busy_poll(std::chrono::microseconds window) {
  busy_poll_ = window.count() > 0 && UsableCpus() > 1 ? window : std::chrono::microseconds(0);
  poll_backoff_ = poll_skip_ = 0;
}

ssize_t Channel::PollReceive(Deadline deadline) {
  const Deadline end = std::min(deadline, Clock::now() + busy_poll_);
  for (;;) {
    ssize_t n = ::recv(fd_, rbuf_.get() + rend_, kReadAhead - rend_, MSG_DONTWAIT);
    if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      ++poll_stats_.hits;
      poll_backoff_ = 0;
      return n;
    }
    if (Clock::now() >= end) break;
    CpuRelax();
  }
  ++poll_stats_.misses;
  poll_backoff_ = std::min<uint32_t>(64, poll_backoff_ == 0 ? 1 : poll_backoff_ * 2);
  poll_skip_ = poll_backoff_;
  errno = EAGAIN;
  return -1;
}

Status Channel::Fill(size_t want, Deadline deadline) {
  if (fd_ < 0) return Status(ErrorCode::kDisconnected, "channel is closed");
  if (!rbuf_) rbuf_ = std::make_unique<char[]>(kReadAhead);
  if (rend_ - rbeg_ >= want) return Status::Ok();
  if (kReadAhead - rbeg_ < want) {  // make room at the end
    std::memmove(rbuf_.get(), rbuf_.get() + rbeg_, rend_ - rbeg_);
    rend_ -= rbeg_;
    rbeg_ = 0;
  }
  // Each read polls (or, backing off, does not) once; a poll that runs out leaves the rest of
  // the wait to recv().
  bool poll = busy_poll_.count() > 0;
  if (poll && poll_skip_ > 0) {
    --poll_skip_;
    poll = false;
  }
  while (rend_ - rbeg_ < want) {
    ssize_t n = -1;
    errno = EAGAIN;
    if (poll) n = PollReceive(deadline);
    if (n < 0 && errno == EAGAIN) {
      poll = false;
      CT_RETURN_IF_ERROR(SetReceiveWait(deadline));
      n = ::recv(fd_, rbuf_.get() + rend_, kReadAhead - rend_, 0);
    }
    if (n > 0) {
      rend_ += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status(ErrorCode::kDisconnected, "peer closed the connection");
    // EAGAIN: the socket's wait limit passed; SetReceiveWait says whether the deadline has.
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return Errno("recv");
  }
  return Status::Ok();
}

Status Channel::ReadDirect(char* p, size_t size, Deadline deadline) {
  while (size > 0) {
    ssize_t n = ::recv(fd_, p, std::min(size, kMaxReceiveBytes), MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status(ErrorCode::kDisconnected, "peer closed the connection");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      CT_RETURN_IF_ERROR(WaitFor(POLLIN, deadline));
      continue;
    }
    return Errno("recv");
  }
  return Status::Ok();
}

Status Channel::ReadBytes(void* data, size_t size, Deadline deadline) {
  if (fd_ < 0) return Status(ErrorCode::kDisconnected, "channel is closed");
  size_t got = TakeBuffered(data, size);
  return ReadDirect(static_cast<char*>(data) + got, size - got, deadline);
}

Expected<Frame> Channel::ReadFrame(Deadline deadline, uint32_t max_frame_bytes) {
  CT_RETURN_IF_ERROR(Fill(4, deadline));
  CT_ASSIGN_OR_RETURN(uint32_t n,
                      DecodeFrameLength(reinterpret_cast<const unsigned char*>(rbuf_.get() + rbeg_),
                                        max_frame_bytes));
  rbeg_ += 4;
  // A body that fits the buffer is received there (with whatever follows it); a larger one goes
  // straight into its string.
  if (n <= kReadAhead) CT_RETURN_IF_ERROR(Fill(n, deadline));
  std::string body(n, '\0');
  size_t got = TakeBuffered(body.data(), n);
  CT_RETURN_IF_ERROR(ReadDirect(body.data() + got, n - got, deadline));
  return DecodeFrameBody(body.data(), body.size(), utf8_strings_);
}

Status Channel::CheckOutgoingFrame(Opcode op, const std::string& frame) const {
  const size_t body = frame.size() - 4;
  if (body <= max_send_frame_bytes_) return Status::Ok();
  std::string what = op == Opcode::kResult ? std::string("the reply") : std::string(OpcodeName(op));
  return Status(ErrorCode::kLimitExceeded, what + " would be " + std::to_string(body) +
                                               " bytes, over the protocol's frame limit of " +
                                               std::to_string(max_send_frame_bytes_));
}

Status Channel::SendError(uint32_t request_id, const Status& status, Deadline deadline) {
  std::string f = EncodeError(request_id, status);
  return WriteBytes(f.data(), f.size(), deadline);
}

Status Channel::CheckReply(const Frame& f, uint32_t request_id) {
  if (f.op != Opcode::kResult && f.op != Opcode::kError) {
    return Status(ErrorCode::kProtocolError,
                  "expected a reply, got " + std::string(OpcodeName(f.op)));
  }
  // Request id 0 is reserved for errors the peer could not tie to a request (a refused frame).
  if (f.request_id != request_id && f.request_id != 0) {
    return Status(ErrorCode::kProtocolError, "reply to request " + std::to_string(f.request_id) +
                                                 ", expected " + std::to_string(request_id));
  }
  return f.AsStatus();
}

// The chunk buffers below are filled before they are read, so they skip zero-filling.
Status Channel::SendFromFd(int file_fd, uint64_t size, Deadline deadline, ByteSink* hasher) {
  const size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, Limits::kStreamChunkBytes));
  auto buf = std::make_unique_for_overwrite<char[]>(chunk);
  while (size > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(size, chunk));
    ssize_t n = ::read(file_fd, buf.get(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("read");
    if (n == 0) return Status(ErrorCode::kIoError, "file ended early");
    if (hasher) hasher->Update(buf.get(), static_cast<size_t>(n));
    CT_RETURN_IF_ERROR(WriteBytes(buf.get(), static_cast<size_t>(n), deadline));
    size -= static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status Channel::ReceiveToFd(int file_fd, uint64_t size, Deadline deadline, ByteSink* hasher) {
  const size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, Limits::kStreamChunkBytes));
  auto buf = std::make_unique_for_overwrite<char[]>(chunk);
  while (size > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(size, chunk));
    // Bytes read ahead with the header come first, then receives of at most kMaxReceiveBytes.
    Status s = ReadBytes(buf.get(), n, deadline);
    if (s.code() == ErrorCode::kDisconnected) {
      return Status(ErrorCode::kDisconnected, s.message() + " mid-stream");
    }
    CT_RETURN_IF_ERROR(s);
    if (hasher) hasher->Update(buf.get(), n);
    const char* p = buf.get();
    size_t left = n;
    while (left > 0) {
      ssize_t w = ::write(file_fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Errno("write");
      p += w;
      left -= static_cast<size_t>(w);
    }
    size -= n;
  }
  return Status::Ok();
}

Status Channel::Discard(uint64_t size, Deadline deadline) {
  const size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, Limits::kStreamChunkBytes));
  auto buf = std::make_unique_for_overwrite<char[]>(chunk);
  while (size > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(size, chunk));
    CT_RETURN_IF_ERROR(ReadBytes(buf.get(), want, deadline));
    size -= want;
  }
  return Status::Ok();
}

}  // namespace crosstune
