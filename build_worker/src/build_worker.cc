#include "crosstune/build_worker/build_worker.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>

#include "crosstune/build_job.h"
#include "crosstune/builder/backend.h"
#include "crosstune/builder/build_cache.h"
#include "crosstune/builder/build_codec.h"
#include "crosstune/builder/sandbox.h"
#include "crosstune/cpus.h"
#include "crosstune/server/device_info.h"
#include "crosstune/server/server.h"
#include "crosstune/server/session.h"
#include "crosstune/server/tracker_link.h"

namespace crosstune::build_worker {
namespace {

using builder::BuildRequest;
using builder::BuildResult;

// Sessions let in beyond `cores`: a client's pings and the tracker's reachability checks must
// not be refused Busy while every core builds.
constexpr uint32_t kSpareSessions = 4;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // their shadow memory reserves terabytes of address space
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Once per session process, before its first build reads a byte of the request: the memory
// bound and the build box (the session's workspace is its scratch folder). A session that cannot
// be boxed serves no build.
Status PrepareSessionForBuilds(const BuildWorkerOptions& options, server::SessionRequestIo& io) {
  static bool prepared = false;  // per session process: each is forked fresh
  if (prepared) return Status::Ok();
  if (options.session_memory_bytes > 0 && !kSanitized) {
    rlimit as{options.session_memory_bytes, options.session_memory_bytes};
    if (::setrlimit(RLIMIT_AS, &as) != 0) {
      return Status(ErrorCode::kInternal, "cannot bound the session's memory (RLIMIT_AS)");
    }
  }
  if (options.confine_builds && builder::LandlockAbi() > 0) {
    CT_RETURN_IF_ERROR(builder::ConfineBuilds(io.workspace_dir(), options.cache_dir));
  }
  prepared = true;
  return Status::Ok();
}

Status RequestSizeLimit(uint64_t bytes, uint64_t limit) {
  if (bytes <= limit) return Status::Ok();
  return Status(ErrorCode::kLimitExceeded, "a build request of " + std::to_string(bytes) +
                                               " bytes is over this worker's " + "limit of " +
                                               std::to_string(limit) + " (--max-build-mb)");
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  const auto addr = boost::asio::ip::make_address(host, ec);
  return !ec && addr.is_loopback();
}
// One Build request in a session process: its bytes, the build under the session's watchdog, the
// result's bytes. The reply is sent here; the Status ends the session (Ok: it goes on).
Status ServeBuild(const Frame& f, server::SessionRequestIo& io, const BuildFunction& build,
                  const BuildWorkerOptions& options) {
  Channel& ch = io.channel();
  const uint32_t id = f.request_id;
  auto job = f.As<msg::BuildJob>();
  if (!job.ok()) {
    // The request's bytes follow a header we cannot read: the stream is out of step.
    (void)ch.SendError(id, job.status(), io.IoDeadline());
    return job.status();
  }
  // Refused unread, so the stream is out of step: the session ends after the reply.
  if (Status big = RequestSizeLimit(job->request_bytes, options.max_request_bytes); !big.ok()) {
    (void)ch.SendError(id, big, io.IoDeadline());
    return big;
  }
  if (Status prepared = PrepareSessionForBuilds(options, io); !prepared.ok()) {
    (void)ch.SendError(id, prepared, io.IoDeadline());
    return prepared;
  }
  auto bytes = ReceiveBuildJob(ch, *job, io.IoDeadline(job->request_bytes));
  if (!bytes.ok()) {
    const Status& s = bytes.status();
    (void)ch.SendError(id, s, io.IoDeadline());
    // A wrong hash: every byte was read, the stream is in step. Anything else (over the size
    // limit, unread; the connection broke) ends the session.
    return s.code() == ErrorCode::kBadHash ? Status::Ok() : s;
  }
  auto request = builder::DecodeBuildRequest(*bytes);
  if (!request.ok()) return ch.SendError(id, request.status(), io.IoDeadline());
  const uint32_t limit_ms = job->timeout_ms != 0
                                ? job->timeout_ms
                                : static_cast<uint32_t>(options.default_timeout.count());
  request->timeout = std::chrono::milliseconds(limit_ms);
  // A crash is reported as the kernel being built dying ("kernel 'matmul_12' died by SIGSEGV").
  io.BeginGuarded(id, request->name, limit_ms);
  BuildResult result = build(*request);
  io.EndGuarded(limit_ms);
  std::string out = builder::EncodeBuildResult(result);
  if (out.size() > Limits::kMaxBuildJobBytes) {
    return ch.SendError(
        id,
        Status(ErrorCode::kLimitExceeded, "the build result of " + std::to_string(out.size()) +
                                              " bytes is over the limit of " +
                                              std::to_string(Limits::kMaxBuildJobBytes)),
        io.IoDeadline());
  }
  return SendBuildJobResult(ch, id, out, io.IoDeadline(out.size()));
}

std::vector<std::string> DefaultTargets() {
  std::vector<std::string> kinds;
  for (builder::TargetKind kind : builder::TargetKinds()) {
    kinds.emplace_back(builder::BackendFor(kind).kind());
  }
  return kinds;
}

}  // namespace

Status ServeBuilds(const BuildWorkerOptions& options, BuildFunction build) {
  if (!options.tracker.empty() && options.key.empty()) {
    return Status(ErrorCode::kInvalidArgument, "a tracker needs a build key (--key)");
  }
  if (!build) return Status(ErrorCode::kInvalidArgument, "no build function");
  if (options.max_request_bytes > Limits::kMaxBuildJobBytes) {
    return Status(ErrorCode::kInvalidArgument, "the request size limit is over the protocol's " +
                                                   std::to_string(Limits::kMaxBuildJobBytes >> 20) +
                                                   " MiB");
  }
  const bool exposed = options.auth_secret.empty() && !IsLoopback(options.host);
  if (exposed && !options.insecure_allow_any_client) {
    return Status(ErrorCode::kUnauthorized,
                  "refusing to listen on " + options.host +
                      " without --auth-token-file: anyone who can reach it could build on this "
                      "host (--insecure-allow-any-client allows it)");
  }
  if (exposed) {
    spdlog::warn(
        "WARNING: listening on {} without --auth-token-file (--insecure-allow-any-client): any "
        "client that can reach this address can use this worker",
        options.host);
  }
  if (options.confine_builds && builder::LandlockAbi() == 0) {
    if (!options.allow_unconfined_builds) {
      return Status(ErrorCode::kInternal,
                    "this kernel has no Landlock (Linux 5.13 or later, with landlock among the "
                    "enabled security modules), so builds from the network could read this "
                    "host's files; refusing to start (--allow-unconfined-builds runs them "
                    "unconfined)");
    }
    spdlog::warn(
        "WARNING: this kernel has no Landlock: builds run unconfined "
        "(--allow-unconfined-builds), and a client's source can make the compiler read any "
        "file this worker's user can");
  }
  const int cores = options.cores > 0 ? options.cores : UsableCpus();

  server::ServerOptions so;
  so.host = options.host;
  so.port = options.port;
  so.work_dir = options.work_dir;
  so.max_sessions = static_cast<uint32_t>(cores) + kSpareSessions;
  so.session.auth_secret = options.auth_secret;
  so.session.device_requests = false;
  // A client keeps its sessions open between a tuning run's batches.
  so.session.idle_timeout = std::chrono::milliseconds(0);
  so.session.handle_request = [build = std::move(build), options](
                                  const Frame& f,
                                  server::SessionRequestIo& io) -> std::optional<Status> {
    if (f.op != Opcode::kBuild) return std::nullopt;
    return ServeBuild(f, io, build, options);
  };

  // Described by a probe process (as crosstune-server does), then named as a build worker.
  msg::DeviceInfo info = server::CollectDeviceInfoInChild();
  info.cores = static_cast<uint32_t>(cores);
  info.build_targets = options.targets.empty() ? DefaultTargets() : options.targets;
  info.gpus.clear();  // it builds for GPUs; it runs nothing on them
  so.session.info = info;

  // As crosstune-server's main: the link is made before the server (sessions check its lease
  // token) and started after Listen() has forked the sessions' fork server.
  std::unique_ptr<server::TrackerLink> link;
  server::Server* running = nullptr;
  if (!options.tracker.empty()) {
    server::TrackerLinkOptions lo;
    lo.tracker = options.tracker;
    lo.key = options.key;
    lo.tags = options.tags;
    lo.tags.emplace("role", "build-worker");
    if (exposed) lo.tags["insecure"] = "any-client";  // shown by query and the status page
    lo.custom_addr = options.custom_addr;
    lo.auth_secret = options.tracker_secret.empty() ? options.auth_secret : options.tracker_secret;
    lo.info = info;
    lo.end_session = [&running](int pid) {
      if (running) {
        running->EndSession(pid, Status(ErrorCode::kUnauthorized,
                                        "the lease ended at the tracker (expired, released or "
                                        "kicked)"));
      }
    };
    lo.health = [&running]() { return running ? running->CanStartSessions() : Status::Ok(); };
    lo.self_check = lo.health;
    link = std::make_unique<server::TrackerLink>(lo);
    so.session.accept_hello = [l = link.get()](const msg::Hello& hello) {
      return l->AcceptHello(hello);
    };
  }

  server::Server srv(so);
  running = &srv;
  CT_RETURN_IF_ERROR(srv.Listen());
  if (link) {
    srv.set_on_session_end([l = link.get()](const server::SessionEnd& end) {
      l->OnSessionEnd(end.pid, end.reported);
    });
  }
  if (options.on_listening) {
    options.on_listening(srv.host(), srv.port());
  } else {
    std::printf("crosstune-build-worker: listening on %s:%u\n", srv.host().c_str(),
                static_cast<unsigned>(srv.port()));
    std::fflush(stdout);
  }
  spdlog::info("serving builds ({} at once) for {}", cores,
               options.tracker.empty() ? std::string("any client")
                                       : "key '" + options.key + "' of " + options.tracker);
  if (link) link->Start(srv.port());
  srv.Run();
  if (link) link->Stop();
  return Status::Ok();
}

BuildFunction CompileHere(const std::string& cache_dir) {
  return [cache_dir](const BuildRequest& r) -> BuildResult {
    if (r.debug_action == BuildRequest::DebugAction::kCrash) {
      std::signal(SIGSEGV, SIG_DFL);  // LLVM's crash handlers may be installed; die as a fault
      std::raise(SIGSEGV);
    }
    if (r.debug_action == BuildRequest::DebugAction::kHang ||
        r.debug_action == BuildRequest::DebugAction::kGarbageThenHang) {
      for (;;) ::pause();
    }
    const bool cached = !cache_dir.empty();
    std::string key;
    std::string warning;
    if (cached) {
      key = builder::BuildCacheKey(r);
      BuildResult hit;
      std::string why;
      switch (builder::LoadCachedBuild(cache_dir, key, &hit, &why)) {
        case builder::CacheRead::kHit:
          hit.cache_hit = true;
          hit.cache_key = key;
          return hit;
        case builder::CacheRead::kDamaged:
          warning = why;
          break;
        case builder::CacheRead::kMiss:
          break;
      }
    }
    BuildResult result = builder::BuildInProcess(r);
    if (cached && result.ok()) {
      result.cache_key = key;
      auto stored = builder::StoreCachedBuild(cache_dir, key, result);
      if (!stored.ok() && warning.empty()) warning = stored.status().message();
    }
    result.cache_warning = warning;
    return result;
  };
}

}  // namespace crosstune::build_worker
