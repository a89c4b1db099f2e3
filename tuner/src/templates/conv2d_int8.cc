// CPU int8 2-D convolution with a fused requantize: uint8 activations times int8 weights, summed
// exactly in int32, then scaled back to uint8:
//   acc[n, oh, ow, k] = bias[k] + sum over (r, s, c) of x(n, oh * stride - pad + r,
//                       ow * stride - pad + s, c) * w[k, r, s, c]
//   out[n, oh, ow, k] = clamp(rint(acc * scale[k]) + out_zero, relu ? out_zero : 0, 255)
// where x reads data and `in_zero` in the padding (the real zero of data's quantization: a caller
// folds -in_zero * sum(w[k]) into bias[k], and ONNX's QLinearConv becomes this). Data and out are
// NHWC; the weight is packed [KO, R, S, C4, L, 4]: L output channels (the target's int32 lanes)
// times 4 input channels per vector, zero past K and C; bias and scale have KO * L entries.
//
// The register tile is TK vectors of L output channels x TP output pixels of a row. Each step
// broadcasts 4 input channels of a pixel (one 32-bit word) and adds their products with the
// weight vector into the pixel's sums: one vpdpbusd with AVX-512 VNNI or AVX-VNNI, two vpmaddwd
// on even and odd bytes with AVX2 or AVX-512BW (exact: no int16 saturation, unlike vpmaddubsw),
// sdot with aarch64's dot product on (x - 128) (the weights' sums times 128 added back), and
// shifts and multiplies of int32 vectors elsewhere (armv7 NEON, riscv64). Data is read in place
// when there is no padding and C is a multiple of 4; otherwise the call first copies it into
// a padded buffer (channels rounded up to 4, in_zero in the border).
//
// Items: (image, output row, block of TK output-channel vectors), in the order the `order` knob
// says; a task takes a contiguous range.
//
// Knobs: tile_k (TK), tile_ow (TP), unroll_c (of the loop over channel quads), order (0: the
// channel blocks of a row one after another, so the row's input stays in cache; 1: the rows of a
// channel block one after another, so its weights do).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "crosstune/tuner/conv_layout.h"
#include "crosstune/tuner/task.h"
#include "templates/common.h"
#include "templates/registry.h"

namespace crosstune::tuner {
namespace {

using templates::CeilDiv;

// The task's sizes and the target's vector unit, and the config space they make.
struct Conv2dInt8Shape {
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, k_ = 0, r_ = 0, s_ = 0, stride_ = 1, pad_ = 0;
  int64_t in_zero_ = 0, out_zero_ = 0;
  bool relu_ = true;
  int64_t oh_ = 0, ow_ = 0;
  int lanes_ = 4;  // int32 lanes of a vector (L)
  int regs_ = 16;
  int64_t c4() const { return CeilDiv(c_, 4); }
  int64_t ko() const { return CeilDiv(k_, lanes_); }
  // Whether the kernel reads a padded copy of data rather than data itself.
  bool packed_in() const { return pad_ > 0 || c_ % 4 != 0; }
  Expected<ConfigSpace> BuildSpace() const;
};

class Conv2dInt8Task final : public Task, private Conv2dInt8Shape {
 public:
  Conv2dInt8Task(TaskId id, builder::Target target, ConfigSpace space, const Conv2dInt8Shape& shape)
      : Task(std::move(id), std::move(target), std::move(space)), Conv2dInt8Shape(shape) {}

