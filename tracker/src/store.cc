#include "crosstune/tracker/store.h"

#include <sqlite3.h>

#include <map>

#include "crosstune/crypto.h"
#include "crosstune/text.h"

namespace crosstune::tracker {
namespace {

// The one checking helper for the sqlite C API: anything but the expected codes is kIoError with
// sqlite's own message.
Status Check(sqlite3* db, int rc, const char* what, int ok1 = SQLITE_OK, int ok2 = SQLITE_DONE) {
  if (rc == ok1 || rc == ok2) return Status::Ok();
  return Status(ErrorCode::kIoError, std::string("tracker database: ") + what + ": " +
                                         (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

// A prepared statement, kept in the store's cache between uses (parsing costs more than a
// small insert); reset and unbound when it goes out of scope.
class Stmt {
 public:
  Stmt(sqlite3* db, std::map<const char*, sqlite3_stmt*>& cache, const char* sql) : db_(db) {
    auto it = cache.find(sql);
    if (it != cache.end()) {
      stmt_ = it->second;
      return;
    }
    status_ = Check(db, sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr), "prepare");
    if (status_.ok()) cache[sql] = stmt_;
  }
  ~Stmt() {
    if (stmt_) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
    }
  }
  Stmt& Bind(int i, const std::string& v) {
    if (status_.ok()) {
      status_ = Check(db_, sqlite3_bind_text(stmt_, i, v.data(), int(v.size()), SQLITE_TRANSIENT),
                      "bind");
    }
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    if (status_.ok()) status_ = Check(db_, sqlite3_bind_int64(stmt_, i, v), "bind");
    return *this;
  }
  Stmt& Bind(int i, double v) {
    if (status_.ok()) status_ = Check(db_, sqlite3_bind_double(stmt_, i, v), "bind");
    return *this;
  }
  // Runs a statement that returns no rows.
  Status Run() {
    CT_RETURN_IF_ERROR(status_);
    return Check(db_, sqlite3_step(stmt_), "step");
  }
  // Steps once: true with a row, false when done.
  Expected<bool> Next() {
    CT_RETURN_IF_ERROR(status_);
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    CT_RETURN_IF_ERROR(Check(db_, rc, "step"));
    return false;
  }
  std::string Text(int col) {
    auto p = sqlite3_column_text(stmt_, col);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) { return sqlite3_column_double(stmt_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  Status status_;
};

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS sessions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  token TEXT NOT NULL,
  holder TEXT NOT NULL,
  key TEXT NOT NULL,
  device TEXT NOT NULL,
  start_ms INTEGER NOT NULL,
  end_ms INTEGER,
  outcome TEXT
);
CREATE INDEX IF NOT EXISTS sessions_token ON sessions(token);
CREATE TABLE IF NOT EXISTS records (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  digest TEXT NOT NULL UNIQUE,
  task TEXT NOT NULL,
  target TEXT NOT NULL,
  kind TEXT NOT NULL,
  generator TEXT NOT NULL,
  config INTEGER NOT NULL,
  ok INTEGER NOT NULL,
  mean REAL NOT NULL,
  stopped_early INTEGER NOT NULL,
  run_id TEXT NOT NULL,
  sender TEXT NOT NULL,
  received_ms INTEGER NOT NULL,
  json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_task ON records(task, target, kind, generator, config);
CREATE TABLE IF NOT EXISTS active_leases (
  token TEXT PRIMARY KEY,
  device TEXT NOT NULL,
  key TEXT NOT NULL,
  holder TEXT NOT NULL,
  granted_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  lease_ms INTEGER NOT NULL,
  multi_session INTEGER NOT NULL
);
)sql";

}  // namespace

Expected<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  sqlite3* db = nullptr;
  std::string p = path.empty() ? ":memory:" : path;
  int rc = sqlite3_open_v2(
      p.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = Check(db, rc, ("open " + p).c_str());
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<Store> store(new Store(db));
  if (p != ":memory:") CT_RETURN_IF_ERROR(store->CheckIntact(p));
  // WAL + NORMAL: a commit costs no fsync of the main file; a crash loses at most the last
  // transactions, never the database.
  CT_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
  CT_RETURN_IF_ERROR(store->Exec(kSchema));
  if (p != ":memory:") {
    CT_RETURN_IF_ERROR(store->Exec("PRAGMA wal_autocheckpoint=0;"));
    store->StartCheckpointer(p);
  }
  return store;
}

// A damaged page would otherwise surface later as an empty history or lost leases, with nothing
// said. quick_check reads every page (a few ms for a tracker's database); the file is left as it
// is, for whoever wants to look at it or move it aside.
Status Store::CheckIntact(const std::string& path) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, "PRAGMA quick_check(1)", -1, &stmt, nullptr);
  std::string verdict;
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(stmt, 0);
      verdict = text ? reinterpret_cast<const char*>(text) : "";
    }
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE && rc != SQLITE_OK) verdict = sqlite3_errmsg(db_);
  sqlite3_finalize(stmt);
  if (verdict == "ok") return Status::Ok();
  return Status(ErrorCode::kIoError,
                "tracker database " + path + " is corrupt (" + EscapeForLog(verdict) +
                    "); it was left as it is: move it aside to start with an empty one");
}

