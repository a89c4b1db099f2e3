// CPU fp32 depthwise 2-D convolution (channel multiplier 1, MobileNet-style) with fused bias and
// activation: out[n, c] = act(conv(data[n, c], weight[c, 0]) + bias[c]), act relu (the default),
// relu6 (clamped to [0, 6]) or none (a shape field), weight [C, 1, R, S], any stride and zero
// padding.
//
// Layout 0 (NCHW tensors):
//
// Vectors run along the output width. Each (image, channel) plane is first copied into a
// per-task zero-padded buffer split by column phase: phase p holds the padded columns p, p +
// stride, p + 2 stride, ..., so the input of output pixels ow..ow+VW-1 at filter column s is one
// contiguous load (phase s % stride, offset ow + s / stride) for any stride. The register tile is
// RT output rows x TV vectors of pixels, accumulating R x S broadcast weights; a row ends in a
// remainder tile of exactly the vectors left, and the last vector's lanes past the width are
// computed on padding and not stored.
//
// Items: (image, channel) planes, split into contiguous ranges by task.
//
// Knobs: tile_vectors (TV), tile_rows (RT).
//
// Layout 1 (blocked, as the model compiler keeps the activations between convs; conv_layout.h):
// data [N, C/VW, H, W, VW], out [N, C/VW, OH, OW, VW], the weight packed at compile time as
// [C/VW, 1, R, S, VW] and the bias padded to C/VW * VW, zeros past C. A vector is one pixel's VW
// channels, so each tap is one FMA of the pixel's vector by the tap's weight vector, for any
// stride. The register tile is RT output rows x TP output pixels; a padded layer first copies its
// channel block's plane into a per-task zero-bordered buffer. Items: (image, channel block)
// planes. Knobs: tile_pixels (TP), tile_rows (RT).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "crosstune/tuner/conv_layout.h"
#include "crosstune/tuner/task.h"
#include "templates/common.h"
#include "templates/reference.h"
#include "templates/registry.h"

namespace crosstune::tuner {
namespace {

using templates::CeilDiv;

// The task's sizes and the target's vector unit, and the config space they make.
struct DepthwiseShape {
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, r_ = 0, s_ = 0, stride_ = 1, pad_ = 0;
  int64_t oh_ = 0, ow_ = 0;
  int64_t act_ = 1;       // 0 none, 1 relu, 2 relu6 (templates::ApplyActivation)
  bool blocked_ = false;  // layout 1
  int vw_ = 4;
  int regs_ = 16;
  int64_t blocks() const { return CeilDiv(c_, vw_); }
  Expected<ConfigSpace> BuildSpace() const;
};

class DepthwiseConv2dTask final : public Task, private DepthwiseShape {
 public:
  DepthwiseConv2dTask(TaskId id, builder::Target target, ConfigSpace space,
                      const DepthwiseShape& shape)
      : Task(std::move(id), std::move(target), std::move(space)), DepthwiseShape(shape) {}

