#include "crosstune/tracker/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

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

// --- a damaged file -------------------------------------------------------------------------

// quick_check's verdict on the file at `path` ("ok" when whole), or kIoError when it cannot be
// told (the file cannot be opened, is locked): only damage moves a file aside. quick_check reads
// every page (a few ms for a tracker's database); a damaged page would otherwise surface later as
// an empty history or lost leases, with nothing said.
Expected<std::string> Verdict(const std::string& path) {
  std::error_code ec;
  const bool had_wal = std::filesystem::exists(path + "-wal", ec);
  const bool had_shm = std::filesystem::exists(path + "-shm", ec);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  std::string verdict = "ok";
  sqlite3_stmt* stmt = nullptr;
  if (rc == SQLITE_OK) {
    // Closing the last connection would checkpoint the WAL into a damaged file and delete it.
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &stmt, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(stmt, 0);
      verdict = text ? reinterpret_cast<const char*>(text) : "";
      // "*** in database main ***\nPage 238: ...": the page is what says something.
      const std::string_view main = "*** in database main ***\n";
      if (verdict.rfind(main, 0) == 0) verdict.erase(0, main.size());
    }
  }
  Status s;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB) {
      verdict = sqlite3_errmsg(db);
    } else {
      s = Check(db, rc, ("open " + path).c_str());
    }
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  if (!s.ok()) return s;
  if (verdict != "ok" && !had_wal) {
    // The empty WAL and its index this check left are not the damaged file's: they do not go with
    // it.
    if (std::filesystem::file_size(path + "-wal", ec) == 0) {
      std::filesystem::remove(path + "-wal", ec);
    }
    if (!had_shm) std::filesystem::remove(path + "-shm", ec);
  }
  return verdict;
}

// Moves the damaged file at `path` to PATH.corrupt-<UTC time>, its -wal and -shm alongside (the
// WAL holds committed transactions); nothing is deleted or written. The WAL goes first: SQLite
// deletes a WAL it finds beside an empty database. On failure what was moved goes back.
Expected<StoreRecovery> MoveAside(const std::string& path, const std::string& verdict) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &utc);
  const std::string base = path + ".corrupt-" + stamp;
  std::string copy = base;
  std::error_code ec;
  auto taken = [&](const std::string& c) {
    return std::filesystem::exists(c, ec) || std::filesystem::exists(c + "-wal", ec) ||
           std::filesystem::exists(c + "-shm", ec);
  };
  for (int i = 2; taken(copy); ++i) copy = base + "-" + std::to_string(i);  // never over a copy
  std::vector<std::string> moved;
  for (const char* suffix : {"-wal", "-shm", ""}) {
    const std::string from = path + suffix;
    if (*suffix && !std::filesystem::exists(from, ec)) continue;
    std::filesystem::rename(from, copy + suffix, ec);
    if (ec) {
      const std::string why = ec.message();
      for (const std::string& s : moved) std::filesystem::rename(copy + s, path + s, ec);
      return Status(ErrorCode::kIoError,
                    "tracker database " + path + " is damaged (" + EscapeForLog(verdict) +
                        ") and could not be moved to " + copy + suffix + ": " + why);
    }
    moved.emplace_back(suffix);
  }
  StoreRecovery r;
  r.verdict = verdict;
  r.damaged_copy = copy;
  return r;
}

// One table of the damaged copy, its columns (the rowid first).
struct SalvagedTable {
  const char* name;
  const char* columns;
  int count;
  StoreRecovery::Table StoreRecovery::*report;
};