Store::~Store() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

// Checkpoints (which fsync) run here, on a connection of their own, so the tracker's thread
// only ever appends to the WAL. PASSIVE never blocks the writer.
void Store::StartCheckpointer(const std::string& path) {
  checkpointer_ = std::thread([this, path] {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK) {
      sqlite3_close(db);
      return;
    }
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      lock.unlock();
      sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      lock.lock();
    }
    sqlite3_close(db);
  });
}

Status Store::Exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string m = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return Status(ErrorCode::kIoError, "tracker database: " + m);
  }
  return Status::Ok();
}

// Runs `body` in one transaction: one WAL commit instead of one per statement.
template <typename Fn>
static Status InTransaction(sqlite3* db, Fn body) {
  // Inside a batch (Store::Begin) the batch's commit covers this too.
  if (sqlite3_get_autocommit(db) == 0) return body();
  CT_RETURN_IF_ERROR(Check(db, sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), "begin"));
  Status s = body();
  if (!s.ok()) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    return s;
  }
  return Check(db, sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), "commit");
}

Status Store::Begin() {
  return Check(db_, sqlite3_exec(db_, "BEGIN", nullptr, nullptr, nullptr), "begin");
}

Status Store::Commit() {
  Status s = Check(db_, sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr), "commit");
  if (!s.ok()) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  return s;
}

Status Store::LeaseStarted(const LeaseRecord& l) {
  return InTransaction(db_, [&] { return LeaseStartedLocked(l); });
}

Status Store::LeaseStartedLocked(const LeaseRecord& l) {
  CT_RETURN_IF_ERROR(Stmt(db_, cache_,
                          "INSERT OR REPLACE INTO active_leases(token, device, key, holder, "
                          "granted_ms, expires_ms, lease_ms, multi_session) "
                          "VALUES(?,?,?,?,?,?,?,?)")
                         .Bind(1, l.token)
                         .Bind(2, l.device)
                         .Bind(3, l.key)
                         .Bind(4, l.holder)
                         .Bind(5, l.granted_unix_ms)
                         .Bind(6, l.expires_unix_ms)
                         .Bind(7, int64_t{l.lease_ms})
                         .Bind(8, int64_t{l.multi_session})
                         .Run());
  return Stmt(db_, cache_,
              "INSERT INTO sessions(token, holder, key, device, start_ms) VALUES(?,?,?,?,?)")
      .Bind(1, l.token)
      .Bind(2, l.holder)
      .Bind(3, l.key)
      .Bind(4, l.device)
      .Bind(5, l.granted_unix_ms)
      .Run();
}

Status Store::LeaseRenewed(const LeaseRecord& l) {
  return Stmt(db_, cache_, "UPDATE active_leases SET expires_ms=? WHERE token=?")
      .Bind(1, l.expires_unix_ms)
      .Bind(2, l.token)
      .Run();
}

Status Store::LeaseEnded(const LeaseRecord& l, const std::string& outcome, int64_t end_unix_ms) {
  return InTransaction(db_, [&] { return LeaseEndedLocked(l, outcome, end_unix_ms); });
}

Status Store::LeaseEndedLocked(const LeaseRecord& l, const std::string& outcome,
                               int64_t end_unix_ms) {
  CT_RETURN_IF_ERROR(
      Stmt(db_, cache_, "DELETE FROM active_leases WHERE token=?").Bind(1, l.token).Run());
  return Stmt(db_, cache_,
              "UPDATE sessions SET end_ms=?, outcome=? WHERE token=? AND end_ms IS NULL")
      .Bind(1, end_unix_ms)
      .Bind(2, outcome)
      .Bind(3, l.token)
      .Run();
}

