// The payload of every frame, one struct per message, encoded as a msgpack array of the fields
// that CT_WIRE_FIELDS names, in that order. The encoding itself lives in wire.h, which only the
// files that encode or decode include: this header is read by most of the tree, msgpack's headers
// (about 2 s of every compile that reads them: g++ 12 and clang 14, 2-core AMD EPYC Zen 3 VM)
// by the few files that need them.
//
// Compatibility: fields are only ever appended; a peer of the same major ignores trailing fields
// it does not know and fills missing trailing ones with defaults.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "crosstune/protocol.h"
#include "crosstune/timing.h"

// A message's fields in wire order, as references (wire.h packs and unpacks them).
#define CT_WIRE_FIELDS(...)                           \
  auto WireFields() { return std::tie(__VA_ARGS__); } \
  auto WireFields() const { return std::tie(__VA_ARGS__); }

namespace crosstune::msg {

struct Empty {
  CT_WIRE_FIELDS()
};

struct Error {
  uint8_t code = 0;  // an ErrorCode
  std::string message;
  CT_WIRE_FIELDS(code, message)
};

// --- Connection ---------------------------------------------------------------------------------

struct Hello {
  uint32_t magic = kProtocolMagic;
  uint16_t major = kProtocolMajor;
  uint16_t minor = kProtocolMinor;
  uint8_t role = 0;         // a PeerRole
  std::string peer_name;    // user@host or a server's key, for logs and the tracker
  std::string lease_token;  // from the tracker; empty when none
  CT_WIRE_FIELDS(magic, major, minor, role, peer_name, lease_token)
};

struct HelloReply {
  uint16_t major = kProtocolMajor;
  uint16_t minor = kProtocolMinor;
  std::string version;  // crosstune release of the peer
  bool auth_required = false;
  std::string nonce;  // random bytes (hex) to answer with an Auth HMAC
  std::string session_id;
  CT_WIRE_FIELDS(major, minor, version, auth_required, nonce, session_id)
};

struct Auth {
  std::string hmac_hex;  // HMAC-SHA256(secret, nonce) in lower-case hex
  CT_WIRE_FIELDS(hmac_hex)
};

// --- Device info --------------------------------------------------------------------------------

struct GpuInfo {
  std::string name;
  std::string arch;  // "sm_90"
  uint64_t memory_bytes = 0;
  // The limits kernel templates check a config against before compiling (0: not reported, e.g.
  // by an older server; the templates then use the architecture's documented values).
  uint32_t max_threads_per_block = 0;
  uint32_t max_shared_per_block = 0;        // bytes a block may declare statically
  uint32_t max_shared_per_block_optin = 0;  // bytes with the function attribute raised
  uint32_t max_registers_per_block = 0;     // 32-bit registers
  uint32_t multiprocessors = 0;
  uint32_t warp_size = 0;
  // The CUDA driver's version ("13.0"; cuDriverGetVersion), empty when not reported.
  std::string driver{};
  CT_WIRE_FIELDS(name, arch, memory_bytes, max_threads_per_block, max_shared_per_block,
                 max_shared_per_block_optin, max_registers_per_block, multiprocessors, warp_size,
                 driver)
};

struct DeviceInfo {
  std::string arch;    // uname machine: x86_64, aarch64, armv7l, riscv64
  std::string triple;  // x86_64-linux-gnu, aarch64-linux-gnu, armv7-linux-gnueabihf
  std::string cpu_model;
  std::vector<std::string> cpu_features;  // LLVM feature names: avx2, avx512f, neon, ...
  uint32_t cores = 0;
  uint64_t memory_bytes = 0;
  std::string os;
  std::vector<GpuInfo> gpus;
  std::string version;
  uint16_t protocol_major = kProtocolMajor;
  uint16_t protocol_minor = kProtocolMinor;
  std::string gpu_status;  // why there are no GPUs ("no CUDA driver"), empty otherwise
  // Bytes of tensors one session may hold (the server's --max-tensor-bytes); 0: not reported
  // (an older server). Clients refuse larger arguments before they allocate anything.
  uint64_t max_tensor_bytes = 0;
  // A build worker (crosstune-build-worker): the target kinds it builds ("cpu", "cuda"); `cores`
  // is then the builds it runs at once. Empty for a device.
  std::vector<std::string> build_targets;
  CT_WIRE_FIELDS(arch, triple, cpu_model, cpu_features, cores, memory_bytes, os, gpus, version,
                 protocol_major, protocol_minor, gpu_status, max_tensor_bytes, build_targets)
};

// --- Files --------------------------------------------------------------------------------------

// Followed by `size` raw bytes. Paths are relative to the session workspace.
struct UploadRequest {
  std::string path;
  uint64_t size = 0;
  std::string sha256_hex;  // checked after the last byte; empty skips the check
  CT_WIRE_FIELDS(path, size, sha256_hex)
};

struct FileRef {
  std::string path;
  CT_WIRE_FIELDS(path)
};

struct FileEntry {
  std::string path;
  uint64_t size = 0;
  std::string sha256_hex;
  CT_WIRE_FIELDS(path, size, sha256_hex)
};

// Reply to Upload, and the header of a Download reply (then `size` raw bytes follow).
using FileReply = FileEntry;

// ListFiles: a client that reads pages says so, and each reply then stops well under the frame
// limit (`more`), to be asked again from its last path. A client that sends no payload (as the
// first ones did) gets the whole list in one reply, or LimitExceeded when it does not fit one
// frame.
struct ListFilesRequest {
  std::string after;   // only paths that sort (bytewise) after this one; "": from the first
  bool paged = false;  // the reply may stop early
  CT_WIRE_FIELDS(after, paged)
};

struct FileList {
  std::vector<FileEntry> files;  // sorted by path
  bool more = false;             // paged: paths after files.back().path remain
  CT_WIRE_FIELDS(files, more)
};

// --- Modules and calls --------------------------------------------------------------------------

struct FunctionInfo {
  std::string name;
  std::string signature;  // kernel_abi.h: 't' tensor, 'i' int64, 'f' float64
  CT_WIRE_FIELDS(name, signature)
};

struct LoadModuleRequest {
  std::string path;  // a .so or .ctpkg in the workspace
  CT_WIRE_FIELDS(path)
};

struct ModuleInfo {
  uint32_t module_id = 0;
  std::string target;
  std::vector<FunctionInfo> functions;
  std::string kind;  // "cpu" or "cuda"
  CT_WIRE_FIELDS(module_id, target, functions, kind)
};

struct ModuleRef {
  uint32_t module_id = 0;
  CT_WIRE_FIELDS(module_id)
};

enum class ArgKind : uint8_t { kInt64 = 0, kFloat64 = 1, kTensor = 2 };

struct Arg {
  uint8_t kind = 0;  // an ArgKind
  int64_t i = 0;
  double f = 0;
  uint32_t tensor_id = 0;
  CT_WIRE_FIELDS(kind, i, f, tensor_id)
};

struct CallRequest {
  uint32_t module_id = 0;
  std::string function;
  std::vector<Arg> args;
  uint32_t timeout_ms = 0;  // 0: the server's default call timeout
  // Threads the module's parallel launches may use (kernel_abi.h); 0: the server's --threads.
  uint32_t threads = 0;
  CT_WIRE_FIELDS(module_id, function, args, timeout_ms, threads)
};

struct CallReply {
  int32_t ret = 0;
  double seconds = 0;    // wall time of the call on the device
  uint32_t threads = 0;  // threads the call could use (0 from servers without a thread pool)
  CT_WIRE_FIELDS(ret, seconds, threads)
};

// The time evaluator of design.md: one warm-up call, then `repeat` rounds of `number` calls;
// a round shorter than min_repeat_ms grows `number` (x1.618 at least) and is measured again.
// The timing fields go on the wire flat, after `call`, as they did before TimingOptions existed.
// stop_above_s: after a round, when more are left and even the fastest round so far took more
// than this per call, the evaluator stops and says so (stopped_early): a tuner's candidate already
// clearly slower than its best spends no more device time. 0: every round. (A server that
// predates the field reads the request without it and runs every round.)
struct TimeRequest {
  CallRequest call;
  TimingOptions timing;
  double stop_above_s = 0;
  CT_WIRE_FIELDS(call, timing.number, timing.repeat, timing.min_repeat_ms, timing.cooldown_ms,
                 timing.flush_cache, stop_above_s)
};

struct TimeReply {
  std::vector<double> seconds_per_call;  // one entry per round
  uint32_t number = 0;                   // calls per round after growth
  uint32_t threads = 0;        // threads the calls could use (0 from servers without a thread pool)
  bool stopped_early = false;  // fewer rounds than asked: stop_above_s stopped it
  CT_WIRE_FIELDS(seconds_per_call, number, threads, stopped_early)
};

// --- Tensors ------------------------------------------------------------------------------------

struct TensorAllocRequest {
  std::vector<int64_t> shape;
  uint8_t dtype_code = 2;  // DLDataTypeCode (kDLFloat = 2)
  uint8_t dtype_bits = 32;
  uint16_t dtype_lanes = 1;
  int32_t device_type = 1;  // DLDeviceType (kDLCPU = 1, kDLCUDA = 2)
  int32_t device_id = 0;
  CT_WIRE_FIELDS(shape, dtype_code, dtype_bits, dtype_lanes, device_type, device_id)
};

struct TensorRef {
  uint32_t tensor_id = 0;
  uint64_t nbytes = 0;
  CT_WIRE_FIELDS(tensor_id, nbytes)
};

// CopyIn is followed by `nbytes` raw bytes; the CopyOut reply (a TensorCopy) by `nbytes` raw bytes.
struct TensorCopy {
  uint32_t tensor_id = 0;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  CT_WIRE_FIELDS(tensor_id, offset, nbytes)
};

// --- Models (the graph executor) ----------------------------------------------------------------

// A model's input or output. dtype in TVM's names ("float32").
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  uint64_t nbytes = 0;
  CT_WIRE_FIELDS(name, shape, dtype, nbytes)
};

