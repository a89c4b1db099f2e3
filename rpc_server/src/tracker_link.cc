#include "crosstune/server/tracker_link.h"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "crosstune/channel.h"
#include "crosstune/crypto.h"
#include "crosstune/handshake.h"
#include "crosstune/text.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::server {
namespace {

using std::chrono::milliseconds;
constexpr size_t kTokenMax = 96;
constexpr size_t kClaims = 256;

// Lives in a MAP_SHARED page so that session children (after fork) read the token the parent's
// link thread writes, and write the claims it reads. Atomics only: no lock survives a fork.
struct Shared {
  // Seqlock around `token`: odd while the link thread writes it.
  std::atomic<uint64_t> seq{0};
  std::atomic<uint32_t> token_len{0};
  char token[kTokenMax];
  struct Claim {
    // 0 free, 1 being written, 2 claimed (not told to the tracker yet), 3 told.
    std::atomic<uint32_t> state{0};
    std::atomic<int32_t> pid{0};
    std::atomic<uint32_t> len{0};
    char token[kTokenMax];
  } claims[kClaims];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

std::string ReadToken(const Shared& s) {
  for (;;) {
    uint64_t a = s.seq.load(std::memory_order_acquire);
    if (a & 1) continue;
    char buf[kTokenMax];
    uint32_t n = std::min<uint32_t>(s.token_len.load(std::memory_order_relaxed), kTokenMax);
    for (uint32_t i = 0; i < n; ++i) {
      buf[i] = reinterpret_cast<const volatile char*>(s.token)[i];
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) == a) return std::string(buf, n);
  }
}

void WriteToken(Shared& s, const std::string& token) {
  uint32_t n = static_cast<uint32_t>(std::min(token.size(), kTokenMax));
  s.seq.fetch_add(1, std::memory_order_acq_rel);
  for (uint32_t i = 0; i < n; ++i) reinterpret_cast<volatile char*>(s.token)[i] = token[i];
  s.token_len.store(n, std::memory_order_relaxed);
  s.seq.fetch_add(1, std::memory_order_release);
}

std::string ClaimToken(const Shared::Claim& c) {
  uint32_t n = std::min<uint32_t>(c.len.load(std::memory_order_acquire), kTokenMax);
  return std::string(c.token, n);
}

// Which session ends count against the device: the server's own failures, not the user's code.
msg::Outcome OutcomeOf(const Status& s) {
  if (s.ok()) return msg::Outcome::kOk;
  switch (s.code()) {
    case ErrorCode::kInternal:
    case ErrorCode::kIoError:
      return msg::Outcome::kInfraFailure;
    default:
      return msg::Outcome::kUserError;
  }
}

}  // namespace