  static Expected<std::unique_ptr<Task>> Make(const std::vector<int64_t>& shape,
                                              const builder::Target& target,
                                              const TaskOptions& options) {
    const std::string usage = templates::ShapeUsage("conv2d_int8");
    CT_RETURN_IF_ERROR(templates::CheckConvSizes(usage, shape));
    const int64_t pad = shape[8];
    Conv2dInt8Shape s;
    s.in_zero_ = shape.size() > 9 ? shape[9] : 0;
    s.out_zero_ = shape.size() > 10 ? shape[10] : 0;
    const int64_t relu = shape.size() > 11 ? shape[11] : 1;
    if (s.in_zero_ < 0 || s.in_zero_ > 255 || s.out_zero_ < 0 || s.out_zero_ > 255) {
      return Status(ErrorCode::kInvalidArgument, usage + ": in_zero and out_zero from 0 to 255");
    }
    if (relu != 0 && relu != 1) {
      return Status(ErrorCode::kInvalidArgument, usage + ": relu is 1 (clamp at out_zero) or 0");
    }
    if (target.is_cuda()) {
      return Status(ErrorCode::kInvalidArgument, "the conv2d_int8 template is for CPU targets");
    }
    s.n_ = shape[0];
    s.c_ = shape[1];
    s.h_ = shape[2];
    s.w_ = shape[3];
    s.k_ = shape[4];
    s.r_ = shape[5];
    s.s_ = shape[6];
    s.stride_ = shape[7];
    s.pad_ = pad;
    s.relu_ = relu == 1;
    s.oh_ = (s.h_ + 2 * pad - s.r_) / s.stride_ + 1;
    s.ow_ = (s.w_ + 2 * pad - s.s_) / s.stride_ + 1;
    s.lanes_ = templates::VectorWidth(target);
    s.regs_ = templates::VectorRegisters(target);
    // Sums of C * R * S products of at most 255 * 128, and the bias, must fit int32.
    if (static_cast<double>(s.c_) * s.r_ * s.s_ * 255 * 128 > 2e9) {
      return Status(ErrorCode::kInvalidArgument,
                    usage + ": C * R * S over 61,000 could overflow the int32 sums");
    }
    return templates::NewTask<Conv2dInt8Task>(TaskId{"conv2d_int8", shape, "int8", options.threads},
                                              target, s);
  }

  std::string function() const override { return "conv2d_int8"; }

  std::vector<ArgSpec> args() const override {
    const int64_t l = lanes_;
    return {{"data", {n_, h_, w_, c_}, {kDLUInt, 8, 1}},
            {"weight", {ko(), r_, s_, c4(), l, 4}, {kDLInt, 8, 1}},
            {"bias", {ko() * l}, {kDLInt, 32, 1}},
            {"scale", {ko() * l}},
            {"out", {n_, oh_, ow_, k_}, {kDLUInt, 8, 1}, true}};
  }

  double flops() const override { return 2.0 * n_ * oh_ * ow_ * k_ * r_ * s_ * c_; }

  Config DefaultConfig() const override {
    // Two channel vectors by as many pixels as the registers hold (up to 8).
    const int64_t tk = std::min<int64_t>(2, ko());
    for (int64_t tp : {8, 7, 6, 5, 4, 3, 2, 1}) {
      nlohmann::json want = {
          {"tile_k", tk}, {"tile_ow", std::min<int64_t>(tp, ow_)}, {"unroll_c", 1}, {"order", 0}};
      auto c = space().FromJson(want);
      if (c.ok() && space().IsValid(*c)) return *c;
    }
    UniqueSampler s(space(), 1);
    return space().Get(s.Next().value_or(0));
  }

  Status CheckLimits(const Config& c, const msg::DeviceInfo& device) const override {
    (void)c;
    CT_RETURN_IF_ERROR(templates::CheckThreads(threads(), device));
    const uint64_t bytes = templates::ScratchBytes(Scratch(), threads());
    if (device.memory_bytes > 0 && bytes > device.memory_bytes / 4) {
      return Status(ErrorCode::kInvalidArgument, "the padded input needs " +
                                                     std::to_string(bytes >> 20) +
                                                     " MiB, over a quarter of the device's memory");
    }
    return Status::Ok();
  }

