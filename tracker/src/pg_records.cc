#include "crosstune/tracker/pg_records.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "crosstune/crypto.h"

#ifdef CROSSTUNE_HAVE_LIBPQ
#include <libpq-fe.h>
#endif

namespace crosstune::tracker {

#ifdef CROSSTUNE_HAVE_LIBPQ

namespace {

// The SQLite store's `records` table (store.cc), in PostgreSQL's types. Names compare and sort
// byte by byte, as SQLite's do (the "C" collation), whatever the database's locale.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS records (
  id BIGSERIAL PRIMARY KEY,
  digest TEXT NOT NULL UNIQUE,
  task TEXT COLLATE "C" NOT NULL,
  target TEXT COLLATE "C" NOT NULL,
  kind TEXT COLLATE "C" NOT NULL,
  generator TEXT NOT NULL,
  config BIGINT NOT NULL,
  ok INTEGER NOT NULL,
  mean DOUBLE PRECISION NOT NULL,
  stopped_early INTEGER NOT NULL,
  run_id TEXT NOT NULL,
  sender TEXT NOT NULL,
  received_ms BIGINT NOT NULL,
  json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_task ON records(task, target, kind, generator, config);
)sql";

// The columns every records query returns, in FarmRecord's order.
constexpr const char* kRecordColumns =
    "id, task, target, kind, generator, config, ok, mean, stopped_early, json, sender, "
    "received_ms";

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

int64_t Int(const PGresult* r, int row, int col) { return std::stoll(PQgetvalue(r, row, col)); }

msg::FarmRecord RecordRow(const PGresult* r, int row) {
  msg::FarmRecord f;
  f.id = static_cast<uint64_t>(Int(r, row, 0));
  f.task = PQgetvalue(r, row, 1);
  f.target = PQgetvalue(r, row, 2);
  f.device_kind = PQgetvalue(r, row, 3);
  f.generator = PQgetvalue(r, row, 4);
  f.config_index = static_cast<uint64_t>(Int(r, row, 5));
  f.ok = Int(r, row, 6) != 0;
  f.mean = std::stod(PQgetvalue(r, row, 7));
  f.stopped_early = Int(r, row, 8) != 0;
  f.json = PQgetvalue(r, row, 9);
  f.sender = PQgetvalue(r, row, 10);
  f.received_unix_ms = Int(r, row, 11);
  return f;
}

// Rows into `reply` until `limit` of them (0: no limit) or half a frame of JSON: the rest is
// `more`.
void TakeRows(const PGresult* r, uint32_t limit, msg::RecordsReply* reply) {
  size_t bytes = 0;
  for (int row = 0; row < PQntuples(r); ++row) {
    if ((limit && reply->records.size() == limit) || bytes > kRecordsReplyBytes) {
      reply->more = true;
      return;
    }
    reply->records.push_back(RecordRow(r, row));
    bytes += reply->records.back().json.size();
  }
}

}  // namespace

struct PgRecordStore::Conn {
  std::string conninfo;
  std::string name;
  PGconn* pg = nullptr;
  ~Conn() {
    if (pg) PQfinish(pg);
  }

  Status Error(const std::string& what) const {
    std::string why = pg ? PQerrorMessage(pg) : "out of memory";
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    const bool gone = !pg || PQstatus(pg) != CONNECTION_OK;
    return Status(gone ? ErrorCode::kDisconnected : ErrorCode::kIoError,
                  "records database " + name + ": " + what + ": " + why);
  }

  Status Connect() {
    if (pg) PQfinish(pg);
    pg = PQconnectdb(conninfo.c_str());
    if (!pg || PQstatus(pg) != CONNECTION_OK) return Error("cannot connect");
    name = std::string(PQuser(pg)) + "@" + PQhost(pg) + ":" + PQport(pg) + "/" + PQdb(pg);
    // Warnings of CREATE ... IF NOT EXISTS and the like are not for the tracker's log.
    PQsetNoticeProcessor(
        pg, [](void*, const char*) {}, nullptr);
    return Status::Ok();
  }

