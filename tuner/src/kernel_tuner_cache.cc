#include "crosstune/tuner/kernel_tuner_cache.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>

#include "crosstune/json_reader.h"

namespace crosstune::tuner {

namespace {

// Orders parameter values: booleans, then numbers (1 and 1.0 alike), then strings, then the rest
// by their JSON text.
int TypeRank(const nlohmann::json& v) {
  if (v.is_boolean()) return 0;
  if (v.is_number()) return 1;
  if (v.is_string()) return 2;
  return 3;
}

bool ValueLess(const nlohmann::json& a, const nlohmann::json& b) {
  int ra = TypeRank(a), rb = TypeRank(b);
  if (ra != rb) return ra < rb;
  switch (ra) {
    case 0:
      return !a.get<bool>() && b.get<bool>();
    case 1:
      return a.get<double>() < b.get<double>();
    case 2:
      return a.get_ref<const std::string&>() < b.get_ref<const std::string&>();
    default:
      return a.dump() < b.dump();
  }
}

bool ValueEqual(const nlohmann::json& a, const nlohmann::json& b) {
  return !ValueLess(a, b) && !ValueLess(b, a);
}

// Python's str() of a parameter value: how Kernel Tuner spells it in a cache key.
std::string PyStr(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return v.dump();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    if (std::isnan(d)) return "nan";
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
    std::string s(buf, end);
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return s;
  }
  return v.dump();
}

Status Malformed(const std::string& source, const std::string& what) {
  return Status(ErrorCode::kInvalidArgument, source + ": not a Kernel Tuner cache file: " + what);
}

// Kernel Tuner appends to a cache file while it tunes and closes the JSON only at the end; a run
// that stopped early leaves `..., "key": {...},` without the closing braces.
// Bounded like all JSON from outside (ParseJson): the error is the whole text's.
Expected<nlohmann::json> ParseCacheText(std::string text) {
  const JsonLimits limits{.max_bytes = kMaxCacheBytes};
  auto j = ParseJson(text, limits);
  if (j.ok()) return j;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  if (!text.empty() && text.back() == ',') text.pop_back();
  if (auto closed = ParseJson(text + "}}", limits); closed.ok()) return closed;
  return j.status();
}

std::vector<std::string> SplitKey(const std::string& key) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t comma; (comma = key.find(',', start)) != std::string::npos; start = comma + 1) {
    parts.push_back(key.substr(start, comma - start));
  }
  parts.push_back(key.substr(start));
  return parts;
}

bool IsKnownFailure(const std::string& s) {
  return s == "CompilationFailedConfig" || s == "RuntimeFailedConfig" || s == "InvalidConfig";
}

// What a cache file says about its entries: the parameters' names in key order, their values
// (tune_params, optional), and the objective and which way it improves.
struct CacheHeader {
  std::vector<std::string> params;
  const nlohmann::json* tune_params = nullptr;  // into the parsed document
  std::string objective = "time";
  bool higher_is_better = false;
};

Expected<CacheHeader> ReadCacheHeader(const nlohmann::json& doc, const std::string& source) {
  CacheHeader h;
  auto keys_it = doc.find("tune_params_keys");
  if (keys_it == doc.end() || !keys_it->is_array() || keys_it->empty()) {
    return Malformed(source, "no 'tune_params_keys' list");
  }
  for (const auto& k : *keys_it) {
    if (!k.is_string()) return Malformed(source, "'tune_params_keys' holds " + JsonExcerpt(k));
    h.params.push_back(k.get<std::string>());
  }
  if (auto it = doc.find("tune_params"); it != doc.end()) {
    if (!it->is_object()) return Malformed(source, "'tune_params' is not an object");
    h.tune_params = &*it;
  }
  if (auto it = doc.find("objective"); it != doc.end()) {
    if (!it->is_string()) return Malformed(source, "'objective' is not a string");
    h.objective = it->get<std::string>();
  }
  if (auto it = doc.find("objective_higher_is_better"); it != doc.end() && it->is_boolean()) {
    h.higher_is_better = it->get<bool>();
  }
  if (auto it = doc.find("problem_size"); it != doc.end()) {
    bool ok = it->is_number() || it->is_string() || it->is_array();
    if (it->is_array()) {
      for (const auto& e : *it) ok = ok && (e.is_number() || e.is_string());
    }
    if (!ok)
      return Malformed(source,
                       "'problem_size' is neither a number nor a list: " + JsonExcerpt(*it));
  }
  return h;
}

