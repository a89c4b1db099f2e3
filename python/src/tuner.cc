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
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings.h"
#include "crosstune/builder/target.h"
#include "crosstune/model/tasks.h"
#include "crosstune/package.h"
#include "crosstune/tuner/export.h"
#include "crosstune/tuner/log_report.h"
#include "crosstune/tuner/records.h"
#include "crosstune/tuner/replay.h"
#include "crosstune/tuner/task.h"
#include "crosstune/tuner/tune.h"
#include "crosstune/tuner/tune_setup.h"
#include "crosstune/tuner/workload.h"
#include "model.h"

namespace nb = nanobind;
using namespace nb::literals;
using nlohmann::json;

namespace crosstune::python {
namespace {

// A record as the package shows it: the log's fields and its GFLOP/s.
json RecordJson(const tuner::Record& r) {
  json j = r.ToJson();
  j["gflops"] = r.gflops();
  return j;
}

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

// tune()'s options as the package passes them (_core.TuneOptions): what to tune, and every field
// of tuner::TuneSetupOptions, with its defaults. Seconds here, milliseconds there; a timing field
// left None is decided by the setup (the tuner's default, or a network's).
struct TuneArgs {
  std::string template_name;
  std::vector<int64_t> shape;
  std::string workload;
  std::string layouts = "blocked";  // of a workload's or model's conv tasks
  int round = tuner::WorkloadTuneOptions{}.round;
  std::string pins_json = "{}";
  tuner::TuneSetupOptions setup;
  std::optional<uint32_t> number, repeat, min_repeat_ms, cooldown_ms;
  std::optional<bool> flush_cache;

  // The setup's options; its callbacks are set by RunTune.
  tuner::TuneSetupOptions ToSetup(bool network) const {
    tuner::TuneSetupOptions o = setup;
    o.network = network;
    if (number || repeat || min_repeat_ms || cooldown_ms || flush_cache) {
      TimingOptions t = tuner::MeasureOptions{}.timing;
      t.number = number.value_or(t.number);
      t.repeat = repeat.value_or(t.repeat);
      t.min_repeat_ms = min_repeat_ms.value_or(t.min_repeat_ms);
      t.cooldown_ms = cooldown_ms.value_or(t.cooldown_ms);
      t.flush_cache = flush_cache.value_or(t.flush_cache);
      o.timing = t;
    }
    return o;
  }
};

using ProgressFn = std::function<void(AnyDict)>;
using TextFn = std::function<void(std::string)>;

std::string RunTune(const TuneArgs& a, const ImportedModel* model, const ProgressFn& on_progress,
                    const TextFn& on_record, const TextFn& on_warning) {
  const model::Layouts layouts = Unwrap(model::ParseLayouts(a.layouts));
  const json pins = json::parse(a.pins_json);
  const bool network = !a.workload.empty() || model != nullptr;
  if (network && !pins.empty()) {
    Check(Status(ErrorCode::kInvalidArgument,
                 "pins hold a knob of one template; they do not apply to a workload or a model"));
  }
  if (network && a.setup.tune.log_path.empty()) {
    Check(Status(ErrorCode::kInvalidArgument,
                 std::string(model ? "a model" : "a workload") +
                     " needs a log (its tasks resume from it): tune(..., log=PATH)"));
  }
  std::vector<tuner::WorkloadLayer> layers;
  if (!a.workload.empty()) layers = Unwrap(model::MakeWorkload(a.workload, layouts));

  tuner::TuneSetupOptions so = a.ToSetup(network);
  tuner::TuneOptions& o = so.tune;
  o.pins = pins;
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

  // The same setup as `crosstune tune`: devices, target, the CPU split, builds, overlap, timing.
  std::unique_ptr<tuner::TuneSetup> setup;
  {
    nb::gil_scoped_release release;
    setup = Unwrap(tuner::TuneSetup::Open(std::move(so)));
  }
  pending.RaiseIfAny();
  std::unique_ptr<tuner::Task> task;
  if (model != nullptr) {
    // The model's tasks (those compile looks up), less those no template takes yet.
    model::TunableTasks tasks =
        model::SplitTunableTasks(model->graph, setup->target(), a.setup.threads, layouts);
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
                   model->path + ": the model has no task a template takes"));
    }
  } else if (a.workload.empty()) {
    task = Unwrap(tuner::MakeTask(a.template_name, a.shape, setup->target(), {a.setup.threads}));
  }

  json out;
  if (task) {
    Expected<tuner::TuneSummary> result = Status(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release release;
      result = setup->Tune(*task);
    }
    pending.RaiseIfAny();
    if (!result.ok()) RaiseTuneError(result.status(), records);
    const tuner::TuneSummary& s = *result;
    // The report as `crosstune tune --json` prints it, and the best and default records whole.
    json report = tuner::TuneReport(*task, setup->options(), s);
    setup->AddToReport(&report);
    out = {{"report", report},
           {"best", s.has_best ? RecordJson(s.best) : json(nullptr)},
           {"default", s.has_default ? RecordJson(s.default_record) : json(nullptr)}};
  } else {
    const tuner::WorkloadTuneOptions wo =
        setup->WorkloadOptions(model != nullptr ? model->name : a.workload, a.round);
    Expected<tuner::WorkloadSummary> result = Status(ErrorCode::kInternal, "not run");
    {
      nb::gil_scoped_release release;
      result = setup->TuneWorkload(layers, wo);
    }
    pending.RaiseIfAny();
    if (!result.ok()) throw StatusError(result.status());
    json report = tuner::WorkloadReport(wo, setup->target(), *result);
    setup->AddToReport(&report);
    out = {{"report", report}, {"best", nullptr}, {"default", nullptr}};
  }
  {
    nb::gil_scoped_release release;
    setup.reset();  // the devices' leases, the local server and the build workers
  }
  return out.dump();
}

