// The farm's tuning records: every tuning record any client sends, kept by the tracker so that a
// second person, host or board of the same kind starts where the others left off.
//
// A record is found by its task (TaskId::Key()), target and device kind ("ARCH/CPU", the
// device's fingerprint), and is kept as the JSON line the tuner wrote (tuner/records.h) with who
// sent it and when. The same line sent twice (a retry after a lost reply) is kept once.
//
// Storage goes through RecordStore: the tracker's SQLite database (store.h) by default, or a
// PostgreSQL database that several trackers may share (pg_records.h, --records-db).
//
// Claims (RecordClaims) are the tracker's memory of which run is timing which config right now, so
// that two runs on the same device kind never time a config twice: a claim is granted when no
// record covers the config and no other run holds it, and lapses after its time to live or when
// the record arrives. A config is its index and its generator (the hash of the code the template
// makes of it): a record of older code does not cover it.
//
// Not thread-safe: the tracker uses these from its io thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tracker_messages.h"

namespace crosstune::tracker {

// Bounds of a record and of a query, checked before anything is kept or looked up: the sizes of
// every string, that `json` is a JSON object, that `mean` is finite and not negative.
Status ValidateRecord(const msg::FarmRecord& r);
Status ValidateRecordsQuery(const msg::RecordsQuery& q);
Status ValidateRecordsClaim(const msg::RecordsClaim& c);
Status ValidateRecordsList(const msg::RecordsList& l);

// Of the device kinds that have records, the one nearest to `wanted`: `wanted` itself; else one
// of the same architecture (the part before '/') whose CPU name shares the longest run of leading
// words with wanted's, ties to the one with more records; else none (""). `kinds` maps each kind
// to its number of records.
std::string NearestKind(const std::string& wanted, const std::map<std::string, int64_t>& kinds);

// A reply's records stop past this many bytes of JSON (`more` says so), so that it fits a frame
// with room for the fields beside them: a record is at most 64 KiB.
inline constexpr size_t kRecordsReplyBytes = Limits::kMaxFrameBytes / 2;

class RecordStore {
 public:
  virtual ~RecordStore() = default;
  // Keeps each record not kept before (by its JSON line), with the run, the sender and the time.
  virtual Expected<msg::RecordsPutReply> PutRecords(
      const std::string& run_id, const std::string& sender, int64_t received_unix_ms,
      const std::vector<msg::FarmRecord>& records) = 0;
  // The records of (task, target) on `kind`: the best successful one per generator (best_only),
  // or those with an id above `after_id`, oldest first, at most `limit`; either way at most
  // half a frame of JSON (`more` when cut).
  virtual Expected<msg::RecordsReply> RecordsOf(const std::string& task, const std::string& target,
                                                const std::string& kind, bool best_only,
                                                uint64_t after_id, uint32_t limit) = 0;
  // The device kinds with records of (task, target), and how many each has.
  virtual Expected<std::map<std::string, int64_t>> RecordKinds(const std::string& task,
                                                               const std::string& target) = 0;
  // Every (target, kind) with records of `task`, and how many each has.
  virtual Expected<std::map<std::pair<std::string, std::string>, int64_t>> RecordTargetKinds(
      const std::string& task) = 0;
  // Those of claim.configs that a record of the claim's task, target and kind covers, made by
  // the config's generator.
  virtual Expected<std::vector<uint64_t>> MeasuredConfigs(const msg::RecordsClaim& claim) = 0;
  // Records kept, in all.
  virtual Expected<int64_t> RecordCount() = 0;
  // Per (task, target, kind), in that order, from the first after list.after_*, of the tasks
  // whose key starts with list.task_prefix: the records kept and the best (the oldest of
  // equals); at most list.limit rows or half a frame (`more` when cut).
  virtual Expected<msg::RecordsListReply> ListRecords(const msg::RecordsList& list) = 0;
};

// A store's summary query's rows (one per best record of each task, target and kind, oldest
// first: ties give several; one with best_mean 0 where none succeeded; `limit` + 1 groups at
// most) as a reply of at most `limit` rows or half a frame.
msg::RecordsListReply FoldRecordsList(const std::vector<msg::RecordsSummaryRow>& rows,
                                      uint32_t limit);

// A query answered from `store`: the kind asked for, or the nearest with records (q.nearest), or
// the nearest with records for another target (q.any_target).
Expected<msg::RecordsReply> QueryRecords(RecordStore& store, const msg::RecordsQuery& q);

class RecordClaims {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint32_t kMaxTtlMs = 10 * 60 * 1000;
  static constexpr uint32_t kDefaultTtlMs = 60 * 1000;

  // Grants `claim.run_id` those of claim.configs that `measured` does not hold and no other run
  // holds an unexpired claim on (its own claims are renewed).
  msg::RecordsClaimReply Claim(Clock::time_point now, const msg::RecordsClaim& claim,
                               const std::vector<uint64_t>& measured);
  // A record arrived: its config's claim, if any, is done.
  void Measured(const msg::FarmRecord& r);
  // Forgets expired claims.
  void Expire(Clock::time_point now);
  size_t size() const;

 private:
  // (task, target, kind) -> (config, generator) -> (run, expiry)
  using Key = std::tuple<std::string, std::string, std::string>;
  using Config = std::pair<uint64_t, std::string>;
  std::map<Key, std::map<Config, std::pair<std::string, Clock::time_point>>> claims_;
};

// Records a second per sender, so that one client flooding the tracker is refused (kBusy, retry
// later) while every other client's records still go in: a token bucket per sender name.
class RecordsThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kPerSecond = 2000;
  static constexpr double kBurst = 20000;
  static constexpr size_t kMaxSenders = 4096;  // the oldest buckets are dropped beyond
  explicit RecordsThrottle(double per_second = kPerSecond, double burst = kBurst)
      : per_second_(per_second), burst_(burst) {}
  // Takes `n` records' credit from `sender`'s bucket: false (nothing taken) without enough.
  bool Take(Clock::time_point now, const std::string& sender, size_t n);

 private:
  struct Bucket {
    double credit;
    Clock::time_point at;
  };
  double per_second_, burst_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace crosstune::tracker
