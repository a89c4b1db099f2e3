// Blocked activations and packed conv weights (conv_layout.h).
#include "crosstune/tuner/conv_layout.h"

#include "templates/common.h"

namespace crosstune::tuner {

int BlockedChannels(const builder::Target& target) { return templates::VectorWidth(target); }

int64_t PaddedChannels(int64_t x, int64_t cb) { return (x + cb - 1) / cb * cb; }

std::vector<int64_t> BlockedShape(const std::vector<int64_t>& nchw, int64_t cb) {
  return {nchw[0], PaddedChannels(nchw[1], cb) / cb, nchw[2], nchw[3], cb};
}

std::vector<int64_t> PackedWeightShape(const std::vector<int64_t>& kcrs, int64_t cb) {
  return {PaddedChannels(kcrs[0], cb) / cb, PaddedChannels(kcrs[1], cb), kcrs[2], kcrs[3], cb};
}

std::vector<float> ToBlocked(const std::vector<float>& nchw, int64_t n, int64_t c, int64_t hw,
                             int64_t cb) {
  const int64_t blocks = PaddedChannels(c, cb) / cb;
  std::vector<float> out(static_cast<size_t>(n * blocks * hw * cb), 0.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        out[((i * blocks + ch / cb) * hw + p) * cb + ch % cb] = nchw[(i * c + ch) * hw + p];
  return out;
}

std::vector<float> FromBlocked(const std::vector<float>& blocked, int64_t n, int64_t c, int64_t hw,
                               int64_t cb) {
  const int64_t blocks = PaddedChannels(c, cb) / cb;
  std::vector<float> out(static_cast<size_t>(n * c * hw));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p)
        out[(i * c + ch) * hw + p] = blocked[((i * blocks + ch / cb) * hw + p) * cb + ch % cb];
  return out;
}

std::vector<float> PackWeight(const std::vector<float>& kcrs, int64_t k, int64_t c, int64_t r,
                              int64_t s, int64_t cb) {
  const int64_t cp = PaddedChannels(c, cb), rs = r * s;
  std::vector<float> out(static_cast<size_t>(PaddedChannels(k, cb) * cp * rs), 0.0f);
  for (int64_t o = 0; o < k; ++o)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t j = 0; j < rs; ++j)
        out[(((o / cb) * cp + i) * rs + j) * cb + o % cb] = kcrs[(o * c + i) * rs + j];
  return out;
}

std::vector<float> UnpackWeight(const std::vector<float>& packed, int64_t k, int64_t c, int64_t r,
                                int64_t s, int64_t cb) {
  const int64_t cp = PaddedChannels(c, cb), rs = r * s;
  std::vector<float> out(static_cast<size_t>(k * c * rs));
  for (int64_t o = 0; o < k; ++o)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t j = 0; j < rs; ++j)
        out[(o * c + i) * rs + j] = packed[(((o / cb) * cp + i) * rs + j) * cb + o % cb];
  return out;
}

std::vector<int64_t> Int8WeightShape(const std::vector<int64_t>& kcrs, int64_t l) {
  return {PaddedChannels(kcrs[0], l) / l, kcrs[2], kcrs[3], PaddedChannels(kcrs[1], 4) / 4, l, 4};
}

std::vector<int8_t> PackInt8Weight(const std::vector<int8_t>& kcrs, int64_t k, int64_t c, int64_t r,
                                   int64_t s, int64_t l) {
  const int64_t c4 = PaddedChannels(c, 4) / 4;
  std::vector<int8_t> out(static_cast<size_t>(PaddedChannels(k, l) * r * s * c4 * 4), 0);
  for (int64_t o = 0; o < k; ++o)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t y = 0; y < r; ++y)
        for (int64_t x = 0; x < s; ++x)
          out[Int8WeightIndex(o, i, y, x, r, s, c4, l)] = kcrs[((o * c + i) * r + y) * s + x];
  return out;
}

std::vector<int8_t> UnpackInt8Weight(const std::vector<int8_t>& packed, int64_t k, int64_t c,
                                     int64_t r, int64_t s, int64_t l) {
  const int64_t c4 = PaddedChannels(c, 4) / 4;
  std::vector<int8_t> out(static_cast<size_t>(k * c * r * s));
  for (int64_t o = 0; o < k; ++o)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t y = 0; y < r; ++y)
        for (int64_t x = 0; x < s; ++x)
          out[((o * c + i) * r + y) * s + x] = packed[Int8WeightIndex(o, i, y, x, r, s, c4, l)];
  return out;
}

}  // namespace crosstune::tuner
