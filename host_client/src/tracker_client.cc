#include "crosstune/client/tracker_client.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <thread>

#include "crosstune/crypto.h"
#include "crosstune/handshake.h"

namespace crosstune::client {
namespace {

using std::chrono::milliseconds;

// How often a waiting client says it is alive (the tracker drops clients idle for two minutes).
constexpr milliseconds kKeepAlive{20'000};

}  // namespace

std::string DefaultPeerName() {
  const char* user = std::getenv("USER");
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  return std::string(user && *user ? user : "user") + "@" + (host[0] ? host : "localhost");
}

Expected<std::unique_ptr<TrackerClient>> TrackerClient::Connect(const TrackerOptions& options) {
  std::unique_ptr<TrackerClient> c(new TrackerClient());
  c->options_ = options;
  if (c->options_.peer_name.empty()) c->options_.peer_name = DefaultPeerName();
  std::lock_guard<std::mutex> lock(c->mu_);
  CT_RETURN_IF_ERROR(c->Open());
  return c;
}

Status TrackerClient::Open() {
  std::string host;
  uint16_t port = 0;
  CT_RETURN_IF_ERROR(Channel::ParseHostPort(options_.tracker, &host, &port));
  auto deadline = DeadlineIn(options_.connect_timeout);
  auto ch = Channel::Connect(host, port, deadline);
  if (!ch.ok()) {
    return Status(ch.status().code(), "tracker " + options_.tracker + ": " + ch.status().message());
  }
  msg::Hello hello;
  hello.role = static_cast<uint8_t>(PeerRole::kClient);
  hello.peer_name = options_.peer_name;
  auto reply = ClientHandshake(*ch, hello, options_.auth_secret, deadline);
  if (!reply.ok()) {
    return Status(reply.status().code(),
                  "tracker " + options_.tracker + ": " + reply.status().message());
  }
  channel_ = std::move(ch).value();
  hello_ = std::move(reply).value();
  return Status::Ok();
}

TrackerClient::~TrackerClient() {
  StopAutoRenew();
  std::lock_guard<std::mutex> lock(mu_);
  channel_.Close();
}

template <typename Reply, typename Req>
Expected<Reply> TrackerClient::Call(Opcode op, const Req& req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!channel_.is_open()) return Status(ErrorCode::kDisconnected, "not connected to the tracker");
  auto r = channel_.Call<Reply>(op, req, DeadlineIn(options_.request_timeout));
  if (!r.ok() &&
      (r.status().code() == ErrorCode::kDisconnected || r.status().code() == ErrorCode::kTimeout ||
       r.status().code() == ErrorCode::kProtocolError)) {
    channel_.Close();
  }
  return r;
}

Expected<msg::Grant> TrackerClient::RequestDevice(const LeaseRequest& request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!channel_.is_open()) return Status(ErrorCode::kDisconnected, "not connected to the tracker");
  cancel_.store(false);
  msg::DeviceRequest req;
  req.key = request.key;
  req.constraints = request.constraints;
  req.priority = request.priority;
  req.lease_ms = static_cast<uint32_t>(request.hold.count());
  req.holder = options_.peer_name;
  req.multi_session = request.multi_session;
  auto wait_until = Clock::now() + request.wait;
  uint32_t id = 0;
  // (Re)sends the request for the time left of the caller's wait.
  auto send = [&]() -> Status {
    auto left = std::chrono::duration_cast<milliseconds>(wait_until - Clock::now());
    req.queue_timeout_ms = static_cast<uint32_t>(std::max<int64_t>(left.count(), 1));
    id = channel_.NextRequestId();
    return channel_.Send(Opcode::kRequestDevice, id, req, DeadlineIn(options_.request_timeout));
  };
  // A lost tracker connection (a tracker restart) does not end the wait: reconnect with backoff
  // for up to reconnect_window and queue again. The tracker cannot know the old place in the
  // queue, so the request joins it anew.
  auto reconnect = [&](const Status& why) -> Status {
    channel_.Close();
    auto until = std::min(Clock::now() + options_.reconnect_window, wait_until);
    milliseconds backoff{100};
    Status last = why;
    while (Clock::now() < until) {
      if (cancel_.load()) return Status(ErrorCode::kBusy, "request cancelled");
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, until - Clock::now()));
      backoff = std::min(backoff * 2, milliseconds(2000));
      last = Open();
      if (last.ok()) return send();
      // Refusals (wrong secret, another protocol) do not get better by retrying.
      if (last.code() == ErrorCode::kUnauthorized || last.code() == ErrorCode::kVersionMismatch) {
        break;
      }
    }
    return Status(last.code(), "lost the tracker while waiting for a device (" + why.message() +
                                   "); reconnecting failed: " + last.message());
  };
  auto fail = [&](Status s) -> Expected<msg::Grant> {
    channel_.Close();
    return s;
  };
  auto transport_error = [](const Status& s) {
    return s.code() == ErrorCode::kDisconnected || s.code() == ErrorCode::kIoError ||
           s.code() == ErrorCode::kTimeout;
  };
  if (Status st = send(); !st.ok()) {
    if (!transport_error(st)) return fail(st);
    CT_RETURN_IF_ERROR(reconnect(st));
  }
  // The tracker answers a timed-out request itself; this is the backstop if it never does.
  auto give_up = wait_until + options_.request_timeout;
  auto last_sent = Clock::now();
  bool cancel_sent = false;
  for (;;) {
    auto now = Clock::now();
    if (now >= give_up) {
      return fail(Status(ErrorCode::kTimeout, "no answer from the tracker about the request"));
    }
    Status io;
    if (cancel_.load() && !cancel_sent) {
      io = channel_.Send(Opcode::kCancelRequest, channel_.NextRequestId(), msg::CancelRequest{id},
                         DeadlineIn(options_.request_timeout));
      cancel_sent = io.ok();
    }
    if (io.ok() && now - last_sent >= kKeepAlive) {
      io = channel_.Send(Opcode::kHeartbeat, channel_.NextRequestId(), msg::Empty{},
                         DeadlineIn(options_.request_timeout));
      last_sent = now;
    }
    if (io.ok()) {
      if (!channel_.has_buffered_input()) {  // a frame read ahead is no longer in the socket
        pollfd p{channel_.fd(), POLLIN, 0};
        int n = ::poll(&p, 1, 200);
        if (n <= 0) continue;
      }
      auto f = channel_.ReadFrame(DeadlineIn(options_.request_timeout));
      if (f.ok()) {
        if (f->request_id != id) continue;  // replies to keep-alives and the cancel
        if (f->op == Opcode::kQueueUpdate) {
          if (request.on_queue_update) {
            auto u = f->As<msg::QueueUpdate>();
            if (u.ok()) request.on_queue_update(*u);
          }
          continue;
        }
        CT_RETURN_IF_ERROR(f->AsStatus());
        return f->As<msg::Grant>();
      }
      io = f.status();
    }
    if (!transport_error(io)) return fail(io);
    if (cancel_.load()) return fail(Status(ErrorCode::kBusy, "request cancelled"));
    if (Status r = reconnect(io); !r.ok()) return fail(r);
    cancel_sent = false;
    last_sent = Clock::now();
  }
}