  static Expected<std::unique_ptr<Task>> Make(const std::vector<int64_t>& shape,
                                              const builder::Target& target,
                                              const TaskOptions& options) {
    const std::string usage = templates::ShapeUsage("depthwise_conv2d");
    if (shape.size() < 8 || shape.size() > 10) {
      return Status(ErrorCode::kInvalidArgument,
                    usage + " (8 to 10 values, got " + std::to_string(shape.size()) + ")");
    }
    if (shape.size() > 8 && (shape[8] < 0 || shape[8] > 2)) {
      return Status(ErrorCode::kInvalidArgument,
                    usage + ": activation is 0 (none), 1 (relu, the default) or 2 (relu6)");
    }
    if (shape.size() > 9 && shape[9] != 0 && shape[9] != 1) {
      return Status(ErrorCode::kInvalidArgument, usage + ": layout is 0 (NCHW) or 1 (blocked)");
    }
    const int64_t limit = int64_t{1} << 16;
    for (size_t i = 0; i < 7; ++i) {
      if (shape[i] < 1 || shape[i] > limit) {
        return Status(ErrorCode::kInvalidArgument, usage + ": sizes and stride from 1 to 65536");
      }
    }
    const int64_t pad = shape[7];
    if (pad < 0 || pad > limit) {
      return Status(ErrorCode::kInvalidArgument, usage + ": pad from 0 to 65536");
    }
    if (shape[4] > shape[2] + 2 * pad || shape[5] > shape[3] + 2 * pad) {
      return Status(ErrorCode::kInvalidArgument,
                    usage + ": the filter (R,S) is larger than the padded input");
    }
    if (target.is_cuda()) {
      return Status(ErrorCode::kInvalidArgument,
                    "the depthwise_conv2d template is for CPU targets");
    }
    DepthwiseShape s;
    s.n_ = shape[0];
    s.c_ = shape[1];
    s.h_ = shape[2];
    s.w_ = shape[3];
    s.r_ = shape[4];
    s.s_ = shape[5];
    s.stride_ = shape[6];
    s.pad_ = pad;
    s.act_ = shape.size() > 8 ? shape[8] : 1;
    s.blocked_ = shape.size() > 9 && shape[9] == 1;
    s.oh_ = (s.h_ + 2 * pad - s.r_) / s.stride_ + 1;
    s.ow_ = (s.w_ + 2 * pad - s.s_) / s.stride_ + 1;
    s.vw_ = templates::VectorWidth(target);
    s.regs_ = templates::VectorRegisters(target);
    // The key: the eight sizes, then the activation when it is not relu or the layout is not
    // NCHW, then the layout when it is not NCHW (so relu on NCHW keeps the key it always had).
    std::vector<int64_t> key(shape.begin(), shape.begin() + 8);
    if (s.act_ != 1 || s.blocked_) key.push_back(s.act_);
    if (s.blocked_) key.push_back(1);
    return templates::NewTask<DepthwiseConv2dTask>(
        TaskId{"depthwise_conv2d", key, "float32", options.threads}, target, s);
  }

  std::string function() const override { return "depthwise_conv2d"; }

  std::vector<ArgSpec> args() const override {
    if (blocked_) {
      const int64_t b = blocks(), l = vw_;
      return {{"data", {n_, b, h_, w_, l}},
              {"weight", {b, 1, r_, s_, l}},
              {"bias", {b * l}},
              {"out", {n_, b, oh_, ow_, l}, {kDLFloat, 32, 1}, true}};
    }
    return {{"data", {n_, c_, h_, w_}},
            {"weight", {c_, 1, r_, s_}},
            {"bias", {c_}},
            {"out", {n_, c_, oh_, ow_}, {kDLFloat, 32, 1}, true}};
  }

  double flops() const override { return 2.0 * n_ * c_ * oh_ * ow_ * r_ * s_; }

  Config DefaultConfig() const override {
    // A whole row in one tile where it fits in about half the registers, two rows at a time;
    // blocked, 4 pixels (8 with 32 registers) of two rows.
    const int64_t vectors = CeilDiv(ow_, vw_);
    nlohmann::json want = {{"tile_vectors", std::min<int64_t>(vectors, regs_ >= 32 ? 4 : 2)},
                           {"tile_rows", std::min<int64_t>(oh_, 2)}};
    if (blocked_) {
      want = {{"tile_pixels", std::min<int64_t>(ow_, regs_ >= 32 ? 8 : 4)},
              {"tile_rows", std::min<int64_t>(oh_, 2)}};
    }
    auto c = space().FromJson(want);
    if (c.ok() && space().IsValid(*c)) return *c;
    UniqueSampler s(space(), 1);
    return space().Get(s.Next().value_or(0));
  }

  Status CheckLimits(const Config& c, const msg::DeviceInfo& device) const override {
    (void)c;
    CT_RETURN_IF_ERROR(templates::CheckThreads(threads(), device));
    const uint64_t bytes = ScratchFloats() * 4;
    if (device.memory_bytes > 0 && bytes > device.memory_bytes / 4) {
      return Status(ErrorCode::kInvalidArgument, "plane buffers need " +
                                                     std::to_string(bytes >> 20) +
                                                     " MiB, over a quarter of the device's memory");
    }
    return Status::Ok();
  }

