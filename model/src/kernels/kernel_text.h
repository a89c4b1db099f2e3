// How the generated kernels are written (kernels.h): a module around a parallel loop over items.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "crosstune/model/kernels.h"

namespace crosstune::model::kernels {

// A kernel whose work is `items` independent items: `body` is C run for each item `it` (a long)
// with `in0`.. `inN` (const float*) and `out0`.. (float*) in scope, after `defines` (macros,
// constant tables, helper functions). The module exports `function`.
// `types`, when given, names each argument's C element type (inputs, then outputs; "float"
// where it runs out).
GeneratedKernel LoopKernel(const std::string& function, int inputs, int outputs, int64_t items,
                           const std::string& defines, const std::string& body,
                           const std::vector<std::string>& types = {});
// The C element type of a dtype ("float", "long long", "unsigned char", ...).
const char* CType(DType t);

// "{1, 2, 3}" for a C array initializer.
std::string CArray(const std::vector<int64_t>& v);
// A float literal that reads back exactly ("0x1.8p+1f").
std::string CFloat(double v);

// Element strides of `shape` broadcast into `out` (0 where a dimension broadcasts), per output
// dimension.
std::vector<int64_t> BroadcastStrides(const std::vector<int64_t>& shape,
                                      const std::vector<int64_t>& out);

// C of `static inline float ct_exp(float y)`: exp in float32 without calls or branches, so that
// a loop of it vectorizes (libm's expf is a call per element): 2^n times a degree-7 polynomial of
// the rest, within 2e-7 relative error of exp on [-87, 88]; 0 below -87 (exp is under 1.7e-38
// there), infinity above 88 (though exp only overflows at 88.72: its callers, Softmax and erf,
// take y <= 0), NaN stays NaN.
extern const char* const kExpFunction;

}  // namespace crosstune::model::kernels