Expected<msg::LeaseInfo> TrackerClient::Renew(const std::string& token, uint32_t lease_ms) {
  return Call<msg::LeaseInfo>(Opcode::kRenewLease, msg::RenewLease{token, lease_ms});
}

Status TrackerClient::Release(const std::string& token, msg::Outcome outcome,
                              const std::string& message) {
  return Call<msg::Empty>(Opcode::kReleaseLease,
                          msg::ReleaseLease{token, static_cast<uint8_t>(outcome), message})
      .status();
}

Expected<std::string> TrackerClient::Query() {
  CT_ASSIGN_OR_RETURN(auto reply, Call<msg::QueryReply>(Opcode::kQuery, msg::Empty{}));
  return reply.json;
}

Status TrackerClient::ReportTuneProgress(const msg::TuneProgress& progress) {
  return Call<msg::Empty>(Opcode::kTuneProgress, progress).status();
}

Expected<msg::RecordsPutReply> TrackerClient::PutRecords(
    const std::string& run_id, const std::vector<msg::FarmRecord>& records) {
  msg::RecordsPutReply total;
  const auto give_up = std::chrono::steady_clock::now() + options_.request_timeout;
  for (size_t first = 0; first < records.size();) {
    // Up to kMaxRecordsPerMessage records and half a frame of JSON a message.
    size_t n = 0, bytes = 0;
    while (first + n < records.size() && n < msg::kMaxRecordsPerMessage &&
           (n == 0 || bytes + records[first + n].json.size() < (Limits::kMaxFrameBytes / 2))) {
      bytes += records[first + n].json.size();
      ++n;
    }
    msg::RecordsPut put;
    put.run_id = run_id;
    put.records.assign(records.begin() + static_cast<std::ptrdiff_t>(first),
                       records.begin() + static_cast<std::ptrdiff_t>(first + n));
    milliseconds backoff{100};
    for (;;) {
      auto reply = Call<msg::RecordsPutReply>(Opcode::kRecordsPut, put);
      if (reply.ok()) {
        total.added += reply->added;
        total.duplicates += reply->duplicates;
        break;
      }
      if (reply.status().code() != ErrorCode::kBusy ||
          std::chrono::steady_clock::now() + backoff > give_up) {
        return reply.status();
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, milliseconds{2000});
    }
    first += n;
  }
  return total;
}

