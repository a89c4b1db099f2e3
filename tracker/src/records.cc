#include "crosstune/tracker/records.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <sstream>

#include "crosstune/json_reader.h"
#include "crosstune/text.h"

namespace crosstune::tracker {
namespace {

constexpr size_t kMaxName = 256;     // task, device kind, generator, run id
constexpr size_t kMaxTarget = 1024;  // a target string with its whole -mattr list

Status Bad(const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, "records: " + what);
}

Status CheckText(const std::string& s, size_t max, const char* what, bool required) {
  if (required && s.empty()) return Bad(std::string(what) + " is empty");
  if (s.size() > max) {
    return Bad(std::string(what) + " is longer than " + std::to_string(max) + " bytes");
  }
  if (!IsValidUtf8(s)) return Bad(std::string(what) + " is not UTF-8");
  return Status::Ok();
}

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

Status ValidateRecord(const msg::FarmRecord& r) {
  CT_RETURN_IF_ERROR(CheckText(r.task, kMaxName, "a record's task", true));
  CT_RETURN_IF_ERROR(CheckText(r.target, kMaxTarget, "a record's target", true));
  CT_RETURN_IF_ERROR(CheckText(r.device_kind, kMaxName, "a record's device kind", true));
  CT_RETURN_IF_ERROR(CheckText(r.generator, kMaxName, "a record's generator", false));
  if (!std::isfinite(r.mean) || r.mean < 0) {
    return Bad("a record's mean is not a finite number of seconds");
  }
  if (r.json.size() > msg::kMaxFarmRecordBytes) {
    return Bad("a record is longer than " + std::to_string(msg::kMaxFarmRecordBytes) + " bytes");
  }
  // A log line as the tuner writes it: one JSON object (bounded in depth, as all JSON from
  // outside).
  auto j = ParseJson(r.json, {.max_bytes = msg::kMaxFarmRecordBytes});
  if (!j.ok()) return Bad("a record of " + r.task + ": " + j.status().message());
  if (!j->is_object()) return Bad("a record of " + r.task + " is not a JSON object");
  return Status::Ok();
}

Status ValidateRecordsQuery(const msg::RecordsQuery& q) {
  CT_RETURN_IF_ERROR(CheckText(q.task, kMaxName, "the query's task", true));
  CT_RETURN_IF_ERROR(CheckText(q.target, kMaxTarget, "the query's target", true));
  CT_RETURN_IF_ERROR(CheckText(q.device_kind, kMaxName, "the query's device kind", false));
  if (q.limit > msg::kMaxRecordsPerMessage) {
    return Bad("at most " + std::to_string(msg::kMaxRecordsPerMessage) + " records a reply");
  }
  return Status::Ok();
}

Status ValidateRecordsClaim(const msg::RecordsClaim& c) {
  CT_RETURN_IF_ERROR(CheckText(c.run_id, kMaxName, "the claim's run id", true));
  CT_RETURN_IF_ERROR(CheckText(c.task, kMaxName, "the claim's task", true));
  CT_RETURN_IF_ERROR(CheckText(c.target, kMaxTarget, "the claim's target", true));
  CT_RETURN_IF_ERROR(CheckText(c.device_kind, kMaxName, "the claim's device kind", true));
  if (!c.generators.empty() && c.generators.size() != c.configs.size()) {
    return Bad("a claim names " + std::to_string(c.configs.size()) + " configs and " +
               std::to_string(c.generators.size()) + " generators");
  }
  for (const std::string& g : c.generators) {
    CT_RETURN_IF_ERROR(CheckText(g, kMaxName, "a claim's generator", false));
  }
  if (c.configs.size() > msg::kMaxClaimConfigs) {
    return Bad("at most " + std::to_string(msg::kMaxClaimConfigs) + " configs a claim");
  }
  if (c.ttl_ms > RecordClaims::kMaxTtlMs) {
    return Bad("a claim lasts at most " + std::to_string(RecordClaims::kMaxTtlMs / 1000) + " s");
  }
  return Status::Ok();
}

Status ValidateRecordsList(const msg::RecordsList& l) {
  CT_RETURN_IF_ERROR(CheckText(l.task_prefix, kMaxName, "the list's task prefix", false));
  CT_RETURN_IF_ERROR(CheckText(l.after_task, kMaxName, "the list's task to resume after", false));
  CT_RETURN_IF_ERROR(
      CheckText(l.after_target, kMaxTarget, "the list's target to resume after", false));
  CT_RETURN_IF_ERROR(CheckText(l.after_kind, kMaxName, "the list's kind to resume after", false));
  if (l.limit == 0 || l.limit > msg::kMaxRecordsListRows) {
    return Bad("a list is 1 to " + std::to_string(msg::kMaxRecordsListRows) + " rows");
  }
  return Status::Ok();
}

msg::RecordsListReply FoldRecordsList(const std::vector<msg::RecordsSummaryRow>& rows,
                                      uint32_t limit) {
  msg::RecordsListReply reply;
  size_t bytes = 0;
  for (const msg::RecordsSummaryRow& r : rows) {
    if (!reply.rows.empty()) {
      const auto& last = reply.rows.back();
      if (last.task == r.task && last.target == r.target && last.device_kind == r.device_kind) {
        continue;  // a later best of equal mean
      }
    }
    if (reply.rows.size() == limit || bytes > kRecordsReplyBytes) {
      reply.more = true;
      break;
    }
    reply.rows.push_back(r);
    bytes += r.task.size() + r.target.size() + r.device_kind.size() + r.best_run_id.size() +
             r.best_sender.size() + 64;
  }
  return reply;
}

std::string NearestKind(const std::string& wanted, const std::map<std::string, int64_t>& kinds) {
  if (kinds.count(wanted)) return wanted;
  auto split = [](const std::string& kind) {
    const size_t slash = kind.find('/');
    if (slash == std::string::npos) return std::make_pair(kind, std::string());
    return std::make_pair(kind.substr(0, slash), kind.substr(slash + 1));
  };
  const auto [arch, cpu] = split(wanted);
  const std::vector<std::string> want_words = Words(cpu);
  std::string best;
  std::pair<size_t, int64_t> best_score{0, -1};
  for (const auto& [kind, count] : kinds) {
    const auto [a, c] = split(kind);
    if (a != arch) continue;
    const std::vector<std::string> words = Words(c);
    size_t shared = 0;
    while (shared < words.size() && shared < want_words.size() &&
           words[shared] == want_words[shared]) {
      ++shared;
    }
    const std::pair<size_t, int64_t> score{shared, count};
    if (score > best_score) {
      best_score = score;
      best = kind;
    }
  }
  return best;
}

Expected<msg::RecordsReply> QueryRecords(RecordStore& store, const msg::RecordsQuery& q) {
  CT_RETURN_IF_ERROR(ValidateRecordsQuery(q));
  const uint32_t limit = q.limit ? q.limit : static_cast<uint32_t>(msg::kMaxRecordsPerMessage);
  std::string kind = q.device_kind;
  std::string target = q.target;
  if (q.nearest) {
    CT_ASSIGN_OR_RETURN(auto kinds, store.RecordKinds(q.task, q.target));
    std::string nearest = NearestKind(q.device_kind, kinds);
    if (!nearest.empty()) {
      kind = nearest;
    } else if (q.any_target) {
      // No kind of this target: the kinds of the others, each with its records over them all.
      CT_ASSIGN_OR_RETURN(auto all, store.RecordTargetKinds(q.task));
      std::map<std::string, int64_t> others;
      for (const auto& [key, n] : all) {
        if (key.first != q.target) others[key.second] += n;
      }
      nearest = NearestKind(q.device_kind, others);
      int64_t most = 0;
      for (const auto& [key, n] : all) {
        if (!nearest.empty() && key.second == nearest && key.first != q.target && n > most) {
          most = n;
          target = key.first;
          kind = nearest;
        }
      }
    }
  }
  CT_ASSIGN_OR_RETURN(msg::RecordsReply reply,
                      store.RecordsOf(q.task, target, kind, q.best_only, q.after_id, limit));
  reply.device_kind = kind;
  reply.target = target;
  reply.exact = kind == q.device_kind && target == q.target;
  return reply;
}

msg::RecordsClaimReply RecordClaims::Claim(Clock::time_point now, const msg::RecordsClaim& claim,
                                           const std::vector<uint64_t>& measured) {
  msg::RecordsClaimReply reply;
  reply.measured = measured;
  auto& held = claims_[Key{claim.task, claim.target, claim.device_kind}];
  const uint32_t ttl = claim.ttl_ms ? claim.ttl_ms : kDefaultTtlMs;
  const Clock::time_point until = now + std::chrono::milliseconds(ttl);
  for (size_t i = 0; i < claim.configs.size(); ++i) {
    const uint64_t config = claim.configs[i];
    if (std::find(measured.begin(), measured.end(), config) != measured.end()) continue;
    const Config key{config, claim.generators.empty() ? "" : claim.generators[i]};
    auto it = held.find(key);
    if (it != held.end() && it->second.first != claim.run_id && it->second.second > now) continue;
    held[key] = {claim.run_id, until};
    reply.granted.push_back(config);
  }
  if (held.empty()) claims_.erase(Key{claim.task, claim.target, claim.device_kind});
  return reply;
}

void RecordClaims::Measured(const msg::FarmRecord& r) {
  auto it = claims_.find(Key{r.task, r.target, r.device_kind});
  if (it == claims_.end()) return;
  it->second.erase(Config{r.config_index, r.generator});
  if (it->second.empty()) claims_.erase(it);
}

void RecordClaims::Expire(Clock::time_point now) {
  for (auto it = claims_.begin(); it != claims_.end();) {
    std::erase_if(it->second, [&](const auto& c) { return c.second.second <= now; });
    it = it->second.empty() ? claims_.erase(it) : std::next(it);
  }
}

size_t RecordClaims::size() const {
  size_t n = 0;
  for (const auto& [key, held] : claims_) n += held.size();
  return n;
}

bool RecordsThrottle::Take(Clock::time_point now, const std::string& sender, size_t n) {
  auto it = buckets_.find(sender);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxSenders) {
      buckets_.erase(
          std::min_element(buckets_.begin(), buckets_.end(),
                           [](const auto& a, const auto& b) { return a.second.at < b.second.at; }));
    }
    it = buckets_.emplace(sender, Bucket{burst_, now}).first;
  }
  Bucket& b = it->second;
  const double elapsed = std::chrono::duration<double>(now - b.at).count();
  b.credit = std::min(burst_, b.credit + std::max(0.0, elapsed) * per_second_);
  b.at = now;
  if (b.credit < static_cast<double>(n)) return false;
  b.credit -= static_cast<double>(n);
  return true;
}

}  // namespace crosstune::tracker
