// What the tracker shows: the /api/summary JSON (also the reply to kQuery), the /metrics
// Prometheus text, and the self-contained HTML status page that polls /api/summary (and draws the
// tune runs' curves and the devices' utilisation as inline SVG; no framework, no outside asset).
// Pure functions of a Snapshot; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/tracker/scheduler.h"
#include "crosstune/tracker/store.h"

namespace crosstune::tracker {

nlohmann::json SummaryJson(const Snapshot& snap, const std::vector<HistoryRow>& history);
std::string MetricsText(const Snapshot& snap);
// A Prometheus label value: backslash, quote and newline escaped.
std::string PrometheusLabel(std::string_view v);
std::string_view StatusPageHtml();

}  // namespace crosstune::tracker
