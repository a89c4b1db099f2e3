// A downstream program on crosstune::tuner: tunes a small matmul on a crosstune-server with the
// XGBoost tuner, then summarises the log as `crosstune log summary` would.
//   tuner_consumer HOST:PORT LOG     prints "tuner_consumer: matmul tuned on <target>: ..." and
//                                    exits 0
#include <cstdio>
#include <string>

#include "crosstune/builder/builder.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/log_report.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"

namespace ct = crosstune;

static int Fail(const std::string& what, const ct::Status& s) {
  std::fprintf(stderr, "tuner_consumer: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tuner_consumer HOST:PORT LOG\n");
    return 2;
  }
  // The builder first: its workers start before any other thread.
  auto builder = ct::builder::Builder::Create({.workers = 1});
  if (!builder.ok()) return Fail("builder", builder.status());
  auto pool = ct::tuner::DevicePool::FromServers({argv[1]}, "", std::chrono::seconds(60));
  auto target = ct::tuner::ResolveTarget("auto", pool->devices().front());
  if (!target.ok()) return Fail("target", target.status());
  auto task = ct::tuner::MakeTask("matmul", {32, 32, 32}, *target);
  if (!task.ok()) return Fail("task", task.status());
  ct::tuner::TuneOptions options;
  options.tuner = "xgb";
  options.trials = 6;
  options.batch = 2;
  options.log_path = argv[2];
  auto summary = ct::tuner::Tune(**task, pool->devices(), **builder, options);
  if (!summary.ok()) return Fail("tune", summary.status());
  if (!summary->has_best) return Fail("tune", ct::Status(ct::ErrorCode::kInternal, "no best"));
  auto log = ct::tuner::ReadLog(argv[2]);
  if (!log.ok()) return Fail("log", log.status());
  const ct::tuner::LogSummary s = ct::tuner::SummarizeLog(log->records);
  if (s.tasks.size() != 1) return Fail("log", ct::Status(ct::ErrorCode::kInternal, "not one task"));
  std::printf("tuner_consumer: matmul tuned on %s: %d trials, best %.2f GFLOP/s\n",
              target->ToString().c_str(), s.tasks[0].trials, s.tasks[0].best.gflops());
  return 0;
}
