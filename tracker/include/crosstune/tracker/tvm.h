// Apache TVM's RPC tracker protocol, served on crosstune-tracker's own port so that TVM's RPC
// servers and clients (`tvm.rpc.connect_tracker`, MetaSchedule's RPC runner,
// `tvm.exec.query_rpc_tracker`) use the tracker unchanged. See tracker/src/tvm_peers.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace crosstune::tracker {

struct TvmOptions {
  // TVM's protocol has no authentication: TVM peers are refused unless this is set.
  bool allow = false;
  // CIDR networks ("10.0.0.0/8", "::1/128") TVM peers may connect from; empty: any.
  std::vector<std::string> networks;
  // A TVM client blocks on its request without limit; the tracker ends the wait after this.
  // 0: the scheduler's default queue timeout.
  std::chrono::milliseconds request_timeout{0};
  // An idle TVM server's port is probed this often (a connect and 4 bytes that are not TVM's
  // RPC magic, which the server closes without starting a session); this many failed probes in
  // a row take the device out of the pool until a probe passes. The peer is not told (its
  // connection stays open, its replies stay the same).
  std::chrono::milliseconds probe_interval{10'000};
  std::chrono::milliseconds probe_timeout{3'000};
  int probe_failures = 2;
  // A TVM server's PUT may name an address for clients other than the one it connects from
  // (custom_addr), and the tracker probes that address. Off: such a PUT is refused, so a peer
  // cannot make the tracker probe other hosts for it. On: IP addresses within `networks` (which
  // must then be set) are accepted too; host names never are (resolving them would be an
  // oracle). Either way the peer's answers never depend on the probes, but whoever can see the
  // pool (a TVM SUMMARY or REQUEST, /api/summary) sees whether the device is in it.
  bool allow_custom_addr = false;
  // TVM connections (servers and clients) open at once, in total and from one address; more are
  // refused as TVM's tracker refuses a peer (its magic answered with -1). Counted apart from the
  // limits on crosstune connections waiting for their handshake.
  size_t max_conns = 1024;
  size_t max_conns_per_peer = 128;
};

namespace tvm {

constexpr int32_t kTrackerMagic = 0x2F271;  // little-endian int32, first on every connection
constexpr int32_t kRpcMagic = 0xFF271;      // first on a client's connection to a TVM server
constexpr int32_t kMaxMessageBytes = 1 << 20;
// A server's UPDATE_INFO dict, all updates merged (TVM servers send {key, addr}: ~100 bytes).
constexpr size_t kMaxInfoBytes = 64 << 10;
// A SUMMARY reply: servers' infos past this are left out of its server_info.
constexpr size_t kMaxSummaryBytes = 1 << 20;

// TVM's TrackerCode (python/tvm/rpc/base.py).
enum Code : int {
  kFail = -1,
  kSuccess = 0,
  kPing = 1,
  kStop = 2,
  kPut = 3,
  kRequest = 4,
  kUpdateInfo = 5,
  kSummary = 6,
  kGetPendingMatchKeys = 7,
};

// Whether a connection's first four bytes are TVM's tracker magic. A crosstune peer starts with
// the length of its Hello frame, which is never that large.
bool IsTrackerMagic(const unsigned char first[4]);

}  // namespace tvm
}  // namespace crosstune::tracker
