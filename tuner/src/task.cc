#include "crosstune/tuner/task.h"

#include <cmath>
#include <cstdlib>
#include <random>

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
      for (float& x : data) x = dist(rng);
    }
    args.push_back(std::move(data));
  }
  task.ZeroPadding(args);
  return args;
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