  // One statement with text parameters; a lost connection is opened again once, when no
  // transaction was open on it (its statements would be lost with it).
  Expected<Result> Exec(const char* sql, const std::vector<std::string>& params,
                        bool in_transaction = false) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p.c_str());
    for (int attempt = 0;; ++attempt) {
      Result r(PQexecParams(pg, sql, static_cast<int>(values.size()), nullptr, values.data(),
                            nullptr, nullptr, 0));
      const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
      if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
      if (attempt == 0 && !in_transaction && PQstatus(pg) != CONNECTION_OK) {
        PQreset(pg);
        if (PQstatus(pg) == CONNECTION_OK) continue;
      }
      return Error(std::string(sql).substr(0, std::string(sql).find(' ')));
    }
  }
};

PgRecordStore::PgRecordStore(std::unique_ptr<Conn> conn) : conn_(std::move(conn)) {}
PgRecordStore::~PgRecordStore() = default;

const std::string& PgRecordStore::name() const { return conn_->name; }

Expected<std::unique_ptr<PgRecordStore>> PgRecordStore::Open(const std::string& conninfo) {
  auto conn = std::make_unique<Conn>();
  conn->conninfo = conninfo;
  conn->name = "(not connected)";
  CT_RETURN_IF_ERROR(conn->Connect());
  // Several statements: the simple query protocol.
  Result r(PQexec(conn->pg, kSchema));
  if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    return conn->Error("cannot create the records table");
  }
  return std::unique_ptr<PgRecordStore>(new PgRecordStore(std::move(conn)));
}

Expected<msg::RecordsPutReply> PgRecordStore::PutRecords(
    const std::string& run_id, const std::string& sender, int64_t received_unix_ms,
    const std::vector<msg::FarmRecord>& records) {
  msg::RecordsPutReply reply;
  CT_RETURN_IF_ERROR(conn_->Exec("BEGIN", {}).status());
  for (const msg::FarmRecord& r : records) {
    auto put = conn_->Exec(
        "INSERT INTO records(digest, task, target, kind, generator, config, ok, mean, "
        "stopped_early, run_id, sender, received_ms, json) "
        "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13) ON CONFLICT (digest) DO NOTHING",
        {Sha256Hex(r.json), r.task, r.target, r.device_kind, r.generator,
         std::to_string(r.config_index), r.ok ? "1" : "0", fmt::format("{}", r.mean),
         r.stopped_early ? "1" : "0", run_id, sender, std::to_string(received_unix_ms), r.json},
        /*in_transaction=*/true);
    if (!put.ok()) {
      (void)conn_->Exec("ROLLBACK", {}, true);
      return put.status();
    }
    if (std::string(PQcmdTuples(put->get())) == "1") {
      ++reply.added;
    } else {
      ++reply.duplicates;
    }
  }
  CT_RETURN_IF_ERROR(conn_->Exec("COMMIT", {}, true).status());
  return reply;
}

Expected<msg::RecordsReply> PgRecordStore::RecordsOf(const std::string& task,
                                                     const std::string& target,
                                                     const std::string& kind, bool best_only,
                                                     uint64_t after_id, uint32_t limit) {
  msg::RecordsReply reply;
  if (best_only) {
    // Per generator the row with the lowest mean (the oldest among equals), oldest first.
    static const std::string sql =
        std::string("SELECT * FROM (SELECT DISTINCT ON (generator) ") + kRecordColumns +
        " FROM records WHERE task=$1 AND target=$2 AND kind=$3 AND ok=1 AND stopped_early=0 "
        "AND mean>0 ORDER BY generator, mean, id) best ORDER BY id";
    CT_ASSIGN_OR_RETURN(Result r, conn_->Exec(sql.c_str(), {task, target, kind}));
    TakeRows(r.get(), 0, &reply);
    return reply;
  }
  static const std::string sql = std::string("SELECT ") + kRecordColumns +
                                 " FROM records WHERE task=$1 AND target=$2 AND kind=$3 AND "
                                 "id>$4 ORDER BY id LIMIT $5";
  CT_ASSIGN_OR_RETURN(Result r,
                      conn_->Exec(sql.c_str(), {task, target, kind, std::to_string(after_id),
                                                std::to_string(int64_t{limit} + 1)}));
  TakeRows(r.get(), limit, &reply);
  return reply;
}

