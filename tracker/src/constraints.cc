#include "crosstune/tracker/constraints.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

namespace crosstune::tracker {
namespace {

// Splits "name<op>value"; op is one of = != >= <=, or the whole text is "+feature".
struct Constraint {
  std::string name, op, value;
};

std::optional<Constraint> Split(const std::string& text) {
  if (text.size() > 1 && text[0] == '+') return Constraint{"feature", "+", text.substr(1)};
  for (const char* op : {"!=", ">=", "<=", "="}) {
    size_t at = text.find(op);
    if (at != std::string::npos && at > 0) {
      std::string value = text.substr(at + std::string_view(op).size());
      if (value.empty()) return std::nullopt;
      return Constraint{text.substr(0, at), op, value};
    }
  }
  return std::nullopt;
}

std::optional<double> Number(const std::string& s) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  // "nan" and "inf" parse, but nan compares false both ways, so "cores>=nan" would match
  // every device: only finite numbers are numbers here.
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::string> Attribute(const std::map<std::string, std::string>& tags,
                                     const msg::DeviceInfo& info, const std::string& name) {
  if (auto it = tags.find(name); it != tags.end()) return it->second;
  if (name == "arch") return info.arch;
  if (name == "triple") return info.triple;
  if (name == "cpu") return info.cpu_model;
  if (name == "cores") return std::to_string(info.cores);
  if (name == "memory_mb") return std::to_string(info.memory_bytes >> 20);
  if (name == "gpus") return std::to_string(info.gpus.size());
  if (name == "gpu_arch") return info.gpus.empty() ? std::string() : info.gpus.front().arch;
  if (name == "os") return info.os;
  if (name == "version") return info.version;
  return std::nullopt;
}

}  // namespace

Status ParseConstraint(const std::string& text) {
  auto c = Split(text);
  if (!c) {
    return Status(
        ErrorCode::kInvalidArgument,
        "bad constraint '" + text +
            "': expected name=value, name!=value, name>=number, name<=number or +feature");
  }
  if ((c->op == ">=" || c->op == "<=") && !Number(c->value)) {
    return Status(ErrorCode::kInvalidArgument,
                  "bad constraint '" + text + "': " + c->op + " needs a number");
  }
  return Status::Ok();
}

bool MatchesConstraints(const std::map<std::string, std::string>& tags, const msg::DeviceInfo& info,
                        const std::vector<std::string>& constraints) {
  for (const std::string& text : constraints) {
    auto c = Split(text);
    if (!c) return false;
    if (c->op == "+") {
      const auto& f = info.cpu_features;
      if (std::find(f.begin(), f.end(), c->value) == f.end() && !tags.count(c->value)) {
        return false;
      }
      continue;
    }
    auto value = Attribute(tags, info, c->name);
    if (c->op == "=") {
      if (!value || *value != c->value) return false;
    } else if (c->op == "!=") {
      if (value && *value == c->value) return false;
    } else {
      if (!value) return false;
      auto have = Number(*value);
      auto want = Number(c->value);
      if (!have || !want) return false;
      if (c->op == ">=" ? *have < *want : *have > *want) return false;
    }
  }
  return true;
}

}  // namespace crosstune::tracker