Expected<std::vector<LeaseRecord>> Store::ActiveLeases() {
  Stmt q(db_, cache_,
         "SELECT token, device, key, holder, granted_ms, expires_ms, lease_ms, multi_session "
         "FROM active_leases");
  std::vector<LeaseRecord> out;
  for (;;) {
    CT_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) break;
    LeaseRecord r;
    r.token = q.Text(0);
    r.device = q.Text(1);
    r.key = q.Text(2);
    r.holder = q.Text(3);
    r.granted_unix_ms = q.Int(4);
    r.expires_unix_ms = q.Int(5);
    r.lease_ms = static_cast<uint32_t>(q.Int(6));
    r.multi_session = q.Int(7) != 0;
    out.push_back(std::move(r));
  }
  return out;
}

Expected<std::vector<HistoryRow>> Store::RecentHistory(int limit) {
  Stmt q(db_, cache_,
         "SELECT holder, key, device, start_ms, COALESCE(end_ms, 0), COALESCE(outcome, '') "
         "FROM sessions ORDER BY id DESC LIMIT ?");
  q.Bind(1, int64_t{limit});
  std::vector<HistoryRow> out;
  for (;;) {
    CT_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) break;
    out.push_back({q.Text(0), q.Text(1), q.Text(2), q.Text(5), q.Int(3), q.Int(4)});
  }
  return out;
}

namespace {

// The columns every records query returns, in FarmRecord's order.
constexpr const char* kRecordColumns =
    "id, task, target, kind, generator, config, ok, mean, stopped_early, json, sender, "
    "received_ms";

msg::FarmRecord RecordRow(Stmt& q) {
  msg::FarmRecord r;
  r.id = static_cast<uint64_t>(q.Int(0));
  r.task = q.Text(1);
  r.target = q.Text(2);
  r.device_kind = q.Text(3);
  r.generator = q.Text(4);
  r.config_index = static_cast<uint64_t>(q.Int(5));
  r.ok = q.Int(6) != 0;
  r.mean = q.Real(7);
  r.stopped_early = q.Int(8) != 0;
  r.json = q.Text(9);
  r.sender = q.Text(10);
  r.received_unix_ms = q.Int(11);
  return r;
}

}  // namespace

Expected<msg::RecordsPutReply> Store::PutRecords(const std::string& run_id,
                                                 const std::string& sender,
                                                 int64_t received_unix_ms,
                                                 const std::vector<msg::FarmRecord>& records) {
  msg::RecordsPutReply reply;
  CT_RETURN_IF_ERROR(InTransaction(db_, [&]() -> Status {
    for (const msg::FarmRecord& r : records) {
      CT_RETURN_IF_ERROR(
          Stmt(db_, cache_,
               "INSERT OR IGNORE INTO records(digest, task, target, kind, generator, config, ok, "
               "mean, stopped_early, run_id, sender, received_ms, json) "
               "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)")
              .Bind(1, Sha256Hex(r.json))
              .Bind(2, r.task)
              .Bind(3, r.target)
              .Bind(4, r.device_kind)
              .Bind(5, r.generator)
              .Bind(6, static_cast<int64_t>(r.config_index))
              .Bind(7, int64_t{r.ok})
              .Bind(8, r.mean)
              .Bind(9, int64_t{r.stopped_early})
              .Bind(10, run_id)
              .Bind(11, sender)
              .Bind(12, received_unix_ms)
              .Bind(13, r.json)
              .Run());
      if (sqlite3_changes(db_) > 0) {
        ++reply.added;
      } else {
        ++reply.duplicates;
      }
    }
    return Status::Ok();
  }));
  return reply;
}

