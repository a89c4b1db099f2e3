#include "crosstune/tuner/space.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "crosstune/json_reader.h"

namespace crosstune::tuner {

std::string_view KnobKindName(KnobKind kind) {
  switch (kind) {
    case KnobKind::kSplit:
      return "split";
    case KnobKind::kReorder:
      return "reorder";
    case KnobKind::kAnnotate:
      return "annotate";
    case KnobKind::kCategorical:
      return "categorical";
  }
  return "?";
}

std::string_view AnnotationName(Annotation a) {
  switch (a) {
    case Annotation::kNone:
      return "none";
    case Annotation::kUnroll:
      return "unroll";
    case Annotation::kVectorize:
      return "vectorize";
  }
  return "?";
}

// --- Config ----------------------------------------------------------------------------------

const std::vector<int64_t>& Config::Ints(std::string_view name) const {
  int k = space_ ? space_->KnobIndex(name) : -1;
  if (k < 0) {
    std::fprintf(stderr, "crosstune: internal error: no knob '%.*s'\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return space_->knobs()[k].ints[choices_[k]];
}

const nlohmann::json& Config::Value(std::string_view name) const {
  int k = space_ ? space_->KnobIndex(name) : -1;
  if (k < 0) {
    std::fprintf(stderr, "crosstune: internal error: no knob '%.*s'\n",
                 static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return space_->knobs()[k].values[choices_[k]];
}

nlohmann::json Config::ToJson() const {
  nlohmann::json out = nlohmann::json::object();
  if (!space_) return out;
  const auto& knobs = space_->knobs();
  for (size_t k = 0; k < knobs.size(); ++k) out[knobs[k].name] = knobs[k].values[choices_[k]];
  return out;
}

std::string Config::ToString() const {
  std::string out;
  if (!space_) return out;
  const auto& knobs = space_->knobs();
  for (size_t k = 0; k < knobs.size(); ++k) {
    // A knob added later, at its first choice, is left out: the text of a config made before
    // it stays what it was (kernels print it into their source, which records hash).
    if (choices_[k] == 0 && space_->AddedLater(knobs[k].name)) continue;
    if (!out.empty()) out += ' ';
    out += knobs[k].name + "=" + knobs[k].values[choices_[k]].dump();
  }
  return out;
}

// --- Building the space ------------------------------------------------------------------------

Status ConfigSpace::AddKnob(Knob knob) {
  if (knob.name.empty()) return Status(ErrorCode::kInvalidArgument, "a knob needs a name");
  if (KnobIndex(knob.name) >= 0) {
    return Status(ErrorCode::kInvalidArgument, "knob '" + knob.name + "' is defined twice");
  }
  if (knob.ints.empty()) {
    return Status(ErrorCode::kInvalidArgument, "knob '" + knob.name + "' has no choices");
  }
  assert(knob.values.size() == knob.ints.size() && knob.features.size() == knob.ints.size());
  uint64_t n = knob.size();
  size_ = (size_ > UINT64_MAX / n) ? UINT64_MAX : size_ * n;
  feature_length_ += knob.features.front().size();
  knobs_.push_back(std::move(knob));
  return Status::Ok();
}

namespace {

std::vector<float> ToFloats(const std::vector<int64_t>& v) {
  return std::vector<float>(v.begin(), v.end());
}

bool IsPow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Every way to pick `parts - 1` inner factors under the policy; `rest` is what the outer factors
// still have to cover.
void EnumerateSplits(int64_t rest, int parts_left, const SplitOptions& o,
                     std::vector<int64_t>& inner, std::vector<std::vector<int64_t>>& out) {
  if (parts_left == 0) {
    out.push_back(inner);
    return;
  }
  int64_t hi = rest;
  if (o.max_factor > 0) hi = std::min(hi, o.max_factor);
  for (int64_t f = std::max<int64_t>(1, o.min_factor); f <= hi; ++f) {
    int64_t next_rest;
    if (o.policy == SplitPolicy::kDivisors) {
      if (rest % f != 0) continue;
      next_rest = rest / f;
    } else {
      if (!IsPow2(f)) continue;
      next_rest = (rest + f - 1) / f;
    }
    inner.push_back(f);
    EnumerateSplits(next_rest, parts_left - 1, o, inner, out);
    inner.pop_back();
  }
}

}  // namespace

Status ConfigSpace::AddSplit(std::string name, int64_t extent, int parts,
                             const SplitOptions& options) {
  if (extent < 1 || parts < 1) {
    return Status(ErrorCode::kInvalidArgument,
                  "split '" + name + "': extent and parts must be at least 1");
  }
  std::vector<std::vector<int64_t>> inners;
  if (options.policy == SplitPolicy::kCandidates) {
    for (const auto& c : options.candidates) {
      if (static_cast<int>(c.size()) != parts - 1) {
        return Status(ErrorCode::kInvalidArgument, "split '" + name + "': a candidate needs " +
                                                       std::to_string(parts - 1) +
                                                       " inner factors");
      }
      int64_t prod = 1;
      bool ok = true;
      for (int64_t f : c) {
        if (f < 1) ok = false;
        prod *= std::max<int64_t>(f, 1);
      }
      if (ok && prod <= extent) inners.push_back(c);
    }
  } else {
    std::vector<int64_t> inner;
    EnumerateSplits(extent, parts - 1, options, inner, inners);
  }
  Knob knob;
  knob.name = std::move(name);
  knob.kind = KnobKind::kSplit;
  for (const auto& in : inners) {
    // Inner factors are listed outermost-inner first; the outer factor covers the rest.
    int64_t prod = 1;
    for (int64_t f : in) prod *= f;
    std::vector<int64_t> factors;
    factors.push_back((extent + prod - 1) / prod);
    factors.insert(factors.end(), in.begin(), in.end());
    knob.values.emplace_back(factors);
    knob.features.push_back(ToFloats(factors));
    knob.ints.push_back(std::move(factors));
  }
  if (knob.ints.empty()) {
    return Status(ErrorCode::kInvalidArgument, "split '" + knob.name + "': no factors of " +
                                                   std::to_string(extent) + " fit the policy");
  }
  return AddKnob(std::move(knob));
}

Status ConfigSpace::AddReorder(std::string name, const std::vector<std::string>& axes,
                               const std::vector<std::vector<int64_t>>& candidates) {
  const int64_t n = static_cast<int64_t>(axes.size());
  if (n < 1 || n > 8) {
    return Status(ErrorCode::kInvalidArgument, "reorder '" + name + "': 1 to 8 axes");
  }
  std::vector<std::vector<int64_t>> perms;
  if (candidates.empty()) {
    std::vector<int64_t> p(n);
    std::iota(p.begin(), p.end(), 0);
    do {
      perms.push_back(p);
    } while (std::next_permutation(p.begin(), p.end()));
  } else {
    for (const auto& c : candidates) {
      std::vector<int64_t> sorted = c;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int64_t> id(n);
      std::iota(id.begin(), id.end(), 0);
      if (sorted != id) {
        return Status(ErrorCode::kInvalidArgument,
                      "reorder '" + name + "': a candidate is not a permutation of the axes");
      }
      perms.push_back(c);
    }
  }
  Knob knob;
  knob.name = std::move(name);
  knob.kind = KnobKind::kReorder;
  for (auto& p : perms) {
    nlohmann::json names = nlohmann::json::array();
    for (int64_t i : p) names.push_back(axes[i]);
    knob.values.push_back(names);
    // Features: each axis's position, so "ir before jr" is one comparison for a tree.
    std::vector<float> pos(n);
    for (int64_t i = 0; i < n; ++i) pos[p[i]] = static_cast<float>(i);
    knob.features.push_back(pos);
    knob.ints.push_back(std::move(p));
  }
  return AddKnob(std::move(knob));
}

Status ConfigSpace::AddAnnotate(std::string name, const std::vector<std::string>& axes,
                                const std::vector<Annotation>& options) {
  if (axes.empty() || options.empty()) {
    return Status(ErrorCode::kInvalidArgument, "annotate '" + name + "': axes and options needed");
  }
  Knob knob;
  knob.name = std::move(name);
  knob.kind = KnobKind::kAnnotate;
  uint64_t total = 1;
  for (size_t i = 0; i < axes.size(); ++i) total *= options.size();
  for (uint64_t idx = 0; idx < total; ++idx) {
    std::vector<int64_t> per_axis;
    nlohmann::json value = nlohmann::json::object();
    uint64_t rest = idx;
    for (const auto& axis : axes) {
      Annotation a = options[rest % options.size()];
      rest /= options.size();
      per_axis.push_back(static_cast<int64_t>(a));
      value[axis] = AnnotationName(a);
    }
    knob.values.push_back(value);
    knob.features.push_back(ToFloats(per_axis));
    knob.ints.push_back(std::move(per_axis));
  }
  return AddKnob(std::move(knob));
}

Status ConfigSpace::AddCategorical(std::string name, const std::vector<int64_t>& values) {
  Knob knob;
  knob.name = std::move(name);
  knob.kind = KnobKind::kCategorical;
  for (int64_t v : values) {
    knob.ints.push_back({v});
    knob.values.emplace_back(v);
    knob.features.push_back({static_cast<float>(v)});
  }
  return AddKnob(std::move(knob));
}

Status ConfigSpace::AddCategoricalJson(std::string name,
                                       const std::vector<nlohmann::json>& values) {
  Knob knob;
  knob.name = std::move(name);
  knob.kind = KnobKind::kCategorical;
  // Values that are all numeric arrays of one length (a split or an order read back from a log)
  // keep their numbers as features; anything else has one feature per value.
  size_t array_len = 0;
  bool numeric_arrays = !values.empty() && values.front().is_array();
  if (numeric_arrays) array_len = values.front().size();
  for (const auto& v : values) {
    if (!v.is_array() || v.size() != array_len) {
      numeric_arrays = false;
      break;
    }
    for (const auto& e : v) numeric_arrays = numeric_arrays && e.is_number();
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& v = values[i];
    if (numeric_arrays) {
      std::vector<int64_t> ints;
      std::vector<float> feats;
      for (const auto& e : v) {
        ints.push_back(e.is_number_integer() ? e.get<int64_t>() : static_cast<int64_t>(i));
        feats.push_back(static_cast<float>(e.get<double>()));
      }
      knob.ints.push_back(std::move(ints));
      knob.values.push_back(v);
      knob.features.push_back(std::move(feats));
      continue;
    }
    float feature = static_cast<float>(i);  // strings and others: their position
    int64_t as_int = static_cast<int64_t>(i);
    if (v.is_number_integer()) {
      as_int = v.get<int64_t>();
      feature = static_cast<float>(as_int);
    } else if (v.is_number()) {
      feature = static_cast<float>(v.get<double>());
    } else if (v.is_boolean()) {
      as_int = v.get<bool>() ? 1 : 0;
      feature = static_cast<float>(as_int);
    }
    knob.ints.push_back({as_int});
    knob.values.push_back(v);
    knob.features.push_back({feature});
  }
  return AddKnob(std::move(knob));
}

void ConfigSpace::AddConstraint(std::string name, Predicate predicate) {
  constraints_.emplace_back(std::move(name), std::move(predicate));
}

Status ConfigSpace::Pin(std::string_view name, const nlohmann::json& value) {
  const int k = KnobIndex(name);
  if (k < 0) {
    std::string names;
    for (const auto& kn : knobs_) names += (names.empty() ? "" : ", ") + kn.name;
    return Status(ErrorCode::kNotFound,
                  "pin: no knob '" + std::string(name) + "' (knobs: " + names + ")");
  }
  const auto& vals = knobs_[k].values;
  auto pos = std::find(vals.begin(), vals.end(), value);
  if (pos == vals.end()) {
    std::string choices;
    for (const auto& v : vals) choices += (choices.empty() ? "" : ", ") + v.dump();
    return Status(ErrorCode::kNotFound, "pin: knob '" + std::string(name) + "' has no choice " +
                                            JsonExcerpt(value) + " (choices: " + choices + ")");
  }
  const auto choice = static_cast<uint32_t>(pos - vals.begin());
  AddConstraint("pin " + std::string(name) + "=" + value.dump(),
                [k, choice](const Config& c) { return c.choices()[k] == choice; });
  return Status::Ok();
}

// --- Points ------------------------------------------------------------------------------------

const Knob* ConfigSpace::FindKnob(std::string_view name) const {
  int k = KnobIndex(name);
  return k < 0 ? nullptr : &knobs_[k];
}

int ConfigSpace::KnobIndex(std::string_view name) const {
  for (size_t k = 0; k < knobs_.size(); ++k) {
    if (knobs_[k].name == name) return static_cast<int>(k);
  }
  return -1;
}

Config ConfigSpace::Get(uint64_t index) const {
  Config c;
  c.space_ = this;
  c.index_ = index;
  c.choices_.resize(knobs_.size());
  for (size_t k = 0; k < knobs_.size(); ++k) {
    uint64_t n = knobs_[k].size();
    c.choices_[k] = static_cast<uint32_t>(index % n);
    index /= n;
  }
  return c;
}

Expected<uint64_t> ConfigSpace::IndexOf(const std::vector<uint32_t>& choices) const {
  if (choices.size() != knobs_.size()) {
    return Status(ErrorCode::kInvalidArgument, "config has " + std::to_string(choices.size()) +
                                                   " choices, the space has " +
                                                   std::to_string(knobs_.size()) + " knobs");
  }
  uint64_t index = 0;
  for (size_t k = knobs_.size(); k-- > 0;) {
    if (choices[k] >= knobs_[k].size()) {
      return Status(ErrorCode::kInvalidArgument, "choice " + std::to_string(choices[k]) +
                                                     " is out of range for knob '" +
                                                     knobs_[k].name + "'");
    }
    index = index * knobs_[k].size() + choices[k];
  }
  return index;
}

Status ConfigSpace::MarkAddedLater(std::string_view name) {
  if (knobs_.empty() || knobs_.back().name != name) {
    return Status(ErrorCode::kInvalidArgument,
                  "a knob added later must be the last one: " + std::string(name));
  }
  // Knobs added later, one after another, are the last few.
  added_later_.emplace_back(name);
  return Status::Ok();
}

bool ConfigSpace::AddedLater(std::string_view name) const {
  return std::find(added_later_.begin(), added_later_.end(), name) != added_later_.end();
}

Expected<Config> ConfigSpace::FromJson(const nlohmann::json& values) const {
  if (!values.is_object()) {
    return Status(ErrorCode::kInvalidArgument, "config values must be a JSON object");
  }
  std::vector<uint32_t> choices(knobs_.size());
  for (size_t k = 0; k < knobs_.size(); ++k) {
    auto it = values.find(knobs_[k].name);
    if (it == values.end() &&
        std::find(added_later_.begin(), added_later_.end(), knobs_[k].name) != added_later_.end()) {
      choices[k] = 0;
      continue;
    }
    if (it == values.end()) {
      return Status(ErrorCode::kNotFound, "config has no value for knob '" + knobs_[k].name + "'");
    }
    const auto& vals = knobs_[k].values;
    auto pos = std::find(vals.begin(), vals.end(), *it);
    if (pos == vals.end()) {
      return Status(ErrorCode::kNotFound,
                    "knob '" + knobs_[k].name + "' has no choice " + JsonExcerpt(*it));
    }
    choices[k] = static_cast<uint32_t>(pos - vals.begin());
  }
  CT_ASSIGN_OR_RETURN(uint64_t index, IndexOf(choices));
  return Get(index);
}

bool ConfigSpace::IsValid(const Config& config) const {
  for (const auto& [name, pred] : constraints_) {
    if (!pred(config)) return false;
  }
  return true;
}

Status ConfigSpace::Check(const Config& config) const {
  for (const auto& [name, pred] : constraints_) {
    if (!pred(config)) {
      return Status(ErrorCode::kInvalidArgument,
                    "constraint '" + name + "' fails for " + config.ToString());
    }
  }
  return Status::Ok();
}

uint64_t ConfigSpace::RandomIndex(std::mt19937_64& rng) const {
  if (size_ == UINT64_MAX) return rng();
  return std::uniform_int_distribution<uint64_t>(0, size_ - 1)(rng);
}

std::optional<uint64_t> ConfigSpace::Neighbour(const Config& from, std::mt19937_64& rng,
                                               int tries) const {
  std::vector<size_t> movable;
  for (size_t k = 0; k < knobs_.size(); ++k) {
    if (knobs_[k].size() > 1) movable.push_back(k);
  }
  if (movable.empty()) return std::nullopt;
  for (int t = 0; t < tries; ++t) {
    std::vector<uint32_t> choices = from.choices();
    // Mostly one knob; every fourth try two, to step out of a valid point's invalid surround.
    int changes = (t % 4 == 3 && movable.size() > 1) ? 2 : 1;
    for (int c = 0; c < changes; ++c) {
      size_t k = movable[std::uniform_int_distribution<size_t>(0, movable.size() - 1)(rng)];
      uint32_t n = static_cast<uint32_t>(knobs_[k].size());
      uint32_t step = std::uniform_int_distribution<uint32_t>(1, n - 1)(rng);
      choices[k] = (choices[k] + step) % n;
    }
    auto index = IndexOf(choices);
    if (!index.ok() || *index == from.index()) continue;
    if (IsValid(Get(*index))) return *index;
  }
  return std::nullopt;
}

std::vector<float> ConfigSpace::Features(const Config& config) const {
  std::vector<float> out;
  out.reserve(feature_length_);
  for (size_t k = 0; k < knobs_.size(); ++k) {
    const auto& f = knobs_[k].features[config.choices()[k]];
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

// --- Sampling without replacement ------------------------------------------------------------

UniqueSampler::UniqueSampler(const ConfigSpace& space, uint64_t seed) : space_(space), rng_(seed) {}

void UniqueSampler::Exclude(uint64_t index) { seen_.insert(index); }

std::optional<uint64_t> UniqueSampler::Next() {
  const uint64_t n = space_.size();
  for (uint64_t skips = 0; cursor_ < n && skips < kMaxSkips; ++skips) {
    // One step of Fisher-Yates: swap a random later position into the cursor's place.
    uint64_t j = std::uniform_int_distribution<uint64_t>(cursor_, n - 1)(rng_);
    auto at = [&](uint64_t pos) {
      auto it = swapped_.find(pos);
      return it == swapped_.end() ? pos : it->second;
    };
    uint64_t picked = at(j);
    swapped_[j] = at(cursor_);
    swapped_.erase(cursor_);
    ++cursor_;
    if (seen_.count(picked)) continue;
    seen_.insert(picked);
    if (space_.IsValid(space_.Get(picked))) return picked;
  }
  return std::nullopt;
}

}  // namespace crosstune::tuner
