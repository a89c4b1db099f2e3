// The matmul template's packed B (its fifth shape field, 1): a constant [K, N] weight stored as
// column panels one vector wide, so that the kernel reads it as it is and packs nothing per call.
// Shared by the template (its argument and reference) and the model compiler (which packs a
// MatMul's constant weight once, at compile time).
//
//   panels   [K, N] as [P, K, vw]: column j of row k at panel j / vw, lane j % vw; P is
//            ceil(N / vw) rounded up to a multiple of 12, so that a register tile of 1 to 4
//            vectors never reads past the last panel; lanes and panels past N hold zeros
//
// vw is the target's vector width in floats (BlockedChannels, conv_layout.h).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace crosstune::tuner {

// P, the panels of an N-column B.
int64_t MatmulPanels(int64_t n, int64_t vw);
// [K, N] row-major to the panels; and back.
std::vector<float> PackMatmulPanels(const float* kn, int64_t k, int64_t n, int64_t vw);
std::vector<float> UnpackMatmulPanels(const float* panels, int64_t k, int64_t n, int64_t vw);

}  // namespace crosstune::tuner
