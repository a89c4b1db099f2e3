#include "model_files.h"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>

#include "commands.h"
#include "crosstune/graph.h"
#include "crosstune/tensor.h"

namespace crosstune::cli {
namespace {

using nlohmann::json;

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// Maps [offset, offset + size) of a file read-only; the pointer to its first byte is returned
// through `data`.
Expected<std::shared_ptr<void>> MapRange(const std::string& path, uint64_t offset, uint64_t size,
                                         const uint8_t** data) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(ErrorCode::kNotFound, path + ": " + std::strerror(errno));
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t span = offset - start + size;
  if (span > std::numeric_limits<size_t>::max()) {
    ::close(fd);
    return Status(ErrorCode::kLimitExceeded, path + ": too large to map here");
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(span), PROT_READ, MAP_PRIVATE, fd,
                   static_cast<off_t>(start));
  ::close(fd);
  if (m == MAP_FAILED) return Status(ErrorCode::kIoError, path + ": mmap: " + std::strerror(errno));
  *data = static_cast<const uint8_t*>(m) + (offset - start);
  return std::shared_ptr<void>(m, [span](void* p) { ::munmap(p, static_cast<size_t>(span)); });
}

// params.bin of a verified package, mapped in place.
Expected<MappedParams> PackageParams(const pkg::Package& p) {
  for (const pkg::TarMember& m : p.members) {
    if (m.path != pkg::kParamsPath) continue;
    MappedParams out;
    const uint8_t* data = nullptr;
    CT_ASSIGN_OR_RETURN(out.map, MapRange(p.path, m.offset, m.size, &data));
    CT_ASSIGN_OR_RETURN(out.file, pkg::ParamsFile::FromBuffer(data, m.size));
    return out;
  }
  return Status(ErrorCode::kNotFound, p.path + ": the package has no params.bin");
}
}  // namespace

