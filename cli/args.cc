#include "args.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "crosstune/tensor.h"

namespace crosstune::cli {
namespace {

Status Bad(const std::string& text, const std::string& why) {
  return Status(ErrorCode::kInvalidArgument, "--arg '" + text + "': " + why);
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  const char* b = s.data();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// IEEE binary16 from a float (round to nearest even; the values generated here are small).
uint16_t FloatToHalf(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

template <typename T>
void Put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Writes `v` (a double) as one element of `dtype` at p.
void PutElement(uint8_t* p, DLDataType dtype, double v) {
  switch (dtype.code) {
    case kDLFloat:
      if (dtype.bits == 16) Put(p, FloatToHalf(static_cast<float>(v)));
      if (dtype.bits == 32) Put(p, static_cast<float>(v));
      if (dtype.bits == 64) Put(p, v);
      break;
    case kDLInt:
      if (dtype.bits == 8) Put(p, static_cast<int8_t>(v));
      if (dtype.bits == 16) Put(p, static_cast<int16_t>(v));
      if (dtype.bits == 32) Put(p, static_cast<int32_t>(v));
      if (dtype.bits == 64) Put(p, static_cast<int64_t>(v));
      break;
    case kDLUInt:
      if (dtype.bits == 8) Put(p, static_cast<uint8_t>(v));
      if (dtype.bits == 16) Put(p, static_cast<uint16_t>(v));
      if (dtype.bits == 32) Put(p, static_cast<uint32_t>(v));
      if (dtype.bits == 64) Put(p, static_cast<uint64_t>(v));
      break;
    default:
      break;
  }
}

}  // namespace

Expected<ArgSpec> ParseArgSpec(const std::string& text) {
  ArgSpec spec;
  spec.text = text;
  if (text.empty()) return Bad(text, "empty argument");
  if (text.rfind("i:", 0) == 0) {
    spec.kind = ArgSpec::Kind::kInt;
    if (!ParseInt(text.substr(2), &spec.i)) return Bad(text, "not an int64");
    return spec;
  }
  if (text.rfind("f:", 0) == 0) {
    spec.kind = ArgSpec::Kind::kFloat;
    if (!ParseDouble(text.substr(2), &spec.f)) return Bad(text, "not a float64");
    return spec;
  }
  if (EndsWith(text, ".npy")) {
    spec.kind = ArgSpec::Kind::kNpy;
    spec.path = text;
    return spec;
  }
  if (ParseInt(text, &spec.i)) {
    spec.kind = ArgSpec::Kind::kInt;
    return spec;
  }
  if (text.find_first_of(".eE") != std::string::npos && ParseDouble(text, &spec.f)) {
    spec.kind = ArgSpec::Kind::kFloat;
    return spec;
  }
  auto colon = text.rfind(':');
  if (colon != std::string::npos) {
    std::string fill = text.substr(colon + 1);
    if (fill == "random") {
      spec.fill = ArgSpec::Fill::kRandom;
    } else if (fill == "zeros") {
      spec.fill = ArgSpec::Fill::kZeros;
    } else if (fill == "ones") {
      spec.fill = ArgSpec::Fill::kOnes;
    } else {
      return Bad(text, "unknown fill '" + fill + "' (valid: random, zeros, ones)");
    }
    auto t = ParseTensorSpec(text.substr(0, colon));
    if (!t.ok()) return Bad(text, t.status().message());
    spec.kind = ArgSpec::Kind::kGenerated;
    spec.shape = t->shape;
    spec.dtype = t->dtype;
    auto bytes = TensorBytes(spec.shape, spec.dtype);
    if (!bytes.ok()) return Bad(text, bytes.status().message());
    return spec;
  }
  return Bad(text,
             "expected a .npy file, SHAPExDTYPE:random|zeros|ones (e.g. 1024xf32:random), an "
             "integer (42, i:42) or a float (2.5, f:2)");
}

Expected<client::NpyArray> MakeHostTensor(const ArgSpec& spec, uint64_t seed) {
  if (spec.kind == ArgSpec::Kind::kNpy) return client::ReadNpy(spec.path);
  if (spec.kind != ArgSpec::Kind::kGenerated) {
    return Status(ErrorCode::kInvalidArgument, "--arg '" + spec.text + "' is not a tensor");
  }
  client::NpyArray out;
  out.shape = spec.shape;
  out.dtype = spec.dtype;
  bool is_float = spec.dtype.code == kDLFloat;
  bool supported =
      spec.dtype.lanes == 1 &&
      (spec.dtype.code == kDLFloat || spec.dtype.code == kDLInt || spec.dtype.code == kDLUInt);
  if (!supported) {
    return Status(ErrorCode::kInvalidArgument,
                  "--arg '" + spec.text + "': cannot generate " + DTypeName(spec.dtype) + " data");
  }
  CT_ASSIGN_OR_RETURN(uint64_t nbytes, TensorBytes(spec.shape, spec.dtype));
  out.data.assign(nbytes, 0);
  if (spec.fill == ArgSpec::Fill::kZeros) return out;
  size_t item = spec.dtype.bits / 8;
  uint64_t n = nbytes / item;
  if (spec.fill == ArgSpec::Fill::kOnes) {
    for (uint64_t i = 0; i < n; ++i) PutElement(out.data.data() + i * item, spec.dtype, 1.0);
    return out;
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  // Small integers, so sums and products of generated data stay exact in every int type.
  std::uniform_int_distribution<int> small(spec.dtype.code == kDLInt ? -16 : 0, 16);
  for (uint64_t i = 0; i < n; ++i) {
    double v = is_float ? real(rng) : static_cast<double>(small(rng));
    PutElement(out.data.data() + i * item, spec.dtype, v);
  }
  return out;
}

Expected<uint64_t> ArgTensorBytes(const std::vector<ArgSpec>& args) {
  uint64_t total = 0;
  for (const ArgSpec& a : args) {
    uint64_t n = 0;
    if (a.kind == ArgSpec::Kind::kGenerated) {
      CT_ASSIGN_OR_RETURN(n, TensorBytes(a.shape, a.dtype));
    } else if (a.kind == ArgSpec::Kind::kNpy) {
      std::error_code ec;
      n = std::filesystem::file_size(a.path, ec);
      if (ec) return Status(ErrorCode::kNotFound, a.path + ": " + ec.message());
    }
    if (__builtin_add_overflow(total, n, &total)) total = UINT64_MAX;
  }
  return total;
}

Expected<std::map<int, std::string>> ParseOutSpecs(const std::vector<std::string>& outs,
                                                   const std::vector<ArgSpec>& args) {
  std::map<int, std::string> result;
  for (const std::string& out : outs) {
    int index = -1;
    std::string path = out;
    auto eq = out.find('=');
    int64_t n = 0;
    if (eq != std::string::npos && ParseInt(out.substr(0, eq), &n)) {
      if (n < 0 || n >= static_cast<int64_t>(args.size())) {
        return Status(ErrorCode::kInvalidArgument, "--out '" + out + "': there are " +
                                                       std::to_string(args.size()) +
                                                       " arguments (0-based index)");
      }
      index = static_cast<int>(n);
      path = out.substr(eq + 1);
      if (!args[index].is_tensor()) {
        return Status(ErrorCode::kInvalidArgument, "--out '" + out + "': argument " +
                                                       std::to_string(index) + " ('" +
                                                       args[index].text + "') is not a tensor");
      }
    } else {
      for (int i = static_cast<int>(args.size()) - 1; i >= 0; --i) {
        if (args[i].is_tensor()) {
          index = i;
          break;
        }
      }
      if (index < 0) {
        return Status(ErrorCode::kInvalidArgument,
                      "--out '" + out + "': no tensor argument to save");
      }
    }
    if (path.empty())
      return Status(ErrorCode::kInvalidArgument, "--out '" + out + "': no file name");
    if (result.count(index)) {
      return Status(ErrorCode::kInvalidArgument,
                    "--out: argument " + std::to_string(index) + " is saved twice");
    }
    result[index] = path;
  }
  return result;
}

Status MatchSignature(const std::string& function, const std::string& signature,
                      std::vector<ArgSpec>* args) {
  if (signature.size() != args->size()) {
    return Status(ErrorCode::kInvalidArgument,
                  function + " takes " + std::to_string(signature.size()) + " arguments ('" +
                      signature + "': t tensor, i int, f float), " + std::to_string(args->size()) +
                      " given");
  }
  for (size_t i = 0; i < signature.size(); ++i) {
    ArgSpec& a = (*args)[i];
    char want = signature[i];
    std::string where = function + " argument " + std::to_string(i) + " ('" + a.text + "')";
    if (want == 't' && !a.is_tensor())
      return Status(ErrorCode::kInvalidArgument, where + " must be a tensor");
    if (want == 'i' && a.kind != ArgSpec::Kind::kInt) {
      return Status(ErrorCode::kInvalidArgument, where + " must be an integer");
    }
    if (want == 'f') {
      if (a.kind == ArgSpec::Kind::kInt) {
        a.kind = ArgSpec::Kind::kFloat;
        a.f = static_cast<double>(a.i);
      } else if (a.kind != ArgSpec::Kind::kFloat) {
        return Status(ErrorCode::kInvalidArgument, where + " must be a number");
      }
    }
  }
  return Status::Ok();
}

}  // namespace crosstune::cli
