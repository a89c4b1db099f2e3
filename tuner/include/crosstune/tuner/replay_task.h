// A task over a recorded table (replay.h), for simulating a farm: its space is the table's, and
// the kernel it generates for a config is a tiny freestanding C function that writes zeros and
// keeps a marker naming the config ("crosstune-sim:<space index>;") in its library. The real
// builder builds it; a simulated device (bench/sim_device.cc) finds the marker in what it is given
// to load and answers from the table: the recorded time of one call, or the recorded failure.
//
//   auto table = ReplayTable::Load("pnpoly.json.gz");
//   auto task = ReplayTask::Make(std::move(*table), target);
//   Tune(**task, devices, builder, options);    // devices: crosstune-sim-device processes
//
// Thread-safety: immutable once made, as every Task.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/task.h"

namespace crosstune::tuner {

// The marker a simulated kernel keeps: "crosstune-sim:<index>;".
inline constexpr std::string_view kSimMarkerPrefix = "crosstune-sim:";
std::string SimMarker(uint64_t index);
// The space index named by the first marker in `bytes` (a source, a library, a marker alone);
// nullopt when there is none.
std::optional<uint64_t> FindSimMarker(std::string_view bytes);

class ReplayTask final : public Task {
 public:
  // The task's template name is "replay", its shape empty; `table` is shared with whoever else
  // reads it (a simulated build service).
  static std::unique_ptr<ReplayTask> Make(std::shared_ptr<const ReplayTable> table,
                                          builder::Target target);

  const ReplayTable& table() const { return *table_; }
  std::string function() const override { return "sim"; }
  // One output of one float, which the kernel (and the simulated device) sets to zero.
  std::vector<ArgSpec> args() const override;
  double flops() const override { return 1.0; }
  // The table's point with the lowest space index.
  Config DefaultConfig() const override { return space().Get(first_index_); }
  std::string Generate(const Config& config) const override;
  void Reference(HostArgs& args) const override;
  // The table's features when it has them (a log of ours whose template is known).
  std::vector<float> Features(const Config& config) const override;

 private:
  ReplayTask(std::shared_ptr<const ReplayTable> table, builder::Target target);
  std::shared_ptr<const ReplayTable> table_;
  uint64_t first_index_ = 0;
};

}  // namespace crosstune::tuner