// Reply to LoadModel. LoadModel's request is a LoadModuleRequest (a .ctpkg in the workspace).
struct ModelInfo {
  uint32_t model_id = 0;
  std::string target;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  uint32_t nodes = 0;          // operator nodes (kernel calls per run)
  uint64_t storage_bytes = 0;  // activations and scratch, allocated once at load
  uint32_t params = 0;
  uint64_t params_bytes = 0;  // used in place from the mapped params.bin
  uint64_t flops = 0;         // per run, from the nodes' "flops"
  CT_WIRE_FIELDS(model_id, target, inputs, outputs, nodes, storage_bytes, params, params_bytes,
                 flops)
};

struct ModelRef {
  uint32_t model_id = 0;
  CT_WIRE_FIELDS(model_id)
};

// Followed by `nbytes` raw bytes, copied straight into the input's storage. The name must be one
// of the model's inputs, and shape and dtype must be the input's.
struct SetInputRequest {
  uint32_t model_id = 0;
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  uint64_t nbytes = 0;
  CT_WIRE_FIELDS(model_id, name, shape, dtype, nbytes)
};

struct RunModelRequest {
  uint32_t model_id = 0;
  uint32_t timeout_ms = 0;  // for the whole run; 0: the server's call timeout
  uint32_t threads = 0;     // for the kernels' parallel loops; 0: the server's --threads
  CT_WIRE_FIELDS(model_id, timeout_ms, threads)
};