// Copies every readable row of `t` from `src` into `dst`, keeping rowids. A damaged page fails
// the scan (or the seek) over its rows: the scan goes on from the first rowid past it that reads,
// found by probing ever further ahead and then bisecting, up to `max_rowid`. kIoError only when
// `dst` cannot be written.
Status CopyTable(sqlite3* src, sqlite3* dst, const SalvagedTable& t, int64_t max_rowid,
                 StoreRecovery::Table& out) {
  const std::string cols = t.columns;
  const std::string select =
      "SELECT rowid, " + cols + " FROM " + t.name + " WHERE rowid >= ? ORDER BY rowid";
  std::string insert = std::string("INSERT INTO ") + t.name + "(rowid, " + cols + ") VALUES(?";
  for (int i = 0; i < t.count; ++i) insert += ",?";
  insert += ")";
  sqlite3_stmt* scan = nullptr;
  sqlite3_stmt* ins = nullptr;
  if (sqlite3_prepare_v2(src, select.c_str(), -1, &scan, nullptr) != SQLITE_OK) {
    out.error = sqlite3_errmsg(src);
    sqlite3_finalize(scan);
    return Status::Ok();
  }
  Status status = Check(dst, sqlite3_prepare_v2(dst, insert.c_str(), -1, &ins, nullptr), "prepare");
  const bool is_records = std::strcmp(t.name, "records") == 0;
  // Whether a scan from `start` reads its first row (or finds none).
  auto reads = [&](int64_t start) {
    sqlite3_reset(scan);
    sqlite3_bind_int64(scan, 1, start);
    int rc = sqlite3_step(scan);
    return rc == SQLITE_ROW || rc == SQLITE_DONE;
  };
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  int64_t start = std::numeric_limits<int64_t>::min();
  while (status.ok()) {
    sqlite3_reset(scan);
    sqlite3_bind_int64(scan, 1, start);
    int64_t last = start == std::numeric_limits<int64_t>::min() ? 0 : start - 1;
    int rc = SQLITE_OK;
    while ((rc = sqlite3_step(scan)) == SQLITE_ROW) {
      last = sqlite3_column_int64(scan, 0);
      if (is_records) {
        // A record's digest is its JSON's SHA-256 (PutRecords): a row that disagrees was garbled.
        const auto* digest = reinterpret_cast<const char*>(sqlite3_column_text(scan, 1));
        const auto* json = reinterpret_cast<const char*>(sqlite3_column_text(scan, t.count));
        if (!digest || !json ||
            Sha256Hex(std::string_view(json, sqlite3_column_bytes(scan, t.count))) != digest) {
          ++out.dropped;
          continue;
        }
      }
      for (int i = 0; i <= t.count; ++i) {
        sqlite3_bind_value(ins, i + 1, sqlite3_column_value(scan, i));
      }
      const int irc = sqlite3_step(ins);
      sqlite3_reset(ins);
      if (irc == SQLITE_DONE) {
        ++out.recovered;
      } else if (irc == SQLITE_CONSTRAINT) {
        ++out.dropped;  // the schema refuses it (a NULL, a duplicate digest)
      } else {
        status = Check(dst, irc, "insert");
        break;
      }
    }
    if (!status.ok() || rc == SQLITE_DONE) break;
    // Unreadable from last + 1 on: probe ever further ahead (+1, +3, +7, ...) for a start that
    // reads again, up to the highest rowid.
    const int64_t from = last + 1;
    const int64_t hi = max_rowid > from ? max_rowid : kEnd - 1;
    int64_t bad = from, good = 0;
    bool found = false;
    for (int64_t step = 1; !found && bad < hi;) {
      const int64_t probe = hi - bad <= step ? hi : bad + step;
      if (reads(probe)) {
        good = probe;
        found = true;
      } else {
        bad = probe;
      }
      step = step > hi / 2 ? hi : step * 2;
    }
    if (!found) {
      out.unreadable.emplace_back(from, max_rowid > from ? max_rowid : kEnd);
      break;
    }
    while (good - bad > 1) {
      const int64_t mid = bad + (good - bad) / 2;
      if (reads(mid)) {
        good = mid;
      } else {
        bad = mid;
      }
    }
    out.unreadable.emplace_back(from, good - 1);
    start = good;
  }
  sqlite3_finalize(scan);
  sqlite3_finalize(ins);
  return status;
}