// A TuneOptions property reading and writing the field `at` returns (a field of the
// TuneSetupOptions inside, by tune()'s name).
template <typename At>
void Field(nb::class_<TuneArgs>& cls, const char* name, At at) {
  using T = std::remove_reference_t<decltype(at(std::declval<TuneArgs&>()))>;
  cls.def_prop_rw(
      name, [at](TuneArgs& a) { return at(a); }, [at](TuneArgs& a, T v) { at(a) = std::move(v); });
}

// The same for a duration, in seconds on the Python side.
template <typename At>
void Seconds(nb::class_<TuneArgs>& cls, const char* name, At at) {
  cls.def_prop_rw(
      name, [at](TuneArgs& a) { return at(a).count() / 1000.0; },
      [at](TuneArgs& a, double s) { at(a) = Ms(s); });
}

}  // namespace

void BindTuner(nb::module_& m) {
  m.def("template_names", &tuner::TemplateNames, "The kernel templates tune() knows.");
  m.def("tuner_names", &tuner::TunerNames, "The search strategies tune() and replay() know.");
  m.def("utc_timestamp", &tuner::UtcTimestamp);

  // tune()'s options, one object (crosstune.tune fills it from its arguments): the fields of
  // tuner::TuneSetupOptions by tune()'s names, with the library's defaults.
  nb::class_<TuneArgs> options(m, "TuneOptions",
                               "The options of one tune() run, as crosstune.tune passes them.");
  options.def(nb::init<>())
      .def_rw("template", &TuneArgs::template_name)
      .def_rw("shape", &TuneArgs::shape)
      .def_rw("workload", &TuneArgs::workload)
      .def_rw("layouts", &TuneArgs::layouts)
      .def_rw("round", &TuneArgs::round)
      .def_rw("pins_json", &TuneArgs::pins_json)
      .def_rw("number", &TuneArgs::number)
      .def_rw("repeat", &TuneArgs::repeat)
      .def_rw("min_repeat_ms", &TuneArgs::min_repeat_ms)
      .def_rw("cooldown_ms", &TuneArgs::cooldown_ms)
      .def_rw("flush_cache", &TuneArgs::flush_cache);
  Field(
      options, "target", [](TuneArgs & a) -> auto& { return a.setup.target; });
  Field(
      options, "threads", [](TuneArgs & a) -> auto& { return a.setup.threads; });
  Field(
      options, "servers", [](TuneArgs & a) -> auto& { return a.setup.devices.servers; });
  Field(
      options, "tracker", [](TuneArgs & a) -> auto& { return a.setup.devices.tracker; });
  Field(
      options, "key", [](TuneArgs & a) -> auto& { return a.setup.devices.key; });
  Field(
      options, "auth_secret", [](TuneArgs & a) -> auto& { return a.setup.devices.auth_secret; });
  Field(
      options, "max_devices", [](TuneArgs & a) -> auto& { return a.setup.devices.max_devices; });
  Seconds(
      options, "wait", [](TuneArgs & a) -> auto& { return a.setup.devices.wait; });
  Seconds(
      options, "timeout", [](TuneArgs & a) -> auto& { return a.setup.devices.timeout; });
  Field(
      options, "server_binary",
      [](TuneArgs & a) -> auto& { return a.setup.devices.server_binary; });
  Field(
      options, "workers", [](TuneArgs & a) -> auto& { return a.setup.workers; });
  Field(
      options, "build_cache", [](TuneArgs & a) -> auto& { return a.setup.build_cache; });
  Field(
      options, "build_cache_max_mb",
      [](TuneArgs & a) -> auto& { return a.setup.build_cache_max_mb; });
  Field(
      options, "build_key", [](TuneArgs & a) -> auto& { return a.setup.build_key; });
  Field(
      options, "records", [](TuneArgs & a) -> auto& { return a.setup.records; });
  Seconds(
      options, "build_timeout",
      [](TuneArgs & a) -> auto& { return a.setup.tune.measure.build_timeout; });
  Field(
      options, "overlap", [](TuneArgs & a) -> auto& { return a.setup.overlap; });
  Field(
      options, "tuner", [](TuneArgs & a) -> auto& { return a.setup.tune.tuner; });
  Field(
      options, "trials", [](TuneArgs & a) -> auto& { return a.setup.tune.trials; });
  Field(
      options, "batch", [](TuneArgs & a) -> auto& { return a.setup.tune.batch; });
  Field(
      options, "early_stop", [](TuneArgs & a) -> auto& { return a.setup.tune.early_stop; });
  Field(
      options, "include_default",
      [](TuneArgs & a) -> auto& { return a.setup.tune.include_default; });
  Field(
      options, "stop_losers", [](TuneArgs & a) -> auto& { return a.setup.tune.stop_losers; });
  Field(
      options, "log", [](TuneArgs & a) -> auto& { return a.setup.tune.log_path; });
  Field(
      options, "run_id", [](TuneArgs & a) -> auto& { return a.setup.tune.run_id; });
  Field(
      options, "transfer", [](TuneArgs & a) -> auto& { return a.setup.tune.transfer_logs; });
  Field(
      options, "run_timeout_ms",
      [](TuneArgs & a) -> auto& { return a.setup.tune.measure.run_timeout_ms; });
  Field(
      options, "check", [](TuneArgs & a) -> auto& { return a.setup.tune.measure.check; });
  Field(
      options, "seed", [](TuneArgs & a) -> auto& { return a.setup.tune.tuner_options.seed; });
  Field(
      options, "objective",
      [](TuneArgs & a) -> auto& { return a.setup.tune.tuner_options.objective; });

  m.def("tune", &RunTune, "options"_a, "model"_a.none() = nb::none(), "on_progress"_a = nb::none(),
        "on_record"_a = nb::none(), "on_warning"_a = nb::none(),
        "Runs a tuning search (crosstune.tune fills its options); returns the report as JSON.");

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

  m.def(
      "compare_tuners",
      [](const std::string& space, const std::vector<std::string>& tuners, int seeds, int batch,
         uint64_t max_trials, double target_fraction, const std::string& task,
         const std::string& objective, const std::string& warm_from, bool with_runs) {
        tuner::ReplayComparison c;
        c.space = space;
        c.tuners = tuners;
        c.seeds = seeds;
        c.batch = batch;
        c.max_trials = max_trials;
        c.target_fraction = target_fraction;
        c.task = task;
        c.objective = objective;
        c.warm_from = warm_from;
        c.with_runs = with_runs;
        nb::gil_scoped_release release;
        return Unwrap(tuner::CompareTuners(c)).dump();
      },
      "space"_a, "tuners"_a, "seeds"_a, "batch"_a, "max_trials"_a, "target_fraction"_a, "task"_a,
      "objective"_a, "warm_from"_a, "with_runs"_a,
      "What `crosstune replay` compares (tuner::CompareTuners), as JSON text.");
}

}  // namespace crosstune::python
