#include "xgb_model.h"

#include <xgboost/c_api.h>

#include <cmath>
#include <mutex>
#include <numeric>

namespace crosstune::tuner::internal {

Status XgbCheck(int rc, std::string_view call) {
  if (rc == 0) return Status::Ok();
  const char* why = XGBGetLastError();
  return Status(ErrorCode::kInternal,
                "xgboost: " + std::string(call) + ": " + (why && *why ? why : "failed"));
}

namespace {

// Owns a DMatrixHandle.
class Matrix {
 public:
  ~Matrix() {
    if (handle_) XGDMatrixFree(handle_);
  }
  Status Create(const std::vector<float>& x, size_t rows, size_t cols) {
    if (rows == 0 || cols == 0 || x.size() != rows * cols) {
      return Status(ErrorCode::kInvalidArgument, "cost model: " + std::to_string(x.size()) +
                                                     " feature values for " + std::to_string(rows) +
                                                     " rows of " + std::to_string(cols));
    }
    return XgbCheck(XGDMatrixCreateFromMat(x.data(), rows, cols, std::nanf(""), &handle_),
                    "XGDMatrixCreateFromMat");
  }
  DMatrixHandle get() const { return handle_; }

 private:
  DMatrixHandle handle_ = nullptr;
};

void QuietOnce() {
  static std::once_flag once;
  std::call_once(once, [] { XGBSetGlobalConfig(R"({"verbosity": 0})"); });
}

}  // namespace

CostModel::CostModel(CostModelOptions options) : options_(std::move(options)) { QuietOnce(); }

CostModel::~CostModel() {
  if (booster_) XGBoosterFree(booster_);
}

Status CostModel::Fit(const TrainingSet& data) {
  Matrix train;
  CT_RETURN_IF_ERROR(train.Create(data.x, data.rows(), data.cols));
  CT_RETURN_IF_ERROR(
      XgbCheck(XGDMatrixSetFloatInfo(train.get(), "label", data.labels.data(), data.labels.size()),
               "XGDMatrixSetFloatInfo(label)"));
  std::string objective;
  if (options_.objective == "ndcg") {
    objective = "rank:ndcg";
  } else if (options_.objective == "rank") {
    objective = "rank:pairwise";
  } else if (options_.objective == "reg") {
    objective = "reg:squarederror";
  } else {
    return Status(ErrorCode::kInvalidArgument,
                  "cost model: unknown objective '" + options_.objective + "' (ndcg, rank, reg)");
  }
  const bool rank = objective.rfind("rank:", 0) == 0;
  if (rank) {
    std::vector<unsigned> groups = data.groups;
    if (groups.empty()) groups.push_back(static_cast<unsigned>(data.rows()));
    if (std::accumulate(groups.begin(), groups.end(), size_t{0}) != data.rows()) {
      return Status(ErrorCode::kInvalidArgument, "cost model: group sizes do not add up to rows");
    }
    CT_RETURN_IF_ERROR(
        XgbCheck(XGDMatrixSetUIntInfo(train.get(), "group", groups.data(), groups.size()),
                 "XGDMatrixSetUIntInfo(group)"));
  }

  BoosterHandle booster = nullptr;
  DMatrixHandle mats[] = {train.get()};
  CT_RETURN_IF_ERROR(XgbCheck(XGBoosterCreate(mats, 1, &booster), "XGBoosterCreate"));
  auto fail = [&](Status s) {
    XGBoosterFree(booster);
    return s;
  };
  // Small trees on few samples: the model must rank well after one batch, not fit noise.
  const std::pair<const char*, std::string> params[] = {
      {"objective", objective},
      {"max_depth", "3"},
      {"eta", "0.3"},
      {"gamma", "0.0001"},
      {"min_child_weight", rank ? "0.01" : "1"},
      {"subsample", "1"},
      {"lambda", "1"},
      {"nthread", "1"},
      {"seed", std::to_string(options_.seed & 0x7fffffff)},
  };
  for (const auto& [name, value] : params) {
    Status s = XgbCheck(XGBoosterSetParam(booster, name, value.c_str()),
                        std::string("XGBoosterSetParam(") + name + ")");
    if (!s.ok()) return fail(s);
  }
  for (int i = 0; i < options_.rounds; ++i) {
    Status s = XgbCheck(XGBoosterUpdateOneIter(booster, i, train.get()), "XGBoosterUpdateOneIter");
    if (!s.ok()) return fail(s);
  }
  if (booster_) XGBoosterFree(booster_);
  booster_ = booster;
  cols_ = data.cols;
  return Status::Ok();
}

Expected<std::vector<float>> CostModel::Predict(const std::vector<float>& x, size_t rows) const {
  if (!booster_) return Status(ErrorCode::kInternal, "cost model: predict before fit");
  if (rows == 0) return std::vector<float>{};
  if (x.size() != rows * cols_) {
    return Status(ErrorCode::kInvalidArgument,
                  "inconsistent feature length: " + std::to_string(x.size() / rows) +
                      ", the model was trained on " + std::to_string(cols_));
  }
  Matrix m;
  CT_RETURN_IF_ERROR(m.Create(x, rows, cols_));
  bst_ulong len = 0;
  const float* out = nullptr;
  CT_RETURN_IF_ERROR(
      XgbCheck(XGBoosterPredict(booster_, m.get(), 0, 0, 0, &len, &out), "XGBoosterPredict"));
  if (len != rows) {
    return Status(ErrorCode::kInternal, "xgboost: XGBoosterPredict gave " + std::to_string(len) +
                                            " scores for " + std::to_string(rows) + " rows");
  }
  return std::vector<float>(out, out + len);
}

}  // namespace crosstune::tuner::internal
