// A row of the farm's records summary (tracker_messages.h's RecordsSummaryRow) as JSON: what
// `crosstune records ls --json` prints and the tracker's /api/summary shows, one form for both.
#pragma once

#include <nlohmann/json.hpp>

#include "crosstune/tracker_messages.h"

namespace crosstune {

inline nlohmann::json RecordsSummaryRowJson(const msg::RecordsSummaryRow& r) {
  return {{"task", r.task},
          {"target", r.target},
          {"device_kind", r.device_kind},
          {"records", r.records},
          {"best_mean_s", r.best_mean},
          {"best_config", r.best_config},
          {"best_run_id", r.best_run_id},
          {"best_sender", r.best_sender}};
}

}  // namespace crosstune
