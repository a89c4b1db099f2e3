// crosstune-sim-device: a crosstune-server (the real server library: sessions, workspace,
// protocol, tracker registration) whose modules answer from a recorded table instead of running
// code, so a farm of many boards can be simulated on one small machine: sleeping costs nothing.
//
// What it loads is anything holding a replay task's marker ("crosstune-sim:<index>;", see
// crosstune/tuner/replay_task.h): a library the real builder made from ReplayTask::Generate, or
// the marker alone from a simulated build. The module's function sleeps `times` x the point's
// recorded call time (to an absolute deadline, so the time evaluator reads the recorded time) and
// zeroes its tensor arguments (so the tuner's check against ReplayTask's zero reference passes).
// A point recorded as failed answers every call with a kernel error naming the recorded failure.
//
// How long a trial takes: with --trial-seconds T, loading a module sleeps T less
// --calls-per-trial x the point's call time, so a trial whose calls are that many (the tuner's
// checked call, the time evaluator's warm-up and one round of one call: what crosstune-bench-farm
// asks for) keeps the device busy T seconds plus the protocol's own time. Without it, a trial
// takes what its calls take.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "crosstune/flag_checks.h"
#include "crosstune/guarded_main.h"
#include "crosstune/numbers.h"
#include "crosstune/server/device_info.h"
#include "crosstune/server/module.h"
#include "crosstune/server/server.h"
#include "crosstune/server/tracker_link.h"
#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/replay_task.h"

