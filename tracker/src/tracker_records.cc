// The farm's tuning records (records.h): what clients put, query and claim.
#include <spdlog/spdlog.h>

#include "crosstune/text.h"
#include "tracker_impl.h"

namespace crosstune::tracker {
namespace {

// Records are the clients' (a tune run's); servers and TVM peers neither write nor read them.
Status RecordsAllowed(const Conn& c) {
  if (c.role == PeerRole::kClient || c.role == PeerRole::kAdmin) return Status::Ok();
  return Status(ErrorCode::kUnauthorized, "records: only clients keep and read tuning records");
}

// Claims held at once across the farm, at most: a client that claims without ever measuring fills
// its own claims' lifetime, not the tracker's memory.
constexpr size_t kMaxClaimsHeld = 200'000;

}  // namespace

void Tracker::Impl::OnRecordsPut(SteadyClock::time_point now, const std::shared_ptr<Conn>& c,
                                 const Frame& f, const msg::RecordsPut& put) {
  if (Status s = RecordsAllowed(*c); !s.ok()) return SendError(c, f.request_id, s);
  if (put.records.size() > msg::kMaxRecordsPerMessage) {
    return SendError(c, f.request_id,
                     Status(ErrorCode::kInvalidArgument,
                            "records: at most " + std::to_string(msg::kMaxRecordsPerMessage) +
                                " records a message"));
  }
  for (const msg::FarmRecord& r : put.records) {
    if (Status s = ValidateRecord(r); !s.ok()) return SendError(c, f.request_id, s);
  }
  if (put.run_id.size() > 256 || !IsValidUtf8(put.run_id)) {
    return SendError(c, f.request_id, Status(ErrorCode::kInvalidArgument, "records: a bad run id"));
  }
  if (!records_throttle.Take(now, c->peer_name, put.records.size())) {
    return SendError(
        c, f.request_id,
        Status(ErrorCode::kBusy, "records: " + EscapeForLog(c->peer_name) + " sends more than " +
                                     std::to_string(int(options.records_per_second)) +
                                     " records a second; retry later"));
  }
  // The records commit on their own before the reply: the lease rows of an open batch go first.
  CommitBatch();
  auto reply = records->PutRecords(put.run_id, c->peer_name, sched.unix_ms(), put.records);
  if (!reply.ok()) {
    spdlog::warn("tracker: {}", reply.status().ToString());
    return SendError(c, f.request_id, reply.status());
  }
  for (const msg::FarmRecord& r : put.records) record_claims.Measured(r);
  Reply(c, f.request_id, *reply);
}

void Tracker::Impl::OnRecordsQuery(const std::shared_ptr<Conn>& c, const Frame& f,
                                   const msg::RecordsQuery& q) {
  if (Status s = RecordsAllowed(*c); !s.ok()) return SendError(c, f.request_id, s);
  auto reply = QueryRecords(*records, q);
  if (!reply.ok()) return SendError(c, f.request_id, reply.status());
  Reply(c, f.request_id, *reply);
}

void Tracker::Impl::OnRecordsClaim(SteadyClock::time_point now, const std::shared_ptr<Conn>& c,
                                   const Frame& f, const msg::RecordsClaim& claim) {
  if (Status s = RecordsAllowed(*c); !s.ok()) return SendError(c, f.request_id, s);
  if (Status s = ValidateRecordsClaim(claim); !s.ok()) return SendError(c, f.request_id, s);
  if (record_claims.size() + claim.configs.size() > kMaxClaimsHeld) {
    record_claims.Expire(now);
    if (record_claims.size() + claim.configs.size() > kMaxClaimsHeld) {
      return SendError(c, f.request_id,
                       Status(ErrorCode::kBusy,
                              "records: the tracker holds too many claims; "
                              "retry later"));
    }
  }
  auto measured = records->MeasuredConfigs(claim);
  if (!measured.ok()) return SendError(c, f.request_id, measured.status());
  Reply(c, f.request_id, record_claims.Claim(now, claim, *measured));
}

void Tracker::Impl::OnRecordsList(const std::shared_ptr<Conn>& c, const Frame& f,
                                  const msg::RecordsList& l) {
  if (Status s = RecordsAllowed(*c); !s.ok()) return SendError(c, f.request_id, s);
  if (Status s = ValidateRecordsList(l); !s.ok()) return SendError(c, f.request_id, s);
  auto reply = records->ListRecords(l);
  if (!reply.ok()) return SendError(c, f.request_id, reply.status());
  Reply(c, f.request_id, *reply);
}

}  // namespace crosstune::tracker
