// The wire protocol in one place: magic, versions, opcodes, error codes and limits.
//
// A frame is a little-endian u32 body length followed by a msgpack body. Every body is an array
// [opcode, request_id, payload], where payload is the message struct of messages.h for that opcode
// (itself a msgpack array). Replies carry Opcode::kResult or Opcode::kError and the request_id of
// the request they answer; every request gets exactly one reply. Bulk bytes (uploads, downloads,
// tensor copies) follow their header frame as a raw byte stream of the length the header names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "crosstune/error_code.h"

namespace crosstune {

// "CTUN" read as a little-endian u32.
inline constexpr uint32_t kProtocolMagic = 0x4e555443;
// A different major is refused with kVersionMismatch; minors are compatible both ways.
inline constexpr uint16_t kProtocolMajor = 1;
// The minor and crosstune's version are defined in protocol.cc (the history of minors is there):
// a bump recompiles that file, not every file that reads this header.
extern const uint16_t kProtocolMinor;
extern const std::string_view kCrosstuneVersion;

enum class Opcode : uint16_t {
  // Replies.
  kResult = 0,
  kError = 1,
  // Connection.
  kHello = 10,      // client -> peer, first frame on every connection
  kChallenge = 11,  // peer -> client: nonce to answer with an HMAC (auth enabled)
  kAuth = 12,       // client -> peer: HMAC over the nonce
  kPing = 13,
  kClose = 14,
  // Session (rpc server).
  kInfo = 20,
  kUpload = 21,    // header, then `size` raw bytes
  kDownload = 22,  // reply header, then `size` raw bytes
  kListFiles = 23,
  kRemoveFile = 24,
  kLoadModule = 30,
  kUnloadModule = 31,
  kListFunctions = 32,
  kCall = 33,
  kTimeCall = 34,
  kTensorAlloc = 40,
  kTensorFree = 41,
  kTensorCopyIn = 42,   // header, then `nbytes` raw bytes
  kTensorCopyOut = 43,  // reply header, then `nbytes` raw bytes
  // Models (the graph executor; minor 1).
  kLoadModel = 50,
  kUnloadModel = 51,
  kSetInput = 52,  // header, then `nbytes` raw bytes
  kRunModel = 53,
  kGetOutput = 54,  // reply header, then `nbytes` raw bytes
  kTimeModel = 55,
  kProfileModel = 56,  // reply header, then `body_bytes` of msgpack
  // Tracker (tracker/ owns the payloads of these).
  kRegister = 60,
  kHeartbeat = 61,
  kRequestDevice = 62,
  kQueueUpdate = 63,
  kGrant = 64,
  kRenewLease = 65,
  kReleaseLease = 66,
  kCancelRequest = 67,
  kQuery = 68,
  kAdmin = 69,
  kSessionEnded = 70,
  kCheckLease = 71,
  kTuneProgress = 72,
  // The farm's tuning records (minor 3; kRecordsList minor 4).
  kRecordsPut = 73,
  kRecordsQuery = 74,
  kRecordsClaim = 75,
  kRecordsList = 76,
  // Build workers (crosstune-build-worker; minor 2).
  kBuild = 80,  // header, then `request_bytes` raw bytes; reply header, then `result_bytes`
};

std::string_view OpcodeName(Opcode op);
bool IsKnownOpcode(uint16_t op);

// Limits, checked before any allocation sized by a peer.
struct Limits {
  static constexpr uint32_t kMaxFrameBytes = 1u << 20;  // 1 MiB of msgpack per frame
  // Until a peer has completed its handshake (Hello, Auth) its frames are capped this small, so
  // an unauthenticated connection costs little memory.
  static constexpr uint32_t kMaxHandshakeFrameBytes = 4096;
  static constexpr size_t kMaxPathBytes = 1024;
  static constexpr int kMaxTensorRank = 8;
  static constexpr int kMaxCallArgs = 64;
  static constexpr size_t kStreamChunkBytes = 1u << 20;  // bulk bytes move in 1 MiB chunks
  // TimeCall: rounds per request (the reply holds one double per round, far under a frame), and
  // the longest min_repeat_ms and cooldown_ms.
  static constexpr uint32_t kMaxTimeRepeat = 10'000;
  static constexpr uint32_t kMaxTimeRoundMs = 600'000;
  // A build job's request (kernel source and the objects it links) and its result (the library),
  // each way; as the builder's own worker frames.
  static constexpr uint64_t kMaxBuildJobBytes = uint64_t{1} << 30;
};

enum class PeerRole : uint8_t { kClient = 0, kServer = 1, kTracker = 2, kAdmin = 3 };

}  // namespace crosstune
