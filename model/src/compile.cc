// The model compiler (compile.h).
#include "crosstune/model/compile.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "crosstune/builder/backend.h"
#include "crosstune/graph.h"
#include "crosstune/model/kernels.h"
#include "crosstune/model/ops.h"
#include "crosstune/params.h"
#include "crosstune/tuner/conv_layout.h"
#include "crosstune/tuner/export.h"
#include "crosstune/tuner/task.h"

namespace crosstune::model {
namespace {

// The task's template ("conv2d", "dense"), else the operator's name in lower case ("maxpool"; a
// conv no template takes is still a "conv2d").
std::string OpType(const Node& n, const CompiledNode& c) {
  if (c.has_task) return c.task.template_name;
  if (n.op == "FusedConv") return "conv2d";
  std::string s;
  for (char ch : n.op) s += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  return s;
}

// A C identifier piece from a function or template name.
std::string Ident(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

DLDataType DLTypeOf(DType t) {
  switch (t) {
    case DType::kFloat32:
      return {kDLFloat, 32, 1};
    case DType::kFloat64:
      return {kDLFloat, 64, 1};
    case DType::kInt64:
      return {kDLInt, 64, 1};
    case DType::kInt32:
      return {kDLInt, 32, 1};
    case DType::kInt8:
      return {kDLInt, 8, 1};
    case DType::kUint8:
    case DType::kBool:
      return {kDLUInt, 8, 1};
    case DType::kFloat16:
      return {kDLFloat, 16, 1};
    case DType::kInt16:
      return {kDLInt, 16, 1};
    case DType::kUint16:
      return {kDLUInt, 16, 1};
    case DType::kUint32:
      return {kDLUInt, 32, 1};
    case DType::kUint64:
      return {kDLUInt, 64, 1};
    default:  // the narrow types travel as their bits (graph.h)
      return {kDLUInt, static_cast<uint8_t>(8 * DTypeBytes(t)), 1};
  }
  return {kDLFloat, 32, 1};
}

// "2026-11-30T10:00:00.123Z" to seconds since the epoch (0 when it does not parse).
double EpochSeconds(const std::string& iso) {
  std::tm tm{};
  const char* rest = ::strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return 0;
  double frac = 0;
  if (*rest == '.') frac = std::strtod(rest, nullptr);
  return static_cast<double>(::timegm(&tm)) + frac;
}

// The library's own source: one wrapper per node around the node object's entry, the module
// table of all of them, and last_error forwarding the failed node's message.
std::string TableSource(const std::vector<CompiledNode>& nodes) {
  std::ostringstream o;
  o << "/* crosstune model: the module table of " << nodes.size() << " nodes */\n"
    << "#include \"crosstune/kernel_abi.h\"\n"
    << "static const ct_module* g_failed = 0;\n"
    << "static const char* last_error(void) {\n"
    << "  return g_failed && g_failed->last_error ? g_failed->last_error() : \"\";\n}\n";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string& f = nodes[i].function;
    o << "const ct_module* " << f << "_module(void);\n"
      << "static int32_t " << f << "(const ct_arg* args, int32_t num_args) {\n"
      << "  const ct_module* m = " << f << "_module();\n"
      << "  const int32_t rc = m->functions[0].fn(args, num_args);\n"
      << "  if (rc != 0) g_failed = m;\n  return rc;\n}\n";
  }
  o << "static const ct_function kFunctions[] = {\n";
  for (const auto& n : nodes) {
    o << "  {\"" << n.function << "\", " << n.function << ", \"" << n.signature << "\"},\n";
  }
  o << "};\nCT_DEFINE_MODULE(\"crosstune model\", kFunctions, last_error)\n";
  return o.str();
}

// The best record of each task key on this target (records of other targets or thread counts
// have other keys or targets): of `device_kind`'s devices where the task has one, else of any.
std::map<std::string, tuner::Record> BestByTask(const std::vector<tuner::Record>& records,
                                                const std::string& target,
                                                const std::string& device_kind) {
  std::map<std::string, tuner::Record> best, on_kind;
  auto keep = [](std::map<std::string, tuner::Record>& m, const tuner::Record& r) {
    auto it = m.find(r.task.Key());
    if (it == m.end() || r.mean < it->second.mean) m[r.task.Key()] = r;
  };
  for (const auto& r : records) {
    if (!r.ok() || r.mean <= 0 || r.target != target) continue;
    keep(best, r);
    if (!device_kind.empty() && tuner::DeviceKind(r) == device_kind) keep(on_kind, r);
  }
  for (auto& [key, r] : on_kind) best[key] = std::move(r);
  return best;
}

}  // namespace

Expected<CompileResult> CompileModel(Graph graph, const CompileOptions& options,
                                     builder::Builder& builder) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!options.target.backend().runs_graphs()) {
    return Status(ErrorCode::kInvalidArgument,
                  "models compile for CPU targets only, not " + options.target.ToString());
  }
  CompileResult result;
  result.graph = std::move(graph);
  // An output the passes folded into a constant (a Shape's, say) is copied from the params by
  // an Identity node, so every output is a value some node writes.
  for (int& o : result.graph.outputs) {
    Graph& gr = result.graph;
    if (!gr.values[o].is_const()) continue;
    Value param = gr.values[o];
    param.name += ":constant";
    Node copy;
    copy.op = "Identity";
    copy.name = gr.values[o].name + ":copy";
    copy.inputs = {gr.AddValue(std::move(param))};
    gr.values[o].data.reset();
    copy.outputs = {o};
    gr.nodes.push_back(std::move(copy));
  }
  // The plan is made without the target (as ExtractTasks makes it); only the block is its own.
  CT_RETURN_IF_ERROR(RewriteLayouts(result.graph, PlanLayouts(result.graph, options.layouts),
                                    tuner::BlockedChannels(options.target)));
  CT_RETURN_IF_ERROR(RewriteInt8Convs(result.graph, options.target, options.threads));
  CT_RETURN_IF_ERROR(PackMatmulWeights(result.graph, options.target, options.threads));
  const Graph& g = result.graph;
  const std::string target_text = options.target.ToString();
  std::vector<tuner::Record> of_target;
  for (const auto& r : options.records) {
    if (r.target == target_text) of_target.push_back(r);
  }
  const auto best = BestByTask(tuner::WithoutStaleRecords(of_target, &result.stale_records),
                               target_text, options.device_kind);

  std::vector<builder::BuildRequest> objects;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    CompiledNode c;
    c.node = static_cast<int>(k);
    c.flops = NodeFlops(g, n);
    std::string source, function;
    if (auto t = TaskOf(g, n)) {
      auto task = tuner::MakeTask(t->template_name, t->shape, options.target, {options.threads});
      if (!task.ok()) {
        // A task its template refuses (a size past its limits): a generated kernel.
        ++result.untemplated;
      } else {
        c.has_task = true;
        c.task = *t;
        c.task_key = (*task)->id().Key();
        if (t->TunedShape() != t->shape) {
          tuner::TaskId tuned = (*task)->id();
          tuned.shape = t->TunedShape();
          c.task_key = tuned.Key();
        }
        tuner::Config config = (*task)->DefaultConfig();
        if (auto it = best.find(c.task_key); it != best.end()) {
          auto from_record = (*task)->space().FromJson(it->second.config_values);
          if (from_record.ok() && (*task)->space().IsValid(*from_record)) {
            config = *from_record;
            c.tuned = true;
            c.record_timestamp = it->second.timestamp;
          }
        }
        c.config_index = config.index();
        // Working memory from the executor's one scratch buffer, not the library's own.
        c.scratch_bytes = (*task)->ScratchBytes(config);
        source =
            (c.scratch_bytes > 0 ? "#define CT_SCRATCH_ARG 1\n" : "") + (*task)->Generate(config);
        function = (*task)->function();
        c.signature = std::string((*task)->args().size() + (c.scratch_bytes > 0 ? 1 : 0), 't');
        ++(c.tuned ? result.tuned : result.defaults);
      }
    }
    if (!c.has_task) {
      CT_ASSIGN_OR_RETURN(GeneratedKernel kernel, GenerateKernel(g, n));
      source = std::move(kernel.source);
      function = kernel.function;
      c.signature = kernel.signature;
      c.scratch_bytes = kernel.scratch_bytes;
      ++result.generated;
    }
    // The call passes the node's present inputs, its outputs and the scratch buffer, if any.
    size_t args = n.outputs.size() + (c.scratch_bytes > 0 ? 1 : 0);
    for (int i : n.inputs) args += i >= 0;
    if (c.signature.size() != args) {
      return Status(ErrorCode::kInternal, n.op + " node '" + n.name + "': its kernel takes " +
                                              std::to_string(c.signature.size()) +
                                              " tensors, the node gives " + std::to_string(args));
    }
    c.op_type = OpType(n, c);
    c.function = "ct_n" + std::to_string(k) + "_" + Ident(function);
    builder::BuildRequest r;
    r.source = "#define crosstune_module_v1 " + c.function + "_module\n" + source;
    r.target = options.target;
    r.object_only = true;
    r.name = options.name;
    r.source_name = c.function + ".c";
    objects.push_back(std::move(r));
    result.scratch_bytes = std::max(result.scratch_bytes, c.scratch_bytes);
    result.nodes.push_back(std::move(c));
  }
  // The nodes' objects on the pool, in parallel; then the table, linked with them.
  std::vector<builder::BuildResult> built = builder.BuildMany(objects);
  builder::BuildRequest lib;
  lib.source = TableSource(result.nodes);
  lib.target = options.target;
  lib.name = options.name;
  lib.source_name = options.name + "_table.c";
  for (size_t i = 0; i < built.size(); ++i) {
    if (!built[i].ok()) {
      const Node& n = g.nodes[result.nodes[i].node];
      return Status(built[i].status.code(), n.op + " node '" + n.name + "' (" +
                                                result.nodes[i].function +
                                                "): " + built[i].status.message());
    }
    lib.link_objects.push_back(std::move(built[i].library));
  }
  result.library = builder.Build(lib);
  if (!result.library.ok()) return result.library.status;
  lib.link_objects.clear();  // not needed past the link
  result.request = std::move(lib);
  result.plan = PlanStorage(g);
  result.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