Expected<msg::RecordsReply> Store::RecordsOf(const std::string& task, const std::string& target,
                                             const std::string& kind, bool best_only,
                                             uint64_t after_id, uint32_t limit) {
  msg::RecordsReply reply;
  if (best_only) {
    // SQLite takes the bare columns of a MIN() aggregate from the row with the minimum.
    static const std::string sql =
        std::string("SELECT ") + kRecordColumns + ", MIN(mean) FROM records " +
        "WHERE task=? AND target=? AND kind=? AND ok=1 AND stopped_early=0 AND mean>0 "
        "GROUP BY generator ORDER BY id";
    Stmt q(db_, cache_, sql.c_str());
    q.Bind(1, task).Bind(2, target).Bind(3, kind);
    size_t bytes = 0;
    for (;;) {
      CT_ASSIGN_OR_RETURN(bool row, q.Next());
      if (!row) break;
      if (bytes > kRecordsReplyBytes) {
        reply.more = true;
        break;
      }
      reply.records.push_back(RecordRow(q));
      bytes += reply.records.back().json.size();
    }
    return reply;
  }
  static const std::string sql = std::string("SELECT ") + kRecordColumns + " FROM records " +
                                 "WHERE task=? AND target=? AND kind=? AND id>? "
                                 "ORDER BY id LIMIT ?";
  Stmt q(db_, cache_, sql.c_str());
  q.Bind(1, task).Bind(2, target).Bind(3, kind).Bind(4, static_cast<int64_t>(after_id));
  q.Bind(5, int64_t{limit} + 1);
  size_t bytes = 0;
  for (;;) {
    CT_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) break;
    if (reply.records.size() == limit || bytes > kRecordsReplyBytes) {
      reply.more = true;
      break;
    }
    reply.records.push_back(RecordRow(q));
    bytes += reply.records.back().json.size();
  }
  return reply;
}

Expected<std::map<std::string, int64_t>> Store::RecordKinds(const std::string& task,
                                                            const std::string& target) {
  Stmt q(db_, cache_, "SELECT kind, COUNT(*) FROM records WHERE task=? AND target=? GROUP BY kind");
  q.Bind(1, task).Bind(2, target);
  std::map<std::string, int64_t> out;
  for (;;) {
    CT_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) break;
    out[q.Text(0)] = q.Int(1);
  }
  return out;
}

Expected<std::vector<uint64_t>> Store::MeasuredConfigs(const msg::RecordsClaim& claim) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < claim.configs.size(); ++i) {
    const uint64_t config = claim.configs[i];
    Stmt q(db_, cache_,
           "SELECT 1 FROM records WHERE task=? AND target=? AND kind=? AND generator=? AND "
           "config=? LIMIT 1");
    q.Bind(1, claim.task).Bind(2, claim.target).Bind(3, claim.device_kind);
    q.Bind(4, claim.generators.empty() ? std::string() : claim.generators[i]);
    q.Bind(5, static_cast<int64_t>(config));
    CT_ASSIGN_OR_RETURN(bool row, q.Next());
    if (row) out.push_back(config);
  }
  return out;
}

Expected<msg::RecordsListReply> Store::ListRecords(const msg::RecordsList& list) {
  // Per group the best records (a LEFT JOIN on the minimum: several when tied, none when nothing
  // succeeded), folded into rows by FoldRecordsList.
  Stmt q(db_, cache_,
         "SELECT c.task, c.target, c.kind, c.n, r.mean, r.config, r.run_id, r.sender FROM "
         "(SELECT task, target, kind, COUNT(*) AS n, "
         "MIN(CASE WHEN ok=1 AND stopped_early=0 AND mean>0 THEN mean END) AS best "
         "FROM records WHERE substr(task, 1, length(?1)) = ?1 AND (task, target, kind) > "
         "(?2, ?3, ?4) GROUP BY task, target, kind ORDER BY task, target, kind LIMIT ?5) c "
         "LEFT JOIN records r ON r.task=c.task AND r.target=c.target AND r.kind=c.kind AND "
         "r.mean=c.best AND r.ok=1 AND r.stopped_early=0 "
         "ORDER BY c.task, c.target, c.kind, r.id");
  q.Bind(1, list.task_prefix).Bind(2, list.after_task).Bind(3, list.after_target);
  q.Bind(4, list.after_kind).Bind(5, int64_t{list.limit} + 1);
  std::vector<msg::RecordsSummaryRow> rows;
  for (;;) {
    CT_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) break;
    msg::RecordsSummaryRow r;
    r.task = q.Text(0);
    r.target = q.Text(1);
    r.device_kind = q.Text(2);
    r.records = static_cast<uint64_t>(q.Int(3));
    r.best_mean = q.Real(4);
    r.best_config = static_cast<uint64_t>(q.Int(5));
    r.best_run_id = q.Text(6);
    r.best_sender = q.Text(7);
    rows.push_back(std::move(r));
  }
  return FoldRecordsList(rows, list.limit);
}

Expected<int64_t> Store::RecordCount() {
  Stmt q(db_, cache_, "SELECT COUNT(*) FROM records");
  CT_ASSIGN_OR_RETURN(bool row, q.Next());
  return row ? q.Int(0) : 0;
}

}  // namespace crosstune::tracker