struct TrackerLink::Impl {
  // Identifies this server process to the tracker across reconnects (msg::Register::server_id).
  const std::string server_id = RandomHex(16);
  explicit Impl(TrackerLinkOptions o) : options(std::move(o)) {
    void* p =
        ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      spdlog::error("tracker link: mmap: {}", std::strerror(errno));
      std::abort();  // no lease checks possible: refuse to run rather than admit everyone
    }
    shared = new (p) Shared();
  }
  ~Impl() {
    shared->~Shared();
    ::munmap(shared, sizeof(Shared));
  }

  TrackerLinkOptions options;
  Shared* shared = nullptr;
  uint16_t port = 0;
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::atomic<bool> registered{false};
  std::deque<msg::SessionEnded> ended;  // under mu

  void Run() {
    milliseconds backoff{500};
    std::mt19937 rng(std::random_device{}());
    bool withdrawn = false;
    while (true) {
      if (Status h = Health(); !h.ok()) {
        // Unfit for good (nothing here mends it): stay away from the tracker until stopped.
        if (!withdrawn) {
          spdlog::error("tracker link: withdrawn from {}: {}", options.tracker,
                        EscapeForLog(h.message()));
          withdrawn = true;
        }
        std::unique_lock<std::mutex> lock(mu);
        if (cv.wait_for(lock, std::chrono::seconds(1), [this] { return stop; })) return;
        continue;
      }
      auto started = Clock::now();
      Status s = Serve();
      registered.store(false);
      {
        std::unique_lock<std::mutex> lock(mu);
        if (stop) return;
      }
      if (!Health().ok()) continue;  // withdrawn: said above, at once
      if (Clock::now() - started > std::chrono::seconds(10)) backoff = milliseconds(500);
      auto jittered = milliseconds(backoff.count() / 2 +
                                   std::uniform_int_distribution<int64_t>(0, backoff.count())(rng));
      spdlog::warn("tracker link: {}: {}; reconnecting in {} ms", options.tracker, s.ToString(),
                   jittered.count());
      std::unique_lock<std::mutex> lock(mu);
      if (cv.wait_for(lock, jittered, [this] { return stop; })) return;
      backoff = std::min(backoff * 2, options.max_backoff);
    }
  }

  Status Health() const { return options.health ? options.health() : Status::Ok(); }

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu);
    return stop;
  }

  // Adopts a token; sessions of a token that is no longer current are ended at once, so an
  // expired or kicked holder cannot go on using the device.
  void SetToken(const std::string& token) {
    std::string old = ReadToken(*shared);
    if (old == token) return;
    WriteToken(*shared, token);
    if (old.empty()) return;
    for (auto& c : shared->claims) {
      uint32_t st = c.state.load(std::memory_order_acquire);
      if (st < 2 || ClaimToken(c) != old) continue;
      int pid = c.pid.load();
      if (pid > 0 && pid != ::getpid()) {
        spdlog::info("tracker link: lease revoked; ending session process {}", pid);
        if (options.end_session) {
          options.end_session(pid);
        } else {
          ::kill(pid, SIGKILL);
        }
      }
    }
  }

  bool SessionActive() {
    for (auto& c : shared->claims) {
      if (c.state.load(std::memory_order_acquire) >= 2) return true;
    }
    return false;
  }

  // One connection to the tracker, from connect to loss.
  Status Serve() {
    std::string host;
    uint16_t tport = 0;
    CT_RETURN_IF_ERROR(Channel::ParseHostPort(options.tracker, &host, &tport));
    auto deadline = DeadlineIn(milliseconds(5000));
    CT_ASSIGN_OR_RETURN(Channel ch, Channel::Connect(host, tport, deadline));
    msg::Hello hello;
    hello.role = static_cast<uint8_t>(PeerRole::kServer);
    hello.peer_name = options.key;
    CT_RETURN_IF_ERROR(ClientHandshake(ch, hello, options.auth_secret, deadline).status());
    msg::Register reg;
    reg.key = options.key;
    reg.tags = options.tags;
    reg.info = options.info;
    reg.custom_addr = options.custom_addr;
    reg.port = port;
    reg.lease_token = ReadToken(*shared);
    reg.session_active = SessionActive();
    reg.server_id = server_id;
    CT_ASSIGN_OR_RETURN(auto reply, ch.Call<msg::RegisterReply>(Opcode::kRegister, reg, deadline));
    SetToken(reply.lease_token);
    registered.store(true);
    spdlog::info("tracker link: registered with {} as {} (key {})", options.tracker, reply.device,
                 options.key);
    if (options.on_registered) options.on_registered(reply.device);
    milliseconds hb(std::max<uint32_t>(reply.heartbeat_ms, 50));
    milliseconds silence = hb * 3 + milliseconds(2000);
    auto last_rx = Clock::now();
    auto next_hb = Clock::now();
    auto io = [] { return DeadlineIn(milliseconds(5000)); };
    for (;;) {
      if (Stopping()) return Status::Ok();
      CT_RETURN_IF_ERROR(Health());
      // Claims made by session processes since the last look.
      for (auto& c : shared->claims) {
        uint32_t two = 2;
        if (c.state.load(std::memory_order_acquire) == 2 &&
            c.state.compare_exchange_strong(two, 3)) {
          CT_RETURN_IF_ERROR(
              ch.Send(Opcode::kCheckLease, ch.NextRequestId(), msg::LeaseRef{ClaimToken(c)}, io()));
        }
      }
      std::deque<msg::SessionEnded> ends;
      {
        std::lock_guard<std::mutex> lock(mu);
        ends.swap(ended);
      }
      while (!ends.empty()) {
        Status s = ch.Send(Opcode::kSessionEnded, ch.NextRequestId(), ends.front(), io());
        if (!s.ok()) {
          // Keep the reports for the next connection.
          std::lock_guard<std::mutex> lock(mu);
          ended.insert(ended.begin(), ends.begin(), ends.end());
          return s;
        }
        ends.pop_front();
      }
      auto now = Clock::now();
      if (now >= next_hb) {
        msg::ServerHeartbeat beat{SessionActive(), ReadToken(*shared)};
        CT_RETURN_IF_ERROR(ch.Send(Opcode::kHeartbeat, ch.NextRequestId(), beat, io()));
        next_hb = now + hb;
      }
      if (now - last_rx > silence) {
        return Status(ErrorCode::kTimeout,
                      "tracker silent for " + std::to_string(silence.count()) + " ms");
      }
      auto wait = std::min<milliseconds>(milliseconds(50),
                                         std::chrono::duration_cast<milliseconds>(next_hb - now));
      if (!ch.has_buffered_input()) {  // a frame read ahead is no longer in the socket
        pollfd p{ch.fd(), POLLIN, 0};
        int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(wait.count(), 1)));
        if (n <= 0) continue;
      }
      CT_ASSIGN_OR_RETURN(Frame f, ch.ReadFrame(io()));
      last_rx = Clock::now();
      switch (f.op) {
        case Opcode::kGrant: {
          auto set = f.As<msg::SetLease>();
          if (!set.ok()) {
            CT_RETURN_IF_ERROR(ch.SendError(f.request_id, set.status(), io()));
            break;
          }
          SetToken(set->lease_token);
          if (!set->lease_token.empty()) {
            spdlog::info("tracker link: leased to {}", EscapeForLog(set->holder));
          }
          CT_RETURN_IF_ERROR(ch.Send(Opcode::kResult, f.request_id, msg::Empty{}, io()));
          break;
        }
        case Opcode::kAdmin: {
          Status s = options.self_check ? options.self_check() : Status::Ok();
          spdlog::info("tracker link: self-check: {}", s.ok() ? "ok" : s.ToString());
          if (s.ok()) {
            CT_RETURN_IF_ERROR(ch.Send(Opcode::kResult, f.request_id, msg::Empty{}, io()));
          } else {
            CT_RETURN_IF_ERROR(ch.SendError(f.request_id, s, io()));
          }
          break;
        }
        case Opcode::kResult:
          break;
        case Opcode::kError:
          spdlog::warn("tracker link: tracker: {}", EscapeForLog(f.AsStatus().ToString()));
          break;
        default:
          CT_RETURN_IF_ERROR(ch.SendError(
              f.request_id,
              Status(
                  ErrorCode::kProtocolError,
                  "a server does not serve " + std::string(OpcodeName(f.op)) + " from a tracker"),
              io()));
      }
    }
  }
};

