// The call arguments of `crosstune run` / `crosstune bench`, parsed from their text form, and
// the host tensors made from them. Pure host-side logic (no session), unit-tested in
// tests/cli/args_test.cc.
//
//   a.npy                   a tensor read from a .npy file
//   1024x16xf32:random      a generated tensor: SHAPExDTYPE:random|zeros|ones (random from --seed)
//   42, i:42                an int64
//   2.5, 1e-3, f:2          a float64 (a plain number with '.' or an exponent)
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "crosstune/client/npy.h"
#include "crosstune/status.h"

namespace crosstune::cli {

struct ArgSpec {
  enum class Kind { kNpy, kGenerated, kInt, kFloat };
  enum class Fill { kRandom, kZeros, kOnes };
  Kind kind = Kind::kInt;
  std::string text;            // as given
  std::string path;            // kNpy
  std::vector<int64_t> shape;  // kGenerated
  DLDataType dtype{kDLFloat, 32, 1};
  Fill fill = Fill::kZeros;
  int64_t i = 0;
  double f = 0;

  bool is_tensor() const { return kind == Kind::kNpy || kind == Kind::kGenerated; }
};

Expected<ArgSpec> ParseArgSpec(const std::string& text);

// A host tensor for a tensor argument: read from its .npy file or generated. Random data is
// uniform in [-1, 1) for floats and small integers otherwise, from `seed` (same seed, same data).
Expected<client::NpyArray> MakeHostTensor(const ArgSpec& spec, uint64_t seed);

// Bytes the tensor arguments take in all, before any is read or generated: a generated one by
// its shape and dtype, a .npy file by its size (the data and a small header). kNotFound naming a
// .npy file that cannot be read.
Expected<uint64_t> ArgTensorBytes(const std::vector<ArgSpec>& args);

// --out FILE (the last tensor argument) or --out N=FILE (argument N, 0-based): arg index -> path.
Expected<std::map<int, std::string>> ParseOutSpecs(const std::vector<std::string>& outs,
                                                   const std::vector<ArgSpec>& args);

// Checks the arguments against a function's signature (kernel_abi.h: 't', 'i', 'f'); an int
// given where a float is wanted becomes a float.
Status MatchSignature(const std::string& function, const std::string& signature,
                      std::vector<ArgSpec>* args);

}  // namespace crosstune::cli
