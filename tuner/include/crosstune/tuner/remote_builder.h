// Builds on a crosstune-build-worker of the farm (build_worker/): a BuildService over the
// network. It runs slots() builds at once, each over a session of its own (opened on first use
// and kept between builds); the worker runs one build per session.
//
// What a caller can tell apart in a BuildResult's status:
//  - kDisconnected: the worker is lost (it went away, stopped answering, or refused this client:
//    a lease that ended). This build and every later one fail so, at once, and lost() is true;
//    the build itself is fine to run elsewhere (BuildDispatcher does).
//  - kBuildError, kTimeout: the build failed there, as it would in the local pool (a compiler
//    crash ends only that session; the next build opens another).
//  - kBadHash: the result's bytes did not match their SHA-256 on arrival; nothing was kept.
//
// It lives in the tuner, not in host_client: the client library links no compiler (its CMake
// says why), and a build service speaks the builder's requests and results.
//
// Thread-safety: Build and BuildMany may be called from any number of threads at once; builds
// past slots() wait for a free session.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/channel.h"
#include "crosstune/client/session.h"
#include "crosstune/status.h"

namespace crosstune::tuner {

struct RemoteBuilderOptions {
  // The worker: `server` (host:port), `auth_secret` and/or a `lease_token` from the tracker, as
  // for a device; `connect_timeout` bounds each connection's handshake.
  client::ConnectOptions connect;
  std::string name;  // in messages and reports; default: connect.server
  int slots = 0;     // builds at once; 0: the cores the worker names in its Info
  // A request's limit when it gives none (BuildRequest::timeout 0).
  std::chrono::milliseconds default_timeout{60'000};
  // Beyond a build's limit: the bytes each way. A worker silent this long past it is lost.
  std::chrono::milliseconds io_timeout{30'000};
};

class RemoteBuilder : public builder::BuildService {
 public:
  // Opens the first session (handshake, Info) so a worker that cannot serve is an error now:
  // kDisconnected when it does not answer, the handshake's error (e.g. kUnauthorized) otherwise.
  static Expected<std::unique_ptr<RemoteBuilder>> Connect(const RemoteBuilderOptions& options);
  ~RemoteBuilder() override;
  RemoteBuilder(const RemoteBuilder&) = delete;
  RemoteBuilder& operator=(const RemoteBuilder&) = delete;

  builder::BuildResult Build(const builder::BuildRequest& request) override;
  std::vector<builder::BuildResult> BuildMany(
      const std::vector<builder::BuildRequest>& requests) override;
  int slots() const override { return slots_; }

  const std::string& name() const { return name_; }
  bool lost() const { return lost_.load(); }
  // Why it was lost (Ok while it is not).
  Status lost_reason() const;

 private:
  explicit RemoteBuilder(const RemoteBuilderOptions& options);
  Expected<Channel> Open(msg::DeviceInfo* info);
  builder::BuildResult Lose(const Status& why);
  builder::BuildResult BuildOn(Channel& ch, const builder::BuildRequest& request, bool* keep);

  RemoteBuilderOptions options_;
  std::string name_;
  int slots_ = 1;
  std::atomic<bool> lost_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int busy_ = 0;               // builds in flight (at most slots_)
  std::vector<Channel> idle_;  // open sessions between builds
  Status lost_reason_;
};

}  // namespace crosstune::tuner