// Reply to RunModel: the wall time of the run on the device.
using RunModelReply = CallReply;

// By name, or by index when name is empty. The reply is a TensorInfo, then `nbytes` raw bytes.
struct GetOutputRequest {
  uint32_t model_id = 0;
  std::string name;
  int64_t index = 0;
  CT_WIRE_FIELDS(model_id, name, index)
};

// TimeModel (whole runs) and ProfileModel (each node on its own, in graph order) under the time
// evaluator's rules; the reply to TimeModel is a TimeReply (seconds per run). The timing fields go
// on the wire flat, between model_id and timeout_ms.
struct TimeModelRequest {
  uint32_t model_id = 0;
  TimingOptions timing;
  uint32_t timeout_ms = 0;  // per run (per node call when profiling); 0: the server's default
  uint32_t threads = 0;
  CT_WIRE_FIELDS(model_id, timing.number, timing.repeat, timing.min_repeat_ms, timing.cooldown_ms,
                 timing.flush_cache, timeout_ms, threads)
};

struct NodeProfile {
  std::string name;
  std::string op_type;
  std::string function;
  std::string shapes;  // "1x64x56x56, 64x64x3x3, 64 -> 1x64x56x56"
  double median_seconds = 0;
  double min_seconds = 0;
  double max_seconds = 0;
  uint64_t number = 0;  // calls per round after growth
  uint64_t flops = 0;
  // The node's median time inside whole runs of the graph (each node after the one before it, as
  // a real run goes: weights and activations as cold as a run leaves them); the times above are
  // of the node run alone, again and again (warm, as the tuner measures a kernel).
  double in_run_median_seconds = 0;
  CT_WIRE_FIELDS(name, op_type, function, shapes, median_seconds, min_seconds, max_seconds, number,
                 flops, in_run_median_seconds)
};

// Reply header of ProfileModel; `body_bytes` follow: a msgpack array of `nodes` NodeProfile.
struct ProfileHeader {
  uint32_t nodes = 0;
  uint64_t body_bytes = 0;
  uint32_t threads = 0;
  CT_WIRE_FIELDS(nodes, body_bytes, threads)
};

// --- Builds (crosstune-build-worker; minor 2) ----------------------------------------------------

// A build job's header; `request_bytes` follow: the builder's request in its own msgpack form
// (opaque here, for common knows nothing of the builder: build_job.h).
struct BuildJob {
  uint64_t request_bytes = 0;
  std::string request_sha256;  // of those bytes; a mismatch is refused with kBadHash
  uint32_t timeout_ms = 0;     // the build's limit (0: the worker's default)
  CT_WIRE_FIELDS(request_bytes, request_sha256, timeout_ms)
};

// The reply header of Build; `result_bytes` follow: the builder's result, the library inside.
struct BuildJobReply {
  uint64_t result_bytes = 0;
  std::string result_sha256;  // of those bytes; the client refuses a mismatch with kBadHash
  CT_WIRE_FIELDS(result_bytes, result_sha256)
};

}  // namespace crosstune::msg