TrackerLink::TrackerLink(TrackerLinkOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

TrackerLink::~TrackerLink() { Stop(); }

void TrackerLink::Start(uint16_t port) {
  impl_->port = port;
  impl_->thread = std::thread([this] { impl_->Run(); });
}

void TrackerLink::Stop() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Status TrackerLink::AcceptHello(const msg::Hello& hello) {
  std::string current = ReadToken(*impl_->shared);
  if (hello.lease_token.empty() || current.empty() ||
      !ConstantTimeEquals(hello.lease_token, current)) {
    return Status(ErrorCode::kUnauthorized,
                  std::string(hello.lease_token.empty() ? "no lease token"
                                                        : "lease token is not current (expired, "
                                                          "released or kicked)") +
                      ": this device is shared through the tracker " + impl_->options.tracker +
                      "; ask it for a lease (--tracker " + impl_->options.tracker + " --key " +
                      impl_->options.key + ")");
  }
  for (auto& c : impl_->shared->claims) {
    uint32_t zero = 0;
    if (c.state.load(std::memory_order_relaxed) != 0 || !c.state.compare_exchange_strong(zero, 1)) {
      continue;
    }
    size_t n = std::min(current.size(), kTokenMax);
    std::memcpy(c.token, current.data(), n);
    c.len.store(static_cast<uint32_t>(n), std::memory_order_relaxed);
    c.pid.store(::getpid(), std::memory_order_relaxed);
    c.state.store(2, std::memory_order_release);
    break;
  }
  return Status::Ok();
}

void TrackerLink::OnSessionEnd(int pid, const Status& reported) {
  for (auto& c : impl_->shared->claims) {
    uint32_t st = c.state.load(std::memory_order_acquire);
    if (st < 2 || c.pid.load() != pid) continue;
    msg::SessionEnded e;
    e.lease_token = ClaimToken(c);
    // Freed before the end is queued: the link never reports a start after its end.
    bool freed = false;
    while (st >= 2 && !(freed = c.state.compare_exchange_weak(st, 0))) {
    }
    if (!freed) continue;
    e.outcome = static_cast<uint8_t>(OutcomeOf(reported));
    e.message = reported.ok() ? "" : reported.ToString();
    {
      // A claim not told to the tracker yet needs no CheckLease: SessionEnded ends the grant.
      std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->ended.push_back(std::move(e));
    }
  }
}

std::string TrackerLink::current_token() const { return ReadToken(*impl_->shared); }
bool TrackerLink::registered() const { return impl_->registered.load(); }

Expected<std::map<std::string, std::string>> ParseTrackerFlags(
    const std::string& tracker, const std::string& key, const std::string& custom_addr,
    const std::vector<std::string>& tags) {
  if (!tracker.empty() && key.empty()) {
    return Status(ErrorCode::kInvalidArgument, "--tracker needs --key");
  }
  if (!IsValidUtf8(key)) return Status(ErrorCode::kInvalidArgument, "--key is not valid UTF-8");
  if (!IsValidUtf8(custom_addr)) {
    return Status(ErrorCode::kInvalidArgument, "--custom-addr is not valid UTF-8");
  }
  std::map<std::string, std::string> parsed;
  for (const auto& t : tags) {
    // Checked first: the message below quotes the tag.
    if (!IsValidUtf8(t)) {
      return Status(ErrorCode::kInvalidArgument,
                    "--tag is not valid UTF-8 (convert it, e.g. with iconv -f latin1)");
    }
    auto eq = t.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status(ErrorCode::kInvalidArgument, "--tag '" + t + "': expected key=value");
    }
    parsed[t.substr(0, eq)] = t.substr(eq + 1);
  }
  return parsed;
}

bool ExitWithParent() {
#ifdef __linux__
  // Checked once after asking: the parent may have died before the request.
  pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  return ::getppid() == parent;
#else
  return true;
#endif
}

}  // namespace crosstune::server