Expected<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(ErrorCode::kNotFound, path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Status(ErrorCode::kLimitExceeded,
                  path + ": larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return Status(ErrorCode::kIoError, path + ": read failed");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return data;
}

Expected<MappedParams> OpenParamsOf(const std::string& path) {
  char magic[8] = {};
  {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status(ErrorCode::kNotFound, path + ": " + std::strerror(errno));
    (void)!::read(fd, magic, sizeof(magic));
    ::close(fd);
  }
  if (std::string_view(magic, 8) == pkg::kParamsMagic) {
    MappedParams out;
    auto file = pkg::ParamsFile::Open(path);
    if (!file.ok()) return Status(file.status().code(), path + ": " + file.status().message());
    out.file = std::move(file).value();
    return out;
  }
  auto package = pkg::OpenPackage(path);
  if (!package.ok()) {
    return Status(package.status().code(), path + ": neither a params.bin nor a valid package: " +
                                               package.status().message());
  }
  return PackageParams(*package);
}

void PrintParamsSummary(const std::string& from, const std::string& to,
                        const pkg::ParamsFile& params, bool as_json) {
  uint64_t bytes = 0;
  for (const auto& t : params.tensors()) bytes += t.nbytes;
  if (as_json) {
    json names = json::array();
    for (const auto& t : params.tensors()) names.push_back(t.name);
    PrintJson(json{{"from", from},
                   {"to", to},
                   {"params", params.tensors().size()},
                   {"bytes", bytes},
                   {"names", names}});
    return;
  }
  std::printf("converted %zu params (%.1f MiB): %s -> %s\n", params.tensors().size(), MiB(bytes),
              from.c_str(), to.c_str());
}

json InspectModel(const pkg::Package& package) {
  json j;
  j["valid"] = false;
  std::string text;
  for (const pkg::TarMember& m : package.members) {
    if (m.path != pkg::kGraphPath) continue;
    const uint8_t* data = nullptr;
    auto map = MapRange(package.path, m.offset, m.size, &data);
    if (!map.ok()) {
      j["error"] = map.status().message();
      return j;
    }
    text.assign(reinterpret_cast<const char*>(data), static_cast<size_t>(m.size));
  }
  auto g = graph::ParseGraph(text);
  if (!g.ok()) {
    j["error"] = g.status().message();
    return j;
  }
  const graph::Graph& graph = *g;
  auto check = [&]() -> Status {
    CT_RETURN_IF_ERROR(graph::ValidateGraph(graph));
    std::vector<msg::FunctionInfo> fns;
    for (const auto& f : package.manifest.functions) fns.push_back({f.name, f.signature});
    CT_RETURN_IF_ERROR(graph::CheckFunctions(graph, fns));
    std::vector<pkg::ParamTensor> tensors;
    auto params = PackageParams(package);
    if (params.ok()) tensors = params->file->tensors();
    return graph::CheckParams(graph, tensors);
  };
  Status valid = check();
  if (!valid.ok()) {
    j["error"] = valid.message();
    return j;
  }
  j["valid"] = true;
  json inputs = json::array(), outputs = json::array();
  for (const std::string& in : graph.inputs) {
    const uint32_t e = graph.entry_id(static_cast<uint32_t>(graph.FindNode(in)));
    inputs.push_back(
        {{"name", in}, {"shape", graph.shape[e]}, {"dtype", graph::TvmDTypeName(graph.dltype[e])}});
  }
  for (size_t h = 0; h < graph.heads.size(); ++h) {
    const uint32_t e = graph.entry_id(graph.heads[h]);
    outputs.push_back({{"name", graph.outputs[h]},
                       {"shape", graph.shape[e]},
                       {"dtype", graph::TvmDTypeName(graph.dltype[e])}});
  }
  uint64_t params_bytes = 0, activation_bytes = 0, flops = 0, scratch = 0;
  std::vector<bool> param_storage(graph.storage_bytes.size(), false);
  const auto params = graph::ParamNodes(graph);
  for (uint32_t node : params) {
    const uint32_t e = graph.entry_id(node);
    params_bytes += *TensorBytes(graph.shape[e], graph.dltype[e]);
    param_storage[graph.storage_id[e]] = true;
  }
  for (size_t sid = 0; sid < graph.storage_bytes.size(); ++sid) {
    if (!param_storage[sid]) activation_bytes += graph.storage_bytes[sid];
  }
  std::map<std::string, int> op_types;
  json nodes = json::array();
  int tuned = 0, defaults = 0, unknown = 0;
  for (const graph::Node& n : graph.nodes) {
    if (!n.is_op()) continue;
    flops += n.flops;
    scratch = std::max(scratch, n.scratch_bytes);
    ++op_types[n.op_type.empty() ? "-" : n.op_type];
    json node = {{"name", n.name},
                 {"op_type", n.op_type},
                 {"function", n.func_name},
                 {"flops", n.flops},
                 {"scratch_bytes", n.scratch_bytes}};
    if (!n.provenance) {
      ++unknown;
    } else if (n.provenance->is_default) {
      ++defaults;
      node["provenance"] = {{"default", true}};
    } else {
      ++tuned;
      node["provenance"] = {{"task", n.provenance->task},
                            {"config_index", n.provenance->config_index},
                            {"timestamp", n.provenance->timestamp}};
    }
    nodes.push_back(std::move(node));
  }
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  j["nodes"] = nodes.size();
  j["op_types"] = op_types;
  j["params"] = params.size();
  j["params_bytes"] = params_bytes;
  j["activation_bytes"] = activation_bytes;
  j["scratch_bytes"] = scratch;
  j["flops"] = flops;
  j["tuned"] = tuned;
  j["default"] = defaults;
  j["no_provenance"] = unknown;
  j["node_list"] = nodes;
  return j;
}

void PrintModel(const json& m) {
  if (!m.value("valid", false)) {
    std::printf("model     INVALID: %s\n", m.value("error", std::string("?")).c_str());
    return;
  }
  auto tensors = [](const json& list) {
    std::string s;
    for (const auto& t : list) {
      s += fmt::format("{}{} {} {}", s.empty() ? "" : ", ", t["name"].get<std::string>(),
                       ShapeString(t["shape"].get<std::vector<int64_t>>()),
                       t["dtype"].get<std::string>());
    }
    return s;
  };
  std::string ops;
  for (const auto& [op, count] : m["op_types"].items()) {
    ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", op, count.get<int>());
  }
  std::printf("model     valid: graph, storage plan, params and functions checked\n");
  std::printf("inputs    %s\n", tensors(m["inputs"]).c_str());
  std::printf("outputs   %s\n", tensors(m["outputs"]).c_str());
  std::printf("nodes     %d (%s)\n", m["nodes"].get<int>(), ops.c_str());
  std::printf("params    %d, %.1f MiB\n", m["params"].get<int>(),
              MiB(m["params_bytes"].get<uint64_t>()));
  std::printf("memory    activations %.2f MiB, scratch %.2f MiB\n",
              MiB(m["activation_bytes"].get<uint64_t>()), MiB(m["scratch_bytes"].get<uint64_t>()));
  std::printf("work      %.3f GFLOP per run\n",
              static_cast<double>(m["flops"].get<uint64_t>()) / 1e9);
  std::printf("configs   %d tuned, %d template defaults%s\n", m["tuned"].get<int>(),
              m["default"].get<int>(),
              m["no_provenance"].get<int>() > 0
                  ? fmt::format(", {} without provenance", m["no_provenance"].get<int>()).c_str()
                  : "");
  std::printf("provenance\n");
  for (const auto& n : m["node_list"]) {
    std::string from = "-";
    if (n.contains("provenance")) {
      const json& p = n["provenance"];
      if (p.value("default", false)) {
        from = "default config";
      } else {
        const auto when = static_cast<std::time_t>(p["timestamp"].get<double>());
        from = fmt::format("{} config {} (record of {:%Y-%m-%d %H:%M} UTC)",
                           p["task"].get<std::string>(), p["config_index"].get<int64_t>(),
                           fmt::gmtime(when));
      }
    }
    std::printf(
        "  %-28s %-12s %-26s %s\n", n["name"].get<std::string>().c_str(),
        n["op_type"].get<std::string>().empty() ? "-" : n["op_type"].get<std::string>().c_str(),
        n["function"].get<std::string>().c_str(), from.c_str());
  }
}

}  // namespace crosstune::cli
