#include "receive_file.h"

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace crosstune::server {
namespace {

// Below this the helper threads cost more than they save.
constexpr uint64_t kPipelineMinBytes = uint64_t{8} << 20;
constexpr size_t kBuffers = 8;

Status WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status(ErrorCode::kIoError, std::string("write: ") + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Chunks flow socket -> {hasher, writer} -> free list. Both consumers see every chunk in order;
// a chunk is free again when both are done with it.
class Pipeline {
 public:
  struct Chunk {
    std::unique_ptr<char[]> data;  // Limits::kStreamChunkBytes, filled before it is read
    size_t size = 0;
    int pending = 0;  // consumers still using it
  };

  explicit Pipeline(size_t buffers) : chunks_(buffers) {
    for (auto& c : chunks_) {
      c.data = std::make_unique_for_overwrite<char[]>(Limits::kStreamChunkBytes);
      free_.push_back(&c);
    }
  }

  Chunk* TakeFree() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !free_.empty(); });
    Chunk* c = free_.front();
    free_.pop_front();
    return c;
  }
  void Publish(Chunk* c) {
    std::lock_guard<std::mutex> lock(mu_);
    c->pending = 2;
    for (auto& q : queues_) q.push_back(c);
    cv_.notify_all();
  }
  void Return(Chunk* c) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(c);
    cv_.notify_all();
  }
  // Consumer `which` (0 or 1): the next chunk, or null once Finish() ran and its queue is empty.
  Chunk* Next(int which) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queues_[which].empty() || finished_; });
    if (queues_[which].empty()) return nullptr;
    Chunk* c = queues_[which].front();
    queues_[which].pop_front();
    return c;
  }
  void Done(Chunk* c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (--c->pending == 0) {
      free_.push_back(c);
      cv_.notify_all();
    }
  }
  void Finish() {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }

 private:
  std::vector<Chunk> chunks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk*> free_;
  std::deque<Chunk*> queues_[2];
  bool finished_ = false;
};

}  // namespace

Status ReceiveFile(Channel& ch, int file_fd, uint64_t size, Deadline deadline, Sha256* sha,
                   bool* in_step) {
  *in_step = false;
  if (size < kPipelineMinBytes) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, Limits::kStreamChunkBytes));
    auto buf = std::make_unique_for_overwrite<char[]>(chunk);
    Status write_status;
    for (uint64_t left = size; left > 0;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk));
      CT_RETURN_IF_ERROR(ch.ReadBytes(buf.get(), n, deadline));
      sha->Update(buf.get(), n);
      if (write_status.ok()) write_status = WriteAll(file_fd, buf.get(), n);
      left -= n;
    }
    *in_step = true;
    return write_status;
  }

  Pipeline pipe(kBuffers);
  std::thread hasher([&] {
    while (Pipeline::Chunk* c = pipe.Next(0)) {
      sha->Update(c->data.get(), c->size);
      pipe.Done(c);
    }
  });
  Status write_status;  // only the writer thread touches it until join
  std::thread writer([&] {
    while (Pipeline::Chunk* c = pipe.Next(1)) {
      if (write_status.ok()) write_status = WriteAll(file_fd, c->data.get(), c->size);
      pipe.Done(c);
    }
  });

  Status status;
  uint64_t left = size;
  while (left > 0) {
    Pipeline::Chunk* c = pipe.TakeFree();
    c->size = static_cast<size_t>(std::min<uint64_t>(left, Limits::kStreamChunkBytes));
    status = ch.ReadBytes(c->data.get(), c->size, deadline);
    if (!status.ok()) {
      pipe.Return(c);
      break;
    }
    left -= c->size;
    pipe.Publish(c);
  }
  pipe.Finish();
  hasher.join();
  writer.join();
  if (!status.ok()) return status;
  *in_step = true;
  return write_status;
}

}  // namespace crosstune::server