  std::string Generate(const Config& c) const override {
    if (blocked_) return GenerateBlocked(c);
    const int64_t tv = c.Int("tile_vectors"), rt = c.Int("tile_rows");
    const int64_t vectors = CeilDiv(ow_, vw_);
    std::ostringstream o;
    o << "/* crosstune depthwise_conv2d " << id().Key() << ": " << c.ToString() << " */\n"
      << templates::KernelHeader() << "#define THREADS " << threads() << "\n"
      << "#define N_ " << n_ << "L\n#define C_ " << c_ << "L\n#define H_ " << h_ << "L\n"
      << "#define W_ " << w_ << "L\n#define R_ " << r_ << "\n#define S_ " << s_ << "\n"
      << "#define ST " << stride_ << "\n#define PAD " << pad_ << "L\n#define OH " << oh_
      << "L\n#define OW " << ow_ << "L\n#define VW " << vw_ << "\n#define HP " << h_ + 2 * pad_
      << "L\n#define WPH " << PhaseWidth() << "L\n#define TV " << tv << "\n#define RT " << rt
      << "\n#define NTV " << vectors / tv << "L\n#define REMV " << vectors % tv << "\n"
      << "#define NRT " << oh_ / rt << "L\n#define REMR " << oh_ % rt << "\n"
      << templates::KernelPrelude(vw_);
    // relu keeps the code (and the generator hash) its records were measured with; the other
    // activations replace its call.
    std::string tile_body = kTileBody;
    if (act_ != 1) {
      o << templates::ActivationDefines(act_);
      tile_body.replace(tile_body.find("relu(acc"), 4, "ACT");
    }
    std::string even, odd;
    for (int j = 0; j < vw_; ++j) {
      even += (j ? ", " : "") + std::to_string(2 * j);
      odd += (j ? ", " : "") + std::to_string(2 * j + 1);
    }
    o << "#define EVEN_LANES " << even << "\n#define ODD_LANES " << odd << "\n";
    o << TileFunction("tile_full", rt, tv, tile_body);
    if (vectors % tv) o << TileFunction("tile_full_rem", rt, vectors % tv, tile_body);
    if (oh_ % rt) {
      o << TileFunction("tile_row", 1, tv, tile_body);
      if (vectors % tv) o << TileFunction("tile_row_rem", 1, vectors % tv, tile_body);
    }
    const auto scratch = Scratch();
    o << templates::KernelArgsStruct(args(), scratch, threads()) << kKernelBody
      << templates::KernelEntry(function(), args(), {{"dw_planes", "N_ * C_"}},
                                templates::ScratchBytes(scratch, threads()));
    return o.str();
  }

  int64_t ScratchBytes(const Config& /*c*/) const override {
    return templates::ScratchBytes(Scratch(), threads());
  }

  void Reference(HostArgs& args) const override {
    if (blocked_) {
      // The NCHW reference on unblocked copies, its output blocked.
      HostArgs plain = {FromBlocked(args[0], n_, c_, h_ * w_, vw_),
                        FromBlocked(args[1], 1, c_, r_ * s_, vw_),
                        std::vector<float>(args[2].begin(), args[2].begin() + c_),
                        std::vector<float>(static_cast<size_t>(n_ * c_ * oh_ * ow_))};
      PlainReference(plain);
      args[3] = ToBlocked(plain[3], n_, c_, oh_ * ow_, vw_);
      return;
    }
    PlainReference(args);
  }

  // Blocked: data and the packed weight hold zeros past the last channel, the padded bias too,
  // as the model compiler's packing writes them.
  void ZeroPadding(HostArgs& args) const override {
    if (!blocked_) return;
    args[0] = ToBlocked(FromBlocked(args[0], n_, c_, h_ * w_, vw_), n_, c_, h_ * w_, vw_);
    args[1] = ToBlocked(FromBlocked(args[1], 1, c_, r_ * s_, vw_), 1, c_, r_ * s_, vw_);
    std::fill(args[2].begin() + c_, args[2].end(), 0.0f);
  }

  double atol() const override { return 2e-6 * static_cast<double>(r_ * s_) + 1e-5; }
  double rtol() const override { return 1e-4; }