  std::string Generate(const Config& c) const override {
    const int64_t tk = c.Int("tile_k"), tp = c.Int("tile_ow");
    const int64_t hp = packed_in() ? h_ + 2 * pad_ : h_, wp = packed_in() ? w_ + 2 * pad_ : w_;
    std::ostringstream o;
    o << "/* crosstune conv2d_int8 " << id().Key() << ": " << c.ToString() << " */\n"
      << templates::KernelHeader() << "#define THREADS " << threads() << "\n"
      << "#define VW " << lanes_ << "\n#define KL " << lanes_ << "\n"
      << "#define N_ " << n_ << "L\n#define C_ " << c_ << "L\n#define H_ " << h_ << "L\n#define W_ "
      << w_ << "L\n#define K_ " << k_ << "L\n#define R_ " << r_ << "L\n#define S_ " << s_
      << "L\n#define STRIDE " << stride_ << "L\n#define PAD " << pad_ << "L\n#define OH " << oh_
      << "L\n#define OW " << ow_ << "L\n#define C4 " << c4() << "L\n#define CP "
      << (packed_in() ? c4() * 4 : c_) << "L\n#define HP " << hp << "L\n#define WP " << wp
      << "L\n#define KO " << ko() << "L\n#define TK " << tk << "\n#define TP_FULL " << tp
      << "\n#define KOB " << CeilDiv(ko(), tk) << "L\n#define IN_ZERO " << in_zero_
      << "\n#define OUT_ZERO " << out_zero_ << "\n#define LOW " << (relu_ ? out_zero_ : 0)
      << "\n#define PACKED_IN " << (packed_in() ? 1 : 0) << "\n#define UNROLL " << c.Int("unroll_c")
      << "\n#define ROWS_OUTER " << c.Int("order") << "\n"
      << templates::KernelPrelude(lanes_) << kProducts;
    const auto scratch = Scratch();
    o << templates::KernelArgsStruct(args(), scratch, threads());
    // Tiles: full, fewer output-channel vectors, fewer pixels, both.
    const int64_t tk_rem = ko() % tk, tp_rem = ow_ % tp;
    o << TileFunction("tile_full", tk, tp);
    if (tp_rem) o << TileFunction("tile_prem", tk, tp_rem);
    if (tk_rem) o << TileFunction("tile_krem", tk_rem, tp);
    if (tk_rem && tp_rem) o << TileFunction("tile_bothrem", tk_rem, tp_rem);
    o << "#define HAS_PREM " << (tp_rem ? 1 : 0) << "\n#define HAS_KREM " << (tk_rem ? 1 : 0)
      << "\n";
    std::vector<templates::KernelPhase> phases;
    if (packed_in()) phases.push_back({"pack_input", "N_ * HP"});
    phases.push_back({"weight_sums", "WSUM_ITEMS"});
    phases.push_back({"conv_rows", "N_ * OH * KOB"});
    o << kKernelBody
      << templates::KernelEntry(function(), args(), phases,
                                templates::ScratchBytes(scratch, threads()));
    return o.str();
  }

  int64_t ScratchBytes(const Config& /*c*/) const override {
    return templates::ScratchBytes(Scratch(), threads());
  }

  void ZeroPadding(HostArgs& args) const override {
    // The packed weight is zero past K and C; bias and scale are 0 past K. Each scale is made a
    // size that keeps most outputs inside [0, 255] and sends some to either end.
    std::vector<float>& w = args[1];
    const int64_t l = lanes_;
    std::vector<bool> inside(w.size(), false);
    for (int64_t k = 0; k < k_; ++k)
      for (int64_t c = 0; c < c_; ++c)
        for (int64_t r = 0; r < r_; ++r)
          for (int64_t s = 0; s < s_; ++s)
            inside[Int8WeightIndex(k, c, r, s, r_, s_, c4(), l)] = true;
    for (size_t i = 0; i < w.size(); ++i) {
      if (!inside[i]) w[i] = 0;
    }
    const double spread = 11000.0 * std::sqrt(static_cast<double>(c_ * r_ * s_)) + 38000.0;
    for (int64_t k = 0; k < ko() * l; ++k) {
      if (k >= k_) {
        args[2][k] = 0;
        args[3][k] = 0;
      } else {
        args[3][k] = static_cast<float>((0.5 + std::fabs(args[3][k])) * 96.0 / spread);
      }
    }
  }