// An entry's parameter values into p.values: the entry's own, else read from its key and matched
// against tune_params.
Status ReadPointValues(const CacheHeader& h, const std::string& key, const nlohmann::json& entry,
                       const std::string& source, ReplayPoint& p) {
  const std::vector<std::string>& params = h.params;
  p.values = nlohmann::json::object();
  std::vector<std::string> parts = SplitKey(key);
  for (size_t k = 0; k < params.size(); ++k) {
    const std::string& name = params[k];
    if (auto v = entry.find(name); v != entry.end()) {
      p.values[name] = *v;
      continue;
    }
    // The entry lacks the value: read it from the key, matched against tune_params.
    if (parts.size() != params.size()) {
      return Malformed(source, "cache key '" + key + "' has " + std::to_string(parts.size()) +
                                   " values for " + std::to_string(params.size()) + " parameters");
    }
    const nlohmann::json* match = nullptr;
    if (h.tune_params && h.tune_params->contains(name) && (*h.tune_params)[name].is_array()) {
      for (const auto& cand : (*h.tune_params)[name]) {
        if (PyStr(cand) == parts[k]) match = &cand;
      }
    }
    if (!match) {
      return Malformed(source, "cache entry '" + key + "' has no value of '" + name + "'");
    }
    p.values[name] = *match;
  }
  return Status::Ok();
}

// An entry's objective into p's cost or failure, and its compile and benchmark times.
Status ReadPointCost(const CacheHeader& h, const std::string& key, const nlohmann::json& entry,
                     const std::string& source, ReplayPoint& p) {
  const std::string& objective = h.objective;
  auto obj = entry.find(objective);
  if (obj == entry.end()) {
    return Malformed(source, "cache entry '" + key + "' has no '" + objective + "'");
  }
  if (obj->is_number()) {
    double v = obj->get<double>();
    if (!std::isfinite(v) || v < 0 || (h.higher_is_better && v <= 0)) {
      p.failure = "NonFinite";
    } else {
      p.ok = true;
      p.cost = h.higher_is_better ? 1.0 / v : v;
    }
  } else if (obj->is_string()) {
    p.failure = obj->get<std::string>();
    if (!IsKnownFailure(p.failure)) {
      return Malformed(source, "cache entry '" + key + "' has " + objective + " \"" + p.failure +
                                   "\" (not a number or a known failure)");
    }
  } else {
    return Malformed(source,
                     "cache entry '" + key + "' has " + objective + " " + JsonExcerpt(*obj));
  }
  // Kernel Tuner keeps its times in milliseconds. A value that is not a finite, non-negative
  // number is left out: these fields are for replaying a trial's duration only.
  auto seconds = [&entry](const char* field) -> std::optional<double> {
    auto f = entry.find(field);
    if (f == entry.end() || !f->is_number()) return std::nullopt;
    double ms = f->get<double>();
    if (!std::isfinite(ms) || ms < 0) return std::nullopt;
    return ms / 1e3;
  };
  if (p.ok && objective == "time" && !h.higher_is_better) p.kernel_s = p.cost / 1e3;
  p.build_s = seconds("compile_time");
  p.run_s = seconds("benchmark_time");
  if (auto t = entry.find("times"); t != entry.end() && t->is_array()) {
    for (const auto& ms : *t) {
      if (!ms.is_number() || !std::isfinite(ms.get<double>()) || ms.get<double>() < 0) {
        p.times_s.clear();
        break;
      }
      p.times_s.push_back(ms.get<double>() / 1e3);
    }
  }
  if (auto t = entry.find("timestamp"); t != entry.end() && t->is_string()) {
    p.timestamp = t->get<std::string>();
  }
  if (auto s = entry.find("stopped_early"); s != entry.end() && s->is_boolean()) {
    p.stopped_early = s->get<bool>();
  }
  return Status::Ok();
}

}  // namespace

