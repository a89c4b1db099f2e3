#include "crosstune/tuner/matmul_layout.h"

#include <cstddef>

namespace crosstune::tuner {

int64_t MatmulPanels(int64_t n, int64_t vw) { return ((n + vw - 1) / vw + 11) / 12 * 12; }

std::vector<float> PackMatmulPanels(const float* kn, int64_t k, int64_t n, int64_t vw) {
  std::vector<float> out(static_cast<std::size_t>(MatmulPanels(n, vw) * k * vw), 0.0f);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) out[((j / vw) * k + p) * vw + j % vw] = kn[p * n + j];
  return out;
}

std::vector<float> UnpackMatmulPanels(const float* panels, int64_t k, int64_t n, int64_t vw) {
  std::vector<float> out(static_cast<std::size_t>(k * n));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) out[p * n + j] = panels[((j / vw) * k + p) * vw + j % vw];
  return out;
}

}  // namespace crosstune::tuner