  void Reference(HostArgs& args) const override {
    const auto& x = args[0];
    const auto& w = args[1];
    const auto& bias = args[2];
    const auto& scale = args[3];
    auto& y = args[4];
    const int64_t l = lanes_;
    const double low = relu_ ? static_cast<double>(out_zero_) : 0.0;
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t oh = 0; oh < oh_; ++oh)
        for (int64_t ow = 0; ow < ow_; ++ow)
          for (int64_t k = 0; k < k_; ++k) {
            int64_t acc = static_cast<int64_t>(bias[k]);
            for (int64_t r = 0; r < r_; ++r)
              for (int64_t s = 0; s < s_; ++s) {
                const int64_t ih = oh * stride_ - pad_ + r, iw = ow * stride_ - pad_ + s;
                const bool inside = ih >= 0 && ih < h_ && iw >= 0 && iw < w_;
                for (int64_t c = 0; c < c_; ++c) {
                  const int64_t xv =
                      inside ? static_cast<int64_t>(x[((n * h_ + ih) * w_ + iw) * c_ + c])
                             : in_zero_;
                  acc += xv * static_cast<int64_t>(w[Int8WeightIndex(k, c, r, s, r_, s_, c4(), l)]);
                }
              }
            const double q = std::nearbyint(static_cast<double>(acc) * scale[k]) + out_zero_;
            y[((n * oh_ + oh) * ow_ + ow) * k_ + k] = static_cast<float>(std::clamp(q, low, 255.0));
          }
  }

  // One quantization step: the kernel rounds a float product, the reference a double one, and
  // the two can fall on either side of a half.
  double atol() const override { return 1.0; }
  double rtol() const override { return 0.0; }

  std::vector<float> Features(const Config& c) const override {
    std::vector<float> f = space().Features(c);
    const double tk = c.Int("tile_k"), tp = c.Int("tile_ow");
    f.insert(f.end(), {
                          static_cast<float>(tk * tp),              // accumulators
                          static_cast<float>(tk * tp / (tk + tp)),  // products per load
                          static_cast<float>(std::ceil(ow_ / tp) * tp / ow_),
                          static_cast<float>(std::ceil(ko() / tk) * tk / ko()),
                          static_cast<float>(c4() * r_ * s_),  // steps per tile
                          static_cast<float>(tk * c4() * r_ * s_ * lanes_ * 4 / 1024.0),
                          static_cast<float>(lanes_),
                          static_cast<float>(stride_),
                          static_cast<float>(threads()),
                      });
    return f;
  }

 private:
  std::vector<templates::ScratchBuffer> Scratch() const {
    std::vector<templates::ScratchBuffer> out;
    if (packed_in()) {
      const int64_t bytes = n_ * (h_ + 2 * pad_) * (w_ + 2 * pad_) * c4() * 4;
      out.push_back({"in", "(N_ * HP * WP * CP + 3) / 4", CeilDiv(bytes, 4), false});
    }
    out.push_back({"wsum", "KO * KL", ko() * lanes_, false});
    return out;
  }

  // A tile of `tk` output-channel vectors x `tp` pixels at (n, oh, ow0, ko0).
  static std::string TileFunction(const char* name, int64_t tk, int64_t tp) {
    std::ostringstream o;
    o << "\nstatic inline __attribute__((always_inline)) void " << name
      << "(const kernel_args* a, const uint8_t* restrict in, long n, long oh, long ow0,\n"
      << "    long ko0) {\n"
      << "  enum { TKV = " << tk << ", TP = " << tp << " };\n"
      << kTileBody;
    return o.str();
  }