Expected<std::map<std::string, int64_t>> PgRecordStore::RecordKinds(const std::string& task,
                                                                    const std::string& target) {
  CT_ASSIGN_OR_RETURN(
      Result r,
      conn_->Exec("SELECT kind, COUNT(*) FROM records WHERE task=$1 AND target=$2 GROUP BY kind",
                  {task, target}));
  std::map<std::string, int64_t> out;
  for (int row = 0; row < PQntuples(r.get()); ++row) {
    out[PQgetvalue(r.get(), row, 0)] = Int(r.get(), row, 1);
  }
  return out;
}

Expected<std::map<std::pair<std::string, std::string>, int64_t>> PgRecordStore::RecordTargetKinds(
    const std::string& task) {
  CT_ASSIGN_OR_RETURN(
      Result r,
      conn_->Exec("SELECT target, kind, COUNT(*) FROM records WHERE task=$1 GROUP BY target, kind",
                  {task}));
  std::map<std::pair<std::string, std::string>, int64_t> out;
  for (int row = 0; row < PQntuples(r.get()); ++row) {
    out[{PQgetvalue(r.get(), row, 0), PQgetvalue(r.get(), row, 1)}] = Int(r.get(), row, 2);
  }
  return out;
}

Expected<std::vector<uint64_t>> PgRecordStore::MeasuredConfigs(const msg::RecordsClaim& claim) {
  if (claim.configs.empty()) return std::vector<uint64_t>{};
  // One round trip: the claimed configs that have a record, with its generator.
  std::string configs = "{";
  for (size_t i = 0; i < claim.configs.size(); ++i) {
    configs += (i ? "," : "") + std::to_string(claim.configs[i]);
  }
  configs += "}";
  CT_ASSIGN_OR_RETURN(
      Result r, conn_->Exec("SELECT DISTINCT config, generator FROM records WHERE task=$1 AND "
                            "target=$2 AND kind=$3 AND config = ANY($4::BIGINT[])",
                            {claim.task, claim.target, claim.device_kind, configs}));
  std::vector<std::pair<uint64_t, std::string>> held;
  for (int row = 0; row < PQntuples(r.get()); ++row) {
    held.emplace_back(static_cast<uint64_t>(Int(r.get(), row, 0)), PQgetvalue(r.get(), row, 1));
  }
  std::vector<uint64_t> out;
  for (size_t i = 0; i < claim.configs.size(); ++i) {
    const std::pair<uint64_t, std::string> want{
        claim.configs[i], claim.generators.empty() ? std::string() : claim.generators[i]};
    if (std::find(held.begin(), held.end(), want) != held.end()) out.push_back(claim.configs[i]);
  }
  return out;
}

Expected<int64_t> PgRecordStore::RecordCount() {
  CT_ASSIGN_OR_RETURN(Result r, conn_->Exec("SELECT COUNT(*) FROM records", {}));
  return Int(r.get(), 0, 0);
}

