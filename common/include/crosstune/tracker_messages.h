// Payloads of the tracker opcodes (protocol.h kRegister .. kTuneProgress), shared by the tracker,
// the rpc server's tracker link and the client library. Same rules as messages.h: msgpack arrays
// of the CT_WIRE_FIELDS (wire.h), fields only ever appended.
//
// Who sends what, after the usual handshake (Hello with role kServer / kClient / kAdmin):
//
//   server -> tracker  kRegister     Register          -> RegisterReply
//   server -> tracker  kHeartbeat    ServerHeartbeat   -> Empty          (every heartbeat_ms)
//   server -> tracker  kCheckLease   LeaseRef          -> Empty | error  (a client opened a
//                                                        session with this token: grant claimed)
//   server -> tracker  kSessionEnded SessionEnded      -> Empty
//   tracker -> server  kGrant        SetLease          -> Empty          (accept only this token
//                                                        from now on; "" accepts none)
//   tracker -> server  kAdmin        SelfCheck         -> Empty | error  (quarantine re-admission)
//
//   client -> tracker  kRequestDevice DeviceRequest    -> kQueueUpdate QueueUpdate notifications
//                                                        (same request id), then Grant | error
//   client -> tracker  kCancelRequest CancelRequest    -> Empty (the request itself then fails)
//   client -> tracker  kRenewLease   RenewLease        -> LeaseInfo (also re-attaches a lease to
//                                                        this connection after a tracker restart)
//   client -> tracker  kReleaseLease ReleaseLease      -> Empty
//   client -> tracker  kHeartbeat    Empty             -> Empty          (keep-alive while queued)
//   client -> tracker  kTuneProgress TuneProgress      -> Empty | error  (a tune run's progress,
//                                                        at most once a second, for the status
//                                                        page and /metrics)
//   client -> tracker  kRecordsPut   RecordsPut        -> RecordsPutReply (tuning records
//                                                        kept for the farm; a record sent again
//                                                        is counted, not kept twice)
//   client -> tracker  kRecordsQuery RecordsQuery      -> RecordsReply (a task's records on a
//                                                        device kind, or on the nearest one)
//   client -> tracker  kRecordsClaim RecordsClaim      -> RecordsClaimReply (the configs this
//                                                        run may time: none measured or claimed
//                                                        by another run on that device kind)
//   client -> tracker  kRecordsList  RecordsList       -> RecordsListReply (per task, target and
//                                                        device kind: records kept, the best)
//   any    -> tracker  kQuery        Empty             -> QueryReply (the /api/summary JSON)
//   admin  -> tracker  kAdmin        AdminRequest      -> Empty | error
//
// Lease tokens: the tracker pushes the current token of a device to its server over the
// registration connection (SetLease) before the client hears of the grant, and the server
// accepts a session only with that token. The server keeps the token it was last told, so
// sessions keep working while the tracker restarts; a revoked (expired, kicked, released)
// lease is pushed as "" and refused from then on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "crosstune/messages.h"