  static const char* const kProducts;
  static const char* const kTileBody;
  static const char* const kKernelBody;
};

Expected<ConfigSpace> Conv2dInt8Shape::BuildSpace() const {
  ConfigSpace space;
  std::vector<int64_t> tk;
  for (int64_t t : {1, 2, 3, 4, 6}) {
    if (t <= ko()) tk.push_back(t);
  }
  CT_RETURN_IF_ERROR(space.AddCategorical("tile_k", tk));
  std::vector<int64_t> tp;
  for (int64_t t : {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16}) {
    if (t <= ow_) tp.push_back(t);
  }
  CT_RETURN_IF_ERROR(space.AddCategorical("tile_ow", tp));
  CT_RETURN_IF_ERROR(space.AddCategorical("unroll_c", {1, 2, 4}));
  CT_RETURN_IF_ERROR(space.AddCategorical("order", {0, 1}));
  const int regs = regs_;
  // TK x TP sums, TK weight vectors (two each where the products take even and odd bytes
  // apart) and the broadcast input.
  space.AddConstraint("registers", [regs](const Config& c) {
    return c.Int("tile_k") * c.Int("tile_ow") + 2 * c.Int("tile_k") + 2 <= regs;
  });
  return space;
}

// The products of one step, by what the target has: wprep (a weight vector made ready),
// aprep (a broadcast word of 4 input channels made ready), PREP_W, prep_a and MAC (sums +=
// products, exact). WSUM_SHIFT: the products are of (x - 128), so each sum starts at 128 times
// its channel's weights' sum (weight_sums computes those).
const char* const Conv2dInt8Task::kProducts = R"KERNEL(
typedef int32_t viu __attribute__((vector_size(KL * 4), aligned(1)));
typedef uint32_t vu32 __attribute__((vector_size(KL * 4)));
typedef uint8_t vu8 __attribute__((vector_size(KL)));
typedef uint8_t vu8u __attribute__((vector_size(KL), aligned(1)));
typedef uint32_t u32u __attribute__((aligned(1)));
#define WSUM_SHIFT 0
#if KL == 16 && defined(__AVX512VNNI__)
#include <immintrin.h>
typedef __m512i wprep;
typedef int32_t aprep;
#define PREP_W(d, p) ((d) = _mm512_loadu_si512((const void*)(p)))
#define prep_a(a4) ((int32_t)(a4))
#define MAC(acc, w, a) ((acc) = (vi)_mm512_dpbusd_epi32((__m512i)(acc), _mm512_set1_epi32(a), (w)))
#elif KL == 8 && defined(__AVXVNNI__)
#include <immintrin.h>
typedef __m256i wprep;
typedef int32_t aprep;
#define PREP_W(d, p) ((d) = _mm256_loadu_si256((const __m256i*)(p)))
#define prep_a(a4) ((int32_t)(a4))
#define MAC(acc, w, a) \
  ((acc) = (vi)_mm256_dpbusd_avx_epi32((__m256i)(acc), _mm256_set1_epi32(a), (w)))
#elif KL == 16 && defined(__AVX512BW__)
#include <immintrin.h>
typedef struct { __m512i e, o; } wprep;
typedef struct { __m512i e, o; } aprep;
#define PREP_W(d, p) do { \
    const __m512i w_ = _mm512_loadu_si512((const void*)(p)); \
    (d).e = _mm512_srai_epi16(_mm512_slli_epi16(w_, 8), 8); \
    (d).o = _mm512_srai_epi16(w_, 8); \
  } while (0)
static inline __attribute__((always_inline)) aprep prep_a(uint32_t a4) {
  const __m512i b = _mm512_set1_epi32((int)a4);
  aprep r = {_mm512_and_si512(b, _mm512_set1_epi32(0x00FF00FF)), _mm512_srli_epi16(b, 8)};
  return r;
}
#define MAC(acc, w, a) \
  ((acc) = (vi)_mm512_add_epi32((__m512i)(acc), _mm512_add_epi32(_mm512_madd_epi16((a).e, (w).e), \
                                                                  _mm512_madd_epi16((a).o, (w).o))))
#elif KL == 8 && defined(__AVX2__)
#include <immintrin.h>
typedef struct { __m256i e, o; } wprep;
typedef struct { __m256i e, o; } aprep;
#define PREP_W(d, p) do { \
    const __m256i w_ = _mm256_loadu_si256((const __m256i*)(p)); \
    (d).e = _mm256_srai_epi16(_mm256_slli_epi16(w_, 8), 8); \
    (d).o = _mm256_srai_epi16(w_, 8); \
  } while (0)
static inline __attribute__((always_inline)) aprep prep_a(uint32_t a4) {
  const __m256i b = _mm256_set1_epi32((int)a4);
  aprep r = {_mm256_and_si256(b, _mm256_set1_epi32(0x00FF00FF)), _mm256_srli_epi16(b, 8)};
  return r;
}
#define MAC(acc, w, a) \
  ((acc) = (vi)_mm256_add_epi32((__m256i)(acc), _mm256_add_epi32(_mm256_madd_epi16((a).e, (w).e), \
                                                                  _mm256_madd_epi16((a).o, (w).o))))