  std::vector<float> Features(const Config& c) const override {
    std::vector<float> f = space().Features(c);
    if (blocked_) {
      const double tp = c.Int("tile_pixels"), rt = c.Int("tile_rows");
      f.insert(f.end(), {
                            static_cast<float>(tp * rt),                         // accumulators
                            static_cast<float>(std::ceil(ow_ / tp)),             // tiles per row
                            static_cast<float>(std::ceil(ow_ / tp) * tp / ow_),  // pixel waste
                            static_cast<float>(std::ceil(oh_ / rt) * rt / oh_),  // row waste
                            static_cast<float>(r_ * s_),
                            static_cast<float>(stride_),
                            static_cast<float>(pad_ > 0 ? (h_ + 2 * pad_) * (w_ + 2 * pad_) * vw_ *
                                                              4 / 1024.0
                                                        : 0.0),  // padded plane KiB
                            static_cast<float>(vw_),
                            static_cast<float>(threads()),
                        });
      return f;
    }
    const double tv = c.Int("tile_vectors"), rt = c.Int("tile_rows");
    const double vectors = static_cast<double>(CeilDiv(ow_, vw_));
    f.insert(f.end(), {
                          static_cast<float>(tv * rt),                  // accumulators
                          static_cast<float>(std::ceil(vectors / tv)),  // tiles per row
                          static_cast<float>(vectors * vw_ / static_cast<double>(ow_)),  // lanes
                          static_cast<float>(std::ceil(oh_ / rt) * rt / oh_),  // row waste
                          static_cast<float>(r_ * s_),
                          static_cast<float>(stride_),
                          static_cast<float>(PhaseWidth() * (h_ + 2 * pad_) * stride_ * 4 /
                                             1024.0),  // plane buffer KiB
                          static_cast<float>(vw_),
                          static_cast<float>(threads()),
                      });
    return f;
  }

 private:
  // Columns of one phase of the padded plane, with room for the last vector's overrun.
  // The NCHW reference: data [N, C, H, W], weight [C, 1, R, S], bias [C], out [N, C, OH, OW].
  void PlainReference(HostArgs& args) const {
    const std::vector<float>& data = args[0];
    const std::vector<float>& weight = args[1];
    const std::vector<float>& bias = args[2];
    std::vector<float>& out = args[3];
    for (int64_t n = 0; n < n_; ++n) {
      for (int64_t c = 0; c < c_; ++c) {
        for (int64_t y = 0; y < oh_; ++y) {
          for (int64_t x = 0; x < ow_; ++x) {
            double sum = bias[c];
            for (int64_t r = 0; r < r_; ++r) {
              const int64_t ih = y * stride_ - pad_ + r;
              if (ih < 0 || ih >= h_) continue;
              for (int64_t s = 0; s < s_; ++s) {
                const int64_t iw = x * stride_ - pad_ + s;
                if (iw < 0 || iw >= w_) continue;
                sum += static_cast<double>(data[((n * c_ + c) * h_ + ih) * w_ + iw]) *
                       weight[(c * r_ + r) * s_ + s];
              }
            }
            out[((n * c_ + c) * oh_ + y) * ow_ + x] =
                static_cast<float>(templates::ApplyActivation(act_, sum));
          }
        }
      }
    }
  }

  int64_t PhaseWidth() const {
    return CeilDiv(w_ + 2 * pad_, stride_) + vw_ + (s_ - 1) / stride_ + 1;
  }
  std::vector<templates::ScratchBuffer> Scratch() const {
    if (blocked_) {
      if (pad_ == 0) return {};
      return {{"plane", "HP * WP * VW", (h_ + 2 * pad_) * (w_ + 2 * pad_) * vw_, true}};
    }
    return {{"plane", "ST * HP * WPH", stride_ * (h_ + 2 * pad_) * PhaseWidth(), true}};
  }
  uint64_t ScratchFloats() const {
    uint64_t floats = 0;
    for (const auto& b : Scratch()) floats += static_cast<uint64_t>(b.floats);
    return floats * static_cast<uint64_t>(threads());
  }