std::string GraphJson(const CompileResult& result) {
  const Graph& g = result.graph;
  graph::Graph out;
  // Null nodes first: the model's inputs (in order), then every constant a node reads.
  std::map<int, graph::EntryRef> entry_of;  // value id -> entry
  std::vector<int> value_of_entry;
  std::set<std::string> names;  // graph.json's node names are unique across null and op nodes
  auto add_null = [&](int v) {
    names.insert(g.values[v].name);
    graph::Node n;
    n.op = std::string(graph::kNullOp);
    n.name = g.values[v].name;
    entry_of[v] = {static_cast<uint32_t>(out.nodes.size()), 0, 0};
    value_of_entry.push_back(v);
    out.nodes.push_back(std::move(n));
  };
  for (int v : g.inputs) {
    add_null(v);
    out.inputs.push_back(g.values[v].name);
  }
  for (const Node& n : g.nodes) {
    for (int i : n.inputs) {
      if (i >= 0 && g.values[i].is_const() && !entry_of.count(i)) add_null(i);
    }
  }
  for (const CompiledNode& c : result.nodes) {
    const Node& n = g.nodes[c.node];
    graph::Node op;
    op.op = std::string(graph::kTvmOp);
    // A node named like a value (ONNX keeps the two apart) gets a suffix.
    op.name = n.name;
    for (int k = 1; !names.insert(op.name).second; ++k) op.name = n.name + "#" + std::to_string(k);
    op.func_name = c.function;
    for (int i : n.inputs) {
      if (i >= 0) op.inputs.push_back(entry_of.at(i));
    }
    op.num_inputs = static_cast<uint32_t>(op.inputs.size());
    op.num_outputs = static_cast<uint32_t>(n.outputs.size());
    op.op_type = c.op_type;
    op.scratch_bytes = static_cast<uint64_t>(c.scratch_bytes);
    op.flops = static_cast<uint64_t>(c.flops);
    graph::Provenance p;
    if (c.tuned) {
      p.task = c.task_key;
      p.config_index = static_cast<int64_t>(c.config_index);
      p.timestamp = EpochSeconds(c.record_timestamp);
    } else if (c.has_task) {
      p.is_default = true;
      p.task = c.task_key;
      p.config_index = static_cast<int64_t>(c.config_index);
    } else {
      p.is_default = true;
    }
    op.provenance = p;
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      entry_of[n.outputs[o]] = {static_cast<uint32_t>(out.nodes.size()), static_cast<uint32_t>(o),
                                0};
      value_of_entry.push_back(n.outputs[o]);
    }
    out.nodes.push_back(std::move(op));
  }
  for (int o : g.outputs) {
    out.heads.push_back(entry_of.at(o));
    out.outputs.push_back(g.values[o].name);
  }
  graph::FillIndex(&out);
  // Entries are numbered node by node, output by output: value_of_entry is in that order.
  for (int v : value_of_entry) {
    out.storage_id.push_back(static_cast<uint32_t>(result.plan.storage_of[v]));
    out.shape.push_back(g.values[v].shape);
    out.dltype.push_back(DLTypeOf(g.values[v].dtype));
  }
  for (int64_t b : result.plan.storage_bytes) out.storage_bytes.push_back(static_cast<uint64_t>(b));
  return graph::GraphToJson(out);
}

Expected<std::string> ParamsBin(const CompileResult& result) {
  const Graph& g = result.graph;
  pkg::ParamsWriter w;
  std::vector<bool> done(g.values.size(), false);
  for (const Node& n : g.nodes) {
    for (int i : n.inputs) {
      if (i < 0 || !g.values[i].is_const() || done[i]) continue;
      done[i] = true;
      const Value& v = g.values[i];
      CT_RETURN_IF_ERROR(w.Add(v.name, DLTypeOf(v.dtype), v.shape, v.data->data(), v.data->size()));
    }
  }
  return w.Serialize();
}

Expected<pkg::Manifest> WriteModelPackage(const CompileResult& result, const std::string& path) {
  CT_ASSIGN_OR_RETURN(std::string params, ParamsBin(result));
  nlohmann::json tuning = {{"model", result.graph.name},
                           {"tuned", result.tuned},
                           {"defaults", result.defaults},
                           {"generated", result.generated},
                           {"activation_bytes", result.plan.activation_bytes},
                           {"scratch_bytes", result.scratch_bytes}};
  return builder::WriteBuildPackage(result.request, result.library, path, GraphJson(result), params,
                                    tuning.dump());
}

}  // namespace crosstune::model
