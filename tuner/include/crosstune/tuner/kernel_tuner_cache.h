// Kernel Tuner cache files as replay tables read them: the text-to-points step and the table's
// space, apart from the rest of the tuner so that they can be fuzzed on their own (fuzz/).
//
//   auto cache = ParseKernelTunerCache(text, "pnpoly.json");   // {params, points}
//   auto space = MakePointSpace("pnpoly.json", cache->points, cache->params);
//
// A cache file is JSON: "tune_params_keys" (the parameter order), optionally "tune_params" (each
// parameter's values), "objective" (default "time"), and "cache", one entry per measured point,
// keyed by the values joined with commas. A file Kernel Tuner left open (a run stopped early) is
// read up to its last complete entry.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "crosstune/status.h"
#include "crosstune/tuner/space.h"

namespace crosstune::tuner {

// NOLINTNEXTLINE(bugprone-exception-escape): a false positive on the implicit move of json
struct ReplayPoint {
  nlohmann::json values;  // {"param": value, ...}
  bool ok = false;
  double cost = 0;      // lower is better; meaningful when ok
  std::string failure;  // when !ok: "RuntimeFailedConfig", "BuildError", ...
  // What the source recorded about the point's trial, where it has it (a simulated device and
  // build worker replay them): seconds one call of the kernel took (set only when the cost is a
  // time: our logs' mean, a Kernel Tuner cache's "time" in ms / 1000), seconds its build took
  // (our build_s, Kernel Tuner's compile_time) and seconds the device spent on the trial (our
  // run_s, Kernel Tuner's benchmark_time).
  std::optional<double> kernel_s;
  std::optional<double> build_s;
  std::optional<double> run_s;
  // The entry's rounds ("times", ms) in seconds and its "timestamp", where it has them (records
  // import keeps them).
  std::vector<double> times_s;
  std::string timestamp;
  // Our own mark (scripts/log-to-kernel-tuner.py writes it; Kernel Tuner ignores it): the time is
  // a lower bound, the device stopped timing it after its first rounds (Record::stopped_early).
  bool stopped_early = false;
};

struct KernelTunerCache {
  std::vector<std::string> params;  // "tune_params_keys", in order
  std::vector<ReplayPoint> points;  // one per cache entry; cost = the objective (inverted when
                                    // higher is better), failures by Kernel Tuner's name
  nlohmann::json header;  // the file's other top-level fields ("device_name", "kernel_name",
                          // "problem_size", ...): the document without "cache"
};

// The largest cache file text ParseKernelTunerCache reads (real ones take a few MB).
inline constexpr size_t kMaxCacheBytes = 256u << 20;

// Parses a cache file's text; `source` names it in errors. kInvalidArgument ("<source>: not a
// Kernel Tuner cache file: ...") for anything else, naming what is wrong and where.
Expected<KernelTunerCache> ParseKernelTunerCache(std::string text, const std::string& source);

// A replay table's space: one categorical knob per parameter (its values sorted: booleans,
// numbers, strings, then the rest; 1 and 1.0 are one value), and each point's index in it, in
// the points' order. kInvalidArgument for a point without exactly the parameters `params` names
// (empty: the first point's).
struct PointSpace {
  std::unique_ptr<ConfigSpace> space;
  std::vector<std::string> params;
  std::vector<uint64_t> indices;
};
Expected<PointSpace> MakePointSpace(const std::string& source,
                                    const std::vector<ReplayPoint>& points,
                                    std::vector<std::string> params);

}  // namespace crosstune::tuner