  // Layout 1 (the file's comment): tiles of RT rows x TP pixels of one channel block.
  std::string GenerateBlocked(const Config& c) const {
    const int64_t tp = c.Int("tile_pixels"), rt = c.Int("tile_rows");
    std::ostringstream o;
    o << "/* crosstune depthwise_conv2d " << id().Key() << ": " << c.ToString() << " */\n"
      << templates::KernelHeader() << "#define THREADS " << threads() << "\n"
      << "#define N_ " << n_ << "L\n#define CBN " << blocks() << "L\n#define H_ " << h_
      << "L\n#define W_ " << w_ << "L\n#define R_ " << r_ << "\n#define S_ " << s_
      << "\n#define ST " << stride_ << "\n#define PAD " << pad_ << "L\n#define OH " << oh_
      << "L\n#define OW " << ow_ << "L\n#define VW " << vw_ << "\n#define HP " << h_ + 2 * pad_
      << "L\n#define WP " << w_ + 2 * pad_
      << "L\n"
      // The width of the plane the tiles read: the zero-bordered copy's, or the input's.
      << "#define IW " << (pad_ > 0 ? w_ + 2 * pad_ : w_) << "L\n#define TP " << tp
      << "\n#define RT " << rt << "\n#define NTP " << ow_ / tp << "L\n#define REMP " << ow_ % tp
      << "\n#define NRT " << oh_ / rt << "L\n#define REMR " << oh_ % rt << "\n"
      << templates::KernelPrelude(vw_) << templates::ActivationDefines(act_);
    o << BlockedTile("tile_full", rt, tp);
    if (ow_ % tp) o << BlockedTile("tile_full_rem", rt, ow_ % tp);
    if (oh_ % rt) {
      o << BlockedTile("tile_row", 1, tp);
      if (ow_ % tp) o << BlockedTile("tile_row_rem", 1, ow_ % tp);
    }
    const auto scratch = Scratch();
    o << templates::KernelArgsStruct(args(), scratch, threads()) << kBlockedBody
      << templates::KernelEntry(function(), args(), {{"dw_blocks", "N_ * CBN"}},
                                templates::ScratchBytes(scratch, threads()));
    return o.str();
  }

  // The blocked register tile for `rows` output rows x `pixels` output pixels.
  static std::string BlockedTile(const char* name, int64_t rows, int64_t pixels) {
    std::ostringstream o;
    o << "\nstatic inline __attribute__((always_inline)) void " << name
      << "(const float* restrict in, const float* restrict w, vf bias, float* restrict out,\n"
      << "    long oh, long ow) {\n"
      << "  enum { TR = " << rows << ", TN = " << pixels << " };\n"
      << kBlockedTileBody;
    return o.str();
  }

  // The register tile for `rows` output rows x `vectors` vectors, with the epilogue.
  static std::string TileFunction(const char* name, int64_t rows, int64_t vectors,
                                  const std::string& body) {
    std::ostringstream o;
    o << "\nstatic inline __attribute__((always_inline)) void " << name
      << "(const float* restrict plane, const float* restrict w, float bias, float* restrict out,\n"
      << "    long oh, long ow) {\n"
      << "  enum { TR = " << rows << ", TN = " << vectors << " };\n"
      << body;
    return o.str();
  }

  static const char* const kTileBody;
  static const char* const kKernelBody;
  static const char* const kBlockedTileBody;
  static const char* const kBlockedBody;
};

Expected<ConfigSpace> DepthwiseShape::BuildSpace() const {
  ConfigSpace space;
  if (blocked_) {
    std::vector<int64_t> tps;
    for (int64_t p = 1; p <= std::min<int64_t>(ow_, 14); ++p) tps.push_back(p);
    CT_RETURN_IF_ERROR(space.AddCategorical("tile_pixels", tps));
    std::vector<int64_t> rts;
    for (int64_t r = 1; r <= std::min<int64_t>(oh_, 4); ++r) rts.push_back(r);
    CT_RETURN_IF_ERROR(space.AddCategorical("tile_rows", rts));
    const int regs = regs_;
    // Accumulators, one input vector and the tap's weight vector in registers.
    space.AddConstraint("registers", [regs](const Config& c) {
      return c.Int("tile_pixels") * c.Int("tile_rows") + 2 <= regs;
    });
    return space;
  }
  std::vector<int64_t> tvs;
  for (int64_t v = 1; v <= std::min<int64_t>(CeilDiv(ow_, vw_), 8); ++v) tvs.push_back(v);
  CT_RETURN_IF_ERROR(space.AddCategorical("tile_vectors", tvs));
  std::vector<int64_t> rts;
  for (int64_t r = 1; r <= std::min<int64_t>(oh_, 4); ++r) rts.push_back(r);
  CT_RETURN_IF_ERROR(space.AddCategorical("tile_rows", rts));
  const int regs = regs_;
  // Accumulators, one input vector and a weight broadcast in registers.
  space.AddConstraint("registers", [regs](const Config& c) {
    return c.Int("tile_vectors") * c.Int("tile_rows") + 2 <= regs;
  });
  return space;
}

// plane: the channel's phase buffer; out: the channel's output plane; (oh, ow): the tile's first
// output pixel.
const char* const DepthwiseConv2dTask::kTileBody = R"KERNEL(  vf acc[TR][TN];
  for (int i = 0; i < TR; ++i)
    for (int v = 0; v < TN; ++v) acc[i][v] = (vf){0};
  for (int r = 0; r < R_; ++r)
    for (int s = 0; s < S_; ++s) {
      const float wv = w[r * S_ + s];
      const float* src = plane + (s % ST) * HP * WPH + s / ST + ow;
      for (int i = 0; i < TR; ++i) {
        const float* row = src + ((oh + i) * ST + r) * WPH;
        for (int v = 0; v < TN; ++v) acc[i][v] += wv * *(const vfu*)(row + v * VW);
      }
    }
  for (int i = 0; i < TR; ++i) {
    float* dst = out + (oh + i) * OW + ow;
    for (int v = 0; v < TN; ++v) {
      const vf y = relu(acc[i][v] + bias);
      if (ow + (v + 1) * VW <= OW) {
        *(vfu*)(dst + v * VW) = y;
      } else {
        float part[VW];
        *(vfu*)part = y;
        for (long j = 0; ow + v * VW + j < OW; ++j) dst[v * VW + j] = part[j];
      }
    }
  }
}
)KERNEL";