// The highest rowid `table` of `src` holds or held, as far as it can be read: max(rowid), or the
// AUTOINCREMENT counter; 0 when neither reads.
int64_t MaxRowid(sqlite3* src, const char* table) {
  int64_t best = 0;
  const std::string queries[] = {
      std::string("SELECT max(rowid) FROM ") + table,
      std::string("SELECT seq FROM sqlite_sequence WHERE name='") + table + "'"};
  for (const std::string& sql : queries) {
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(src, sql.c_str(), -1, &q, nullptr) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
      best = std::max<int64_t>(best, sqlite3_column_int64(q, 0));
    }
    sqlite3_finalize(q);
  }
  return best;
}

// `path` as a URI file name: the characters a URI gives a meaning to, escaped.
std::string UriPath(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", static_cast<unsigned char>(c));
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

// Copies what can be read of the damaged copy into `dst` (a fresh database with the schema), in
// one transaction. The copy is opened read-only: with its WAL (whose committed transactions
// count), or, without one, as immutable, so that SQLite creates no -wal or -shm beside it.
Status Salvage(sqlite3* dst, StoreRecovery& r) {
  std::error_code ec;
  const bool wal = std::filesystem::exists(r.damaged_copy + "-wal", ec);
  const std::string uri = "file:" + UriPath(r.damaged_copy) + (wal ? "?mode=ro" : "?immutable=1");
  sqlite3* src = nullptr;
  int rc = sqlite3_open_v2(uri.c_str(), &src,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
  static const SalvagedTable kTables[] = {
      {"sessions", "token, holder, key, device, start_ms, end_ms, outcome", 7,
       &StoreRecovery::sessions},
      {"records",
       "digest, task, target, kind, generator, config, ok, mean, stopped_early, run_id, sender, "
       "received_ms, json",
       13, &StoreRecovery::records},
      {"active_leases",
       "token, device, key, holder, granted_ms, expires_ms, lease_ms, multi_session", 8,
       &StoreRecovery::leases}};
  if (rc != SQLITE_OK) {
    for (const SalvagedTable& t : kTables) (r.*t.report).error = sqlite3_errmsg(src);
    sqlite3_close(src);
    return Status::Ok();
  }
  Status s = Check(dst, sqlite3_exec(dst, "BEGIN", nullptr, nullptr, nullptr), "begin");
  for (const SalvagedTable& t : kTables) {
    if (!s.ok()) break;
    const int64_t max_rowid = MaxRowid(src, t.name);
    s = CopyTable(src, dst, t, max_rowid, r.*t.report);
    // Ids handed out before stay handed out, those of lost rows included.
    if (s.ok() && std::strcmp(t.name, "active_leases") != 0 && max_rowid > 0) {
      const std::string sql = std::string("INSERT INTO sqlite_sequence(name, seq) SELECT '") +
                              t.name +
                              "', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name='" +
                              t.name + "'); UPDATE sqlite_sequence SET seq=max(seq, " +
                              std::to_string(max_rowid) + ") WHERE name='" + t.name + "';";
      s = Check(dst, sqlite3_exec(dst, sql.c_str(), nullptr, nullptr, nullptr), "sequence");
    }
  }
  sqlite3_close(src);
  if (s.ok()) s = Check(dst, sqlite3_exec(dst, "COMMIT", nullptr, nullptr, nullptr), "commit");
  if (!s.ok()) sqlite3_exec(dst, "ROLLBACK", nullptr, nullptr, nullptr);
  return s;
}

}  // namespace

std::string StoreRecovery::Summary(const std::string& path) const {
  std::string out = "database " + path + " was damaged (" + EscapeForLog(verdict) + "): kept as " +
                    damaged_copy + ", recovered " + std::to_string(records.recovered) +
                    " records, " + std::to_string(sessions.recovered) + " sessions, " +
                    std::to_string(leases.recovered) + " active leases; unreadable: ";
  const std::pair<const char*, const Table*> tables[] = {
      {"records ids", &records}, {"sessions ids", &sessions}, {"active_leases rowids", &leases}};
  std::string unreadable;
  if (!records.error.empty() && records.error == sessions.error && records.error == leases.error) {
    unreadable = "the whole file (" + EscapeForLog(records.error) + ")";
  } else {
    for (const auto& [what, t] : tables) {
      std::string ranges;
      if (!t->error.empty()) ranges = "all (" + EscapeForLog(t->error) + ")";
      for (const auto& [first, last] : t->unreadable) {
        if (!ranges.empty()) ranges += ", ";
        ranges += std::to_string(first);
        if (last == std::numeric_limits<int64_t>::max()) {
          ranges += " and on";
        } else if (last != first) {
          ranges += "-" + std::to_string(last);
        }
      }
      if (ranges.empty()) continue;
      if (!unreadable.empty()) unreadable += "; ";
      unreadable += std::string(what) + " " + ranges;
    }
  }
  out += unreadable.empty() ? "none" : unreadable;
  if (records.dropped + sessions.dropped + leases.dropped > 0) {
    out += "; dropped as garbled: " + std::to_string(records.dropped) + " records, " +
           std::to_string(sessions.dropped) + " sessions, " + std::to_string(leases.dropped) +
           " active leases";
  }
  return out;
}

Expected<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  std::string p = path.empty() ? ":memory:" : path;
  std::optional<StoreRecovery> recovery;
  std::error_code ec;
  if (p != ":memory:" && std::filesystem::exists(p, ec)) {
    CT_ASSIGN_OR_RETURN(std::string verdict, Verdict(p));
    if (verdict != "ok") {
      CT_ASSIGN_OR_RETURN(recovery, MoveAside(p, verdict));
    }
  }
  auto open = [&]() -> Expected<std::unique_ptr<Store>> {
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(
        p.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      Status s = Check(db, rc, ("open " + p).c_str());
      sqlite3_close(db);
      return s;
    }
    std::unique_ptr<Store> store(new Store(db));
    // WAL + NORMAL: a commit costs no fsync of the main file; a crash loses at most the last
    // transactions, never the database.
    CT_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"));
    CT_RETURN_IF_ERROR(store->Exec(kSchema));
    if (recovery) CT_RETURN_IF_ERROR(Salvage(db, *recovery));
    return store;
  };
  auto store = open();
  if (!store.ok()) {
    if (!recovery) return store.status();
    // No fresh file: the damaged one goes back, to be salvaged at the next start.
    const std::string& copy = recovery->damaged_copy;
    std::string where = "it was put back";
    for (const char* suffix : {"-wal", "-shm", ""}) std::filesystem::remove(p + suffix, ec);
    for (const char* suffix : {"", "-shm", "-wal"}) {
      if (*suffix && !std::filesystem::exists(copy + suffix, ec)) continue;
      std::filesystem::rename(copy + suffix, p + suffix, ec);
      if (ec) where = "it stays at " + copy + " (" + ec.message() + ")";
    }
    return Status(ErrorCode::kIoError,
                  "tracker database " + p + " is damaged (" + EscapeForLog(recovery->verdict) +
                      ") and could not be salvaged into a fresh one: " + store.status().message() +
                      "; " + where);
  }
  (*store)->recovery_ = std::move(recovery);
  if (p != ":memory:") {
    CT_RETURN_IF_ERROR((*store)->Exec("PRAGMA wal_autocheckpoint=0;"));
    (*store)->StartCheckpointer(p);
  }
  return store;
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

Expected<std::map<std::pair<std::string, std::string>, int64_t>> Store::RecordTargetKinds(
    const std::string& task) {
  Stmt q(db_, cache_,
         "SELECT target, kind, COUNT(*) FROM records WHERE task=? GROUP BY target, kind");
  q.Bind(1, task);
  std::map<std::pair<std::string, std::string>, int64_t> out;
  for (;;) {
    CT_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) break;
    out[{q.Text(0), q.Text(1)}] = q.Int(2);
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