#elif KL == 4 && defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>
#undef WSUM_SHIFT
#define WSUM_SHIFT 1
typedef int8x16_t wprep;
typedef int8x16_t aprep;
#define PREP_W(d, p) ((d) = vld1q_s8((const int8_t*)(p)))
#define prep_a(a4) vreinterpretq_s8_u32(vdupq_n_u32((uint32_t)(a4) ^ 0x80808080u))
#define MAC(acc, w, a) ((acc) = (vi)vdotq_s32((int32x4_t)(acc), (w), (a)))
#else
/* Byte j of each lane's word, sign-extended, times input channel j. */
typedef struct { vi b0, b1, b2, b3; } wprep;
typedef struct { int32_t a0, a1, a2, a3; } aprep;
#define PREP_W(d, p) do { \
    const vu32 w_ = (vu32)*(const viu*)(p); \
    (d).b0 = (vi)(w_ << 24) >> 24; \
    (d).b1 = (vi)(w_ << 16) >> 24; \
    (d).b2 = (vi)(w_ << 8) >> 24; \
    (d).b3 = (vi)w_ >> 24; \
  } while (0)
static inline __attribute__((always_inline)) aprep prep_a(uint32_t a4) {
  aprep r = {(int32_t)(a4 & 255u), (int32_t)(a4 >> 8 & 255u), (int32_t)(a4 >> 16 & 255u),
             (int32_t)(a4 >> 24)};
  return r;
}
#define MAC(acc, w, a) \
  ((acc) += (w).b0 * (a).a0 + (w).b1 * (a).a1 + (w).b2 * (a).a2 + (w).b3 * (a).a3)
#endif
#if WSUM_SHIFT
#define WSUM_ITEMS KO
#else
#define WSUM_ITEMS 0
#endif
)KERNEL";

// in: data or its padded copy (HP x WP pixels of CP channels); the tile's pixels are ow0 ..
// ow0 + TP - 1 of row oh, its channels ko0 * KL .. (ko0 + TKV) * KL - 1.
const char* const Conv2dInt8Task::kTileBody = R"KERNEL(  vi acc[TKV][TP];
  for (int t = 0; t < TKV; ++t) {
#if WSUM_SHIFT
    const vi init = *(const vi*)(a->scratch->wsum + (ko0 + t) * KL);
#else
    const vi init = (vi){0};
#endif
    for (int p = 0; p < TP; ++p) acc[t][p] = init;
  }
  const long wko = R_ * S_ * C4 * KL * 4;
  for (long r = 0; r < R_; ++r) {
    for (long s = 0; s < S_; ++s) {
      const uint8_t* x = in + ((n * HP + oh * STRIDE + r) * WP + ow0 * STRIDE + s) * CP;
      const int8_t* w = a->weight + ko0 * wko + (r * S_ + s) * C4 * KL * 4;
#pragma clang loop unroll_count(UNROLL)
      for (long q = 0; q < C4; ++q) {
        wprep wp[TKV];
        for (int t = 0; t < TKV; ++t) PREP_W(wp[t], w + t * wko + q * KL * 4);
        for (int p = 0; p < TP; ++p) {
          const aprep ap = prep_a(*(const u32u*)(x + p * STRIDE * CP + q * 4));
          for (int t = 0; t < TKV; ++t) MAC(acc[t][p], wp[t], ap);
        }
      }
    }
  }
  /* Requantize: rint by adding and taking away 1.5 * 2^23 (round half to even), after the clamp
     to [LOW, 255] (whole numbers, so the order does not matter). */
  const vf magic = (vf){0} + 12582912.0f;
  const vf low = (vf){0} + (float)LOW, high = (vf){0} + 255.0f;
  for (int t = 0; t < TKV; ++t) {
    const long k0 = (ko0 + t) * KL;
    const vi b = *(const viu*)(a->bias + k0);
    const vf sc = *(const vfu*)(a->scale + k0);
    for (int p = 0; p < TP; ++p) {
      vf f = __builtin_convertvector(acc[t][p] + b, vf) * sc + (float)OUT_ZERO;
      const vi under = f < low, over = f > high;
      f = (vf)(((vi)f & ~under) | ((vi)low & under));
      f = (vf)(((vi)f & ~over) | ((vi)high & over));
      f = (f + magic) - magic;
      const vu8 q8 = __builtin_convertvector(__builtin_convertvector(f, vi), vu8);
      uint8_t* y = a->out + ((n * OH + oh) * OW + ow0 + p) * K_ + k0;
      if (k0 + KL <= K_) {
        *(vu8u*)y = q8;
      } else {
        for (long j = 0; j < K_ - k0; ++j) y[j] = q8[j];
      }
    }
  }
}
)KERNEL";