const char* const DepthwiseConv2dTask::kKernelBody = R"KERNEL(
/* Scratch plane: per-task plane buffers [phase][HP][WPH]. A task zeroes its buffer once a call;
   then the padding and overrun columns stay zero (pack_plane never writes them). */

/* Padded column x = j * ST + p of phase p is input column j * ST + p - PAD: a strided copy per
   phase (clang vectorizes it for some strides; stride 2 splits vector pairs itself). */
static void pack_plane(float* restrict plane, const float* restrict src) {
  for (long h = 0; h < H_; ++h) {
    const float* s = src + h * W_;
#if ST == 2
    /* Stride 2: pairs of vectors split into their even and odd columns, each a phase. */
    float* de = plane + (PAD % 2) * HP * WPH + (h + PAD) * WPH + PAD / 2;
    float* dodd = plane + ((PAD + 1) % 2) * HP * WPH + (h + PAD) * WPH + (PAD + 1) / 2;
    long w = 0;
    for (; w + 2 * VW <= W_; w += 2 * VW) {
      const vf a = *(const vfu*)(s + w), b = *(const vfu*)(s + w + VW);
      *(vfu*)(de + w / 2) = __builtin_shufflevector(a, b, EVEN_LANES);
      *(vfu*)(dodd + w / 2) = __builtin_shufflevector(a, b, ODD_LANES);
    }
    if (w < W_ && W_ >= 2 * VW) {
      /* The rest as one more pair that ends at the row's end (or one column before, to start
         on an even column), rewriting some columns with the same values. */
      const long t = (W_ - 2 * VW) & ~1L;
      const vf a = *(const vfu*)(s + t), b = *(const vfu*)(s + t + VW);
      *(vfu*)(de + t / 2) = __builtin_shufflevector(a, b, EVEN_LANES);
      *(vfu*)(dodd + t / 2) = __builtin_shufflevector(a, b, ODD_LANES);
      w = t + 2 * VW;
    }
    for (; w < W_; ++w) (w % 2 ? dodd : de)[w / 2] = s[w];
    continue;
#endif
    for (long p = 0; p < ST; ++p) {
      float* d = plane + p * HP * WPH + (h + PAD) * WPH;
      long j0 = (PAD - p + ST - 1) / ST;
      if (j0 < 0) j0 = 0;
      const long j1 = (W_ + PAD - p + ST - 1) / ST;
      for (long j = j0; j < j1; ++j) d[j] = s[j * ST + p - PAD];
    }
  }
}

