// The tracker's SQLite database: session history (who, key, device, start, end, outcome), the
// leases active right now, so that a restarted tracker hands no running lease to someone else,
// and the farm's tuning records (records.h).
//
// Thread-safety: the tracker uses its Store from its io_context thread only. For a file database
// the Store runs one thread of its own that checkpoints the WAL on a separate connection.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tracker/records.h"
#include "crosstune/tracker/scheduler.h"

struct sqlite3;
struct sqlite3_stmt;

namespace crosstune::tracker {

struct HistoryRow {
  std::string holder, key, device, outcome;
  int64_t start_unix_ms = 0, end_unix_ms = 0;  // end 0: still running
};

// What Store::Open salvaged from a damaged database file (quick_check found it damaged, or it is
// not a database at all). The file was moved aside, never changed, and a fresh one holds the rows
// that could still be read.
struct StoreRecovery {
  struct Table {
    int64_t recovered = 0;  // rows copied into the fresh file, with their ids
    int64_t dropped = 0;  // read but refused: a record whose digest is not its JSON's, and the like
    // Rowid ranges that could not be read, inclusive; second = INT64_MAX: to the end.
    std::vector<std::pair<int64_t, int64_t>> unreadable;
    std::string error;  // why the table could not be read at all, "" when it could
  };
  std::string verdict;       // quick_check's first complaint, or SQLite's error
  std::string damaged_copy;  // the damaged file's new path; its -wal and -shm are beside it
  Table sessions, records, leases;

  // One line for the log: what was damaged, where it is kept, what was recovered and what not.
  std::string Summary(const std::string& path) const;
};

class Store final : public RecordStore {
 public:
  // "" or ":memory:" keeps everything in memory (nothing survives a restart). A damaged file is
  // moved aside and what can be read of it copied into a fresh one (recovery() says what);
  // kIoError naming the path when even that fails.
  static Expected<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store() override;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // A batch: the writes between Begin and Commit share one commit (group commit).
  Status Begin();
  Status Commit();

  Status LeaseStarted(const LeaseRecord& lease);
  Status LeaseRenewed(const LeaseRecord& lease);
  Status LeaseEnded(const LeaseRecord& lease, const std::string& outcome, int64_t end_unix_ms);
  Expected<std::vector<LeaseRecord>> ActiveLeases();
  Expected<std::vector<HistoryRow>> RecentHistory(int limit);

  // RecordStore. PutRecords commits before it returns (outside a batch): a record acknowledged is
  // in the WAL, and a tracker killed afterwards still has it.
  Expected<msg::RecordsPutReply> PutRecords(const std::string& run_id, const std::string& sender,
                                            int64_t received_unix_ms,
                                            const std::vector<msg::FarmRecord>& records) override;
  Expected<msg::RecordsReply> RecordsOf(const std::string& task, const std::string& target,
                                        const std::string& kind, bool best_only, uint64_t after_id,
                                        uint32_t limit) override;
  Expected<std::map<std::string, int64_t>> RecordKinds(const std::string& task,
                                                       const std::string& target) override;
  Expected<std::map<std::pair<std::string, std::string>, int64_t>> RecordTargetKinds(
      const std::string& task) override;
  Expected<std::vector<uint64_t>> MeasuredConfigs(const msg::RecordsClaim& claim) override;
  Expected<int64_t> RecordCount() override;
  Expected<msg::RecordsListReply> ListRecords(const msg::RecordsList& list) override;

  // What Open salvaged from a damaged file; empty when the file was whole (or new).
  const std::optional<StoreRecovery>& recovery() const { return recovery_; }

 private:
  explicit Store(sqlite3* db) : db_(db) {}
  Status Exec(const char* sql);
  void StartCheckpointer(const std::string& path);
  Status LeaseStartedLocked(const LeaseRecord& lease);
  Status LeaseEndedLocked(const LeaseRecord& lease, const std::string& outcome,
                          int64_t end_unix_ms);
  sqlite3* db_;
  std::map<const char*, sqlite3_stmt*> cache_;  // prepared statements by their SQL literal
  std::thread checkpointer_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<StoreRecovery> recovery_;
};

}  // namespace crosstune::tracker
