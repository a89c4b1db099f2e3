// What the tracker shows: the /api/summary JSON (also the reply to kQuery), the /metrics
// Prometheus text, and the self-contained HTML status page that polls /api/summary (and draws the
// tune runs' curves and the devices' utilisation as inline SVG; no framework, no outside asset).
// Pure functions of a Snapshot; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crosstune/tracker/scheduler.h"
#include "crosstune/tracker/store.h"

namespace crosstune::tracker {

nlohmann::json SummaryJson(const Snapshot& snap, const std::vector<HistoryRow>& history);
std::string MetricsText(const Snapshot& snap);
// A Prometheus label value: backslash, quote and newline escaped.
std::string PrometheusLabel(std::string_view v);
std::string_view StatusPageHtml();

// The Content-Security-Policy every HTTP answer of the tracker carries: the status page may run
// only its own inline script and style (named by their SHA-256, computed from the page once),
// fetch only from the tracker itself (/api/summary), and be framed by nobody. Thread-safe.
const std::string& ContentSecurityPolicy();

// The headers every HTTP answer of the tracker carries (the page, the API, /metrics, errors and
// 404s alike): the CSP above, nosniff, no framing, no referrer, no caching. Thread-safe.
const std::vector<std::pair<std::string, std::string>>& HttpSecurityHeaders();

}  // namespace crosstune::tracker