const char* const Conv2dInt8Task::kKernelBody = R"KERNEL(
#if PACKED_IN
/* Items: padded rows (image, row); the border rows and pixels read IN_ZERO, the channels past C
   zero (their weights are zero too). */
static int32_t pack_input(int32_t task, int32_t num_tasks, void* closure) {
  const kernel_args* a = (const kernel_args*)closure;
  uint8_t* in = (uint8_t*)a->scratch->in;
  long begin, end;
  task_range(N_ * HP, task, num_tasks, &begin, &end);
  for (long item = begin; item < end; ++item) {
    const long hp = item % HP, n = item / HP, h = hp - PAD;
    uint8_t* dst = in + item * WP * CP;
    if (h < 0 || h >= H_) {
      for (long i = 0; i < WP * CP; ++i) dst[i] = IN_ZERO;
      continue;
    }
    for (long i = 0; i < PAD * CP; ++i) dst[i] = IN_ZERO;
    for (long i = (PAD + W_) * CP; i < WP * CP; ++i) dst[i] = IN_ZERO;
    const uint8_t* src = a->data + (n * H_ + h) * W_ * C_;
    for (long w = 0; w < W_; ++w) {
      uint8_t* d = dst + (PAD + w) * CP;
      for (long c = 0; c < C_; ++c) d[c] = src[w * C_ + c];
      for (long c = C_; c < CP; ++c) d[c] = 0;
    }
  }
  return 0;
}
#endif

/* Items: output-channel vectors; each lane's sum of weights times 128 (WSUM_SHIFT only). */
static int32_t weight_sums(int32_t task, int32_t num_tasks, void* closure) {
  const kernel_args* a = (const kernel_args*)closure;
  long begin, end;
  task_range(WSUM_ITEMS, task, num_tasks, &begin, &end);
  for (long kb = begin; kb < end; ++kb) {
    int32_t* sum = (int32_t*)a->scratch->wsum + kb * KL;
    for (int l = 0; l < KL; ++l) sum[l] = 0;
    const int8_t* w = a->weight + kb * R_ * S_ * C4 * KL * 4;
    for (long i = 0; i < R_ * S_ * C4; ++i)
      for (int l = 0; l < KL; ++l)
        for (int j = 0; j < 4; ++j) sum[l] += 128 * w[(i * KL + l) * 4 + j];
  }
  return 0;
}

/* Items: (image, output row, channel block) in the order ROWS_OUTER says. */
static int32_t conv_rows(int32_t task, int32_t num_tasks, void* closure) {
  const kernel_args* a = (const kernel_args*)closure;
#if PACKED_IN
  const uint8_t* in = (const uint8_t*)a->scratch->in;
#else
  const uint8_t* in = a->data;
#endif
  long begin, end;
  task_range(N_ * OH * KOB, task, num_tasks, &begin, &end);
  for (long item = begin; item < end; ++item) {
#if ROWS_OUTER
    const long kb = item / (N_ * OH), row = item % (N_ * OH);
#else
    const long kb = item % KOB, row = item / KOB;
#endif
    const long n = row / OH, oh = row % OH, ko0 = kb * TK;
    const int full_k = ko0 + TK <= KO;
    long ow = 0;
    for (; ow + TP_FULL <= OW; ow += TP_FULL) {
#if HAS_KREM
      if (!full_k) { tile_krem(a, in, n, oh, ow, ko0); continue; }
#endif
      tile_full(a, in, n, oh, ow, ko0);
    }
#if HAS_PREM
    if (ow < OW) {
#if HAS_KREM
      if (!full_k) { tile_bothrem(a, in, n, oh, ow, ko0); continue; }
#endif
      tile_prem(a, in, n, oh, ow, ko0);
    }
#endif
    (void)full_k;
  }
  return 0;
}
)KERNEL";

}  // namespace

Expected<std::unique_ptr<Task>> templates::MakeConv2dInt8Task(const std::vector<int64_t>& shape,
                                                              const builder::Target& target,
                                                              const TaskOptions& options) {
  return Conv2dInt8Task::Make(shape, target, options);
}

}  // namespace crosstune::tuner
