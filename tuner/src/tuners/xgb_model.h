// The xgb tuner's cost model: gradient-boosted trees over fixed-length features, through
// XGBoost's C API. Apart from the search (xgb.cc) so either can change alone.
//
// Thread-safety: one thread per CostModel.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "crosstune/status.h"

namespace crosstune::tuner::internal {

// The one checking helper for XGBoost C API calls: kInternal with XGBoost's own message
// ("xgboost: XGBoosterUpdateOneIter: Check failed: ...") when `rc` is not 0.
Status XgbCheck(int rc, std::string_view call);

struct CostModelOptions {
  // "ndcg" (rank:ndcg), "rank" (rank:pairwise) or "reg" (reg:squarederror).
  std::string objective = "ndcg";
  int rounds = 60;
  uint64_t seed = 1;
};

// A row-major training set: `rows` rows of `cols` features, a label per row (higher is better),
// and, for ranking, the sizes of consecutive groups of rows (labels compare only within one).
struct TrainingSet {
  std::vector<float> x;
  size_t cols = 0;
  std::vector<float> labels;
  std::vector<unsigned> groups;
  size_t rows() const { return labels.size(); }
};

class CostModel {
 public:
  explicit CostModel(CostModelOptions options);
  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // Trains a new model; the old one is kept when this fails.
  Status Fit(const TrainingSet& data);
  bool fitted() const { return booster_ != nullptr; }
  // Scores of `rows` rows of the fitted model's feature length (higher is better).
  Expected<std::vector<float>> Predict(const std::vector<float>& x, size_t rows) const;

 private:
  CostModelOptions options_;
  void* booster_ = nullptr;  // BoosterHandle
  size_t cols_ = 0;
};

}  // namespace crosstune::tuner::internal
