// Reference implementations shared by the CPU and CUDA templates of one operator: plain loops
// that sum in double, against which every generated kernel's output is checked. Also the conv2d
// shape both conv2d templates read from --shape, and the task key it gives.
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

// The shape of a 2-D convolution with a fused epilogue, as the conv2d templates take it:
// out = act(conv(data, weight) + bias (+ residual)), act relu, relu6 or none.
struct ConvShape {
  int64_t n, c, h, w, k, r, s, stride, pad;
  bool residual;
  int64_t oh, ow;
  int64_t act = 1;     // ConvActivation: 0 none, 1 relu, 2 relu6
  int64_t layout = 0;  // ConvLayout (conv_layout.h): 0 NCHW, 1 blocked, 2 NCHW in, blocked out
};

// The activation field of conv2d's and depthwise_conv2d's shapes, applied to a sum.
inline double ApplyActivation(int64_t act, double x) {
  if (act == 0) return x;
  x = std::max(x, 0.0);
  return act == 2 ? std::min(x, 6.0) : x;
}

// --shape N,C,H,W,K,R,S,stride,pad[,residual[,activation[,layout]]] (9 to 12 values, already
// checked) as a ConvShape; a shape that leaves them out has no residual, a relu and NCHW.
inline ConvShape ConvShapeOf(const std::vector<int64_t>& v) {
  ConvShape g{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], false, 0, 0};
  g.residual = v.size() > 9 && v[9] != 0;
  g.act = v.size() > 10 ? v[10] : 1;
  g.layout = v.size() > 11 ? v[11] : 0;
  g.oh = (g.h + 2 * g.pad - g.r) / g.stride + 1;
  g.ow = (g.w + 2 * g.pad - g.s) / g.stride + 1;
  return g;
}

// The sizes in the task's key: the nine sizes, the residual when there is one or an activation
// follows it, the activation when it is not relu (0 none, 2 relu6). So "1,64,56,56,64,3,3,1,1"
// names the task it always named (relu, no residual) whether the shape said ",0" or ",0,1", and a
// conv without activation is "...,0,0" (or "...,1,0" with a residual), as the model compiler writes
// it. A layout other than NCHW comes last, after both of them ("...,0,1,1").
inline std::vector<int64_t> ConvKey(const ConvShape& g) {
  std::vector<int64_t> key = {g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.stride, g.pad};
  if (g.residual || g.act != 1 || g.layout != 0) key.push_back(g.residual ? 1 : 0);
  if (g.act != 1 || g.layout != 0) key.push_back(g.act);
  if (g.layout != 0) key.push_back(g.layout);
  return key;
}

// out = act(conv(data, weight) + bias (+ residual)); data NCHW, weight KCRS, out NKHW.
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
          out[o] = static_cast<float>(ApplyActivation(g.act, sum));
        }
      }
    }
  }
}

}  // namespace crosstune::tuner::templates
