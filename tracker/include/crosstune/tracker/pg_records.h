// The farm's tuning records in PostgreSQL (records.h's RecordStore): the schema of the tracker's
// SQLite `records` table, in a database that several trackers, or tools outside them, may share.
//
//   auto store = PgRecordStore::Open("postgresql://crosstune@db.lan/farm");   // or key=value
//   auto put = (*store)->PutRecords("run", "alice", now_ms, records);
//
// Every call is one round trip or one transaction; a record acknowledged has committed. A lost
// connection is opened again once per call before the call fails (kDisconnected, naming the
// database). Built only where libpq is (CROSSTUNE_HAVE_LIBPQ); elsewhere Open says so.
//
// Not thread-safe: one connection, used by the tracker's io thread.
#pragma once

#include <memory>
#include <string>

#include "crosstune/tracker/records.h"

namespace crosstune::tracker {

class PgRecordStore final : public RecordStore {
 public:
  // Connects to `conninfo` (a postgresql:// URI or libpq's key=value form) and creates the
  // records table and its index when they are absent. kDisconnected when the server cannot be
  // reached, kInvalidArgument in a build without libpq.
  static Expected<std::unique_ptr<PgRecordStore>> Open(const std::string& conninfo);
  ~PgRecordStore() override;
  PgRecordStore(const PgRecordStore&) = delete;
  PgRecordStore& operator=(const PgRecordStore&) = delete;

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

  // The database it is connected to, without the password ("crosstune@/tmp/pg:5432/farm").
  const std::string& name() const;

 private:
  struct Conn;
  explicit PgRecordStore(std::unique_ptr<Conn> conn);
  std::unique_ptr<Conn> conn_;
};

}  // namespace crosstune::tracker
