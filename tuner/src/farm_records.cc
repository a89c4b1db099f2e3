#include "crosstune/tuner/farm_records.h"

#include <cmath>

#include "crosstune/json_reader.h"

namespace crosstune::tuner {
namespace {

std::string Line(const Record& r) {
  return r.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

msg::FarmRecord ToFarmRecord(const Record& r) {
  msg::FarmRecord f;
  f.task = r.task.Key();
  f.target = r.target;
  f.device_kind = DeviceKind(r);
  f.generator = r.generator;
  f.config_index = r.config_index;
  f.ok = r.ok();
  // A mean no measurement gives (a log edited by hand) is no mean.
  f.mean = r.ok() && std::isfinite(r.mean) && r.mean > 0 ? r.mean : 0;
  f.stopped_early = r.stopped_early;
  f.json = Line(r);
  if (f.json.size() > msg::kMaxFarmRecordBytes) {
    // Only a message can be that long: keep its start, and say so.
    Record cut = r;
    const size_t over = f.json.size() - msg::kMaxFarmRecordBytes;
    const size_t keep = cut.message.size() > over + 64 ? cut.message.size() - over - 64 : 0;
    cut.message = cut.message.substr(0, keep) + " [cut]";
    f.json = Line(cut);
  }
  return f;
}

Expected<Record> FromFarmRecord(const msg::FarmRecord& f) {
  auto j = ParseJson(f.json, {.max_bytes = msg::kMaxFarmRecordBytes});
  if (!j.ok()) return j.status();
  return Record::FromJson(*j);
}

Expected<RecordsImport> ImportLogs(client::TrackerClient& tracker,
                                   const std::vector<std::string>& logs, const std::string& run_id,
                                   const ForeignOptions& options) {
  RecordsImport out;
  for (const std::string& path : logs) {
    CT_ASSIGN_OR_RETURN(RecordsFile file, ReadRecordsFile(path, options));
    out.files.emplace_back(path, file.format);
    LogContents& log = file.log;
    out.warnings.insert(out.warnings.end(), log.warnings.begin(), log.warnings.end());
    std::vector<msg::FarmRecord> batch;
    batch.reserve(log.records.size());
    for (const Record& r : log.records) {
      msg::FarmRecord f = ToFarmRecord(r);
      // A record the farm cannot place (no task or device) is said, not sent.
      if (f.device_kind.empty() || f.target.empty()) {
        out.warnings.push_back(path + ": a record of " + f.task +
                               " names no device kind or target: not imported");
        continue;
      }
      if (f.json.size() > msg::kMaxFarmRecordBytes) {
        out.warnings.push_back(path + ": a record of " + f.task + " takes " +
                               std::to_string(f.json.size()) + " bytes, over the farm's " +
                               std::to_string(msg::kMaxFarmRecordBytes) + ": not imported");
        continue;
      }
      batch.push_back(std::move(f));
    }
    out.read += static_cast<int>(log.records.size());
    if (batch.empty()) continue;
    auto put = tracker.PutRecords(run_id, batch);
    if (!put.ok()) {
      return Status(put.status().code(), path + ": " + put.status().message());
    }
    out.added += static_cast<int>(put->added);
    out.duplicates += static_cast<int>(put->duplicates);
  }
  return out;
}

namespace {

// Reads the query's pages into `out`: the first page's kind (the nearest, when asked) is the one
// every later page asks for; `q.after_id` ends at the last record read. One page for a best-only
// query.
Status ReadPages(client::TrackerClient& tracker, msg::RecordsQuery& q, FarmRecords* out) {
  for (bool first = true;; first = false) {
    CT_ASSIGN_OR_RETURN(msg::RecordsReply reply, tracker.QueryRecords(q));
    if (first) {
      out->device_kind = reply.device_kind;
      out->exact = reply.exact;
      q.device_kind = reply.device_kind;
      // A tracker from before RecordsReply::target sends none: the records are the query's.
      if (!reply.target.empty()) q.target = reply.target;
      out->target = q.target;
      q.nearest = false;
      q.any_target = false;
    }
    for (const msg::FarmRecord& f : reply.records) {
      q.after_id = f.id;
      auto r = FromFarmRecord(f);
      if (!r.ok()) {
        out->warnings.push_back("farm record " + std::to_string(f.id) + " (sent by " + f.sender +
                                "): " + r.status().message());
        continue;
      }
      out->records.push_back(std::move(r).value());
    }
    if (q.best_only || !reply.more || reply.records.empty()) return Status::Ok();
  }
}

}  // namespace

Expected<FarmRecords> FetchRecords(client::TrackerClient& tracker, const std::string& task_key,
                                   const std::string& target, const std::string& device_kind,
                                   bool best_only, bool any_target) {
  FarmRecords out;
  msg::RecordsQuery q;
  q.task = task_key;
  q.target = target;
  q.device_kind = device_kind;
  q.best_only = best_only;
  q.any_target = any_target;
  CT_RETURN_IF_ERROR(ReadPages(tracker, q, &out));
  return out;
}

Expected<std::vector<msg::RecordsSummaryRow>> ListFarmRecords(client::TrackerClient& tracker,
                                                              const std::string& task_prefix) {
  std::vector<msg::RecordsSummaryRow> rows;
  msg::RecordsList list;
  list.task_prefix = task_prefix;
  list.limit = msg::kMaxRecordsListRows;
  for (;;) {
    CT_ASSIGN_OR_RETURN(msg::RecordsListReply page, tracker.ListRecords(list));
    rows.insert(rows.end(), page.rows.begin(), page.rows.end());
    if (!page.more || page.rows.empty()) return rows;
    list.after_task = page.rows.back().task;
    list.after_target = page.rows.back().target;
    list.after_kind = page.rows.back().device_kind;
  }
}

Expected<FarmRecords> FarmLink::Pull(const std::string& task_key, const std::string& target,
                                     const std::string& kind) {
  FarmRecords out;
  msg::RecordsQuery q;
  q.task = task_key;
  q.target = target;
  q.device_kind = kind;
  q.nearest = false;  // what another kind measured is no measurement of this one
  uint64_t& last = last_id_[task_key + "|" + target + "|" + kind];
  q.after_id = last;
  CT_RETURN_IF_ERROR(ReadPages(tracker_, q, &out));
  last = q.after_id;
  return out;
}

Expected<FarmRecords> FarmLink::Nearest(const std::string& task_key, const std::string& target,
                                        const std::string& kind) {
  CT_ASSIGN_OR_RETURN(FarmRecords got,
                      FetchRecords(tracker_, task_key, target, kind, false, /*any_target=*/true));
  if (got.exact) return FarmRecords{};
  return got;
}

Expected<msg::RecordsClaimReply> FarmLink::Claim(const std::string& task_key,
                                                 const std::string& target, const std::string& kind,
                                                 const std::vector<uint64_t>& configs,
                                                 const std::vector<std::string>& generators) {
  msg::RecordsClaim c;
  c.run_id = run_id_;
  c.task = task_key;
  c.target = target;
  c.device_kind = kind;
  c.configs = configs;
  c.generators = generators;
  return tracker_.ClaimRecords(c);
}

Status FarmLink::Push(const std::vector<Record>& records) {
  for (const Record& r : records) pending_.push_back(ToFarmRecord(r));
  if (pending_.empty()) return Status::Ok();
  auto put = tracker_.PutRecords(run_id_, pending_);
  if (!put.ok()) return put.status();
  pending_.clear();
  return Status::Ok();
}

}  // namespace crosstune::tuner
