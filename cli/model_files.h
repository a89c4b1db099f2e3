// Model packages read on the host for the CLI: a package's params.bin mapped where it lies in
// the archive, and what `crosstune inspect` shows of a model (graph summary, provenance of every
// node, and the same graph/params/function checks the server makes).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "crosstune/package.h"
#include "crosstune/params.h"
#include "crosstune/status.h"

namespace crosstune::cli {

// A TVM params blob is read whole; bigger is not a params file.
inline constexpr uint64_t kMaxTvmBlobBytes = uint64_t{8} << 30;

Expected<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes);

// A params file, mapped read-only; `file` points into the mapping, which lives as long as this.
struct MappedParams {
  std::shared_ptr<void> map;
  std::unique_ptr<pkg::ParamsFile> file;
};
// A params.bin, or the params.bin of a .ctpkg (the package verified first, as OpenPackage does).
Expected<MappedParams> OpenParamsOf(const std::string& path);

// "imported 161 params (97.5 MiB): model.params -> params.bin", or that as JSON.
void PrintParamsSummary(const std::string& from, const std::string& to,
                        const pkg::ParamsFile& params, bool as_json);

// For a package with a graph.json: {"valid", "error", "inputs", "outputs", "nodes", "op_types",
// "params", "params_bytes", "activation_bytes", "flops", "tuned", "default", "node_list": [...]}.
// The checks are the server's (graph::ValidateGraph, CheckParams, CheckFunctions against the
// manifest's functions); a failed one sets "valid": false and "error".
nlohmann::json InspectModel(const pkg::Package& package);
void PrintModel(const nlohmann::json& model);

}  // namespace crosstune::cli
