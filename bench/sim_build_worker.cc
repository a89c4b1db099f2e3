// crosstune-sim-build-worker: a build worker of a simulated farm. The real build worker's serving
// code (build_worker.h ServeBuilds: crosstune-server's acceptor, handshake, tracker registration)
// with a build that sleeps the recorded build time of the config a replay task's source names
// (its "crosstune-sim:<index>;" marker, crosstune/tuner/replay_task.h) and answers with the
// marker as the library, which crosstune-sim-device loads. A point recorded as a compile failure
// fails its build. crosstune-bench-farm starts these for --build-workers.
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "crosstune/build_worker/build_worker.h"
#include "crosstune/flag_checks.h"
#include "crosstune/guarded_main.h"
#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/replay_task.h"

namespace {

// The figure for a 1024^3 matmul candidate, for tables that recorded no build time.
constexpr double kDefaultBuildSeconds = 0.42;

int Main(int argc, char** argv) {
  using namespace crosstune;
  CLI::App app{
      "crosstune-sim-build-worker: a build worker whose builds sleep the recorded build time "
      "(simulated farms, crosstune-bench-farm)"};
  build_worker::BuildWorkerOptions o;
  o.cores = 1;
  o.confine_builds = false;  // its builds only sleep; nothing is compiled
  std::string space, task;
  double build_seconds = 0;
  bool exit_with_parent = false;
  app.add_option("--space", space, "the recorded table: a Kernel Tuner cache or one of our logs")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--task", task, "the log's task to replay (default: its first)");
  app.add_option("--build-seconds", build_seconds,
                 "seconds every build takes (0: the table's recorded build time, else 0.42)")
      ->check(SecondsIn(0, 3600));
  app.add_option("--host", o.host, "address to listen on")->capture_default_str();
  app.add_option("--port", o.port, "port to listen on (0: any free port)")
      ->capture_default_str()
      ->check(IntegerIn<uint16_t>(0, 65535));
  app.add_option("--cores", o.cores, "builds at once")
      ->capture_default_str()
      ->check(IntegerIn<int>(1, 4096));
  app.add_option("--tracker", o.tracker, "register with this tracker (host:port)");
  app.add_option("--key", o.key, "the build key tuners ask the tracker for");
  app.add_flag("--exit-with-parent", exit_with_parent,
               "end (SIGTERM) when the process that started this worker dies");
  CLI11_PARSE(app, argc, argv);
  if (exit_with_parent) {
    pid_t parent = ::getppid();
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);
  // Loaded before ServeBuilds forks its session processes, which share it.
  auto loaded = tuner::ReplayTable::Load(space, task);
  if (!loaded.ok()) {
    std::cerr << "crosstune-sim-build-worker: error: " << loaded.status().message() << "\n";
    return 1;
  }
  std::shared_ptr<const tuner::ReplayTable> table = std::move(loaded).value();
  auto build = [table, build_seconds](const builder::BuildRequest& request) {
    builder::BuildResult out;
    auto index = tuner::FindSimMarker(request.source);
    const tuner::ReplayPoint* p = index ? table->Find(*index) : nullptr;
    if (!p) {
      out.status = Status(ErrorCode::kInvalidArgument,
                          request.source_name + ": not a replay task's source (no marker)");
      return out;
    }
    const double s = build_seconds > 0 ? build_seconds : p->build_s.value_or(kDefaultBuildSeconds);
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::duration<double>(s)));
    out.build_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!p->ok && (p->failure == "CompilationFailedConfig" || p->failure == "BuildError")) {
      out.status = Status(ErrorCode::kBuildError, "recorded build failure: " + p->failure);
      return out;
    }
    out.library = tuner::SimMarker(*index);
    return out;
  };
  Status st = build_worker::ServeBuilds(o, build);
  if (!st.ok()) {
    std::cerr << "crosstune-sim-build-worker: error: " << st.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return crosstune::GuardedMain("crosstune-sim-build-worker", [&] { return Main(argc, argv); });
}