Expected<msg::RecordsReply> TrackerClient::QueryRecords(const msg::RecordsQuery& query) {
  return Call<msg::RecordsReply>(Opcode::kRecordsQuery, query);
}

Expected<msg::RecordsClaimReply> TrackerClient::ClaimRecords(const msg::RecordsClaim& claim) {
  return Call<msg::RecordsClaimReply>(Opcode::kRecordsClaim, claim);
}

Expected<msg::RecordsListReply> TrackerClient::ListRecords(const msg::RecordsList& list) {
  return Call<msg::RecordsListReply>(Opcode::kRecordsList, list);
}

Status TrackerClient::Admin(const std::string& action, const std::string& device,
                            const std::string& admin_secret) {
  msg::AdminRequest req;
  req.action = action;
  req.device = device;
  {
    std::lock_guard<std::mutex> lock(mu_);
    req.proof = HmacSha256Hex(admin_secret, hello_.session_id + "\n" + action + "\n" + device);
  }
  return Call<msg::Empty>(Opcode::kAdmin, req).status();
}

void TrackerClient::StartAutoRenew(const std::string& token, milliseconds interval) {
  StopAutoRenew();
  {
    std::lock_guard<std::mutex> lock(renew_mu_);
    stop_renew_ = false;
  }
  renewer_ = std::thread([this, token, interval] {
    milliseconds backoff{250};
    std::unique_lock<std::mutex> lock(renew_mu_);
    milliseconds wait = interval;
    while (!renew_cv_.wait_for(lock, wait, [this] { return stop_renew_; })) {
      lock.unlock();
      Status s;
      {
        std::lock_guard<std::mutex> cl(mu_);
        if (!channel_.is_open()) s = Open();  // the tracker restarted: re-attach below
      }
      if (s.ok()) s = Renew(token).status();
      lock.lock();
      renew_status_ = s;
      if (s.ok() || s.code() == ErrorCode::kNotFound) {
        backoff = milliseconds(250);
        wait = interval;
        if (!s.ok()) break;  // the lease is gone; nothing more to renew
      } else {
        wait = backoff;
        backoff = std::min(backoff * 2, milliseconds(5'000));
      }
    }
  });
}

void TrackerClient::StopAutoRenew() {
  {
    std::lock_guard<std::mutex> lock(renew_mu_);
    stop_renew_ = true;
  }
  renew_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
}

Status TrackerClient::renew_status() const {
  std::lock_guard<std::mutex> lock(renew_mu_);
  return renew_status_;
}

}  // namespace crosstune::client

namespace crosstune::client {

std::chrono::milliseconds RenewInterval(std::chrono::milliseconds hold) {
  using std::chrono::milliseconds;
  return std::max(milliseconds(200), std::min(hold / 3, milliseconds(20'000)));
}

Expected<LeasedSession> OpenLeasedSession(const TrackerOptions& tracker_options,
                                          const LeaseRequest& request, ConnectOptions options) {
  CT_ASSIGN_OR_RETURN(auto tracker, TrackerClient::Connect(tracker_options));
  Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    CT_ASSIGN_OR_RETURN(msg::Grant grant, tracker->RequestDevice(request));
    options.server = grant.address;
    options.lease_token = grant.lease_token;
    auto session = Session::Connect(options);
    if (session.ok()) {
      tracker->StartAutoRenew(grant.lease_token, RenewInterval(request.hold));
      LeasedSession leased;
      leased.grant = std::move(grant);
      leased.tracker = std::move(tracker);
      leased.session = std::move(session).value();
      return leased;
    }
    last = Status(session.status().code(), grant.device + " (" + grant.address + ", from tracker " +
                                               tracker_options.tracker +
                                               "): " + session.status().message());
    const bool unreachable = session.status().code() == ErrorCode::kDisconnected ||
                             session.status().code() == ErrorCode::kTimeout;
    (void)tracker->Release(grant.lease_token,
                           unreachable ? msg::Outcome::kUnreachable : msg::Outcome::kOk,
                           session.status().message());
    if (!unreachable) break;
  }
  return last;
}

}  // namespace crosstune::client