namespace crosstune::msg {

struct Register {
  std::string key;                          // e.g. "rpi4"
  std::map<std::string, std::string> tags;  // --tag k=v
  DeviceInfo info;
  std::string custom_addr;  // "host" or "host:port" clients can reach; empty: the address the
                            // tracker sees, with `port`
  uint16_t port = 0;        // the server's session port
  std::string lease_token;  // the token the server accepts now (re-registration after restart)
  bool session_active = false;
  // Random per server process, the same across its reconnects: only the server that holds a
  // live registration may replace it.
  std::string server_id;
  CT_WIRE_FIELDS(key, tags, info, custom_addr, port, lease_token, session_active, server_id)
};

struct RegisterReply {
  std::string device;         // the device's name at the tracker ("host:port")
  uint32_t heartbeat_ms = 0;  // send a ServerHeartbeat this often
  std::string lease_token;    // the token to accept now ("" none)
  CT_WIRE_FIELDS(device, heartbeat_ms, lease_token)
};

struct ServerHeartbeat {
  bool session_active = false;
  std::string lease_token;
  CT_WIRE_FIELDS(session_active, lease_token)
};

struct SetLease {
  std::string lease_token;  // "" revokes
  std::string holder;       // for the server's log
  CT_WIRE_FIELDS(lease_token, holder)
};

struct SelfCheck {
  CT_WIRE_FIELDS()
};

struct LeaseRef {
  std::string lease_token;
  CT_WIRE_FIELDS(lease_token)
};

// How a session or a lease ended, as the server or the client reports it. Infrastructure
// failures count towards quarantine; kernel errors and crashes of uploaded code do not.
enum class Outcome : uint8_t {
  kOk = 0,
  kUserError = 1,     // the client's code failed (RemoteCrash, KernelError, ...)
  kInfraFailure = 2,  // the server itself failed (session child lost, workspace error, ...)
  kUnreachable = 3,   // the client could not reach the granted address
};

struct SessionEnded {
  std::string lease_token;
  uint8_t outcome = 0;  // an Outcome
  std::string message;
  CT_WIRE_FIELDS(lease_token, outcome, message)
};

// A constraint is "name=value", "name!=value", "name>=number", "name<=number" or "+feature",
// where name is a tag of the device or one of its attributes: arch, triple, cpu, cores,
// memory_mb, gpus, gpu_arch, os, version.
struct DeviceRequest {
  std::string key;
  std::vector<std::string> constraints;
  int32_t priority = 0;           // higher first
  uint32_t queue_timeout_ms = 0;  // 0: the tracker's default
  uint32_t lease_ms = 0;          // 0: the tracker's default; renew before it runs out
  std::string holder;             // user@host, shown on the status page
  // false: the lease ends with the first session on the device (a `crosstune run`);
  // true: it lasts until released, expired or disconnected (a `crosstune lease` hold).
  bool multi_session = false;
  CT_WIRE_FIELDS(key, constraints, priority, queue_timeout_ms, lease_ms, holder, multi_session)
};

struct QueueUpdate {
  uint32_t position = 0;  // 1: next in line
  uint32_t queue_length = 0;
  uint64_t waited_ms = 0;
  std::string note;  // e.g. "every matching device is busy"
  CT_WIRE_FIELDS(position, queue_length, waited_ms, note)
};

struct Grant {
  std::string device;
  std::string address;  // host:port of the server
  std::string lease_token;
  uint32_t lease_ms = 0;
  std::string key;
  CT_WIRE_FIELDS(device, address, lease_token, lease_ms, key)
};

struct CancelRequest {
  uint32_t request_id = 0;  // of the DeviceRequest frame on this connection
  CT_WIRE_FIELDS(request_id)
};

struct RenewLease {
  std::string lease_token;
  uint32_t lease_ms = 0;  // 0: the lease's own length
  CT_WIRE_FIELDS(lease_token, lease_ms)
};

struct LeaseInfo {
  std::string device;
  std::string address;
  uint64_t remaining_ms = 0;
  CT_WIRE_FIELDS(device, address, remaining_ms)
};

struct ReleaseLease {
  std::string lease_token;
  uint8_t outcome = 0;  // an Outcome (kUnreachable when the granted address did not answer)
  std::string message;
  CT_WIRE_FIELDS(lease_token, outcome, message)
};

// A tune run's progress. Bounded by the tracker (tracker/tune_runs.h: ids and names, at most
// kMaxTuneProgressLeases leases and 16 error kinds); every lease named must be active (a token is
// its holder's secret). A run on more devices names some of its leases.
inline constexpr size_t kMaxTuneProgressLeases = 16;
struct TuneProgress {
  std::string run_id;
  std::vector<std::string> lease_tokens;  // the run's leases
  std::string task;                       // e.g. "matmul 256,256,256"
  uint32_t trials = 0;                    // of the task in the log, this run's included
  uint32_t total = 0;                     // the run's goal
  uint32_t measured = 0;                  // by this run
  double best_gflops = 0;
  std::map<std::string, uint32_t> errors;  // this run's failed trials by kind
  double rate = 0;                         // trials per second
  bool finished = false;                   // the last report of the run
  // This run's trials the device stopped timing early as clear losers (TuneSummary's).
  uint32_t stopped_early = 0;
  // The device kind whose farm records the run started from (warm start), "" when none.
  std::string warm_from;
  CT_WIRE_FIELDS(run_id, lease_tokens, task, trials, total, measured, best_gflops, errors, rate,
                 finished, stopped_early, warm_from)
};

// --- The farm's tuning records (tracker/records.h) ---------------------------------------------

// One tuning record as the farm keeps it: what the tracker finds it by, and the record itself,
// the JSON line the tuner writes to its log (tuner/records.h), kept as sent. The tracker checks
// the bounds and that `json` is a JSON object; the fields beside it are the sender's reading of
// it, as the tuner writes both.
inline constexpr size_t kMaxFarmRecordBytes = 64 << 10;  // of `json`
inline constexpr size_t kMaxRecordsPerMessage = 256;
struct FarmRecord {
  std::string task;         // TaskId::Key(): "matmul 512,512,512 float32"
  std::string target;       // the builder's target string
  std::string device_kind;  // "ARCH/CPU" (tuner's DeviceKind): the device's fingerprint
  std::string generator;    // GeneratorHash of the measured code; "" in old logs
  uint64_t config_index = 0;
  bool ok = false;             // measured without error
  double mean = 0;             // seconds per call; 0 when failed
  bool stopped_early = false;  // `mean` is a lower bound (tuner/records.h)
  std::string json;
  // Filled in by the tracker on the way out: who sent it (the connection's name) and when.
  std::string sender;
  int64_t received_unix_ms = 0;
  uint64_t id = 0;  // the tracker's row id: later rows have larger ids
  CT_WIRE_FIELDS(task, target, device_kind, generator, config_index, ok, mean, stopped_early, json,
                 sender, received_unix_ms, id)
};

struct RecordsPut {
  std::string run_id;
  std::vector<FarmRecord> records;  // at most kMaxRecordsPerMessage
  CT_WIRE_FIELDS(run_id, records)
};
struct RecordsPutReply {
  uint32_t added = 0;
  uint32_t duplicates = 0;  // the same JSON line already kept (a retry): not kept again
  CT_WIRE_FIELDS(added, duplicates)
};

// A task's records for a target on a device kind; where the farm has none on that kind, those of
// the nearest kind that has some (same architecture first: tracker/records.h), and the reply says
// which. `best_only`: the best successful record per device kind and generator; otherwise every
// record with an id above `after_id`, oldest first, at most `limit` (more follow from the last
// id).
struct RecordsQuery {
  std::string task;
  std::string target;
  std::string device_kind;
  bool best_only = false;
  uint64_t after_id = 0;
  uint32_t limit = 0;   // 0: kMaxRecordsPerMessage
  bool nearest = true;  // fall back to the nearest kind where this one has none
  // With `nearest`: where no kind has records of the task for this target, the nearest kind's
  // for another target (of the kinds of the same architecture; its target with most records).
  bool any_target = false;
  CT_WIRE_FIELDS(task, target, device_kind, best_only, after_id, limit, nearest, any_target)
};
struct RecordsReply {
  std::vector<FarmRecord> records;
  std::string device_kind;  // the kind the records are of
  bool exact = true;        // false: the nearest kind's, none of this one's
  bool more = false;        // the limit cut the list short
  std::string target;       // the target the records are for (another only with any_target)
  CT_WIRE_FIELDS(records, device_kind, exact, more, target)
};

// Before timing configs of a task on a device kind, a run claims them: the reply grants those no
// record covers yet (on that kind, made by the same generator) and that no other run holds an
// unexpired claim on. Claims last `ttl_ms` (at most 10 minutes) or until a record of the config
// arrives.
inline constexpr size_t kMaxClaimConfigs = 1024;
struct RecordsClaim {
  std::string run_id;  // the claimant: one run's claims are its own
  std::string task;
  std::string target;
  std::string device_kind;
  std::vector<uint64_t> configs;
  std::vector<std::string> generators;  // each config's GeneratorHash (as many, or none: "")
  uint32_t ttl_ms = 0;
  CT_WIRE_FIELDS(run_id, task, target, device_kind, configs, generators, ttl_ms)
};
struct RecordsClaimReply {
  std::vector<uint64_t> granted;
  std::vector<uint64_t> measured;  // a record covers them: their result is in the farm's records
  CT_WIRE_FIELDS(granted, measured)
};

// What the farm holds, per task, target and device kind (`crosstune records ls`, the status
// page): tasks whose key starts with `task_prefix`, in (task, target, kind) order from the first
// after `after` (the last row of the page before), at most `limit` rows (at most
// kMaxRecordsListRows).
inline constexpr uint32_t kMaxRecordsListRows = 1000;
struct RecordsSummaryRow {
  std::string task;
  std::string target;
  std::string device_kind;
  uint64_t records = 0;
  double best_mean = 0;      // seconds; 0: no successful measurement
  uint64_t best_config = 0;  // the best record's config index
  std::string best_run_id;   // and the run that sent it
  std::string best_sender;
  CT_WIRE_FIELDS(task, target, device_kind, records, best_mean, best_config, best_run_id,
                 best_sender)
};
struct RecordsList {
  std::string task_prefix;
  uint32_t limit = 200;
  // Resume after this row (its task, target and kind); empty: from the first.
  std::string after_task, after_target, after_kind;
  CT_WIRE_FIELDS(task_prefix, limit, after_task, after_target, after_kind)
};
struct RecordsListReply {
  std::vector<RecordsSummaryRow> rows;
  bool more = false;  // rows past `limit` (or half a frame) follow
  CT_WIRE_FIELDS(rows, more)
};

struct QueryReply {
  std::string json;
  CT_WIRE_FIELDS(json)
};

// proof = HMAC-SHA256(admin token, session_id + "\n" + action + "\n" + device), with the
// session_id of this connection's HelloReply, so a captured proof is useless elsewhere.
struct AdminRequest {
  std::string action;  // drain, undrain, kick
  std::string device;
  std::string proof;
  CT_WIRE_FIELDS(action, device, proof)
};

}  // namespace crosstune::msg
