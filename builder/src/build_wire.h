// What travels between the pool and a worker over their socketpair, and what a build cache entry
// holds (build_cache.h): requests and results as msgpack arrays of their CT_WIRE_FIELDS (wire.h).
// Internal to the builder.
#pragma once

#include <string>
#include <vector>

#include "crosstune/builder/builder.h"
#include "crosstune/wire.h"

namespace crosstune::builder::wire {

struct WireFunction {
  std::string name, signature, symbol;
  std::vector<std::string> grid, block;
  uint32_t shared_mem_bytes = 0;
  CT_WIRE_FIELDS(name, signature, symbol, grid, block, shared_mem_bytes)
};

struct WireRequest {
  std::string source;
  uint8_t kind = 0;  // TargetKind
  std::string triple, cpu, cuda_arch;
  std::vector<std::string> attrs, flags;
  std::string name;
  uint8_t debug_action = 0;
  std::string source_name;
  bool object_only = false;
  std::vector<std::string> link_objects;
  CT_WIRE_FIELDS(source, kind, triple, cpu, cuda_arch, attrs, flags, name, debug_action,
                 source_name, object_only, link_objects)
};

struct WireResult {
  uint8_t code = 0;
  std::string message, diagnostics, library, ptx;
  std::vector<WireFunction> functions;
  std::vector<std::string> features;
  double seconds = 0;
  CT_WIRE_FIELDS(code, message, diagnostics, library, ptx, functions, features, seconds)
};

inline constexpr uint32_t kMaxWorkerFrame = 1u << 30;

inline WireRequest ToWire(const BuildRequest& r) {
  WireRequest w;
  w.source = r.source;
  w.kind = static_cast<uint8_t>(r.target.kind);
  w.triple = r.target.triple;
  w.cpu = r.target.cpu;
  w.cuda_arch = r.target.cuda_arch;
  w.attrs = r.target.attrs;
  w.flags = r.flags;
  w.name = r.name;
  w.debug_action = static_cast<uint8_t>(r.debug_action);
  w.source_name = r.source_name;
  w.object_only = r.object_only;
  w.link_objects = r.link_objects;
  return w;
}

inline BuildRequest FromWire(const WireRequest& w) {
  BuildRequest r;
  r.source = w.source;
  r.target.kind = static_cast<TargetKind>(w.kind);
  r.target.triple = w.triple;
  r.target.cpu = w.cpu;
  r.target.cuda_arch = w.cuda_arch;
  r.target.attrs = w.attrs;
  r.flags = w.flags;
  r.name = w.name;
  r.debug_action = static_cast<BuildRequest::DebugAction>(w.debug_action);
  r.source_name = w.source_name;
  r.object_only = w.object_only;
  r.link_objects = w.link_objects;
  return r;
}

inline WireResult ToWire(const BuildResult& r) {
  WireResult w;
  w.code = static_cast<uint8_t>(r.status.code());
  w.message = r.status.message();
  w.diagnostics = r.diagnostics;
  w.library = r.library;
  w.ptx = r.ptx;
  for (const auto& f : r.functions) {
    w.functions.push_back({f.name, f.signature, f.symbol, f.grid, f.block, f.shared_mem_bytes});
  }
  w.features = r.required_features;
  w.seconds = r.build_seconds;
  return w;
}

inline BuildResult FromWire(WireResult w) {
  BuildResult r;
  r.status = w.code == 0 ? Status::Ok() : Status(static_cast<ErrorCode>(w.code), w.message);
  r.diagnostics = std::move(w.diagnostics);
  r.library = std::move(w.library);
  r.ptx = std::move(w.ptx);
  for (auto& f : w.functions) {
    r.functions.push_back({f.name, f.signature, f.symbol, f.grid, f.block, f.shared_mem_bytes});
  }
  r.required_features = std::move(w.features);
  r.build_seconds = w.seconds;
  return r;
}

}  // namespace crosstune::builder::wire