/* Items: (image, channel) planes. */
static int32_t dw_planes(int32_t task, int32_t num_tasks, void* closure) {
  const kernel_args* a = (const kernel_args*)closure;
  float* plane = a->scratch->plane[task];
  long begin, end;
  task_range(N_ * C_, task, num_tasks, &begin, &end);
  if (begin < end) zero_floats(plane, ST * HP * WPH);
  for (long item = begin; item < end; ++item) {
    const long c = item % C_;
    pack_plane(plane, a->data + item * H_ * W_);
    const float* w = a->weight + c * R_ * S_;
    const float bias = a->bias[c];
    float* out = a->out + item * OH * OW;
    for (long t = 0; t < NRT; ++t) {
      for (long v = 0; v < NTV; ++v) tile_full(plane, w, bias, out, t * RT, v * TV * VW);
#if REMV
      tile_full_rem(plane, w, bias, out, t * RT, NTV * TV * VW);
#endif
    }
#if REMR
    for (long oh = NRT * RT; oh < OH; ++oh) {
      for (long v = 0; v < NTV; ++v) tile_row(plane, w, bias, out, oh, v * TV * VW);
#if REMV
      tile_row_rem(plane, w, bias, out, oh, NTV * TV * VW);
#endif
    }
#endif
  }
  return 0;
}

)KERNEL";

// in: the channel block's plane as the tile reads it (HP x WP pixels with a padding, H_ x W_
// without, VW floats each); w: the block's packed weight [R][S][VW]; out: the block's output plane;
// (oh, ow): the tile's first output pixel.
const char* const DepthwiseConv2dTask::kBlockedTileBody = R"KERNEL(  vf acc[TR][TN];
  for (int i = 0; i < TR; ++i)
    for (int p = 0; p < TN; ++p) acc[i][p] = bias;
  for (int r = 0; r < R_; ++r)
    for (int s = 0; s < S_; ++s) {
      const vf wv = *(const vfu*)(w + (r * S_ + s) * VW);
      for (int i = 0; i < TR; ++i) {
        const float* row = in + (((oh + i) * ST + r) * IW + ow * ST + s) * VW;
        for (int p = 0; p < TN; ++p) acc[i][p] += wv * *(const vfu*)(row + p * ST * VW);
      }
    }
  for (int i = 0; i < TR; ++i) {
    float* dst = out + ((oh + i) * OW + ow) * VW;
    for (int p = 0; p < TN; ++p) *(vfu*)(dst + p * VW) = ACT(acc[i][p]);
  }
}
)KERNEL";

const char* const DepthwiseConv2dTask::kBlockedBody = R"KERNEL(
/* Items: (image, channel block) planes. A padded layer copies each plane into its task's
   zero-bordered buffer (zeroed once a call: the copies never write the border). */
static int32_t dw_blocks(int32_t task, int32_t num_tasks, void* closure) {
  const kernel_args* a = (const kernel_args*)closure;
  long begin, end;
  task_range(N_ * CBN, task, num_tasks, &begin, &end);
#if PAD > 0
  float* plane = a->scratch->plane[task];
  if (begin < end) zero_floats(plane, HP * WP * VW);
#endif
  for (long item = begin; item < end; ++item) {
    const long cb = item % CBN;
    const float* src = a->data + item * H_ * W_ * VW;
#if PAD > 0
    for (long h = 0; h < H_; ++h) {
      float* d = plane + ((h + PAD) * WP + PAD) * VW;
      const float* s = src + h * W_ * VW;
      for (long x = 0; x < W_ * VW; x += VW) *(vfu*)(d + x) = *(const vfu*)(s + x);
    }
    const float* in = plane;
#else
    const float* in = src;
#endif
    const float* w = a->weight + cb * R_ * S_ * VW;
    const vf bias = *(const vfu*)(a->bias + cb * VW);
    float* out = a->out + item * OH * OW * VW;
    for (long t = 0; t < NRT; ++t) {
      for (long p = 0; p < NTP; ++p) tile_full(in, w, bias, out, t * RT, p * TP);
#if REMP
      tile_full_rem(in, w, bias, out, t * RT, NTP * TP);
#endif
    }
#if REMR
    for (long oh = NRT * RT; oh < OH; ++oh) {
      for (long p = 0; p < NTP; ++p) tile_row(in, w, bias, out, oh, p * TP);
#if REMP
      tile_row_rem(in, w, bias, out, oh, NTP * TP);
#endif
    }
#endif
  }
  return 0;
}

)KERNEL";

}  // namespace

Expected<std::unique_ptr<Task>> templates::MakeDepthwiseConv2dTask(
    const std::vector<int64_t>& shape, const builder::Target& target, const TaskOptions& options) {
  return DepthwiseConv2dTask::Make(shape, target, options);
}

}  // namespace crosstune::tuner
