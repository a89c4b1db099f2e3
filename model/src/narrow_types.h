// The narrow element types a graph holds only at its edges and around Cast (graph.h): bfloat16,
// the float8 and float4 types, and the 4- and 2-bit integers, each converted to and from float
// by one piece of C that both the host (graph.cc: folding, the interpreter) and the generated
// Cast kernels (kernels/elementwise.cc: as text) compile, so the two cannot disagree.
//
// Storage: bfloat16 as its 16 bits; every other type one byte per element holding its bit
// pattern in the low bits (a 4-bit int4 -2 is 0x0e), as numpy's ml_dtypes arrays hold them.
// Rounding is to nearest, ties to even. A float8 or float4 cast saturates as ONNX's Cast does
// (saturate=1: past the largest finite value, infinities included, gives the largest;
// saturate=0: float8e5m2 gives infinity, the others NaN); NaN gives each type's NaN (float4,
// which has none, gives 0x8). A float to a 4- or 2-bit integer truncates toward zero, and a value
// outside the type's range gives 0, as the onnx release's reference computes it.
#pragma once

#include "crosstune/model/graph.h"

// Kinds of the minifloats: 0 float8e4m3fn, 1 float8e4m3fnuz, 2 float8e5m2, 3 float8e5m2fnuz,
// 4 float4e2m1.
#define CT_NARROW_TYPES(...) \
  __VA_ARGS__                \
  inline const char* const kNarrowTypesC = #__VA_ARGS__;

namespace crosstune::model::narrow {

CT_NARROW_TYPES(
    static inline float ct_pow2(int k) {
      const unsigned bits = (unsigned)(k + 127) << 23;
      float f;
      __builtin_memcpy(&f, &bits, 4);
      return f;
    }

    static inline int ct_mini_mbits(int kind) {
      return kind == 4 ? 1 : kind >= 2 ? 2 : 3;
    } static inline int ct_mini_ebits(int kind) {
      return kind == 4 ? 2 : kind >= 2 ? 5 : 4;
    } static inline int ct_mini_bias(int kind) {
      return kind == 0 ? 7 : kind == 1 ? 8 : kind == 2 ? 15 : kind == 3 ? 16 : 1;
    } static inline unsigned ct_mini_max(int kind) {
      return kind == 0 ? 0x7e : kind == 2 ? 0x7b : kind == 4 ? 0x7 : 0x7f;
    }

    static inline float ct_mini_to_float(unsigned code, int kind) {
      const int m = ct_mini_mbits(kind), e = ct_mini_ebits(kind), bias = ct_mini_bias(kind);
      const unsigned sign = (code >> (e + m)) & 1, ef = (code >> m) & ((1u << e) - 1),
                     mf = code & ((1u << m) - 1);
      const float nan = __builtin_nanf("");
      if ((kind == 1 || kind == 3) && (code & 0xff) == 0x80) return nan;
      if (kind == 0 && ef == 15 && mf == 7) return sign ? -nan : nan;
      if (kind == 2 && ef == 31) {
        if (mf) return sign ? -nan : nan;
        return sign ? -__builtin_inff() : __builtin_inff();
      }
      const float v = ef ? (float)((1u << m) | mf) * ct_pow2((int)ef - bias - m)
                         : (float)mf * ct_pow2(1 - bias - m);
      return sign ? -v : v;
    }

    static inline unsigned ct_float_to_mini(float x, int kind, int saturate) {
      const int m = ct_mini_mbits(kind), e = ct_mini_ebits(kind), bias = ct_mini_bias(kind);
      const int fnuz = kind == 1 || kind == 3;
      if (kind == 4) saturate = 1;
      unsigned bits;
      __builtin_memcpy(&bits, &x, 4);
      const unsigned sbit = (bits >> 31) ? 1u << (e + m) : 0u;
      const unsigned maxcode = ct_mini_max(kind);
      const unsigned nan = kind == 0   ? 0x7f | sbit
                           : kind == 2 ? 0x7e | sbit
                           : kind == 4 ? 0x8
                                       : 0x80;
      const unsigned abits = bits & 0x7fffffffu;
      if (abits > 0x7f800000u) return nan;
      if (abits == 0x7f800000u) {
        if (saturate) return maxcode | sbit;
        return kind == 2 ? 0x7c | sbit : nan;
      }
      float a;
      __builtin_memcpy(&a, &abits, 4);
      const float maxv = ct_mini_to_float(maxcode, kind);
      if (saturate && a > maxv) a = maxv;
      unsigned abits2;
      __builtin_memcpy(&abits2, &a, 4);
      const int emin = 1 - bias;
      int k = (int)((abits2 >> 23) & 0xff) - 127;
      if (k < emin) k = emin;
      const double t = (double)a * (double)ct_pow2(m - k);
      long long q = (long long)t;
      const double rest = t - (double)q;
      if (rest > 0.5 || (rest == 0.5 && (q & 1))) ++q;
      if (q == 0) return fnuz ? 0u : sbit;
      if (q >= (2LL << m)) {
        q >>= 1;
        ++k;
      }
      unsigned code;
      if (q < (1LL << m)) {
        code = (unsigned)q;  // a subnormal
      } else {
        const int ef = k + bias;
        code = ef >= (1 << e) ? 0xffu : ((unsigned)ef << m) | (unsigned)(q - (1LL << m));
      }
      if (code > maxcode) {
        if (saturate) return maxcode | sbit;
        return kind == 2 ? 0x7c | sbit : nan;
      }
      return code | sbit;
    }

    static inline float ct_bf16_to_float(unsigned short h) {
      const unsigned bits = (unsigned)h << 16;
      float f;
      __builtin_memcpy(&f, &bits, 4);
      return f;
    }

    static inline unsigned short ct_float_to_bf16(float f) {
      unsigned bits;
      __builtin_memcpy(&bits, &f, 4);
      if ((bits & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((bits >> 16) | 0x40);
      bits += 0x7fffu + ((bits >> 16) & 1);
      return (unsigned short)(bits >> 16);
    }

    static inline long long ct_narrow_int(unsigned code, int nbits, int is_signed) {
      code &= (1u << nbits) - 1;
      return is_signed && (code >> (nbits - 1)) ? (long long)code - (1LL << nbits)
                                                : (long long)code;
    }

    static inline unsigned char ct_to_narrow_int(double x, int nbits, int is_signed) {
      const double lo = is_signed ? -(double)(1 << (nbits - 1)) : 0.0;
      const double hi = is_signed ? (double)((1 << (nbits - 1)) - 1) : (double)((1 << nbits) - 1);
      if (!(x > lo - 1.0 && x < hi + 1.0)) return 0;
      return (unsigned char)((unsigned)(long long)x & ((1u << nbits) - 1));
    })

// The minifloat kind (above) of a DType, or -1.
inline int MiniKind(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN:
      return 0;
    case DType::kFloat8E4M3FNUZ:
      return 1;
    case DType::kFloat8E5M2:
      return 2;
    case DType::kFloat8E5M2FNUZ:
      return 3;
    case DType::kFloat4E2M1:
      return 4;
    default:
      return -1;
  }
}

// The bits of a narrow integer type (4 or 2; 0 for any other) and whether it is signed.
inline int NarrowIntBits(DType t, bool* is_signed) {
  *is_signed = t == DType::kInt4 || t == DType::kInt2;
  return t == DType::kInt4 || t == DType::kUint4   ? 4
         : t == DType::kInt2 || t == DType::kUint2 ? 2
                                                   : 0;
}

}  // namespace crosstune::model::narrow
