// Reference implementations shared by the CPU and CUDA templates of one operator: plain loops
// that sum in double, against which every generated kernel's output is checked.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace crosstune::tuner::templates {

// C (m x n) = A (m x k) · B (k x n), row-major.
inline void MatmulReference(const std::vector<float>& a, const std::vector<float>& b,
                            std::vector<float>& c, int64_t m, int64_t n, int64_t k) {
  std::vector<double> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double av = a[i * k + p];
      const float* brow = &b[p * n];
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = static_cast<float>(row[j]);
  }
}

// y (batch x out) = x (batch x in) · wᵀ + bias, w stored [out, in].
inline void DenseReference(const std::vector<float>& x, const std::vector<float>& w,
                           const std::vector<float>& bias, std::vector<float>& y, int64_t batch,
                           int64_t in, int64_t out) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias[o];
      for (int64_t i = 0; i < in; ++i) sum += static_cast<double>(x[b * in + i]) * w[o * in + i];
      y[b * out + o] = static_cast<float>(sum);
    }
  }
}

// The shape of a 2-D convolution with a fused epilogue, as the conv2d templates take it.
struct ConvShape {
  int64_t n, c, h, w, k, r, s, stride, pad;
  bool residual;
  int64_t oh, ow;
};

// out = relu(conv(data, weight) + bias (+ residual)); data NCHW, weight KCRS, out NKHW.
inline void Conv2dReference(const ConvShape& g, const std::vector<float>& data,
                            const std::vector<float>& weight, const std::vector<float>& bias,
                            const std::vector<float>* residual, std::vector<float>& out) {
  for (int64_t n = 0; n < g.n; ++n) {
    for (int64_t k = 0; k < g.k; ++k) {
      for (int64_t y = 0; y < g.oh; ++y) {
        for (int64_t x = 0; x < g.ow; ++x) {
          double sum = bias[k];
          for (int64_t c = 0; c < g.c; ++c) {
            for (int64_t r = 0; r < g.r; ++r) {
              const int64_t ih = y * g.stride - g.pad + r;
              if (ih < 0 || ih >= g.h) continue;
              for (int64_t s = 0; s < g.s; ++s) {
                const int64_t iw = x * g.stride - g.pad + s;
                if (iw < 0 || iw >= g.w) continue;
                sum += static_cast<double>(data[((n * g.c + c) * g.h + ih) * g.w + iw]) *
                       weight[((k * g.c + c) * g.r + r) * g.s + s];
              }
            }
          }
          const int64_t o = ((n * g.k + k) * g.oh + y) * g.ow + x;
          if (residual) sum += (*residual)[o];
          out[o] = static_cast<float>(std::max(sum, 0.0));
        }
      }
    }
  }
}

}  // namespace crosstune::tuner::templates
