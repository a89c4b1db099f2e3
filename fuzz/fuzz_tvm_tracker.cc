// The TVM side of the tracker (tracker/src/tvm_peers.h), which takes unauthenticated bytes from
// TVM servers and clients: several connections' byte streams interleaved, with connections
// closing and the clock moving, fed to TvmPeers over a real Scheduler. Every reply must be a
// well-formed TVM message, and the scheduler's view must stay consistent (a leased device has a
// holder; no more leases than devices).
//
// The input is a list of steps. A step's first byte b picks the connection (1 + b % 4) and what
// happens (b / 4 % 4): 0 bytes arrive (the next byte is their count), 1 the connection closes,
// 2 the clock moves (the next byte, in tenths of a second, then Scheduler::Tick), 3 the same as 0.
// A connection opens (sends the TVM magic) on its first bytes. Port probes (Tick of TvmPeers, the
// self-checks of quarantined devices) would dial out and are left out.
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "tvm_peers.h"

namespace {

using namespace crosstune::tracker;

// Each reply on the wire: [int32 length][JSON], the length matching.
void CheckReply(const std::string& bytes) {
  if (bytes.size() < 4) std::abort();
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i) len |= uint32_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  if (len != bytes.size() - 4) std::abort();
  if (nlohmann::json::parse(bytes.substr(4), nullptr, false).is_discarded()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  boost::asio::io_context io;
  TimePoint now{};
  SchedulerOptions so;
  uint64_t tokens = 0;
  so.make_token = [&tokens] { return "token" + std::to_string(++tokens); };
  Scheduler sched(so, now);
  sched.unix_ms = [&now] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  };
  TvmOptions to;
  to.allow = true;
  std::map<uint64_t, std::string> pending;  // bytes not used yet, per open connection
  TvmPeers* self = nullptr;
  auto drain = [&] {
    while (sched.HasActions()) {
      for (Action& a : sched.TakeActions()) {
        if (a.kind == Action::Kind::kSelfCheck) continue;  // a port probe: it would dial out
        if (pending.count(a.conn) == 0) continue;          // not a TVM connection (closed)
        if (self->Execute(now, a)) continue;
        if (a.kind == Action::Kind::kGrant) CheckReply(self->EncodeGrant(a));
        if (a.kind == Action::Kind::kCloseConn) {
          pending.erase(a.conn);
          self->Closed(now, a.conn, "replaced");
        }
      }
    }
  };
  TvmPeers::Hooks hooks{[](uint64_t, std::string bytes) { CheckReply(bytes); },
                        [](uint64_t, const std::string&) {}, drain};
  TvmPeers tvm(io, sched, to, hooks);
  self = &tvm;
  if (!tvm.Init().ok()) std::abort();

  for (size_t i = 0; i < size;) {
    uint8_t b = data[i++];
    uint64_t conn = 1 + b % 4;
    int what = b / 4 % 4;
    if (what == 1) {
      if (pending.erase(conn) != 0) tvm.Closed(now, conn, "closed");
    } else if (what == 2) {
      int tenths = i < size ? data[i++] : 1;
      now += std::chrono::milliseconds(100 * tenths);
      sched.Tick(now);
    } else {
      size_t n = i < size ? data[i++] : 0;
      n = std::min(n, size - i);
      if (pending.count(conn) == 0) {
        tvm.Opened(conn, boost::asio::ip::make_address("127.0.0.1"),
                   static_cast<uint16_t>(40000 + conn));
        pending[conn];
      }
      std::string& buf = pending[conn];
      buf.append(reinterpret_cast<const char*>(data + i), n);
      i += n;
      auto used = tvm.OnInput(now, conn, buf);
      if (!used.ok()) {
        pending.erase(conn);
        tvm.Closed(now, conn, used.status().message());
      } else {
        if (*used > buf.size()) std::abort();
        buf.erase(0, *used);
      }
    }
    drain();
    Snapshot snap = sched.Snap(now);
    uint64_t leased = 0;
    for (const auto& d : snap.devices) {
      if (d.state == "granting" || d.state == "in-session" || d.state == "leased") {
        ++leased;
        if (d.holder.empty()) std::abort();
      }
    }
    if (leased > snap.devices.size() || snap.leases_active > snap.devices.size()) std::abort();
  }
  return 0;
}
