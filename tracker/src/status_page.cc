#include "crosstune/tracker/status_page.h"

#include <fmt/format.h>

#include <stdexcept>

#include "crosstune/crypto.h"

namespace crosstune::tracker {

nlohmann::json SummaryJson(const Snapshot& snap, const std::vector<HistoryRow>& history) {
  nlohmann::json j;
  j["uptime_seconds"] = snap.uptime_seconds;
  j["leases_active"] = snap.leases_active;
  j["policy"] = snap.policy;
  j["devices"] = nlohmann::json::array();
  for (const auto& d : snap.devices) {
    j["devices"].push_back({{"name", d.name},
                            {"key", d.key},
                            {"address", d.address},
                            {"state", d.state},
                            {"holder", d.holder},
                            {"arch", d.arch},
                            {"triple", d.triple},
                            {"cpu", d.cpu},
                            {"cores", d.cores},
                            {"build_targets", d.build_targets},
                            {"tags", d.tags},
                            {"protocol", ProtocolName(d.protocol)},
                            // TVM's tracker protocol has no authentication.
                            {"authenticated", d.protocol != Protocol::kTvm},
                            {"draining", d.draining},
                            {"quarantined", d.quarantined},
                            {"consecutive_failures", d.consecutive_failures},
                            {"infra_failures", d.infra_failures},
                            {"sessions", d.sessions},
                            {"lease_remaining_ms", d.lease_remaining_ms},
                            {"busy_seconds", d.busy_seconds},
                            {"utilisation", d.utilisation}});
  }
  j["keys"] = nlohmann::json::array();
  for (const auto& k : snap.keys) {
    nlohmann::json q = nlohmann::json::array();
    for (const auto& w : k.queue) {
      q.push_back({{"holder", w.holder},
                   {"protocol", ProtocolName(w.protocol)},
                   {"priority", w.priority},
                   {"effective_priority", w.effective_priority},
                   {"waited_ms", w.waited_ms}});
    }
    j["keys"].push_back({{"key", k.key},
                         {"queue", q},
                         {"grants", k.grants},
                         {"wait_seconds_sum", k.wait_seconds_sum},
                         {"wait_seconds_max", k.wait_seconds_max},
                         {"timeouts", k.timeouts},
                         {"no_device", k.no_device}});
  }
  j["quarantined_offline"] = snap.quarantined_offline;
  j["history"] = nlohmann::json::array();
  for (const auto& h : history) {
    j["history"].push_back({{"holder", h.holder},
                            {"key", h.key},
                            {"device", h.device},
                            {"start_unix_ms", h.start_unix_ms},
                            {"end_unix_ms", h.end_unix_ms},
                            {"outcome", h.outcome}});
  }
  return j;
}

std::string PrometheusLabel(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string MetricsText(const Snapshot& snap) {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("crosstune_tracker_uptime_seconds", "gauge", "Seconds since the tracker started.");
  out += fmt::format("crosstune_tracker_uptime_seconds {:.3f}\n", snap.uptime_seconds);
  family("crosstune_leases_active", "gauge", "Leases held now.");
  out += fmt::format("crosstune_leases_active {}\n", snap.leases_active);

  // One sample per key or per device; values print in their shortest exact form.
  auto per_key = [&](const char* name, const char* type, const char* help, auto value) {
    family(name, type, help);
    for (const auto& k : snap.keys) {
      out += fmt::format("{}{{key=\"{}\"}} {}\n", name, PrometheusLabel(k.key), value(k));
    }
  };
  auto per_device = [&](const char* name, const char* type, const char* help, auto value) {
    family(name, type, help);
    for (const auto& d : snap.devices) {
      out += fmt::format("{}{{device=\"{}\",key=\"{}\"}} {}\n", name, PrometheusLabel(d.name),
                         PrometheusLabel(d.key), value(d));
    }
  };

  per_key("crosstune_queue_depth", "gauge", "Requests waiting, per key.",
          [](const auto& k) { return k.queue.size(); });
  per_key("crosstune_queue_oldest_wait_seconds", "gauge",
          "How long the longest-waiting request of a key has waited.", [](const auto& k) {
            int64_t oldest = 0;
            for (const auto& w : k.queue) oldest = std::max(oldest, w.waited_ms);
            return oldest / 1000.0;
          });
  family("crosstune_queue_wait_seconds", "summary", "Time from request to grant, per key.");
  for (const auto& k : snap.keys) {
    out += fmt::format("crosstune_queue_wait_seconds_sum{{key=\"{}\"}} {}\n",
                       PrometheusLabel(k.key), k.wait_seconds_sum);
    out += fmt::format("crosstune_queue_wait_seconds_count{{key=\"{}\"}} {}\n",
                       PrometheusLabel(k.key), k.grants);
  }
  per_key("crosstune_queue_wait_seconds_max", "gauge", "Longest time from request to grant.",
          [](const auto& k) { return k.wait_seconds_max; });
  per_key("crosstune_requests_timed_out_total", "counter",
          "Requests that waited past their timeout.", [](const auto& k) { return k.timeouts; });
  per_key("crosstune_requests_no_device_total", "counter",
          "Requests no registered device could ever match.",
          [](const auto& k) { return k.no_device; });

  family("crosstune_device_up", "gauge", "1 per registered device, by state and protocol.");
  for (const auto& d : snap.devices) {
    out += fmt::format(
        "crosstune_device_up{{device=\"{}\",key=\"{}\",state=\"{}\",protocol=\"{}\"}} 1\n",
        PrometheusLabel(d.name), PrometheusLabel(d.key), d.state, ProtocolName(d.protocol));
  }
  per_device("crosstune_device_utilisation", "gauge",
             "Fraction of its registered time a device has been leased.",
             [](const auto& d) { return d.utilisation; });
  per_device("crosstune_device_busy_seconds_total", "counter", "Seconds a device has been leased.",
             [](const auto& d) { return d.busy_seconds; });
  per_device("crosstune_device_infra_failures_total", "counter",
             "Sessions that failed for infrastructure reasons (server crash, unreachable).",
             [](const auto& d) { return d.infra_failures; });
  per_device("crosstune_device_quarantined", "gauge", "1 while a device is quarantined.",
             [](const auto& d) { return d.quarantined ? 1 : 0; });
  return out;
}

std::string_view StatusPageHtml() {
  static constexpr std::string_view kPage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>crosstune tracker</title>
<style>
 body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
 h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
 table { border-collapse: collapse; } td, th { padding: .25em .8em; border-bottom: 1px solid #ddd; text-align: left; }
 th { background: #f4f4f4; }
 .free { color: #17803d; } .quarantined { color: #b91c1c; font-weight: bold; } .drained { color: #a16207; }
 .leased, .in-session, .granting, .reserved, .busy { color: #1d4ed8; }
 .tvm { color: #a16207; font-size: .85em; }
 #status { color: #666; }
 .runs { display: flex; flex-wrap: wrap; gap: 1em; }
 .run { border: 1px solid #ddd; padding: .5em .8em; width: 360px; }
 .run.finished { opacity: .65; }
 .run h3 { font-size: 1em; margin: 0 0 .3em 0; overflow-wrap: anywhere; }
 .run .facts { color: #444; font-size: .9em; overflow-wrap: anywhere; }
 svg.curve polyline { fill: none; stroke: #1d4ed8; stroke-width: 2; }
 svg.curve .axis, svg.usage .axis { stroke: #999; stroke-width: 1; }
 svg text { font: 10px system-ui, sans-serif; fill: #555; }
 svg.usage rect.bar { fill: #17803d; }
 .mark { display: inline-block; font-size: .8em; padding: 0 .4em; margin-right: .3em; border-radius: .3em; }
 .mark.warm { background: #fef3c7; color: #92400e; } .mark.early { background: #e0e7ff; color: #3730a3; }
 #records th { cursor: pointer; } #records th.sorted::after { content: ' ▾'; } #records th.sorted.up::after { content: ' ▴'; }
 #records td.target { color: #666; font-size: .85em; max-width: 28em; overflow-wrap: anywhere; }
</style>
</head>
<body>
<h1>crosstune tracker</h1>
<div id="status">loading…</div>
<h2>Devices</h2>
<table id="devices"><thead><tr><th>device</th><th>key</th><th>state</th><th>holder</th><th>arch</th>
<th>tags</th><th>lease left</th><th>utilisation</th><th>failures</th></tr></thead><tbody></tbody></table>
<h2>Tuning</h2>
<div id="runs" class="runs"><span class="none">no tune run has reported</span></div>
<h2>Tuning records</h2>
<div id="records-note" class="none">no tuning records in the farm</div>
<table id="records"><thead><tr><th data-key="task">task</th><th data-key="device_kind">device kind</th>
<th data-key="records">records</th><th data-key="best_mean_s">best</th><th data-key="best_run_id">by run</th>
<th data-key="target">target</th></tr></thead><tbody></tbody></table>
<h2>Utilisation, last hour</h2>
<table id="usage"><thead><tr><th>device</th><th>share of each interval leased</th><th>average</th></tr></thead><tbody></tbody></table>
<h2>Queues</h2>
<table id="queues"><thead><tr><th>key</th><th>waiting</th><th>who (in grant order)</th><th>grants</th>
<th>max wait</th></tr></thead><tbody></tbody></table>
<h2>Recent sessions</h2>
<table id="history"><thead><tr><th>holder</th><th>key</th><th>device</th><th>start</th><th>end</th>
<th>outcome</th></tr></thead><tbody></tbody></table>
<script>
function cell(row, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
}
function fill(id, rows, render) {
  const body = document.querySelector('#' + id + ' tbody');
  body.replaceChildren();
  for (const r of rows) { const tr = document.createElement('tr'); render(tr, r); body.appendChild(tr); }
}
function when(ms) { return ms ? new Date(ms).toLocaleString() : '…'; }
const SVG = 'http://www.w3.org/2000/svg';
function svgEl(parent, name, attrs, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}
// A run's best GFLOP/s so far against trials, as an inline SVG line chart.
function curveChart(run) {
  const w = 340, h = 120, l = 36, b = 18;
  const svg = svgEl(document.createDocumentFragment(), 'svg',
                    {class: 'curve', width: w, height: h, viewBox: '0 0 ' + w + ' ' + h});
  const pts = run.curve;
  const maxX = Math.max(1, run.total, ...pts.map(p => p[0]));
  const maxY = Math.max(1e-9, ...pts.map(p => p[1]));
  const x = t => l + (w - l - 4) * t / maxX, y = g => (h - b) - (h - b - 6) * g / maxY;
  svgEl(svg, 'line', {class: 'axis', x1: l, y1: h - b, x2: w - 4, y2: h - b});
  svgEl(svg, 'line', {class: 'axis', x1: l, y1: 4, x2: l, y2: h - b});
  svgEl(svg, 'text', {x: 2, y: 12}, maxY.toPrecision(3));
  svgEl(svg, 'text', {x: 2, y: h - b}, '0');
  svgEl(svg, 'text', {x: w - 60, y: h - 4}, maxX + ' trials');
  svgEl(svg, 'title', {}, 'best GFLOP/s so far against trials');
  if (pts.length) {
    // A step line: the best stays until a better config is found.
    let d = [], last = 0;
    for (const [t, g] of pts) { d.push(x(t) + ',' + y(last)); d.push(x(t) + ',' + y(g)); last = g; }
    svgEl(svg, 'polyline', {points: d.join(' ')});
  }
  return svg;
}
function runCard(run) {
  const div = document.createElement('div');
  div.className = 'run' + (run.finished ? ' finished' : ' running');
  div.dataset.run = run.run_id;
  div.id = 'run-' + run.run_id;
  const h3 = document.createElement('h3');
  h3.textContent = run.task + ' on ' + run.devices.join(', ');
  div.appendChild(h3);
  // Trials it did not time in full, and whose records it started from.
  if (run.warm_from) {
    const m = document.createElement('span');
    m.className = 'mark warm';
    m.textContent = 'warm start: ' + run.warm_from;
    m.title = 'started from the farm\'s records of the nearest device kind';
    div.appendChild(m);
  }
  if (run.stopped_early) {
    const m = document.createElement('span');
    m.className = 'mark early';
    m.textContent = run.stopped_early + ' stopped early';
    m.title = 'trials the device stopped timing after a round as clear losers';
    div.appendChild(m);
  }
  const facts = document.createElement('div');
  facts.className = 'facts';
  const errs = Object.entries(run.errors).map(([k, n]) => k + ' ' + n).join(', ') || 'none';
  facts.textContent = (run.finished ? 'finished' : 'running') + ' · ' + run.trials + '/' + run.total +
    ' trials · best ' + run.best_gflops.toFixed(2) + ' GFLOP/s · ' + run.rate.toFixed(2) +
    ' trials/s · errors: ' + errs + ' · ' + run.holder + ' (' + run.key + ')';
  div.appendChild(facts);
  div.appendChild(curveChart(run));
  return div;
}
// The farm's records, sorted by the column last clicked (again: the other way).
let recordsSort = {key: 'task', up: true}, lastRecords = [];
function fillRecords(rows) {
  lastRecords = rows;
  document.getElementById('records-note').hidden = rows.length > 0;
  const {key, up} = recordsSort;
  const sorted = [...rows].sort((a, b) => {
    const x = a[key], y = b[key];
    const c = typeof x === 'number' ? x - y : String(x).localeCompare(String(y));
    return up ? c : -c;
  });
  for (const th of document.querySelectorAll('#records th')) {
    th.classList.toggle('sorted', th.dataset.key === key);
    th.classList.toggle('up', th.dataset.key === key && up);
  }
  fill('records', sorted, (tr, r) => {
    cell(tr, r.task); cell(tr, r.device_kind); cell(tr, r.records);
    cell(tr, !(r.best_mean_s > 0) ? '–' : r.best_mean_s >= 1e-3 ? (r.best_mean_s * 1e3).toPrecision(4) + ' ms'
                                                               : (r.best_mean_s * 1e6).toPrecision(4) + ' µs');
    const td = document.createElement('td');
    if (r.best_run_id && document.getElementById('run-' + r.best_run_id)) {
      const a = document.createElement('a');
      a.href = '#run-' + r.best_run_id;
      a.textContent = r.best_run_id;
      td.appendChild(a);
    } else {
      td.textContent = r.best_run_id || '–';
    }
    if (r.best_sender) td.title = 'sent by ' + r.best_sender;
    tr.appendChild(td);
    cell(tr, r.target, 'target');
  });
}
for (const th of document.querySelectorAll('#records th')) {
  th.addEventListener('click', () => {
    recordsSort = {key: th.dataset.key, up: recordsSort.key === th.dataset.key ? !recordsSort.up : true};
    fillRecords(lastRecords);
  });
}
// One bar per interval: the share of it the device was leased.
function usageChart(fractions, bucket) {
  const n = 120, w = 360, h = 28;
  const svg = svgEl(document.createDocumentFragment(), 'svg',
                    {class: 'usage', width: w, height: h, viewBox: '0 0 ' + w + ' ' + h});
  svgEl(svg, 'line', {class: 'axis', x1: 0, y1: h - 1, x2: w, y2: h - 1});
  const bw = w / n, off = n - fractions.length;
  fractions.forEach((f, i) => {
    const bh = Math.max(0, Math.min(1, f)) * (h - 2);
    svgEl(svg, 'rect', {class: 'bar', x: ((off + i) * bw).toFixed(1), y: (h - 1 - bh).toFixed(1),
                        width: Math.max(1, bw - 0.5).toFixed(1), height: bh.toFixed(1)});
  });
  svgEl(svg, 'title', {}, 'leased share of each ' + bucket + ' s, oldest left');
  return svg;
}
async function refresh() {
  try {
    const s = await (await fetch('/api/summary', {cache: 'no-store'})).json();
    fill('devices', s.devices, (tr, d) => {
      tr.id = 'device-' + d.name;
      cell(tr, d.name);
      cell(tr, d.key);
      if (d.protocol === 'tvm') {
        const note = document.createElement('div');
        note.className = 'tvm';
        note.textContent = 'TVM server, unauthenticated';
        tr.lastChild.appendChild(note);
      }
      cell(tr, d.state, d.state); cell(tr, d.holder);
      cell(tr, d.arch);
      cell(tr, Object.entries(d.tags).map(([k, v]) => k + '=' + v).join(' '));
      cell(tr, d.lease_remaining_ms ? Math.round(d.lease_remaining_ms / 1000) + ' s' : '');
      cell(tr, (100 * d.utilisation).toFixed(0) + ' %');
      cell(tr, d.infra_failures + (d.consecutive_failures ? ' (' + d.consecutive_failures + ' in a row)' : ''));
    });
    const runs = document.getElementById('runs');
    runs.replaceChildren();
    if (!s.tune_runs.length) {
      const none = document.createElement('span');
      none.className = 'none';
      none.textContent = 'no tune run has reported';
      runs.appendChild(none);
    }
    for (const r of s.tune_runs) runs.appendChild(runCard(r));
    fillRecords(s.records || []);
    fill('usage', Object.entries(s.usage.devices), (tr, [name, fr]) => {
      cell(tr, name);
      const td = document.createElement('td');
      td.appendChild(usageChart(fr, s.usage.bucket_seconds));
      tr.appendChild(td);
      const avg = fr.length ? fr.reduce((a, b) => a + b, 0) / fr.length : 0;
      cell(tr, (100 * avg).toFixed(0) + ' %');
    });
    fill('queues', s.keys, (tr, k) => {
      cell(tr, k.key); cell(tr, k.queue.length);
      cell(tr, k.queue.map(w => w.holder + (w.protocol === 'tvm' ? ' (TVM)' : '') + ' [p' + w.priority + ', ' + Math.round(w.waited_ms / 1000) + ' s]').join(', '));
      cell(tr, k.grants); cell(tr, k.wait_seconds_max.toFixed(1) + ' s');
    });
    fill('history', s.history, (tr, h) => {
      cell(tr, h.holder); cell(tr, h.key); cell(tr, h.device); cell(tr, when(h.start_unix_ms));
      cell(tr, when(h.end_unix_ms)); cell(tr, h.outcome);
    });
    document.getElementById('status').textContent =
      s.devices.length + ' devices, ' + s.leases_active + ' leases; updated ' + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById('status').textContent = 'tracker unreachable: ' + e;
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
)html";
  return kPage;
}

namespace {

// CSP's hash source: "'sha256-" + base64 of the digest of the element's text + "'".
std::string CspHash(std::string_view text) { return "'sha256-" + Sha256Base64(text) + "'"; }

// The text of the page's one `<tag>` element, exactly as a browser hashes it.
std::string_view ElementText(std::string_view page, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  const size_t begin = page.find(open), end = page.find(close);
  if (begin == std::string_view::npos || end == std::string_view::npos || end < begin) {
    throw std::logic_error("the status page has no " + open + " element");  // a bug
  }
  return page.substr(begin + open.size(), end - begin - open.size());
}

}  // namespace

const std::string& ContentSecurityPolicy() {
  static const std::string kPolicy =
      "default-src 'none'; script-src " + CspHash(ElementText(StatusPageHtml(), "script")) +
      "; style-src " + CspHash(ElementText(StatusPageHtml(), "style")) +
      "; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
      "frame-ancestors 'none'";
  return kPolicy;
}

const std::vector<std::pair<std::string, std::string>>& HttpSecurityHeaders() {
  static const std::vector<std::pair<std::string, std::string>> kHeaders = {
      {"Content-Security-Policy", ContentSecurityPolicy()},
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Referrer-Policy", "no-referrer"},
      // Other sites' pages may not embed the API's JSON or the metrics (no-cors loads).
      {"Cross-Origin-Resource-Policy", "same-origin"},
      {"Cache-Control", "no-store"},
  };
  return kHeaders;
}

}  // namespace crosstune::tracker
