// Config spaces: the knobs of a kernel template and the points of their product.
//
//   ConfigSpace s;
//   s.AddSplit("tile_k", 1024, 2, {.policy = SplitPolicy::kPow2, .min_factor = 16});
//   s.AddReorder("order", {"jr", "ir"});
//   s.AddCategorical("unroll", {1, 2, 4, 8});
//   s.AddConstraint("regs", [](const Config& c) { return c.Int("mr") * c.Int("nr") <= 28; });
//   Config c = s.Get(12345);                 // mixed-radix index -> one choice per knob
//   uint64_t i = s.IndexOf(c.choices());     // and back
//
// Every knob is a list of choices; a choice holds integers (a split's factors, a permutation,
// one annotation per axis, a categorical value's number) and its JSON form for records. A point
// of the space is one choice per knob, numbered in mixed radix with the first knob the fastest
// digit. Constraints are predicates checked on demand: nothing is ever stored per point, so
// spaces of 10^9 points and more cost no memory (AutoTVM's multi_filter allocates a cache over
// the whole range).
//
// Thread-safety: a ConfigSpace is built by one thread; once built, its const methods may be
// called from any number of threads. A Config points at its space, which must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::tuner {

enum class KnobKind { kSplit, kReorder, kAnnotate, kCategorical };
std::string_view KnobKindName(KnobKind kind);

struct Knob {
  std::string name;
  KnobKind kind = KnobKind::kCategorical;
  std::vector<std::vector<int64_t>> ints;    // per choice
  std::vector<nlohmann::json> values;        // per choice, as records show it
  std::vector<std::vector<float>> features;  // per choice, for cost models
  size_t size() const { return ints.size(); }
};

enum class SplitPolicy {
  kDivisors,    // every factor divides the extent: the product of all factors is the extent
  kPow2,        // inner factors are powers of two; the outermost takes the remainder (ceil)
  kCandidates,  // the inner factors are given explicitly
};

struct SplitOptions {
  SplitPolicy policy = SplitPolicy::kDivisors;
  int64_t max_factor = 0;  // 0: no limit (inner factors only)
  int64_t min_factor = 1;  // inner factors only
  // kCandidates: each entry lists the parts-1 inner factors (innermost last).
  std::vector<std::vector<int64_t>> candidates;
};

// Annotation of one loop axis.
enum class Annotation : int64_t { kNone = 0, kUnroll = 1, kVectorize = 2 };
std::string_view AnnotationName(Annotation a);

class ConfigSpace;

// One point of a space: one choice per knob.
class Config {
 public:
  Config() = default;
  uint64_t index() const { return index_; }
  const std::vector<uint32_t>& choices() const { return choices_; }
  const ConfigSpace* space() const { return space_; }
  // The chosen integers of knob `name` (a split: outermost factor first). Dies on unknown names:
  // templates name their own knobs.
  const std::vector<int64_t>& Ints(std::string_view name) const;
  // The first integer of the choice (a categorical value, a 2-way split's outer factor).
  int64_t Int(std::string_view name) const { return Ints(name).front(); }
  // The JSON form of knob `name`'s choice.
  const nlohmann::json& Value(std::string_view name) const;
  // {"knob": value, ...} in knob order.
  nlohmann::json ToJson() const;
  // "tile_k=[4,256] order=[1,0] unroll=4"; a knob added later (MarkAddedLater) only when it is
  // not at its first choice.
  std::string ToString() const;

 private:
  friend class ConfigSpace;
  const ConfigSpace* space_ = nullptr;
  uint64_t index_ = 0;
  std::vector<uint32_t> choices_;
};

class ConfigSpace {
 public:
  using Predicate = std::function<bool(const Config&)>;

