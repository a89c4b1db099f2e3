// Records a full-space matmul log for crosstune-bench-tuners: every valid config of a matmul
// task measured once (grid order) on a crosstune-server started on this machine, into `log`.
// A log that exists already is read back as it is (a partial one is completed: resume). `pins`
// ({"knob": value}) hold knobs at one value: the space recorded is then the rest's.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::bench {

Status RecordMatmulSpace(const std::string& log, const std::vector<int64_t>& shape,
                         const nlohmann::json& pins, const std::string& server_bin);

}  // namespace crosstune::bench
