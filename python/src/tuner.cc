// The tuner: tune (templates, workloads and imported models), records and logs, replay
// (crosstune.tune, read_log, replay). Records and reports cross as JSON text, which the package
// parses with json.loads.
//
// A tune runs with the GIL released; its callbacks take the GIL, call Python and check for
// signals: Ctrl-C (KeyboardInterrupt) or an exception from a callback sets the run's stop flag,
// so it ends after the current batch with every finished record kept, and the exception is
// raised when Tune returns.
#include "crosstune/tuner/tuner.h"

#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.h"
#include "crosstune/builder/builder.h"
#include "crosstune/builder/target.h"
#include "crosstune/client/local_server.h"
#include "crosstune/model/tasks.h"
#include "crosstune/package.h"
#include "crosstune/tuner/device_pool.h"
#include "crosstune/tuner/export.h"
#include "crosstune/tuner/log_report.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "crosstune/tuner/workload.h"
#include "model.h"

namespace nb = nanobind;
using namespace nb::literals;
using nlohmann::json;

namespace crosstune::python {
namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

// A record as the package shows it: the log's fields and its GFLOP/s.
json RecordJson(const tuner::Record& r) {
  json j = r.ToJson();
  j["gflops"] = r.gflops();
  return j;
}

// Where a tune measures, as tune() was asked.
struct DeviceChoice {
  std::vector<std::string> servers;
  std::string tracker, key, auth_secret;
  int max_devices = 0;
  double wait_s = 600, timeout_s = 60;
  std::string server_binary;  // for a local server
};

// Everything that must outlive the run: the device pool (leases, a local server), the builder.
struct TuneContext {
  std::unique_ptr<builder::Builder> builder;
  std::unique_ptr<tuner::DevicePool> pool;
  builder::Target target;
};

// The first Python exception a callback raised (or a signal's), kept until Tune returns.
class PendingError {
 public:
  // Called with the GIL held, after Python code ran or to check for signals.
  void Capture(std::atomic<bool>& stop) {
    if (!PyErr_Occurred() && PyErr_CheckSignals() == 0) return;
    if (!error_) {
      error_ = std::make_unique<nb::python_error>();  // takes the error indicator
    } else {
      PyErr_Clear();
    }
    stop.store(true);
  }
  void RaiseIfAny() {
    if (error_) {
      error_->restore();
      error_.reset();
      throw nb::python_error();
    }
  }

