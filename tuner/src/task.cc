#include "crosstune/tuner/task.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>

#include "crosstune/crypto.h"

namespace crosstune::tuner {

std::string GeneratorHash(const Task& task, const Config& config) {
  return Sha256Hex(task.Generate(config)).substr(0, 16);
}

bool MadeByThisGenerator(const Task& task, const Record& record) {
  if (record.generator.empty()) return true;
  auto config = task.space().FromJson(record.config_values);
  return config.ok() && task.space().IsValid(*config) &&
         GeneratorHash(task, *config) == record.generator;
}

Status Task::CheckLimits(const Config& config, const msg::DeviceInfo& device) const {
  (void)config;
  (void)device;
  return Status::Ok();
}

Expected<std::vector<int64_t>> ParseShape(const std::string& text) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string part =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0') {
      return Status(ErrorCode::kInvalidArgument,
                    "shape '" + text + "' is not a comma-separated list of integers");
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

HostArgs MakeInputs(const Task& task, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  HostArgs args;
  for (const auto& spec : task.args()) {
    std::vector<float> data(spec.elements(), 0.0f);
    if (!spec.output) {
      if (spec.dtype.code == kDLFloat) {
        for (float& x : data) x = dist(rng);
      } else {
        const bool is_signed = spec.dtype.code == kDLInt;
        const int64_t lo = spec.dtype.bits == 8 ? (is_signed ? -128 : 0) : -(int64_t{1} << 16);
        const int64_t hi = spec.dtype.bits == 8 ? (is_signed ? 127 : 255) : int64_t{1} << 16;
        std::uniform_int_distribution<int64_t> ints(lo, hi);
        for (float& x : data) x = static_cast<float>(ints(rng));
      }
    }
    args.push_back(std::move(data));
  }
  task.ZeroPadding(args);
  return args;
}

namespace {

template <typename T>
void Store(const std::vector<float>& values, std::vector<uint8_t>& out) {
  out.resize(values.size() * sizeof(T));
  for (size_t i = 0; i < values.size(); ++i) {
    T v;
    if constexpr (std::is_floating_point_v<T>) {
      v = values[i];
    } else {
      const double lo = static_cast<double>(std::numeric_limits<T>::min());
      const double hi = static_cast<double>(std::numeric_limits<T>::max());
      v = static_cast<T>(std::clamp(std::nearbyint(static_cast<double>(values[i])), lo, hi));
    }
    std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
  }
}

template <typename T>
std::vector<float> Load(const std::vector<uint8_t>& bytes, uint64_t n) {
  std::vector<float> out(n);
  for (uint64_t i = 0; i < n && (i + 1) * sizeof(T) <= bytes.size(); ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
  return out;
}

}  // namespace

std::vector<uint8_t> ArgBytes(const ArgSpec& spec, const std::vector<float>& values) {
  std::vector<uint8_t> out;
  const DLDataType t = spec.dtype;
  if (t.code == kDLInt && t.bits == 8) {
    Store<int8_t>(values, out);
  } else if (t.code == kDLUInt && t.bits == 8) {
    Store<uint8_t>(values, out);
  } else if (t.code == kDLInt && t.bits == 32) {
    Store<int32_t>(values, out);
  } else {
    Store<float>(values, out);
  }
  return out;
}

std::vector<float> ArgValues(const ArgSpec& spec, const std::vector<uint8_t>& bytes) {
  const DLDataType t = spec.dtype;
  if (t.code == kDLInt && t.bits == 8) return Load<int8_t>(bytes, spec.elements());
  if (t.code == kDLUInt && t.bits == 8) return Load<uint8_t>(bytes, spec.elements());
  if (t.code == kDLInt && t.bits == 32) return Load<int32_t>(bytes, spec.elements());
  return Load<float>(bytes, spec.elements());
}

std::vector<uint8_t> UnwrittenBytes(const ArgSpec& spec) {
  if (spec.dtype.code == kDLFloat) {
    return ArgBytes(spec, std::vector<float>(spec.elements(), std::nanf("")));
  }
  return std::vector<uint8_t>(spec.elements() * (spec.dtype.bits / 8), 0x5A);
}

Status CompareOutputs(const Task& task, const HostArgs& got, const HostArgs& want) {
  const auto specs = task.args();
  for (size_t a = 0; a < specs.size(); ++a) {
    if (!specs[a].output) continue;
    const auto& g = got[a];
    const auto& w = want[a];
    if (g.size() != w.size()) {
      return Status(ErrorCode::kInvalidArgument, specs[a].name + " has " +
                                                     std::to_string(g.size()) + " elements, want " +
                                                     std::to_string(w.size()));
    }
    uint64_t bad = 0, first = 0;
    for (uint64_t i = 0; i < g.size(); ++i) {
      double diff = std::fabs(static_cast<double>(g[i]) - w[i]);
      // NaN compares false, so it counts as bad too.
      if (!(diff <= task.atol() + task.rtol() * std::fabs(w[i]))) {
        if (bad++ == 0) first = i;
      }
    }
    if (bad) {
      std::string where;
      uint64_t rest = first;
      const auto& shape = specs[a].shape;
      std::vector<uint64_t> idx(shape.size());
      for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = rest % shape[d];
        rest /= shape[d];
      }
      for (size_t d = 0; d < idx.size(); ++d) where += (d ? "," : "") + std::to_string(idx[d]);
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s[%s] = %.6g, reference %.6g (%llu of %llu elements differ)",
                    specs[a].name.c_str(), where.c_str(), g[first], w[first],
                    static_cast<unsigned long long>(bad),
                    static_cast<unsigned long long>(g.size()));
      return Status(ErrorCode::kInvalidArgument, buf);
    }
  }
  return Status::Ok();
}

}  // namespace crosstune::tuner
