// Models: ONNX import (crosstune.import_onnx), the model compiler (crosstune.compile) and model
// packages run by a device's graph executor (Device.load_model). The work is the model and client
// libraries'; this file converts types and releases the GIL around every import, compile and
// remote call.
#include "model.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings.h"
#include "crosstune/client/remote_model.h"
#include "crosstune/client/session.h"
#include "crosstune/client/time_stats.h"
#include "crosstune/model/ops.h"
#include "crosstune/model/pipeline.h"
#include "crosstune/model/report.h"
#include "crosstune/package.h"

namespace nb = nanobind;
using namespace nb::literals;
using nlohmann::json;

namespace crosstune::python {

namespace {

json TensorInfos(const std::vector<msg::TensorInfo>& tensors) {
  json out = json::array();
  for (const auto& t : tensors) {
    out.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}, {"nbytes", t.nbytes}});
  }
  return out;
}

// An array argument of set_input / get_output as the client sends or fills it.
DLTensor HostTensorOf(nb::handle array, HostArray& storage, bool writable, const char* what) {
  client::HostArg arg;
  if (!ToHostArg(array, storage, arg)) {
    throw StatusError(
        Status(ErrorCode::kInvalidArgument, std::string(what) + ": expected an array, got " +
                                                nb::cast<std::string>(nb::str(array.type()))));
  }
  if (writable && !arg.copy_back) {
    throw StatusError(
        Status(ErrorCode::kInvalidArgument, std::string(what) + ": the array is read-only"));
  }
  return arg.host;
}

}  // namespace

