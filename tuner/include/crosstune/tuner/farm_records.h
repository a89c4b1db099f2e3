// The farm's tuning records (the tracker keeps them: tracker/records.h) from the tuner's side: a
// record in the tracker's form and back, the calls `crosstune records` makes, and a tune run's
// link to them (FarmLink, TuneOptions::farm).
//
// Thread-safety: the functions are thread-safe; a TrackerClient serialises its own calls.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "crosstune/client/tracker_client.h"
#include "crosstune/status.h"
#include "crosstune/tracker_messages.h"
#include "crosstune/tuner/foreign_records.h"
#include "crosstune/tuner/records.h"

namespace crosstune::tuner {

// `r` as the farm keeps it: its JSON line with the fields the tracker finds it by. A record whose
// line would pass msg::kMaxFarmRecordBytes (a failure's compiler diagnostics) keeps the start of
// its message only.
msg::FarmRecord ToFarmRecord(const Record& r);
// The record a farm record holds (its JSON line, read as a log line is).
Expected<Record> FromFarmRecord(const msg::FarmRecord& f);

struct RecordsImport {
  int read = 0;                       // records in the files
  int added = 0;                      // new to the farm
  int duplicates = 0;                 // the farm had them already
  std::vector<std::string> warnings;  // lines of the files that were skipped, guesses made
  // Per file, in order: its path and the format it was read as.
  std::vector<std::pair<std::string, RecordsFormat>> files;
};
// Every record of the files (our logs, or another tool's records: foreign_records.h) into the
// farm's records, under `run_id`. Importing the same file twice adds nothing the second time.
Expected<RecordsImport> ImportLogs(client::TrackerClient& tracker,
                                   const std::vector<std::string>& logs, const std::string& run_id,
                                   const ForeignOptions& options = {});

struct FarmRecords {
  std::vector<Record> records;
  std::string device_kind;            // whose records they are
  std::string target;                 // the target they are for (another: FetchRecords' any_target)
  bool exact = true;                  // false: the nearest kind's, where the one asked for had none
  std::vector<std::string> warnings;  // farm records that are not records (skipped)
};
// A task's records for a target on `device_kind`, or on the nearest kind with records (with
// `any_target`, for another target where no kind has any for this one): every one (all pages),
// oldest first, or the best per generator (`best_only`).
Expected<FarmRecords> FetchRecords(client::TrackerClient& tracker, const std::string& task_key,
                                   const std::string& target, const std::string& device_kind,
                                   bool best_only, bool any_target = false);

// What the farm's records hold, per task, target and device kind (records kept, the best), of the
// tasks whose key starts with `task_prefix`: every row (all pages), in that order.
Expected<std::vector<msg::RecordsSummaryRow>> ListFarmRecords(client::TrackerClient& tracker,
                                                              const std::string& task_prefix);

// A tune run's link to the farm's records (`tune --records tracker`): what the farm has of the
// task on the devices' kind is resumed from as a log is; the configs of each batch are claimed
// before they are timed (a config another run claimed or measured is not timed here); each
// batch's records go to the farm after it. Records that could not be sent (the tracker away)
// are sent with the next batch's.
//
// Thread-safety: one thread at a time (the run's calling thread).
class FarmLink {
 public:
  FarmLink(client::TrackerClient& tracker, std::string run_id)
      : tracker_(tracker), run_id_(std::move(run_id)) {}
  const std::string& run_id() const { return run_id_; }

  // The farm's records of (task, target) on `kind` (that kind's only) that this link has not
  // returned before: every one the first time, then those that came since.
  Expected<FarmRecords> Pull(const std::string& task_key, const std::string& target,
                             const std::string& kind);
  // Warm start: the records of (task, target) on the kind nearest `kind` with records, when
  // `kind` itself has none (FarmRecords::exact false), or where no kind has any for `target`,
  // those of the nearest kind for another target (FarmRecords::target says which); none when
  // `kind` has some or no kind of its arch has any.
  Expected<FarmRecords> Nearest(const std::string& task_key, const std::string& target,
                                const std::string& kind);
  // Claims `configs` (with their generator hashes) for this run: the reply says which to time.
  Expected<msg::RecordsClaimReply> Claim(const std::string& task_key, const std::string& target,
                                         const std::string& kind,
                                         const std::vector<uint64_t>& configs,
                                         const std::vector<std::string>& generators);
  // Sends `records` and whatever an earlier Push could not; an error leaves them pending.
  Status Push(const std::vector<Record>& records);
  size_t pending() const { return pending_.size(); }

 private:
  client::TrackerClient& tracker_;
  std::string run_id_;
  std::map<std::string, uint64_t> last_id_;  // per task|target|kind: the last record pulled
  std::vector<msg::FarmRecord> pending_;
};

}  // namespace crosstune::tuner