namespace {

using crosstune::ErrorCode;
using crosstune::Expected;
using crosstune::Status;
using crosstune::tuner::ReplayPoint;
using crosstune::tuner::ReplayTable;
using Clock = std::chrono::steady_clock;

// Files bigger than this are not simulated kernels (a real one is a few KiB).
constexpr size_t kMaxModuleBytes = size_t{64} << 20;

struct SimOptions {
  double trial_seconds = 0;
  int calls_per_trial = 3;
};

// Sleeps until `deadline` whatever signals interrupt it.
void SleepUntil(Clock::time_point deadline) {
  while (Clock::now() < deadline) std::this_thread::sleep_until(deadline);
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

class SimModule final : public crosstune::server::Module {
 public:
  SimModule(const ReplayPoint& point, uint64_t index) : point_(point) {
    call_ = Seconds(point.kernel_s.value_or(point.cost));
    if (!point.ok)
      error_ = "recorded failure of point " + std::to_string(index) + ": " + point.failure;
  }
  std::string_view kind() const override { return "sim"; }
  const std::string& target() const override { return target_; }
  const std::vector<crosstune::msg::FunctionInfo>& functions() const override { return functions_; }

  Status Invoke(size_t /*index*/, const ct_arg* args, int32_t num_args, uint64_t times,
                int32_t* ret) override {
    *ret = 0;
    if (!point_.ok) {
      *ret = 1;
      return Status::Ok();
    }
    // One deadline for all the calls: the time evaluator divides by `times`.
    SleepUntil(Clock::now() + call_ * static_cast<int64_t>(times));
    for (int32_t a = 0; a < num_args; ++a) {
      if (args[a].kind != CT_ARG_TENSOR || !args[a].value.v_tensor) continue;
      const DLTensor* t = args[a].value.v_tensor;
      uint64_t n = 1;
      for (int32_t d = 0; d < t->ndim; ++d) n *= static_cast<uint64_t>(t->shape[d]);
      std::memset(static_cast<char*>(t->data) + t->byte_offset, 0,
                  n * ((t->dtype.bits * t->dtype.lanes + 7) / 8));
    }
    return Status::Ok();
  }
  std::string LastError() const override { return error_; }

 private:
  const ReplayPoint& point_;
  Clock::duration call_{};
  std::string error_;
  std::string target_ = "sim";
  std::vector<crosstune::msg::FunctionInfo> functions_{{"sim", "t"}};
};

// Takes every file (it must be asked first: the CPU loader takes everything too) and refuses,
// by name, one that holds no marker or names a point the table lacks.
class SimLoader final : public crosstune::server::ModuleLoader {
 public:
  SimLoader(const ReplayTable& table, SimOptions options) : table_(table), options_(options) {}
  std::string_view name() const override { return "sim"; }
  bool Accepts(const crosstune::server::LoadRequest& /*request*/) const override { return true; }

  Expected<std::unique_ptr<crosstune::server::Module>> Load(
      const crosstune::server::LoadRequest& request) override {
    const Clock::time_point start = Clock::now();
    std::string bytes;
    char buf[1 << 16];
    for (off_t at = 0;;) {
      ssize_t n = ::pread(request.fd, buf, sizeof buf, at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        return Status(ErrorCode::kIoError,
                      request.display_name + ": cannot read: " + std::strerror(errno));
      }
      if (n == 0) break;
      bytes.append(buf, static_cast<size_t>(n));
      at += n;
      if (bytes.size() > kMaxModuleBytes) {
        return Status(ErrorCode::kInvalidArgument,
                      request.display_name + ": too big for a simulated kernel");
      }
    }
    auto index = crosstune::tuner::FindSimMarker(bytes);
    if (!index) {
      return Status(ErrorCode::kInvalidArgument,
                    request.display_name + ": not a simulated kernel (no " +
                        std::string(crosstune::tuner::kSimMarkerPrefix) + " marker)");
    }
    const ReplayPoint* point = table_.Find(*index);
    if (!point) {
      return Status(ErrorCode::kNotFound, request.display_name + ": point " +
                                              std::to_string(*index) + " is not in " +
                                              table_.source());
    }
    if (options_.trial_seconds > 0) {
      double calls =
          point->ok ? options_.calls_per_trial * point->kernel_s.value_or(point->cost) : 0;
      SleepUntil(start + Seconds(std::max(0.0, options_.trial_seconds - calls)));
    }
    return std::unique_ptr<crosstune::server::Module>(new SimModule(*point, *index));
  }

 private:
  const ReplayTable& table_;
  SimOptions options_;
};

}  // namespace

static int SimDeviceMain(int argc, char** argv) {
  using crosstune::server::Server;
  using crosstune::server::ServerOptions;
  CLI::App app{
      "crosstune-sim-device: a crosstune-server whose kernels answer from a recorded table "
      "(simulated boards for crosstune-bench-farm)"};
  ServerOptions opt;
  opt.port = 0;
  opt.session.busy_poll = std::chrono::microseconds(0);
  double call_timeout_s = 60, idle_timeout_s = 600;
  std::string log_level = "warn", space, task;
  SimOptions sim;
  crosstune::server::TrackerLinkOptions link;
  std::vector<std::string> tags;
  bool exit_with_parent = false;
  int64_t busy_poll_us = 0;
  app.add_option("--space", space, "the recorded table: a Kernel Tuner cache or one of our logs")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--task", task, "the log's task to replay (default: its first)");
  app.add_option("--trial-seconds", sim.trial_seconds,
                 "seconds a trial keeps the device busy: loading sleeps this less "
                 "--calls-per-trial recorded calls (0: only the calls' recorded time)")
      ->check(crosstune::SecondsIn(0, 3600));
  app.add_option("--calls-per-trial", sim.calls_per_trial,
                 "the calls a trial makes after loading (crosstune-bench-farm: 3)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<int>(0, 1'000'000));
  app.add_option("--host", opt.host, "address to listen on")->capture_default_str();
  app.add_option("--port", opt.port, "port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint16_t>(0, 65535));
  app.add_option("--work-dir", opt.work_dir,
                 "directory for session workspaces (default: a fresh one under $TMPDIR)");
  app.add_option("--max-sessions", opt.max_sessions, "sessions served at once")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<uint32_t>(1, 65536));
  app.add_option("--call-timeout", call_timeout_s, "default seconds one call may run (0: none)")
      ->capture_default_str()
      ->check(crosstune::SecondsIn(0, 86400));
  app.add_option("--idle-timeout", idle_timeout_s,
                 "seconds a session may go without a request (0: no limit)")
      ->capture_default_str()
      ->check(crosstune::SecondsIn(0, 30 * 86400.0));
  app.add_option("--busy-poll-us", busy_poll_us,
                 "microseconds a session polls for the next request (default 0: many simulated "
                 "boards share few CPUs)")
      ->capture_default_str()
      ->check(crosstune::IntegerIn<int64_t>(0, 100'000));
  app.add_option("--tracker", link.tracker, "register with this tracker (host:port)");
  app.add_option("--key", link.key, "the device key clients ask the tracker for");
  app.add_option("--tag", tags, "k=v device tag for the tracker (repeatable)");
  app.add_option("--custom-addr", link.custom_addr, "address clients should dial");
  app.add_flag("--exit-with-parent", exit_with_parent,
               "end (SIGTERM) when the process that started this device dies");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  CLI11_PARSE(app, argc, argv);
  if (exit_with_parent && !crosstune::server::ExitWithParent()) return 0;
  std::signal(SIGPIPE, SIG_IGN);
  auto parsed_tags =
      crosstune::server::ParseTrackerFlags(link.tracker, link.key, link.custom_addr, tags);
  if (!parsed_tags.ok()) {
    std::cerr << "crosstune-sim-device: error: " << parsed_tags.status().message() << "\n";
    return 1;
  }
  link.tags = std::move(*parsed_tags);
  // Loaded before Listen(): the session processes are forked from this one and share the table.
  auto loaded = ReplayTable::Load(space, task);
  if (!loaded.ok()) {
    std::cerr << "crosstune-sim-device: error: " << loaded.status().message() << "\n";
    return 1;
  }
  std::shared_ptr<const ReplayTable> table = std::move(loaded).value();

  auto logger = spdlog::stderr_color_mt("crosstune-sim-device");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern(crosstune::server::kLogPattern);

  opt.session.call_timeout = crosstune::SecondsToMs(call_timeout_s);
  opt.session.idle_timeout = crosstune::SecondsToMs(idle_timeout_s);
  opt.session.busy_poll = std::chrono::microseconds(busy_poll_us);
  opt.session.add_loaders = [table, sim](crosstune::server::LoaderRegistry& registry) {
    registry.AddFirst(std::make_unique<SimLoader>(*table, sim));
  };

  std::unique_ptr<crosstune::server::TrackerLink> tracker;
  Server* running = nullptr;
  if (!link.tracker.empty()) {
    link.end_session = [&running](int pid) {
      if (running) {
        running->EndSession(pid,
                            Status(ErrorCode::kUnauthorized, "the lease ended at the tracker"));
      }
    };
    link.health = [&running]() { return running ? running->CanStartSessions() : Status::Ok(); };
    link.self_check = link.health;
    link.info = crosstune::server::CollectDeviceInfoInChild();
    tracker = std::make_unique<crosstune::server::TrackerLink>(link);
    opt.session.accept_hello = [t = tracker.get()](const crosstune::msg::Hello& hello) {
      return t->AcceptHello(hello);
    };
  }
  Server server(opt);
  running = &server;
  if (auto st = server.Listen(); !st.ok()) {
    std::cerr << "crosstune-sim-device: error: " << st.message() << "\n";
    return 1;
  }
  if (tracker) {
    server.set_on_session_end([t = tracker.get()](const crosstune::server::SessionEnd& end) {
      t->OnSessionEnd(end.pid, end.reported);
    });
  }
  // Scripts and tests read the port from this line (the same as crosstune-server's).
  std::printf("crosstune-server: listening on %s:%u\n", server.host().c_str(),
              static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  if (tracker) tracker->Start(server.port());
  server.Run();
  if (tracker) tracker->Stop();
  return 0;
}

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-sim-device", [&] { return SimDeviceMain(argc, argv); });
}
