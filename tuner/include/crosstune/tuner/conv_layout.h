// Blocked ("NCHWc") activations and packed conv weights: the layouts conv2d's layout field names,
// shared by the conv2d template (its arguments and reference) and the model compiler (which keeps
// activations blocked between layers and packs each conv's weight once, at compile time).
//
//   blocked tensor   NCHW [N, C, H, W] as [N, ceil(C/cb), H, W, cb]: channel c of pixel (h, w)
//                    at block c / cb, lane c % cb; lanes past C hold zeros
//   packed weight    KCRS [K, C, R, S] as [ceil(K/cb), ceil(C/cb)*cb, R, S, cb]: output channel
//                    k at block k / cb, lane k % cb, input channels padded with zero rows; lanes
//                    of channels past K are zero
//   depthwise weight [C, 1, R, S] blocked as a [1, C, R, S] tensor: [ceil(C/cb), 1, R, S, cb]
//                    (ToBlocked(w, 1, C, R * S, cb)), zero lanes past C
//
// cb is the target's vector width in floats (BlockedChannels): one vector a pixel and block.
//
//   int8 weight      conv2d_int8's: KCRS int8 [K, C, R, S] as [ceil(K/l), R, S, ceil(C/4), l, 4]:
//                    l output channels (the target's int32 lanes, BlockedChannels) times 4 input
//                    channels, zero past K and C
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "crosstune/builder/target.h"

namespace crosstune::tuner {

// conv2d's layout field (its --shape's 12th value).
enum class ConvLayout : int64_t {
  kNchw = 0,           // data, residual and out NCHW; the weight KCRS as stored
  kBlocked = 1,        // data, residual and out blocked; the weight packed; bias padded
  kNchwToBlocked = 2,  // data NCHW, weight KCRS as stored; residual and out blocked; bias padded
};

// The channel block of blocked tensors on `target`: the floats of one vector register.
int BlockedChannels(const builder::Target& target);

// [N, C, H, W] -> [N, ceil(C/cb), H, W, cb].
std::vector<int64_t> BlockedShape(const std::vector<int64_t>& nchw, int64_t cb);
// [K, C, R, S] -> [ceil(K/cb), ceil(C/cb)*cb, R, S, cb].
std::vector<int64_t> PackedWeightShape(const std::vector<int64_t>& kcrs, int64_t cb);
// ceil(x / cb) * cb: a padded channel count (the bias of a blocked conv has K rounded up).
int64_t PaddedChannels(int64_t x, int64_t cb);

// NCHW (n images of c channels of hw pixels) to blocked, padding lanes zero; and back.
std::vector<float> ToBlocked(const std::vector<float>& nchw, int64_t n, int64_t c, int64_t hw,
                             int64_t cb);
std::vector<float> FromBlocked(const std::vector<float>& blocked, int64_t n, int64_t c, int64_t hw,
                               int64_t cb);
// KCRS to the packed weight; and back.
std::vector<float> PackWeight(const std::vector<float>& kcrs, int64_t k, int64_t c, int64_t r,
                              int64_t s, int64_t cb);
std::vector<float> UnpackWeight(const std::vector<float>& packed, int64_t k, int64_t c, int64_t r,
                                int64_t s, int64_t cb);

// The int8 weight's shape, and where KCRS element (k, c, r, s) of a [K, C, R, S] weight lands in
// it.
std::vector<int64_t> Int8WeightShape(const std::vector<int64_t>& kcrs, int64_t l);
inline int64_t Int8WeightIndex(int64_t k, int64_t c, int64_t r, int64_t s, int64_t rn, int64_t sn,
                               int64_t c4, int64_t l) {
  return ((((k / l) * rn + r) * sn + s) * c4 + c / 4) * l * 4 + (k % l) * 4 + c % 4;
}
// KCRS to the int8 weight; and back.
std::vector<int8_t> PackInt8Weight(const std::vector<int8_t>& kcrs, int64_t k, int64_t c, int64_t r,
                                   int64_t s, int64_t l);
std::vector<int8_t> UnpackInt8Weight(const std::vector<int8_t>& packed, int64_t k, int64_t c,
                                     int64_t r, int64_t s, int64_t l);

}  // namespace crosstune::tuner