 private:
  std::unique_ptr<nb::python_error> error_;
};

TuneContext Prepare(const DeviceChoice& d, const std::string& target_text, int workers) {
  TuneContext ctx;
  nb::gil_scoped_release release;
  // The builder's workers come before any thread of the run's (server output, lease renewal).
  ctx.builder = Unwrap(builder::Builder::Create({.workers = workers}));
  const auto timeout = Ms(d.timeout_s);
  if (!d.tracker.empty() || !d.key.empty()) {
    if (d.tracker.empty() || d.key.empty()) {
      Check(Status(ErrorCode::kInvalidArgument, "tracker and key go together"));
    }
    client::TrackerOptions to;
    to.tracker = d.tracker;
    to.auth_secret = d.auth_secret;
    ctx.pool = Unwrap(tuner::DevicePool::FromTracker(to, d.key, d.max_devices, Ms(d.wait_s),
                                                     d.auth_secret, timeout));
  } else if (!d.servers.empty()) {
    ctx.pool = tuner::DevicePool::FromServers(d.servers, d.auth_secret, timeout);
  } else {
    client::LocalServerOptions lo;
    lo.binary = d.server_binary;
    ctx.pool = Unwrap(tuner::DevicePool::StartLocal(timeout, lo));
  }
  ctx.target = Unwrap(tuner::ResolveTarget(target_text, ctx.pool->devices().front()));
  return ctx;
}

AnyDict ProgressDict(const tuner::TuneProgress& p) {
  AnyDict d;
  d["done"] = p.done;
  d["total"] = p.total;
  d["measured"] = p.measured;
  nb::dict errors;
  for (const auto& [kind, n] : p.errors)
    errors[std::string(tuner::TrialErrorName(kind)).c_str()] = n;
  d["errors"] = errors;
  d["best_gflops"] = p.best_gflops;
  d["devices"] = p.devices;
  d["devices_busy"] = p.devices_busy;
  d["elapsed_s"] = p.elapsed_s;
  d["rate"] = p.rate;
  d["batch_end"] = p.batch_end;
  return d;
}

// A Tune whose every trial failed: raised as the class of the commonest failure kind.
[[noreturn]] void RaiseTuneError(const Status& s, const std::vector<tuner::Record>& records) {
  auto kind = tuner::CommonestFailure(records);
  if (s.code() == ErrorCode::kInternal && kind) {
    nb::object classes = nb::module_::import_("crosstune._errors").attr("ERRORS");
    nb::object cls = classes.attr("get")(std::string(tuner::TrialErrorName(*kind)));
    if (!cls.is_none()) {
      PyErr_SetObject(cls.ptr(), nb::str(s.message().c_str()).ptr());
      throw nb::python_error();
    }
  }
  throw StatusError(s);
}

struct TuneCall {
  // What to tune: a template and shape, a workload, or an imported model's tasks.
  std::string template_name;
  std::vector<int64_t> shape;
  std::string workload;
  const ImportedModel* model = nullptr;
  model::Layouts layouts = model::Layouts::kBlocked;  // of a workload's or model's conv tasks
  int round = 16;
  int threads = 1;
  std::string target = "auto";
  DeviceChoice devices;
  int workers = 0;
  tuner::TuneOptions options;
  double build_timeout_s = 30;
  std::string pins_json = "{}";
};

using ProgressFn = std::function<void(AnyDict)>;
using TextFn = std::function<void(std::string)>;

std::string RunTune(TuneCall& c, const ProgressFn& on_progress, const TextFn& on_record,
                    const TextFn& on_warning) {
  const json pins = json::parse(c.pins_json);
  const bool network = !c.workload.empty() || c.model != nullptr;
  if (network && !pins.empty()) {
    Check(Status(ErrorCode::kInvalidArgument,
                 "pins hold a knob of one template; they do not apply to a workload or a model"));
  }
  if (network && c.options.log_path.empty()) {
    Check(Status(ErrorCode::kInvalidArgument,
                 std::string(c.model ? "a model" : "a workload") +
                     " needs a log (its tasks resume from it): tune(..., log=PATH)"));
  }
  std::vector<tuner::WorkloadLayer> layers;
  if (!c.workload.empty()) layers = Unwrap(model::MakeWorkload(c.workload, c.layouts));
  TuneContext ctx = Prepare(c.devices, c.target, c.workers);
  std::unique_ptr<tuner::Task> task;
  if (c.model != nullptr) {
    // The model's tasks (those compile looks up), less those no template takes yet.
    model::TunableTasks tasks =
        model::SplitTunableTasks(c.model->graph, ctx.target, c.threads, c.layouts);
    layers = std::move(tasks.layers);
    if (!tasks.left_out.empty() && on_warning) {
      std::string refused;
      for (const auto& why : tasks.left_out) refused += (refused.empty() ? "" : "; ") + why;
      on_warning(std::to_string(tasks.left_out.size()) +
                 " of the model's tasks are left out (no template takes them yet; compile gives "
                 "them generated kernels): " +
                 refused);
    }
    if (layers.empty()) {
      Check(Status(ErrorCode::kInvalidArgument,
                   c.model->path + ": the model has no task a template takes"));
    }
  } else if (c.workload.empty()) {
    task = Unwrap(tuner::MakeTask(c.template_name, c.shape, ctx.target, {c.threads}));
  }

  tuner::TuneOptions& o = c.options;
  o.pins = pins;
  o.measure.build_timeout = Ms(c.build_timeout_s);
  if (!o.log_path.empty()) o.transfer_logs.push_back(o.log_path);
  std::atomic<bool> stop{false};
  o.stop = &stop;
  PendingError pending;
  std::vector<tuner::Record> records;
  // Runs Python code from a callback: with the GIL, never letting an exception into the tuner
  // (a Python error, or a signal's, is kept and stops the run after its batch).
  auto in_python = [&](auto&& body) {
    nb::gil_scoped_acquire acquire;
    try {
      body();
    } catch (nb::python_error& e) {
      e.restore();
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
    pending.Capture(stop);
  };
  o.on_record = [&](const tuner::Record& r) {
    records.push_back(r);
    in_python([&] {
      if (on_record) on_record(RecordJson(r).dump());
    });
  };
  o.on_progress = [&](const tuner::TuneProgress& p) {
    in_python([&] {
      if (on_progress) on_progress(ProgressDict(p));
    });
  };
  o.on_warning = [&](const std::string& w) {
    in_python([&] {
      if (on_warning) on_warning(w);
    });
  };
  tuner::DevicePool* pool = ctx.pool.get();
  o.on_device_lost = [pool](const tuner::DeviceSpec& d, const Status& why) { pool->Lost(d, why); };

  json out;
  if (task) {
    Expected<tuner::TuneSummary> result = Status(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release release;
      result = tuner::Tune(*task, ctx.pool->devices(), *ctx.builder, o);
    }
    pending.RaiseIfAny();
    if (!result.ok()) RaiseTuneError(result.status(), records);
    const tuner::TuneSummary& s = *result;
    // The report as `crosstune tune --json` prints it, and the best and default records whole.
    out = {{"report", tuner::TuneReport(*task, o, s)},
           {"best", s.has_best ? RecordJson(s.best) : json(nullptr)},
           {"default", s.has_default ? RecordJson(s.default_record) : json(nullptr)}};
  } else {
    tuner::WorkloadTuneOptions wo;
    wo.name = c.model != nullptr ? c.model->name : c.workload;
    wo.trials = o.trials;
    wo.round = c.round;
    wo.threads = c.threads;
    wo.tune = o;
    Expected<tuner::WorkloadSummary> result = Status(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release release;
      result = tuner::TuneWorkload(layers, ctx.target, ctx.pool->devices(), *ctx.builder, wo);
    }
    pending.RaiseIfAny();
    if (!result.ok()) throw StatusError(result.status());
    out = {{"report", tuner::WorkloadReport(wo, ctx.target, *result)},
           {"best", nullptr},
           {"default", nullptr}};
  }
  return out.dump();
}

}  // namespace

void BindTuner(nb::module_& m) {
  m.def("template_names", &tuner::TemplateNames, "The kernel templates tune() knows.");
  m.def("tuner_names", &tuner::TunerNames, "The search strategies tune() and replay() know.");
  m.def("utc_timestamp", &tuner::UtcTimestamp);

  m.def(
      "tune",
      [](const std::string& template_name, const std::vector<int64_t>& shape,
         const std::string& workload, const ImportedModel* model, int round, int threads,
         const std::string& target, const std::vector<std::string>& servers,
         const std::string& tracker, const std::string& key, const std::string& auth_secret,
         int max_devices, double wait_s, double timeout_s, const std::string& server_binary,
         int workers, const std::string& tuner_name, int trials, int batch, int early_stop,
         bool overlap, bool include_default, const std::string& log, const std::string& run_id,
         const std::vector<std::string>& transfer, const std::string& pins_json, uint32_t number,
         uint32_t repeat, uint32_t min_repeat_ms, uint32_t cooldown_ms, bool flush_cache,
         uint32_t run_timeout_ms, double build_timeout_s, bool check, uint64_t seed,
         const std::string& objective, ProgressFn on_progress, TextFn on_record, TextFn on_warning,
         const std::string& layouts) {
        TuneCall c;
        c.layouts = Unwrap(model::ParseLayouts(layouts));
        c.template_name = template_name;
        c.shape = shape;
        c.workload = workload;
        c.model = model;
        c.round = round;
        c.threads = threads;
        c.target = target;
        c.devices.servers = servers;
        c.devices.tracker = tracker;
        c.devices.key = key;
        c.devices.auth_secret = auth_secret;
        c.devices.max_devices = max_devices;
        c.devices.wait_s = wait_s;
        c.devices.timeout_s = timeout_s;
        c.devices.server_binary = server_binary;
        c.workers = workers;
        c.options.tuner = tuner_name;
        c.options.trials = trials;
        c.options.batch = batch;
        c.options.early_stop = early_stop;
        c.options.overlap = overlap;
        c.options.include_default = include_default;
        c.options.log_path = log;
        c.options.run_id = run_id;
        c.options.transfer_logs = transfer;
        c.options.measure.timing.number = number;
        c.options.measure.timing.repeat = repeat;
        c.options.measure.timing.min_repeat_ms = min_repeat_ms;
        c.options.measure.timing.cooldown_ms = cooldown_ms;
        c.options.measure.timing.flush_cache = flush_cache;
        c.options.measure.run_timeout_ms = run_timeout_ms;
        c.options.measure.check = check;
        c.options.tuner_options.seed = seed;
        c.options.tuner_options.objective = objective;
        c.build_timeout_s = build_timeout_s;
        c.pins_json = pins_json;
        return RunTune(c, on_progress, on_record, on_warning);
      },
      "template_name"_a, "shape"_a, "workload"_a, "model"_a.none(), "round"_a, "threads"_a,
      "target"_a, "servers"_a, "tracker"_a, "key"_a, "auth_secret"_a, "max_devices"_a, "wait_s"_a,
      "timeout_s"_a, "server_binary"_a, "workers"_a, "tuner"_a, "trials"_a, "batch"_a,
      "early_stop"_a, "overlap"_a, "include_default"_a, "log"_a, "run_id"_a, "transfer"_a,
      "pins_json"_a, "number"_a, "repeat"_a, "min_repeat_ms"_a, "cooldown_ms"_a, "flush_cache"_a,
      "run_timeout_ms"_a, "build_timeout_s"_a, "check"_a, "seed"_a, "objective"_a,
      "on_progress"_a = nb::none(), "on_record"_a = nb::none(), "on_warning"_a = nb::none(),
      "layouts"_a = "blocked",
      "Runs a tuning search (crosstune.tune gives it its defaults); returns the report as JSON.");

  m.def(
      "parse_pins",
      [](const std::vector<std::string>& pins) { return Unwrap(tuner::ParsePins(pins)).dump(); },
      "pins"_a, "KNOB=VALUE pins as a JSON object text.");
  m.def(
      "parse_shape", [](const std::string& text) { return Unwrap(tuner::ParseShape(text)); },
      "text"_a);

  m.def(
      "read_log",
      [](const std::string& path) {
        tuner::LogContents log;
        {
          nb::gil_scoped_release release;
          log = Unwrap(tuner::ReadLog(path));
        }
        json records = json::array();
        for (const auto& r : log.records) records.push_back(RecordJson(r));
        return std::make_pair(records.dump(), log.warnings);
      },
      "path"_a, "Every record of a log (JSON text) and the lines it skipped.");
  m.def(
      "best_records",
      [](const std::string& records_json) {
        std::vector<tuner::Record> records;
        for (const auto& j : json::parse(records_json)) {
          records.push_back(Unwrap(tuner::Record::FromJson(j)));
        }
        json out = json::array();
        for (const auto& r : tuner::BestRecords(records)) out.push_back(RecordJson(r));
        return out.dump();
      },
      "records_json"_a, "The best record per task and target (JSON text in and out).");

  m.def(
      "summarize_log",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        return tuner::SummarizeLog(Unwrap(tuner::ReadLog(path)).records).ToJson().dump();
      },
      "path"_a, "A log's summary per task and target (JSON text), as `crosstune log summary`.");
  m.def(
      "plot_log",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        tuner::BestSoFarPlot plot =
            Unwrap(tuner::PlotBestSoFar(Unwrap(tuner::ReadLog(path)).records));
        return std::make_tuple(plot.svg, plot.lines, plot.max_trials);
      },
      "path"_a, "The best-so-far SVG of a log's runs, its line count and longest run.");
  m.def(
      "export_best",
      [](const std::string& log_path, const std::string& out_path, const std::string& task_key) {
        nb::gil_scoped_release release;
        // Records of code the template now generates differently are not their configs.
        std::vector<tuner::Record> pick = tuner::BestRecordsOf(
            tuner::WithoutStaleRecords(Unwrap(tuner::ReadLog(log_path)).records, nullptr),
            task_key);
        if (pick.empty()) {
          Check(Status(
              ErrorCode::kNotFound,
              log_path + (task_key.empty() ? ": no successful record to export"
                                           : ": no successful record of task '" + task_key + "'")));
        }
        if (pick.size() > 1) {
          std::string keys;
          for (const auto& b : pick) keys += "\n  " + b.task.Key() + "|" + b.target;
          Check(Status(ErrorCode::kInvalidArgument,
                       log_path + ": several tasks; choose one with task=:" + keys));
        }
        tuner::ExportedPackage exported =
            Unwrap(tuner::ExportRecord(pick.front(), out_path, log_path));
        return std::make_tuple(pkg::ManifestToJson(exported.manifest), exported.function,
                               RecordJson(pick.front()).dump());
      },
      "log_path"_a, "out_path"_a, "task_key"_a = "",
      "Builds the best config of a log's task into a package; returns (manifest JSON, function, "
      "record JSON).");

  nb::class_<tuner::ReplayTable>(m, "ReplayTable",
                                 "A table of measured points that answers trials instead of a "
                                 "device.")
      .def_static(
          "load",
          [](const std::string& path, const std::string& task) {
            nb::gil_scoped_release release;
            return Unwrap(tuner::ReplayTable::Load(path, task));
          },
          "path"_a, "task"_a = "")
      .def_prop_ro("source", &tuner::ReplayTable::source)
      .def_prop_ro("space_size", [](const tuner::ReplayTable& t) { return t.space().size(); })
      .def_prop_ro("valid_count", &tuner::ReplayTable::valid_count)
      .def_prop_ro("ok_count", &tuner::ReplayTable::ok_count)
      .def_prop_ro("best", [](const tuner::ReplayTable& t) { return t.best(); })
      .def_prop_ro("warnings", &tuner::ReplayTable::warnings)
      .def("count_within", &tuner::ReplayTable::CountWithin, "fraction"_a)
      .def(
          "summarise",
          [](const tuner::ReplayTable& t, const std::string& tuner_name, int seeds, int batch,
             uint64_t max_trials, double target_fraction, const std::string& objective,
             bool with_runs) {
            tuner::ReplayOptions o;
            o.tuner = tuner_name;
            o.batch = batch;
            o.max_trials = max_trials;
            o.target_fraction = target_fraction;
            o.tuner_options.objective = objective;
            nb::gil_scoped_release release;
            return tuner::ReplaySummaryJson(Unwrap(tuner::SummariseReplay(t, o, seeds)), with_runs)
                .dump();
          },
          "tuner"_a, "seeds"_a, "batch"_a = 8, "max_trials"_a = 0, "target_fraction"_a = 0.95,
          "objective"_a = "mixed", "with_runs"_a = false,
          "Replays a tuner for seeds 1..N; the summary as JSON text.");
}

}  // namespace crosstune::python