Expected<KernelTunerCache> ParseKernelTunerCache(std::string text, const std::string& source) {
  auto parsed = ParseCacheText(std::move(text));
  if (!parsed.ok()) return Malformed(source, parsed.status().message());
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) return Malformed(source, "the top level is not an object");
  CT_ASSIGN_OR_RETURN(CacheHeader header, ReadCacheHeader(doc, source));
  auto cache_it = doc.find("cache");
  if (cache_it == doc.end() || !cache_it->is_object())
    return Malformed(source, "no 'cache' object");

  std::vector<ReplayPoint> points;
  points.reserve(cache_it->size());
  for (const auto& [key, entry] : cache_it->items()) {
    if (!entry.is_object()) return Malformed(source, "cache entry '" + key + "' is not an object");
    ReplayPoint p;
    CT_RETURN_IF_ERROR(ReadPointValues(header, key, entry, source, p));
    CT_RETURN_IF_ERROR(ReadPointCost(header, key, entry, source, p));
    points.push_back(std::move(p));
  }
  if (points.empty()) return Malformed(source, "'cache' holds no entries");
  nlohmann::json rest = nlohmann::json::object();
  for (const auto& [name, value] : doc.items()) {
    if (name != "cache") rest[name] = value;
  }
  return KernelTunerCache{std::move(header.params), std::move(points), std::move(rest)};
}

Expected<PointSpace> MakePointSpace(const std::string& source,
                                    const std::vector<ReplayPoint>& points,
                                    std::vector<std::string> params) {
  if (points.empty()) {
    return Status(ErrorCode::kInvalidArgument, source + ": the table has no points");
  }
  if (params.empty()) {
    if (!points.front().values.is_object() || points.front().values.empty()) {
      return Status(ErrorCode::kInvalidArgument, source + ": a point has no parameter values");
    }
    for (const auto& [name, v] : points.front().values.items()) params.push_back(name);
  }
  // One knob per parameter: its sorted unique values.
  std::vector<std::vector<nlohmann::json>> values(params.size());
  for (const ReplayPoint& p : points) {
    if (!p.values.is_object() || p.values.size() != params.size()) {
      return Status(ErrorCode::kInvalidArgument, source + ": point " + JsonExcerpt(p.values) +
                                                     " does not have the parameters of the table");
    }
    for (size_t k = 0; k < params.size(); ++k) {
      auto it = p.values.find(params[k]);
      if (it == p.values.end()) {
        return Status(ErrorCode::kInvalidArgument,
                      source + ": point " + JsonExcerpt(p.values) + " has no '" + params[k] + "'");
      }
      values[k].push_back(*it);
    }
  }
  PointSpace out;
  out.space = std::make_unique<ConfigSpace>();
  for (size_t k = 0; k < params.size(); ++k) {
    auto& v = values[k];
    std::sort(v.begin(), v.end(), ValueLess);
    v.erase(std::unique(v.begin(), v.end(), ValueEqual), v.end());
    CT_RETURN_IF_ERROR(out.space->AddCategoricalJson(params[k], v));
  }
  out.indices.reserve(points.size());
  for (const ReplayPoint& p : points) {
    // Match each value to its knob's choice by value (1 and 1.0 are one value).
    std::vector<uint32_t> choices(params.size());
    for (size_t k = 0; k < params.size(); ++k) {
      const auto& choices_k = out.space->knobs()[k].values;
      auto pos =
          std::lower_bound(choices_k.begin(), choices_k.end(), p.values.at(params[k]), ValueLess);
      choices[k] = static_cast<uint32_t>(pos - choices_k.begin());
    }
    CT_ASSIGN_OR_RETURN(uint64_t index, out.space->IndexOf(choices));
    out.indices.push_back(index);
  }
  out.params = std::move(params);
  return out;
}

}  // namespace crosstune::tuner
