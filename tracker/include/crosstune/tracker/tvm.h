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
  // a row drop the device.
  std::chrono::milliseconds probe_interval{10'000};
  std::chrono::milliseconds probe_timeout{3'000};
  int probe_failures = 2;
};

namespace tvm {

constexpr int32_t kTrackerMagic = 0x2F271;  // little-endian int32, first on every connection
constexpr int32_t kRpcMagic = 0xFF271;      // first on a client's connection to a TVM server
constexpr int32_t kMaxMessageBytes = 1 << 20;
// A server's UPDATE_INFO dict, all updates merged (TVM servers send {key, addr}: ~100 bytes).
constexpr size_t kMaxInfoBytes = 64 << 10;

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