Expected<msg::RecordsListReply> PgRecordStore::ListRecords(const msg::RecordsList& list) {
  // As the SQLite store's (store.cc): the best records of each group, folded into rows.
  CT_ASSIGN_OR_RETURN(
      Result r,
      conn_->Exec(
          "SELECT c.task, c.target, c.kind, c.n, r.mean, r.config, r.run_id, r.sender FROM "
          "(SELECT task, target, kind, COUNT(*) AS n, "
          "MIN(CASE WHEN ok=1 AND stopped_early=0 AND mean>0 THEN mean END) AS best "
          "FROM records WHERE substr(task, 1, length($1::text)) = $1::text AND "
          "(task, target, kind) > ($2::text, $3::text, $4::text) "
          "GROUP BY task, target, kind ORDER BY task, target, kind LIMIT $5) c "
          "LEFT JOIN records r ON r.task=c.task AND r.target=c.target AND r.kind=c.kind AND "
          "r.mean=c.best AND r.ok=1 AND r.stopped_early=0 "
          "ORDER BY c.task, c.target, c.kind, r.id",
          {list.task_prefix, list.after_task, list.after_target, list.after_kind,
           std::to_string(int64_t{list.limit} + 1)}));
  std::vector<msg::RecordsSummaryRow> rows;
  for (int row = 0; row < PQntuples(r.get()); ++row) {
    const PGresult* res = r.get();
    msg::RecordsSummaryRow s;
    s.task = PQgetvalue(res, row, 0);
    s.target = PQgetvalue(res, row, 1);
    s.device_kind = PQgetvalue(res, row, 2);
    s.records = static_cast<uint64_t>(Int(res, row, 3));
    if (!PQgetisnull(res, row, 4)) {
      s.best_mean = std::stod(PQgetvalue(res, row, 4));
      s.best_config = static_cast<uint64_t>(Int(res, row, 5));
      s.best_run_id = PQgetvalue(res, row, 6);
      s.best_sender = PQgetvalue(res, row, 7);
    }
    rows.push_back(std::move(s));
  }
  return FoldRecordsList(rows, list.limit);
}

#else  // no libpq

struct PgRecordStore::Conn {
  std::string name;
};

PgRecordStore::PgRecordStore(std::unique_ptr<Conn> conn) : conn_(std::move(conn)) {}
PgRecordStore::~PgRecordStore() = default;
const std::string& PgRecordStore::name() const { return conn_->name; }

Expected<std::unique_ptr<PgRecordStore>> PgRecordStore::Open(const std::string&) {
  return Status(ErrorCode::kInvalidArgument,
                "this crosstune-tracker was built without PostgreSQL (libpq): records go to its "
                "own --db");
}
Expected<msg::RecordsPutReply> PgRecordStore::PutRecords(const std::string&, const std::string&,
                                                         int64_t,
                                                         const std::vector<msg::FarmRecord>&) {
  return Status(ErrorCode::kInternal, "no PostgreSQL");
}
Expected<msg::RecordsReply> PgRecordStore::RecordsOf(const std::string&, const std::string&,
                                                     const std::string&, bool, uint64_t, uint32_t) {
  return Status(ErrorCode::kInternal, "no PostgreSQL");
}
Expected<std::map<std::string, int64_t>> PgRecordStore::RecordKinds(const std::string&,
                                                                    const std::string&) {
  return Status(ErrorCode::kInternal, "no PostgreSQL");
}
Expected<std::map<std::pair<std::string, std::string>, int64_t>> PgRecordStore::RecordTargetKinds(
    const std::string&) {
  return Status(ErrorCode::kInternal, "no PostgreSQL");
}
Expected<std::vector<uint64_t>> PgRecordStore::MeasuredConfigs(const msg::RecordsClaim&) {
  return Status(ErrorCode::kInternal, "no PostgreSQL");
}
Expected<int64_t> PgRecordStore::RecordCount() {
  return Status(ErrorCode::kInternal, "no PostgreSQL");
}
Expected<msg::RecordsListReply> PgRecordStore::ListRecords(const msg::RecordsList&) {
  return Status(ErrorCode::kInternal, "no PostgreSQL");
}

#endif

}  // namespace crosstune::tracker
