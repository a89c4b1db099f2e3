#include "crosstune/tuner/remote_builder.h"

#include <thread>

#include "crosstune/build_job.h"
#include "crosstune/builder/build_codec.h"
#include "crosstune/client/tracker_client.h"
#include "crosstune/handshake.h"

namespace crosstune::tuner {

using builder::BuildRequest;
using builder::BuildResult;

namespace {

BuildResult Failed(Status why) {
  BuildResult r;
  r.status = std::move(why);
  return r;
}

}  // namespace

RemoteBuilder::RemoteBuilder(const RemoteBuilderOptions& options)
    : options_(options), name_(options.name.empty() ? options.connect.server : options.name) {}

RemoteBuilder::~RemoteBuilder() = default;

Expected<std::unique_ptr<RemoteBuilder>> RemoteBuilder::Connect(
    const RemoteBuilderOptions& options) {
  std::unique_ptr<RemoteBuilder> rb(new RemoteBuilder(options));
  msg::DeviceInfo info;
  auto ch = rb->Open(&info);
  if (!ch.ok()) {
    return Status(ch.status().code(), "build worker " + rb->name_ + ": " + ch.status().message());
  }
  rb->slots_ = options.slots > 0 ? options.slots : std::max<int>(1, static_cast<int>(info.cores));
  rb->idle_.push_back(std::move(ch).value());
  return rb;
}

Expected<Channel> RemoteBuilder::Open(msg::DeviceInfo* info) {
  const client::ConnectOptions& c = options_.connect;
  std::string host;
  uint16_t port = 0;
  CT_RETURN_IF_ERROR(Channel::ParseHostPort(c.server, &host, &port));
  const Deadline deadline = DeadlineIn(c.connect_timeout);
  CT_ASSIGN_OR_RETURN(Channel ch, Channel::Connect(host, port, deadline));
  // Results carry libraries and compiler output: raw bytes, not UTF-8 text.
  ch.set_utf8_strings(false);
  msg::Hello hello;
  hello.role = static_cast<uint8_t>(PeerRole::kClient);
  hello.peer_name = c.peer_name.empty() ? client::DefaultPeerName() : c.peer_name;
  hello.lease_token = c.lease_token;
  CT_ASSIGN_OR_RETURN(msg::HelloReply reply, ClientHandshake(ch, hello, c.auth_secret, deadline));
  if (reply.minor < 2) {
    return Status(ErrorCode::kVersionMismatch,
                  "the peer speaks protocol 1." + std::to_string(reply.minor) +
                      ", without builds (1.2): is it a crosstune-build-worker?");
  }
  if (info != nullptr) {
    CT_ASSIGN_OR_RETURN(*info, ch.Call<msg::DeviceInfo>(Opcode::kInfo, msg::Empty{}, deadline));
    if (info->build_targets.empty()) {
      return Status(ErrorCode::kInvalidArgument,
                    "the peer builds nothing (a device's crosstune-server, not a build worker)");
    }
  }
  return ch;
}

Status RemoteBuilder::lost_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_reason_;
}

BuildResult RemoteBuilder::Lose(const Status& why) {
  Status lost(ErrorCode::kDisconnected, "build worker " + name_ + " lost: " + why.ToString());
  std::lock_guard<std::mutex> lock(mu_);
  if (!lost_.exchange(true)) lost_reason_ = lost;
  idle_.clear();
  return Failed(lost_reason_);
}

BuildResult RemoteBuilder::BuildOn(Channel& ch, const BuildRequest& request, bool* keep) {
  *keep = false;
  const auto limit = request.timeout.count() > 0 ? request.timeout : options_.default_timeout;
  const Deadline deadline = Clock::now() + limit + options_.io_timeout;
  auto bytes = CallBuildJob(ch, builder::EncodeBuildRequest(request),
                            static_cast<uint32_t>(limit.count()), deadline);
  if (bytes.ok()) {
    auto result = builder::DecodeBuildResult(*bytes);
    if (!result.ok()) return Failed(result.status());
    *keep = true;
    return std::move(result).value();
  }
  const Status& s = bytes.status();
  switch (s.code()) {
    case ErrorCode::kRemoteCrash:  // the session process died: the compiler crashed there
      return Failed(Status(ErrorCode::kBuildError, "the compiler crashed on build worker " + name_ +
                                                       " building '" + request.name +
                                                       "': " + s.message()));
    case ErrorCode::kTimeout:
      // The worker's watchdog ended the build (it said so before our deadline); silence past
      // our deadline is a worker that no longer answers.
      if (Clock::now() < deadline) return Failed(s);
      return Lose(Status(ErrorCode::kTimeout, "no answer " +
                                                  std::to_string(options_.io_timeout.count()) +
                                                  " ms past the build's limit"));
    case ErrorCode::kBadHash:
    case ErrorCode::kLimitExceeded:
      return Failed(Status(s.code(), "build worker " + name_ + ": " + s.message()));
    default:
      // The connection broke, or the worker refused us (a lease that ended): lost.
      return Lose(s);
  }
}

BuildResult RemoteBuilder::Build(const BuildRequest& request) {
  if (lost_.load()) return Failed(lost_reason());
  Channel ch;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return busy_ < slots_ || lost_.load(); });
    if (lost_.load()) return Failed(lost_reason_);
    ++busy_;
    if (!idle_.empty()) {
      ch = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  BuildResult result;
  bool keep = false;
  if (!ch.is_open()) {
    auto opened = Open(nullptr);
    if (opened.ok()) {
      ch = std::move(opened).value();
    } else {
      result = Lose(opened.status());
    }
  }
  if (ch.is_open()) result = BuildOn(ch, request, &keep);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --busy_;
    if (keep && !lost_.load()) idle_.push_back(std::move(ch));
  }
  cv_.notify_all();
  return result;
}

std::vector<BuildResult> RemoteBuilder::BuildMany(const std::vector<BuildRequest>& requests) {
  std::vector<BuildResult> results(requests.size());
  std::atomic<size_t> next{0};
  const size_t n = std::min(requests.size(), static_cast<size_t>(slots_));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < n; ++t) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < requests.size(); i = next++) results[i] = Build(requests[i]);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace crosstune::tuner