  // Splits an axis of `extent` into `parts` factors (outermost first). Refused (kInvalidArgument)
  // when no split fits the policy.
  Status AddSplit(std::string name, int64_t extent, int parts, const SplitOptions& options = {});
  // Orders of `axes`: every permutation, or only `candidates` (each a permutation of 0..n-1).
  Status AddReorder(std::string name, const std::vector<std::string>& axes,
                    const std::vector<std::vector<int64_t>>& candidates = {});
  // One annotation per axis out of `options`.
  Status AddAnnotate(std::string name, const std::vector<std::string>& axes,
                     const std::vector<Annotation>& options);
  // Integer values, or any JSON values (strings, floats, booleans) for spaces read from others.
  Status AddCategorical(std::string name, const std::vector<int64_t>& values);
  Status AddCategoricalJson(std::string name, const std::vector<nlohmann::json>& values);
  // A constraint across knobs; a point is valid when every constraint holds.
  void AddConstraint(std::string name, Predicate predicate);
  // Keeps only the points whose knob `name` has the choice `value` (its JSON form, as records
  // show it): a constraint named "pin name=value", so the index numbering stays the same.
  // kNotFound naming the knob's choices when the knob or the value is not one of them.
  Status Pin(std::string_view name, const nlohmann::json& value);
  // Marks knob `name` (the last one added, so its first choice keeps every earlier point's
  // index) as added to a template after records were made: FromJson reads its absence as its
  // first choice, so those records still name their config. kInvalidArgument when `name` is not
  // the last knob.
  Status MarkAddedLater(std::string_view name);
  bool AddedLater(std::string_view name) const;

  const std::vector<Knob>& knobs() const { return knobs_; }
  const Knob* FindKnob(std::string_view name) const;
  int KnobIndex(std::string_view name) const;  // -1 when absent
  // The number of points, valid or not. Saturates at UINT64_MAX (never for real templates).
  uint64_t size() const { return size_; }

  Config Get(uint64_t index) const;
  // kInvalidArgument when a choice is out of range or the count is wrong.
  Expected<uint64_t> IndexOf(const std::vector<uint32_t>& choices) const;
  // The point whose knob values equal `values` ({"knob": value}); NotFound when a value is not
  // one of the knob's choices, or a knob is absent (one MarkAddedLater names takes its first).
  Expected<Config> FromJson(const nlohmann::json& values) const;

  bool IsValid(const Config& config) const;
  // Ok, or kInvalidArgument naming the first constraint that fails.
  Status Check(const Config& config) const;

  // A uniformly random point (valid or not).
  uint64_t RandomIndex(std::mt19937_64& rng) const;
  // A valid point that differs from `from` in one knob (two when no single change is valid),
  // drawn at random; nullopt when none was found in `tries` draws.
  std::optional<uint64_t> Neighbour(const Config& from, std::mt19937_64& rng, int tries = 64) const;

  // Features of a point for cost models: each knob's choice features, in knob order. Always
  // the same length for one space.
  std::vector<float> Features(const Config& config) const;
  size_t feature_length() const { return feature_length_; }

 private:
  Status AddKnob(Knob knob);
  std::vector<Knob> knobs_;
  std::vector<std::string> added_later_;  // MarkAddedLater's knobs
  std::vector<std::pair<std::string, Predicate>> constraints_;
  uint64_t size_ = 1;
  size_t feature_length_ = 0;
};

// Draws valid points without replacement, uniformly: a Fisher-Yates shuffle of 0..size-1 done
// lazily, keeping only the swapped positions, so memory grows with the draws and never with the
// space, and the last valid point comes out as surely as the first. Invalid points are skipped.
//
// Not thread-safe.
class UniqueSampler {
 public:
  // Next() gives up after this many invalid draws in a row (a space that is almost all invalid).
  static constexpr uint64_t kMaxSkips = 1'000'000;
  UniqueSampler(const ConfigSpace& space, uint64_t seed);
  // Marks `index` as drawn (e.g. measured in an earlier run).
  void Exclude(uint64_t index);
  bool Seen(uint64_t index) const { return seen_.count(index) != 0; }
  // The next valid point not drawn or excluded; nullopt when none is left (or, in a large
  // space, none was found in many tries).
  std::optional<uint64_t> Next();
  std::mt19937_64& rng() { return rng_; }

 private:
  const ConfigSpace& space_;
  std::mt19937_64 rng_;
  std::unordered_set<uint64_t> seen_;               // drawn or excluded
  std::unordered_map<uint64_t, uint64_t> swapped_;  // shuffle positions that moved
  uint64_t cursor_ = 0;
};

}  // namespace crosstune::tuner