void BindModel(nb::module_& m) {
  nb::class_<ImportedModel>(m, "ImportedModel",
                            "An ONNX model imported and put through the default passes "
                            "(model::Load, as `crosstune import` loads it).")
      .def_ro("path", &ImportedModel::path)
      .def_ro("name", &ImportedModel::name)
      .def(
          "summary_json",
          [](const ImportedModel& model) {
            // Names from the file need not be UTF-8: what is not is replaced, never thrown.
            return model::ImportReport(model).dump(-1, ' ', false,
                                                   nlohmann::json::error_handler_t::replace);
          },
          "What `crosstune import --json` prints, as JSON text.");

  m.def(
      "import_onnx",
      [](const std::string& path, const std::map<std::string, std::vector<int64_t>>& shapes,
         const std::string& name, uint64_t max_model_mb) {
        nb::gil_scoped_release release;
        return std::make_unique<ImportedModel>(Unwrap(
            model::Load(path, {.shapes = shapes, .max_model_mb = max_model_mb, .name = name})));
      },
      "path"_a, "shapes"_a, "name"_a = "", "max_model_mb"_a = model::kDefaultMaxModelMb,
      "model::Load: imports an ONNX file (shapes: input name -> dims, for dynamic dimensions) "
      "and runs the default passes.");

  m.def(
      "unsupported_json",
      [](const std::string& path, uint64_t max_model_mb) {
        nb::gil_scoped_release release;
        auto found = Unwrap(model::FindUnsupported(path, max_model_mb << 20));
        return model::UnsupportedJson(path, found)
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      },
      "path"_a, "max_model_mb"_a = model::kDefaultMaxModelMb,
      "model::FindUnsupported: what `crosstune import --json` lists for a model the importer "
      "refuses, as JSON text.");

  m.def(
      "onnx_operators",
      [] {
        std::vector<std::tuple<std::string, int, int>> out;
        for (const auto& o : model::OnnxOperators()) {
          out.emplace_back(o.op, o.since_opset, o.until_opset);
        }
        return out;
      },
      "model::OnnxOperators: (op, since_opset, until_opset) of each ONNX operator the importer "
      "takes, sorted.");

  m.def(
      "compile_model",
      [](const ImportedModel& model, const std::string& out, const std::string& target,
         client::Session* device, int threads, const std::string& log, int workers,
         const std::string& layouts, const std::string& lib_name) {
        nb::gil_scoped_release release;
        model::PackageOptions o;
        o.target = target;
        if (device != nullptr) o.device = Unwrap(device->Info());
        o.threads = threads;
        o.log = log;
        o.layouts = layouts;
        o.out = out;
        o.library_name = lib_name;
        o.workers = workers;
        model::CompiledPackage p = Unwrap(model::CompileToPackage(model, o));
        return std::make_tuple(
            pkg::ManifestToJson(p.manifest),
            p.report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), p.warnings);
      },
      "model"_a, "out"_a, "target"_a = "auto", "device"_a.none() = nb::none(), "threads"_a = 1,
      "log"_a = "", "workers"_a = 0, "layouts"_a = "blocked", "lib_name"_a = "model",
      "model::CompileToPackage: compiles a model into a package at `out` (target \"auto\": the "
      "target of `device`, a session, whose kind of device picks the records); returns "
      "(manifest JSON, report JSON, warnings).");

  m.def(
      "release_shared_builders",
      [] {
        nb::gil_scoped_release release;
        model::ReleaseSharedBuilders();
      },
      "model::ReleaseSharedBuilders: ends the build workers that compile_model's calls share "
      "(the package calls it at exit).");

  nb::class_<client::RemoteModel>(m, "RemoteModel",
                                  "A model package loaded on a device. Belongs to its session.")
      .def_static(
          "load",
          [](client::Session& session, const std::string& remote) {
            nb::gil_scoped_release release;
            return Unwrap(client::RemoteModel::Load(&session, remote));
          },
          "session"_a, "remote"_a, nb::keep_alive<0, 1>(),
          "Loads a .ctpkg of the session's workspace (the server verifies it first).")
      .def(
          "info_json",
          [](const client::RemoteModel& model) {
            const msg::ModelInfo& i = model.info();
            return json{{"target", i.target},
                        {"inputs", TensorInfos(i.inputs)},
                        {"outputs", TensorInfos(i.outputs)},
                        {"nodes", i.nodes},
                        {"storage_bytes", i.storage_bytes},
                        {"params", i.params},
                        {"params_bytes", i.params_bytes},
                        {"flops", i.flops}}
                .dump();
          },
          "The model's inputs, outputs, nodes, storage, params and FLOPs (JSON text).")
      .def(
          "set_input",
          [](client::RemoteModel& model, const std::string& name, nb::handle array) {
            HostArray storage;
            DLTensor host = HostTensorOf(array, storage, false, ("input '" + name + "'").c_str());
            nb::gil_scoped_release release;
            Check(model.SetInputHost(name, host));
          },
          "name"_a, "array"_a, "Sends an array as input `name`, from its own memory.")
      .def(
          "get_output",
          [](client::RemoteModel& model, nb::handle which, nb::handle array) {
            HostArray storage;
            DLTensor host = HostTensorOf(array, storage, true, "the output's array");
            if (nb::isinstance<nb::int_>(which)) {
              const int64_t index = nb::cast<int64_t>(which);
              if (index < 0) {
                throw StatusError(
                    Status(ErrorCode::kNotFound, "no output " + std::to_string(index)));
              }
              nb::gil_scoped_release release;
              Check(model.GetOutputHost(static_cast<size_t>(index), host));
            } else {
              const std::string name = nb::cast<std::string>(which);
              nb::gil_scoped_release release;
              Check(model.GetOutputHost(name, host));
            }
          },
          "which"_a, "array"_a,
          "Copies an output (by index or name) into a writable array of its dtype and size.")
      .def(
          "run",
          [](client::RemoteModel& model, double timeout_s, uint32_t threads) {
            nb::gil_scoped_release release;
            return Unwrap(model.Run(TimeoutMs(timeout_s), threads));
          },
          "timeout_s"_a = 0.0, "threads"_a = 0, "Runs every node once.")
      .def(
          "time",
          [](client::RemoteModel& model, uint32_t number, uint32_t repeat, uint32_t min_repeat_ms,
             uint32_t cooldown_ms, bool flush_cache, double timeout_s, uint32_t threads) {
            const client::TimeOptions o = TimeOptionsOf(number, repeat, min_repeat_ms, cooldown_ms,
                                                        flush_cache, timeout_s, threads);
            nb::gil_scoped_release release;
            return client::SummarizeTimes(Unwrap(model.Time(o)));
          },
          "number"_a, "repeat"_a, "min_repeat_ms"_a, "cooldown_ms"_a, "flush_cache"_a,
          "timeout_s"_a, "threads"_a, "Times whole runs with the device's time evaluator.")
      .def(
          "profile_json",
          [](client::RemoteModel& model, uint32_t number, uint32_t repeat, uint32_t min_repeat_ms,
             uint32_t cooldown_ms, bool flush_cache, double timeout_s, uint32_t threads) {
            const client::TimeOptions o = TimeOptionsOf(number, repeat, min_repeat_ms, cooldown_ms,
                                                        flush_cache, timeout_s, threads);
            std::vector<msg::NodeProfile> nodes;
            uint32_t used = 0;
            {
              nb::gil_scoped_release release;
              nodes = Unwrap(model.Profile(o, &used));
            }
            json out = json::array();
            for (const auto& n : nodes) {
              out.push_back({{"name", n.name},
                             {"op_type", n.op_type},
                             {"function", n.function},
                             {"shapes", n.shapes},
                             {"median_s", n.median_seconds},
                             {"min_s", n.min_seconds},
                             {"max_s", n.max_seconds},
                             {"number", n.number},
                             {"flops", n.flops},
                             {"in_run_median_s", n.in_run_median_seconds}});
            }
            return std::make_pair(out.dump(), used);
          },
          "number"_a, "repeat"_a, "min_repeat_ms"_a, "cooldown_ms"_a, "flush_cache"_a,
          "timeout_s"_a, "threads"_a,
          "Times every operator node within whole runs (in_run_median_s) and on its own, in "
          "graph order (median_s); (nodes JSON, threads).")
      .def(
          "unload",
          [](client::RemoteModel& model) {
            nb::gil_scoped_release release;
            Check(model.Unload());
          },
          "Unloads the model on the device.");
}

}  // namespace crosstune::python
