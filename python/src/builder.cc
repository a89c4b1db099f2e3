// The builder: targets and kernel builds into .ctpkg packages (crosstune.build, crosstune.Target).
#include "crosstune/builder/builder.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "crosstune/builder/target.h"
#include "crosstune/package.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace crosstune::python {

void BindBuilder(nb::module_& m) {
  m.def(
      "parse_target",
      [](const std::string& text) { return Unwrap(builder::ParseTarget(text)).ToString(); },
      "text"_a, "The canonical string of a target string or preset; refuses unknown names.");
  m.def(
      "target_arch",
      [](const std::string& text) { return Unwrap(builder::ParseTarget(text)).Arch(); }, "text"_a);
  m.def("presets", &builder::Presets, "(name, target string) of every preset.");
  m.def("default_cache_dir", &builder::DefaultCacheDir);

  nb::class_<builder::Builder>(m, "Builder",
                               "Compiles kernels in worker processes, with a build cache.")
      .def_static(
          "create",
          [](int workers, const std::string& cache_dir, double timeout_s) {
            builder::BuilderOptions o;
            o.workers = workers;
            o.cache_dir = cache_dir;
            o.default_timeout =
                std::chrono::milliseconds(static_cast<int64_t>(std::llround(timeout_s * 1000)));
            nb::gil_scoped_release release;
            return Unwrap(builder::Builder::Create(o));
          },
          "workers"_a = 1, "cache_dir"_a = "", "timeout_s"_a = 120.0)
      .def(
          "build",
          [](builder::Builder& b, const std::string& source, const std::string& target,
             const std::string& out_path, const std::string& name, const std::string& source_name,
             const std::vector<std::string>& flags, nb::bytes graph_json, nb::bytes params_bin) {
            builder::BuildRequest req;
            req.source = source;
            req.target = Unwrap(builder::ParseTarget(target));
            req.name = name;
            req.source_name = source_name;
            req.flags = flags;
            std::string graph(graph_json.c_str(), graph_json.size());
            std::string params(params_bin.c_str(), params_bin.size());
            nb::gil_scoped_release release;
            builder::BuildResult r = b.Build(req);
            Check(r.status);
            pkg::Manifest manifest =
                Unwrap(builder::WriteBuildPackage(req, r, out_path, graph, params));
            return std::make_pair(pkg::ManifestToJson(manifest), r.diagnostics);
          },
          "source"_a, "target"_a, "out_path"_a, "name"_a = "kernel", "source_name"_a = "",
          "flags"_a = std::vector<std::string>{}, "graph_json"_a = nb::bytes(""),
          "params_bin"_a = nb::bytes(""),
          "Builds a source for a target and writes the package; returns (manifest JSON, "
          "diagnostics).")
      .def_prop_ro("workers", &builder::Builder::workers);
}

}  // namespace crosstune::python
