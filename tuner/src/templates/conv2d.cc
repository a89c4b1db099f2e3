// CPU fp32 2-D convolution with a fused epilogue: out = act(conv(data, weight) + bias
// (+ residual)), act relu, relu6 (clamped to [0, 6]) or none (a shape field, no knob), NCHW
// tensors, weight [K, C, R, S], any stride and zero padding.
//
// A direct convolution over blocked layouts. Each call repacks
//   data   [N, C, H, W]    -> [N][C/CB][H + 2 pad][W + 2 pad][CB]  (the padding stays zero)
//   weight [K, C, R, S]    -> per block of KVW output channels (KV vectors), [C][R][S][KVW]
// into static scratch sized from the shape, with VW x VW in-register transposes where the blocks
// allow; a weight block is made by the task that uses it, when it comes to it. The register tile is
// T output pixels along a row x KV vectors of output channels: each step loads KV weight vectors,
// broadcasts one input scalar per pixel and does T x KV FMAs, accumulating over the input channels
// and the filter window. A row's tiles are T wide plus one remainder tile of exactly the width
// left, so widths that do not divide the tile cost no padded work. The tiles write a per-task row
// buffer in pixel-major order; the epilogue transposes it back to NCHW a VW x VW block at a time,
// adding bias and residual and clamping (relu). Channel counts that do not fill a block are
// zero-padded in the packed copies (zeros add nothing) and never written out.
//
// The second algorithm ("gemm") is an implicit matrix product, out[n] (K x P) = weight (K x CRS)
// · x (CRS x P) over the P = OH*OW output pixels and CRS = C*R*S: for each panel of NV vectors of
// pixels, a task copies the inputs under them into its own im2col panel (CRS x NV*VW, zero where
// the window is over the padding), and an MR-channel x NV-vector register tile broadcasts the
// weight as stored, one element per channel. The pixels are the vector lanes, so NCHW output is
// stored directly, and the weight is never repacked: the default for 1x1 layers of many pixels, a
// knob value for the others. A 1x1 stride-1 unpadded layer may read full panels from the input
// planes in place.
//
// Layouts (the shape's layout field, conv_layout.h): 0 NCHW as above; 1 blocked, the network
// layout the model compiler keeps between layers: data, residual and out [N, C/VW, H, W, VW] and
// the weight packed at compile time as [K/VW, C, R, S, VW], so a call packs nothing (a padded
// layer copies its input rows into a zero-bordered buffer, no transposes) and stores its register
// tiles as they are, one vector a pixel and channel block; 2 NCHW data (packed in the call, as
// layout 0) with blocked out, for a network's first layer. Blocked layouts use the direct
// algorithm with the channel block VW; the KV vectors of a tile are KV neighbouring channel blocks.
//
// The work is a list of items (image, output-channel block, output rows; for gemm: image, pixel
// panel), split into contiguous ranges by task, so the kernel runs unchanged on one thread or
// many; packing is split likewise.
//
// Knobs: ow_tile (T), oc_vectors (KV), ic_block (CB), order of the row-tile and input-channel
// block loops, oh_rows (output rows an item covers: with the channel-block loop outermost, a
// block's weights serve them all from L1), unroll of the innermost channel loop, taps_inner
// (the filter's taps inside the channel loop: the weight read in memory order); algorithm
// (direct, gemm), gemm_rows (MR), gemm_vectors (NV), gemm_chunk (reduction chunk, a split) and
// gemm_pack (copy or read in place). The
// knobs of the algorithm not chosen are held at their first value, so no kernel appears twice in
// the space.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "crosstune/tuner/conv_layout.h"
#include "crosstune/tuner/task.h"
#include "templates/common.h"
#include "templates/cuda.h"
#include "templates/reference.h"
#include "templates/registry.h"

namespace crosstune::tuner {
namespace {

using templates::CeilDiv;
using templates::RoundUp;

// The task's sizes and the target's vector unit, and the config space they make.
struct Conv2dShape {
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, k_ = 0, r_ = 0, s_ = 0, stride_ = 1, pad_ = 0;
  int64_t oh_ = 0, ow_ = 0;
  bool residual_ = false;
  int64_t act_ = 1;     // the epilogue's activation: 0 none, 1 relu, 2 relu6
  int64_t layout_ = 0;  // ConvLayout
  int vw_ = 4;
  int regs_ = 16;
  Expected<ConfigSpace> BuildSpace() const;
  // 1x1, stride 1, no padding: the input planes are the matrix product's right-hand side.
  bool PlainMatrix() const { return r_ == 1 && s_ == 1 && pad_ == 0 && stride_ == 1; }
  bool BlockedIn() const { return layout_ == 1; }
  bool BlockedOut() const { return layout_ != 0; }
  // Channel blocks of VW in blocked tensors: of the input (layout 1) and of the output.
  int64_t InBlocks() const { return CeilDiv(c_, vw_); }
  int64_t OutBlocks() const { return CeilDiv(k_, vw_); }
};

class Conv2dTask final : public Task, private Conv2dShape {
 public:
  Conv2dTask(TaskId id, builder::Target target, ConfigSpace space, const Conv2dShape& shape)
      : Task(std::move(id), std::move(target), std::move(space)), Conv2dShape(shape) {}

  static Expected<std::unique_ptr<Task>> Make(const std::vector<int64_t>& shape,
                                              const builder::Target& target,
                                              const TaskOptions& options) {
    const std::string usage = templates::ShapeUsage("conv2d");
    CT_RETURN_IF_ERROR(templates::CheckConvSizes(usage, shape));
    if (shape.size() > 9 && shape[9] != 0 && shape[9] != 1) {
      return Status(ErrorCode::kInvalidArgument, usage + ": residual is 0 or 1");
    }
    if (shape.size() > 10 && (shape[10] < 0 || shape[10] > 2)) {
      return Status(ErrorCode::kInvalidArgument,
                    usage + ": activation is 0 (none), 1 (relu, the default) or 2 (relu6)");
    }
    if (shape.size() > 11 && (shape[11] < 0 || shape[11] > 2)) {
      return Status(ErrorCode::kInvalidArgument,
                    usage + ": layout is 0 (NCHW), 1 (blocked) or 2 (NCHW data, blocked out)");
    }
    if (target.is_cuda()) {
      if (shape.size() > 11 && shape[11] != 0) {
        return Status(ErrorCode::kInvalidArgument,
                      usage + ": blocked layouts are for CPU targets; " + target.ToString() +
                          " takes NCHW (layout 0)");
      }
      return MakeCudaConv2dTask(shape, target, options);
    }
    const templates::ConvShape g = templates::ConvShapeOf(shape);
    Conv2dShape s;
    s.n_ = g.n;
    s.c_ = g.c;
    s.h_ = g.h;
    s.w_ = g.w;
    s.k_ = g.k;
    s.r_ = g.r;
    s.s_ = g.s;
    s.stride_ = g.stride;
    s.pad_ = g.pad;
    s.residual_ = g.residual;
    s.act_ = g.act;
    s.layout_ = g.layout;
    s.oh_ = g.oh;
    s.ow_ = g.ow;
    s.vw_ = templates::VectorWidth(target);
    s.regs_ = templates::VectorRegisters(target);
    return templates::NewTask<Conv2dTask>(
        TaskId{"conv2d", templates::ConvKey(g), "float32", options.threads}, target, s);
  }

  std::string function() const override { return "conv2d"; }

  std::vector<ArgSpec> args() const override {
    if (!BlockedOut()) {
      std::vector<ArgSpec> a = {
          {"data", {n_, c_, h_, w_}}, {"weight", {k_, c_, r_, s_}}, {"bias", {k_}}};
      if (residual_) a.push_back({"residual", {n_, k_, oh_, ow_}});
      a.push_back({"out", {n_, k_, oh_, ow_}, {kDLFloat, 32, 1}, true});
      return a;
    }
    const std::vector<int64_t> out = BlockedShape({n_, k_, oh_, ow_}, vw_);
    std::vector<ArgSpec> a;
    if (BlockedIn()) {
      a = {{"data", BlockedShape({n_, c_, h_, w_}, vw_)},
           {"weight", PackedWeightShape({k_, c_, r_, s_}, vw_)}};
    } else {
      a = {{"data", {n_, c_, h_, w_}}, {"weight", {k_, c_, r_, s_}}};
    }
    a.push_back({"bias", {PaddedChannels(k_, vw_)}});
    if (residual_) a.push_back({"residual", out});
    a.push_back({"out", out, {kDLFloat, 32, 1}, true});
    return a;
  }

  double flops() const override { return 2.0 * n_ * k_ * oh_ * ow_ * c_ * r_ * s_; }

  Config DefaultConfig() const override {
    // Two channel vectors where K has them, and the widest pixel tile the registers hold, made
    // narrower while that keeps the number of tiles per row (fewer wasted remainder pixels).
    const int64_t kv = k_ > vw_ && (!BlockedIn() || OutBlocks() % 2 == 0) ? 2 : 1;
    const int64_t tmax = std::max<int64_t>(1, std::min<int64_t>(ow_, (regs_ - 1 - kv) / kv));
    int64_t t = tmax;
    while (t > 1 && CeilDiv(ow_, t - 1) == CeilDiv(ow_, tmax)) --t;
    const Knob* cb_knob = space().FindKnob("ic_block");
    nlohmann::json cb = cb_knob->values.front();
    for (const auto& v : cb_knob->values) {
      if (v.get<int64_t>() <= 16) cb = v;
    }
    // Rows narrower than the widest tile (7 pixels on AVX-512) leave few sums per channel step:
    // items of 4 rows, whose weights serve all four from L1, and the channel loop unrolled 4
    // times keep the FMA units fed. Measured on ResNet-50's 3x3 layer of 7x7 outputs (AMD EPYC,
    // one thread, same run): 79-87 GFLOP/s with 1 row and no unroll, 99-104 with both. On rows
    // of 14 pixels or more neither made a difference above the noise. Measured on blocked
    // layouts only, so NCHW keeps one row and no unroll.
    const bool narrow = BlockedIn() && ow_ < (regs_ - 1 - kv) / kv;
    const int64_t unroll = narrow ? std::min<int64_t>(4, cb.get<int64_t>()) : 1;
    const int64_t rows = narrow ? space().FindKnob("oh_rows")->values.back().get<int64_t>() : 1;
    // A weight of over 4 MiB comes from memory on every call in a network (it outgrows L2, and
    // the layers between evict it from L3): read it in its memory order, every tap of a channel
    // before the next channel, so each of the tile's weight vectors is one sequential stream.
    // Measured cold (caches flushed) on ResNet-50's layers with their tuned configs (AMD EPYC,
    // one thread, same run, GFLOP/s): the 3x3 layers of 512 channels 124-147 -> 202-206 (7x7
    // pixels) and 131-139 -> 199-200 (stride 2, 14x14 -> 7x7); on those of 256 channels and
    // less (2.4 MiB of weight and under) from -8% (stride 2) to +7%, so they keep the taps
    // outside.
    const bool streamed = k_ * c_ * r_ * s_ * 4 > (int64_t{4} << 20);
    nlohmann::json want = {{"ow_tile", t},
                           {"oc_vectors", kv},
                           {"ic_block", cb},
                           {"order", {"ow", "cb"}},
                           {"oh_rows", rows},
                           {"unroll_c", unroll},
                           {"taps_inner", streamed && r_ * s_ > 1 ? 1 : 0}};
    want["algorithm"] = "direct";
    want["gemm_rows"] = 1;
    want["gemm_vectors"] = 1;
    want["gemm_pack"] = space().FindKnob("gemm_pack")->values.front();
    want["gemm_chunk"] = space().FindKnob("gemm_chunk")->values.front();
    // The matrix product for 1x1 filters over many pixels (32 vectors or more). Measured against
    // the direct algorithm on ResNet-50's layers: faster on the 1x1 layers of 56x56 and 28x28
    // pixels, slower on those of 14x14 and 7x7 (few pixels: lanes past the last one are wasted,
    // while the direct tile's lanes are output channels) and on every 3x3 layer.
    if (!BlockedOut() && r_ == 1 && s_ == 1 && pad_ == 0 && oh_ * ow_ >= 32 * vw_) {
      // Pixel vectors: the fewest padded lanes, within 10%, with the most vectors a panel.
      const int64_t p = oh_ * ow_;
      auto padded = [&](int64_t nv) { return CeilDiv(p, nv * vw_) * nv * vw_; };
      int64_t least = padded(1);
      for (int64_t nv = 2; nv <= 4; ++nv) least = std::min(least, padded(nv));
      int64_t nv = 4;
      while (nv > 1 && (padded(nv) * 10 > least * 11 || 2 * nv + nv + 1 > regs_)) --nv;
      int64_t mr = std::min<int64_t>({k_, 12, (regs_ - 1 - nv) / nv});
      want = {{"ow_tile", 1},
              {"oc_vectors", 1},
              {"ic_block", cb_knob->values.front()},
              {"order", {"ow", "cb"}},
              {"oh_rows", 1},
              {"unroll_c", 1},
              {"taps_inner", 0},
              {"algorithm", "gemm"},
              {"gemm_rows", std::max<int64_t>(mr, 1)},
              {"gemm_vectors", nv},
              {"gemm_pack", PlainMatrix() ? 0 : 1}};
      // Reduction chunks whose part of the panel fits in 32 KiB (L1), 64 elements at least.
      const Knob* chunks = space().FindKnob("gemm_chunk");
      want["gemm_chunk"] = chunks->values.front();
      for (const auto& v : chunks->values) {
        if (v[1].get<int64_t>() * nv * vw_ * 4 <= 32 * 1024) want["gemm_chunk"] = v;
      }
    }
    auto c = space().FromJson(want);
    if (c.ok() && space().IsValid(*c)) return *c;
    UniqueSampler s(space(), 1);
    return space().Get(s.Next().value_or(0));
  }

  Status CheckLimits(const Config& c, const msg::DeviceInfo& device) const override {
    CT_RETURN_IF_ERROR(templates::CheckThreads(threads(), device));
    const uint64_t bytes = ScratchFloats(c) * 4;
    if (device.memory_bytes > 0 && bytes > device.memory_bytes / 4) {
      return Status(ErrorCode::kInvalidArgument, "packed copies need " +
                                                     std::to_string(bytes >> 20) +
                                                     " MiB, over a quarter of the device's memory");
    }
    return Status::Ok();
  }

  std::string Generate(const Config& c) const override {
    const Blocks b = BlocksOf(c);
    std::ostringstream o;
    o << "/* crosstune conv2d " << id().Key() << ": " << c.ToString() << " */\n"
      << templates::KernelHeader() << "#define THREADS " << threads() << "\n"
      << "#define N_ " << n_ << "L\n#define C_ " << c_ << "L\n#define H_ " << h_ << "L\n"
      << "#define W_ " << w_ << "L\n#define K_ " << k_ << "L\n#define R_ " << r_ << "\n"
      << "#define S_ " << s_ << "\n#define ST " << stride_ << "\n#define PAD " << pad_ << "L\n"
      << "#define OH " << oh_ << "L\n#define OW " << ow_ << "L\n#define VW " << vw_ << "\n"
      << "#define KV " << b.kv << "\n#define KVW " << b.kv * vw_ << "\n#define T " << b.t << "\n"
      << "#define NT " << ow_ / b.t << "L\n#define REM " << ow_ % b.t << "\n"
      << "#define CB " << b.cb << "\n#define CBN " << b.cbn << "L\n#define KB " << b.kb << "L\n"
      << "#define HP " << h_ + 2 * pad_ << "L\n#define WP " << w_ + 2 * pad_ << "L\n"
      << "#define OHB " << c.Int("oh_rows") << "L\n#define OHN " << CeilDiv(oh_, c.Int("oh_rows"))
      << "L\n#define OWP " << RoundUp(ow_, vw_) << "L\n#define UNROLL " << c.Int("unroll_c") << "\n"
      << "#define CB_OUTER " << (c.Ints("order")[0] == 1 ? 1 : 0) << "\n"
      << "#define RESIDUAL " << (residual_ ? 1 : 0) << "\n#define RELU " << (act_ != 0 ? 1 : 0)
      << "\n"
      << "#define GEMM " << (b.gemm ? 1 : 0) << "\n#define MR " << b.mr << "\n#define NV " << b.nv
      << "\n#define NRP " << b.nv * vw_ << "\n#define P_ " << oh_ * ow_ << "L\n"
      << "#define PB " << CeilDiv(oh_ * ow_, b.nv * vw_) << "L\n#define IN_PLACE "
      << (b.in_place ? 1 : 0) << "\n#define CRS " << c_ * r_ * s_ << "L\n"
      << "#define KC " << b.kc << "L\n#define NCHUNK " << CeilDiv(c_ * r_ * s_, b.kc)
      << "\n#define KR " << RoundUp(k_, b.mr) << "L\n"
      << "#define IN_BLOCKED " << (BlockedIn() ? 1 : 0) << "\n#define OUT_BLOCKED "
      << (BlockedOut() ? 1 : 0) << "\n#define IN_DIRECT " << (InDirect() ? 1 : 0)
      << "\n#define KBO " << OutBlocks()
      << "L\n"
      // The weight a tile reads: channel rows WROW apart, its KV vectors WVS apart (the packed
      // weight of layout 1, or the call's copy of a KVW-channel block).
      << "#define WROW " << (BlockedIn() ? vw_ : b.kv * vw_) << "\n#define WVS "
      << (BlockedIn() ? b.cbn * b.cb * r_ * s_ * vw_ : vw_) << "L\n"
      << templates::KernelPrelude(vw_);
    // relu6 redefines the activation after the relu one (relu and none keep the code, and so the
    // generator hash, their records were measured with).
    o << kActivation;
    if (act_ == 2) o << "#undef ACT\n#undef ACT1\n" << templates::ActivationDefines(act_);
    if (!b.gemm) {
      const bool taps_inner = c.Int("taps_inner") == 1;
      o << TileFunction("tile_full", b.t, taps_inner);
      if (ow_ % b.t) o << TileFunction("tile_rem", ow_ % b.t, taps_inner);
    }
    std::vector<templates::KernelPhase> phases;
    if (b.gemm) {
      phases = {{"conv_gemm", "N_ * PB"}};
    } else {
      if (!InDirect()) phases.push_back({"pack_input", "N_ * CBN * H_"});
      phases.push_back({"conv_rows", "KB * N_ * OHN"});
    }
    const auto scratch = Scratch(b);
    o << templates::KernelArgsStruct(args(), scratch, threads()) << kKernelBody
      << templates::KernelEntry(function(), args(), phases,
                                templates::ScratchBytes(scratch, threads()));
    return o.str();
  }

  int64_t ScratchBytes(const Config& c) const override {
    return templates::ScratchBytes(Scratch(BlocksOf(c)), threads());
  }

  void Reference(HostArgs& args) const override {
    templates::ConvShape g{n_, c_, h_, w_, k_, r_, s_, stride_, pad_, residual_, oh_, ow_};
    g.act = act_;
    if (!BlockedOut()) {
      templates::Conv2dReference(g, args[0], args[1], args[2], residual_ ? &args[3] : nullptr,
                                 args.back());
      return;
    }
    // The NCHW reference on unblocked copies, its output blocked.
    const std::vector<float> data =
        BlockedIn() ? FromBlocked(args[0], n_, c_, h_ * w_, vw_) : args[0];
    const std::vector<float> weight =
        BlockedIn() ? UnpackWeight(args[1], k_, c_, r_, s_, vw_) : args[1];
    const std::vector<float> bias(args[2].begin(), args[2].begin() + k_);
    std::vector<float> residual;
    if (residual_) residual = FromBlocked(args[3], n_, k_, oh_ * ow_, vw_);
    std::vector<float> out(static_cast<size_t>(n_ * k_ * oh_ * ow_));
    templates::Conv2dReference(g, data, weight, bias, residual_ ? &residual : nullptr, out);
    args.back() = ToBlocked(out, n_, k_, oh_ * ow_, vw_);
  }

  // Blocked tensors hold zeros past the last channel, the packed weight zero rows and lanes past
  // C and K, the padded bias zeros past K: as the model compiler's packing writes them.
  void ZeroPadding(HostArgs& args) const override {
    if (!BlockedOut()) return;
    auto reblock = [](std::vector<float>& t, int64_t n, int64_t c, int64_t hw, int64_t cb) {
      t = ToBlocked(FromBlocked(t, n, c, hw, cb), n, c, hw, cb);
    };
    if (BlockedIn()) {
      reblock(args[0], n_, c_, h_ * w_, vw_);
      args[1] = PackWeight(UnpackWeight(args[1], k_, c_, r_, s_, vw_), k_, c_, r_, s_, vw_);
    }
    std::fill(args[2].begin() + k_, args[2].end(), 0.0f);
    if (residual_) reblock(args[3], n_, k_, oh_ * ow_, vw_);
  }

  // fp32 sums of C*R*S products in another order than the reference's (double) sum.
  double atol() const override { return 2e-6 * static_cast<double>(c_ * r_ * s_) + 1e-5; }
  double rtol() const override { return 1e-4; }

  std::vector<float> Features(const Config& c) const override {
    std::vector<float> f = space().Features(c);
    const Blocks b = BlocksOf(c);
    const double t = b.t, kv = b.kv, kvw = b.kv * vw_;
    const double tiles = static_cast<double>(CeilDiv(ow_, b.t));
    const double rem = static_cast<double>(ow_ % b.t);
    const double wblock = static_cast<double>(r_ * s_) * b.cb * kvw * 4 / 1024.0;
    f.insert(f.end(), {
                          static_cast<float>(kvw),
                          static_cast<float>(t * kv),             // accumulators
                          static_cast<float>(t * kv / (t + kv)),  // FMAs per load
                          static_cast<float>(tiles),              // tiles per row
                          static_cast<float>(rem / t),            // remainder tile's fill
                          static_cast<float>(b.kb * kvw / k_),    // padded channel work
                          static_cast<float>(double(b.cbn) * b.cb / c_),
                          static_cast<float>(wblock),          // weights of a CB block, KiB
                          static_cast<float>(wblock * b.cbn),  // weights of an item, KiB
                          static_cast<float>(double(r_) * (w_ + 2 * pad_) * b.cb * 4 / 1024.0),
                          static_cast<float>(c_ * r_ * s_),  // reduction length
                          static_cast<float>(stride_),
                          static_cast<float>(c.Int("oh_rows") * tiles),  // tiles an item
                          static_cast<float>(ScratchFloats(c) * 4 / 1048576.0),
                          static_cast<float>(vw_),
                          static_cast<float>(threads()),
                      });
    // The matrix-product algorithm's tile (1x1 filters; held values otherwise).
    const double mr = b.mr, nrp = b.nv * vw_;
    const double p = static_cast<double>(oh_ * ow_);
    f.insert(f.end(),
             {
                 static_cast<float>(b.gemm ? 1 : 0), static_cast<float>(b.in_place ? 1 : 0),
                 static_cast<float>(mr * b.nv),                     // accumulators
                 static_cast<float>(mr * b.nv / (mr + b.nv)),       // FMAs per load
                 static_cast<float>(c_ * nrp * 4 / 1024.0),         // panel KiB
                 static_cast<float>(std::ceil(p / nrp) * nrp / p),  // padded pixels
                 static_cast<float>(std::ceil(k_ / mr) * mr / k_),  // repeated rows
             });
    return f;
  }

 private:
  // Layout 1 without padding reads its input where it is: no packed copy.
  bool InDirect() const { return BlockedIn() && pad_ == 0; }

  struct Blocks {
    int64_t t, kv, cb, cbn, kb;
    bool gemm, in_place;
    int64_t mr, nv, kc, ohb;
  };
  Blocks BlocksOf(const Config& c) const {
    Blocks b{};
    b.gemm = c.Int("algorithm") == 1;
    b.mr = c.Int("gemm_rows");
    b.nv = c.Int("gemm_vectors");
    b.in_place = b.gemm && PlainMatrix() && c.Int("gemm_pack") == 0;
    b.kc = c.Ints("gemm_chunk")[1];
    b.t = c.Int("ow_tile");
    b.kv = c.Int("oc_vectors");
    b.cb = c.Int("ic_block");
    b.cbn = CeilDiv(c_, b.cb);
    b.kb = CeilDiv(k_, b.kv * vw_);
    b.ohb = c.Int("oh_rows");
    return b;
  }

  // The kernel's working memory: the panels and their sums (gemm), or the padded input, a
  // task's packed weight block and its output rows.
  std::vector<templates::ScratchBuffer> Scratch(const Blocks& b) const {
    if (b.gemm) {
      return {{"x", "CRS * NRP", c_ * r_ * s_ * b.nv * vw_, true},
              {"sums", "KR * NRP", RoundUp(k_, b.mr) * b.nv * vw_, true}};
    }
    const int64_t hp = h_ + 2 * pad_, wp = w_ + 2 * pad_;
    std::vector<templates::ScratchBuffer> out;
    if (!InDirect()) {
      out.push_back({"in", "N_ * CBN * HP * WP * CB", n_ * b.cbn * hp * wp * b.cb, false});
    }
    if (!BlockedIn()) {
      out.push_back({"wt", "CBN * R_ * S_ * CB * KVW", b.cbn * r_ * s_ * b.cb * b.kv * vw_, true});
    }
    out.push_back({"rows", "OHB * OWP * KVW", b.ohb * RoundUp(ow_, vw_) * b.kv * vw_, true});
    return out;
  }

  uint64_t ScratchFloats(const Config& c) const {
    const Blocks b = BlocksOf(c);
    const uint64_t tasks = static_cast<uint64_t>(threads());
    if (b.gemm) return tasks * (c_ * r_ * s_ + RoundUp(k_, b.mr)) * b.nv * vw_;
    const uint64_t in =
        InDirect() ? 0
                   : static_cast<uint64_t>(n_) * b.cbn * (h_ + 2 * pad_) * (w_ + 2 * pad_) * b.cb;
    const uint64_t w = BlockedIn() ? 0 : tasks * b.cbn * r_ * s_ * b.cb * b.kv * vw_;
    const uint64_t rows = tasks * c.Int("oh_rows") * RoundUp(ow_, vw_) * b.kv * vw_;
    return in + w + rows;
  }

  // The register tile for `t` pixels: acc[t][KV] over `ncb` channel blocks, from (first) zero or
  // from the row buffer, written back to the row buffer.
  static std::string TileFunction(const char* name, int64_t t, bool taps_inner) {
    std::ostringstream o;
    o << "\nstatic inline __attribute__((always_inline)) void " << name
      << "(const float* restrict ip, const float* restrict wp, float* restrict rb, long ncb,\n"
      << "    int first, int last, float* restrict op, const float* restrict rp,\n"
      << "    const float* restrict bp, long nv) {\n"
      << "  enum { TW = " << t << " };\n"
      << kTileHead << (taps_inner ? kTapsInside : kTapsOutside) << kTileTail;
    return o.str();
  }

  static const char* const kTileHead;
  static const char* const kTapsOutside;
  static const char* const kTapsInside;
  static const char* const kTileTail;
  static const char* const kActivation;
  static const char* const kKernelBody;
};

Expected<ConfigSpace> Conv2dShape::BuildSpace() const {
  ConfigSpace space;
  std::vector<int64_t> tiles;
  for (int64_t t = 1; t <= std::min<int64_t>(ow_, regs_ - 2); ++t) tiles.push_back(t);
  CT_RETURN_IF_ERROR(space.AddCategorical("ow_tile", tiles));
  std::vector<int64_t> kvs;
  for (int64_t v = 1; v <= 4 && (v - 1) * vw_ < k_; ++v) {
    // Blocked: a tile's KV channel blocks are whole blocks of the packed weight.
    if (!BlockedIn() || OutBlocks() % v == 0) kvs.push_back(v);
  }
  CT_RETURN_IF_ERROR(space.AddCategorical("oc_vectors", kvs));
  // A blocked input comes in blocks of VW channels.
  CT_RETURN_IF_ERROR(space.AddCategorical(
      "ic_block", BlockedIn() ? std::vector<int64_t>{vw_}
                              : templates::CandidatesUpTo({1, 2, 4, 8, 16, 32, 64},
                                                          std::min<int64_t>(c_, 64))));
  CT_RETURN_IF_ERROR(space.AddReorder("order", {"ow", "cb"}));
  CT_RETURN_IF_ERROR(space.AddCategorical(
      "oh_rows", templates::CandidatesUpTo({1, 2, 4}, std::min<int64_t>(oh_, 4))));
  CT_RETURN_IF_ERROR(space.AddCategorical("unroll_c", {1, 2, 4, 8}));
  const int regs = regs_;
  {
    // The matrix product reads and writes NCHW: no algorithm of the blocked layouts.
    CT_RETURN_IF_ERROR(space.AddCategoricalJson(
        "algorithm", BlockedOut() ? std::vector<nlohmann::json>{"direct"}
                                  : std::vector<nlohmann::json>{"direct", "gemm"}));
    std::vector<int64_t> rows;
    for (int64_t m = 1; m <= std::min<int64_t>(k_, 14); ++m) rows.push_back(m);
    CT_RETURN_IF_ERROR(space.AddCategorical("gemm_rows", rows));
    CT_RETURN_IF_ERROR(space.AddCategorical("gemm_vectors", {1, 2, 3, 4}));
    // Copy every panel, or (1x1, stride 1, no padding) read full panels in place.
    CT_RETURN_IF_ERROR(space.AddCategorical(
        "gemm_pack", PlainMatrix() ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{1}));
    const std::vector<std::string> direct = {"ow_tile", "oc_vectors", "ic_block",
                                             "order",   "oh_rows",    "taps_inner"};
    SplitOptions chunk{.policy = SplitPolicy::kCandidates};
    chunk.candidates =
        templates::AsCandidates(templates::CandidatesUpTo({64, 128, 256, 512, 1024}, c_ * r_ * s_));
    CT_RETURN_IF_ERROR(space.AddSplit("gemm_chunk", c_ * r_ * s_, 2, chunk));
    // Whether the filter's taps loop inside the channel loop (1) or outside it (0); only a
    // filter of more than one tap has the choice. The last knob, added after the others: 0
    // keeps the numbering and the code of the configs made before it (records.h), and records
    // made before it mean 0.
    CT_RETURN_IF_ERROR(space.AddCategorical(
        "taps_inner", r_ * s_ > 1 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0}));
    CT_RETURN_IF_ERROR(space.MarkAddedLater("taps_inner"));
    const std::vector<std::string> gemm = {"gemm_rows", "gemm_vectors", "gemm_pack", "gemm_chunk"};
    space.AddConstraint("one_algorithm", [direct, gemm](const Config& c) {
      const auto& held = c.Int("algorithm") == 1 ? direct : gemm;
      const ConfigSpace& sp = *c.space();
      for (const auto& k : held) {
        if (c.choices()[sp.KnobIndex(k)] != 0) return false;
      }
      return true;
    });
    space.AddConstraint("gemm_registers", [regs](const Config& c) {
      return c.Int("gemm_rows") * c.Int("gemm_vectors") + c.Int("gemm_vectors") + 1 <= regs;
    });
  }
  // The accumulators plus the KV weight vectors and a broadcast must fit the register file, or
  // they spill and the tile is slower than a smaller one.
  space.AddConstraint("registers", [regs](const Config& c) {
    return c.Int("ow_tile") * c.Int("oc_vectors") + c.Int("oc_vectors") + 1 <= regs;
  });
  // Unrolling past the channel block only repeats configs.
  const int64_t reduction = c_ * r_ * s_;
  space.AddConstraint("unroll_fits", [reduction](const Config& c) {
    return c.Int("unroll_c") <= (c.Int("algorithm") == 1 ? reduction : c.Int("ic_block"));
  });
  return space;
}

// ip: packed input at (channel block 0, the item's first input row, the tile's first input
// column); wp: the item's packed weights at channel block 0; rb: the row buffer at the tile's
// first pixel. Blocked out: `last` (the sums are whole) stores the tile with the epilogue to op,
// the output at the tile's first pixel and channel block (blocks OVS apart), rp the residual
// there, bp the bias of the block, nv the blocks that exist (past K there are none). Loops with
// constant bounds over TW and KV are unrolled by clang, so the accumulators stay in registers.
const char* const Conv2dTask::kTileHead = R"KERNEL(  vf acc[TW][KV];
  for (int i = 0; i < TW; ++i)
    for (int v = 0; v < KV; ++v) acc[i][v] = first ? (vf){0} : *(const vf*)(rb + i * KVW + v * VW);
  for (long cb = 0; cb < ncb; ++cb) {
    const float* ib = ip + cb * (HP * WP * CB);
    const float* wb = wp + cb * ((long)R_ * S_ * CB * WROW);
)KERNEL";

// The loops over the filter taps and the channels of a block: the taps outside (a tap's
// weights for the block's channels CB rows apart), or inside (taps_inner: every tap of a
// channel, then the next channel, so the weight is read in its memory order).
const char* const Conv2dTask::kTapsOutside = R"KERNEL(    for (int r = 0; r < R_; ++r)
      for (int s = 0; s < S_; ++s) {
        const float* ir = ib + (r * WP + s) * CB;
        const float* wr = wb + (r * S_ + s) * WROW;
#pragma clang loop unroll_count(UNROLL)
        for (int c = 0; c < CB; ++c) {
          vf w[KV];
          for (int v = 0; v < KV; ++v) w[v] = *(const vfu*)(wr + c * R_ * S_ * WROW + v * WVS);
          for (int i = 0; i < TW; ++i) {
            const float x = ir[i * ST * CB + c];
            for (int v = 0; v < KV; ++v) acc[i][v] += x * w[v];
          }
        }
      }
)KERNEL";

const char* const Conv2dTask::kTapsInside = R"KERNEL(#pragma clang loop unroll_count(UNROLL)
    for (int c = 0; c < CB; ++c)
      for (int r = 0; r < R_; ++r)
        for (int s = 0; s < S_; ++s) {
          const float* ir = ib + (r * WP + s) * CB;
          const float* wr = wb + (r * S_ + s) * WROW;
          vf w[KV];
          for (int v = 0; v < KV; ++v) w[v] = *(const vfu*)(wr + c * R_ * S_ * WROW + v * WVS);
          for (int i = 0; i < TW; ++i) {
            const float x = ir[i * ST * CB + c];
            for (int v = 0; v < KV; ++v) acc[i][v] += x * w[v];
          }
        }
)KERNEL";

const char* const Conv2dTask::kTileTail = R"KERNEL(  }
#if OUT_BLOCKED
  if (last) {
    for (int v = 0; v < KV; ++v) {
      if (v >= nv) break;
      const vf b = *(const vfu*)(bp + v * VW);
      for (int i = 0; i < TW; ++i) {
        vf y = acc[i][v] + b;
#if RESIDUAL
        y += *(const vfu*)(rp + v * OVS + i * VW);
#endif
        *(vfu*)(op + v * OVS + i * VW) = ACT(y);
      }
    }
    return;
  }
#endif
  for (int i = 0; i < TW; ++i)
    for (int v = 0; v < KV; ++v) *(vf*)(rb + i * KVW + v * VW) = acc[i][v];
}
)KERNEL";

const char* const Conv2dTask::kActivation = R"KERNEL(
/* The epilogue's activation on a vector and on one element: relu (NaN becomes 0), or none. */
#if RELU
#define ACT(v) relu(v)
#define ACT1(x) ((x) > 0 ? (x) : 0)
#else
#define ACT(v) (v)
#define ACT1(x) (x)
#endif
/* Blocked out: channel blocks of the output are OVS apart. */
#define OVS (OH * OW * VW)
)KERNEL";

const char* const Conv2dTask::kKernelBody = R"KERNEL(
#if GEMM
/* Scratch x: per-task im2col panels [C*R*S][NRP]: for each (c, r, s), the input under NRP output
   pixels (zero where the window is over the padding). Lanes past the last pixel hold whatever
   was there; they only reach output lanes that are not stored. */

/* The panel of pixels [p0, p0 + pn) of image `img`, an output row's run at a time. */
static void pack_panel(float* restrict dst, const float* restrict img, long p0, long pn) {
  for (long c = 0; c < C_; ++c)
    for (int r = 0; r < R_; ++r)
      for (int s = 0; s < S_; ++s) {
        float* d = dst + ((c * R_ + r) * S_ + s) * NRP;
        for (long j = 0; j < pn;) {
          const long p = p0 + j, oh = p / OW, ow = p % OW;
          const long len = MIN(pn - j, OW - ow);
          const long ih = oh * ST - PAD + r;
          /* Pixels ow + q with q in [lo, hi) read inside the row, (ow + q) * ST - PAD + s. */
          long lo = (PAD - s + ST - 1) / ST - ow, hi = (W_ + PAD - s + ST - 1) / ST - ow;
          lo = lo < 0 ? 0 : lo > len ? len : lo;
          hi = hi < lo ? lo : hi > len ? len : hi;
          if (ih < 0 || ih >= H_) lo = hi = len;
          const float* row = img + (c * H_ + ih) * W_ + ow * ST - PAD + s;
          long q = 0;
          for (; q < lo; ++q) d[j + q] = 0;
          for (; q < hi; ++q) d[j + q] = row[q * ST];
          for (; q < len; ++q) d[j + q] = 0;
          j += len;
        }
      }
}

/* Scratch sums: per-task sums of a panel, KR = K rounded up to MR rows of NRP. */

/* Sums of channels [k0, k0 + MR) over the reduction elements [j0, j0 + jn) into `sums` (MR rows
   of NRP; first: from zero). xp: the panel at element j0, elements xs apart; w0: channel k0's
   weights at j0. Rows past `rows` repeat row k0. */
static inline __attribute__((always_inline)) void gemm_tile(const float* restrict xp, long xs,
                                                            const float* restrict w0, long rows,
                                                            long jn, float* restrict sums,
                                                            int first) {
  const float* wr[MR];
  for (int i = 0; i < MR; ++i) wr[i] = w0 + (i < rows ? i : 0) * CRS;
  vf acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v)
      acc[i][v] = first ? (vf){0} : *(const vf*)(sums + i * NRP + v * VW);
#pragma clang loop unroll_count(UNROLL)
  for (long c = 0; c < jn; ++c) {
    vf x[NV];
    for (int v = 0; v < NV; ++v) x[v] = *(const vfu*)(xp + c * xs + v * VW);
    for (int i = 0; i < MR; ++i) {
      const float w = wr[i][c];
      for (int v = 0; v < NV; ++v) acc[i][v] += w * x[v];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) *(vf*)(sums + i * NRP + v * VW) = acc[i][v];
}

/* Channels [k0, k0 + rows) of the panel's sums to NCHW with the epilogue. */
static void gemm_store(const kernel_args* a, const float* sums, long n, long k0, long rows,
                       long p0, long pn) {
  for (long i = 0; i < rows; ++i) {
    const long k = k0 + i;
    float* o = a->out + (n * K_ + k) * P_ + p0;
#if RESIDUAL
    const float* res = a->residual + (n * K_ + k) * P_ + p0;
#endif
    for (int v = 0; v < NV; ++v) {
      vf y = *(const vf*)(sums + i * NRP + v * VW) + a->bias[k];
      if ((v + 1) * VW <= pn) {
#if RESIDUAL
        y += *(const vfu*)(res + v * VW);
#endif
        *(vfu*)(o + v * VW) = ACT(y);
      } else {
        float part[VW];
        *(vfu*)part = y;
        for (long j = 0; j < VW && v * VW + j < pn; ++j) {
          float z = part[j];
#if RESIDUAL
          z += res[v * VW + j];
#endif
          o[v * VW + j] = ACT1(z);
        }
      }
    }
  }
}

/* Every output channel of one panel: reduction chunks of KC outside (the panel's chunk stays in
   cache while all channels go by), channel tiles inside. */
static inline __attribute__((always_inline)) void gemm_panel(const kernel_args* a,
                                                             const float* restrict x, long xs,
                                                             float* restrict sums, long n, long p0,
                                                             long pn) {
  for (long j0 = 0; j0 < CRS; j0 += KC) {
    const long jn = MIN(KC, CRS - j0);
    for (long k0 = 0; k0 < K_; k0 += MR) {
      gemm_tile(x + j0 * xs, xs, a->weight + k0 * CRS + j0, MIN(MR, K_ - k0), jn, sums + k0 * NRP,
                j0 == 0);
#if NCHUNK == 1
      gemm_store(a, sums + k0 * NRP, n, k0, MIN(MR, K_ - k0), p0, pn);
#endif
    }
  }
#if NCHUNK > 1
  gemm_store(a, sums, n, 0, K_, p0, pn);
#endif
}

/* Items: (image, pixel panel). */
static int32_t conv_gemm(int32_t task, int32_t num_tasks, void* closure) {
  const kernel_args* a = (const kernel_args*)closure;
  float* sums = a->scratch->sums[task];
  long begin, end;
  task_range(N_ * PB, task, num_tasks, &begin, &end);
  for (long item = begin; item < end; ++item) {
    const long pb = item % PB, n = item / PB;
    const long p0 = pb * NRP, pn = MIN(NRP, P_ - p0);
#if IN_PLACE
    if (pn == NRP) {
      /* 1x1, stride 1, no padding, a full panel: the input planes are the panel, P apart. */
      gemm_panel(a, a->data + n * C_ * P_ + p0, P_, sums, n, p0, pn);
      continue;
    }
#endif
    float* xp = a->scratch->x[task];
    pack_panel(xp, a->data + n * C_ * H_ * W_, p0, pn);
    gemm_panel(a, xp, NRP, sums, n, p0, pn);
  }
  return 0;
}

#else
/* Scratch: the packed input `in` (channel blocks of the padded planes, CB channels a pixel), and
   a task's copy of the output-channel block it works on, `wt`, made when its items reach the
   block (while the block is then used from cache, rather than all blocks written out and read
   back), and its output `rows`. The kernel writes every element it reads: zeros for the padding
   and for channels past C (scratch holds anything when a call begins). */

#if !IN_DIRECT
/* Items: (image, channel block, input row); the first and last rows write the padding rows. */
static int32_t pack_input(int32_t task, int32_t num_tasks, void* closure) {
  const kernel_args* a = (const kernel_args*)closure;
  float* in = a->scratch->in;
  long begin, end;
  task_range(N_ * CBN * H_, task, num_tasks, &begin, &end);
  for (long item = begin; item < end; ++item) {
    const long h = item % H_, cb = item / H_ % CBN, n = item / (H_ * CBN);
    float* plane = in + (n * CBN + cb) * HP * WP * CB;
    if (h == 0) zero_floats(plane, PAD * WP * CB);
    if (h == H_ - 1) zero_floats(plane + (H_ + PAD) * WP * CB, PAD * WP * CB);
    float* dst = plane + (h + PAD) * WP * CB + PAD * CB;
    zero_floats(dst - PAD * CB, PAD * CB);
    zero_floats(dst + W_ * CB, PAD * CB);
#if IN_BLOCKED
    /* The row as it is (CB is VW): the padded copy only adds the zero border. */
    const float* src = a->data + ((n * CBN + cb) * H_ + h) * W_ * CB;
    for (long j = 0; j < W_ * CB; j += VW) *(vfu*)(dst + j) = *(const vfu*)(src + j);
#else
    const float* src = a->data + ((n * C_ + cb * CB) * H_ + h) * W_;
    const long cn = MIN(CB, C_ - cb * CB);
    long w = 0;
#if CB % VW == 0
    if (cn == CB) {
      for (; w + VW <= W_; w += VW)
        for (int cv = 0; cv < CB / VW; ++cv) {
          vf t[VW];
          for (int j = 0; j < VW; ++j) t[j] = *(const vfu*)(src + (cv * VW + j) * H_ * W_ + w);
          transpose(t);
          for (int j = 0; j < VW; ++j) *(vfu*)(dst + (w + j) * CB + cv * VW) = t[j];
        }
    }
#endif
    for (; w < W_; ++w) {
      long c = 0;
      for (; c < cn; ++c) dst[w * CB + c] = src[c * H_ * W_ + w];
      for (; c < CB; ++c) dst[w * CB + c] = 0;
    }
#endif
  }
  return 0;
}
#endif

/* Output-channel block kb of the weight into dst: the weight's (c, r, s) order with KVW channels
   an element, so the transposed vectors are written in sequence. Lanes of channels past K keep
   what was there (they only reach outputs that are not stored); rows of channels past C are
   zero. */
#if !IN_BLOCKED
static void pack_weight_block(const kernel_args* a, float* restrict dst, long kb) {
  const long crs = C_ * R_ * S_;
#if OUT_BLOCKED
  /* Blocked outputs store whole vectors: the lanes of channels past K must sum to zero. */
  zero_floats(dst, CBN * CB * R_ * S_ * KVW);
#endif
  for (long kk = 0; kk < KVW; kk += VW) {
    const long k0 = kb * KVW + kk;
    if (k0 >= K_) break;
    const long kn = MIN(VW, K_ - k0);
    const float* src = a->weight + k0 * crs;
    long j = 0;
    if (kn == VW) {
      for (; j + VW <= crs; j += VW) {
        vf t[VW];
        for (int e = 0; e < VW; ++e) t[e] = *(const vfu*)(src + e * crs + j);
        transpose(t);
        for (int e = 0; e < VW; ++e) *(vf*)(dst + (j + e) * KVW + kk) = t[e];
      }
    }
    for (; j < crs; ++j)
      for (long q = 0; q < kn; ++q) dst[j * KVW + kk + q] = src[q * crs + j];
  }
  zero_floats(dst + crs * KVW, (CBN * CB - C_) * R_ * S_ * KVW);
}
#endif

#if !OUT_BLOCKED
/* The row buffer (pixel-major, KVW channels a pixel) back to NCHW with the epilogue. */
static void store_row(const kernel_args* a, const float* rb, long n, long kb, long oh) {
  for (int v = 0; v < KV; ++v) {
    const long k0 = kb * KVW + v * VW;
    if (k0 >= K_) break;
    for (long ow = 0; ow < OW; ow += VW) {
      vf t[VW];
      for (int j = 0; j < VW; ++j) t[j] = *(const vf*)(rb + (ow + j) * KVW + v * VW);
      transpose(t);
      const long cols = MIN(VW, OW - ow);
      for (int c = 0; c < VW && k0 + c < K_; ++c) {
        const long o = ((n * K_ + k0 + c) * OH + oh) * OW + ow;
        vf y = t[c] + a->bias[k0 + c];
        if (cols == VW) {
#if RESIDUAL
          y += *(const vfu*)(a->residual + o);
#endif
          *(vfu*)(a->out + o) = ACT(y);
        } else {
          float part[VW];
          *(vfu*)part = y;
          for (long j = 0; j < cols; ++j) {
            float x = part[j];
#if RESIDUAL
            x += a->residual[o + j];
#endif
            a->out[o + j] = ACT1(x);
          }
        }
      }
    }
  }
}
#endif

/* Items: (output-channel block, image, block of OHB output rows). */
static int32_t conv_rows(int32_t task, int32_t num_tasks, void* closure) {
  const kernel_args* a = (const kernel_args*)closure;
  float* rows = a->scratch->rows[task];
  long begin, end;
#if !IN_BLOCKED
  float* wp = a->scratch->wt[task];
  long packed = -1;
#endif
  task_range(KB * N_ * OHN, task, num_tasks, &begin, &end);
  for (long item = begin; item < end; ++item) {
    const long oh0 = item % OHN * OHB, n = item / OHN % N_, kb = item / (OHN * N_);
#if IN_BLOCKED
    /* The packed weight's blocks kb * KV ... (its vectors WVS apart). */
    const float* wp = a->weight + kb * KV * WVS;
#else
    if (kb != packed) {
      pack_weight_block(a, wp, kb);
      packed = kb;
    }
#endif
    const long nrows = MIN(OHB, OH - oh0);
#if IN_DIRECT
    const float* ip = a->data + n * CBN * HP * WP * CB + oh0 * ST * WP * CB;
#else
    const float* ip = a->scratch->in + n * CBN * HP * WP * CB + oh0 * ST * WP * CB;
#endif
#if OUT_BLOCKED
    /* The tiles store whole sums to the output themselves: blocks kb * KV ..., nv of them. */
    float* ob = a->out + ((n * KBO + kb * KV) * OH + oh0) * OW * VW;
#if RESIDUAL
    const float* rs = a->residual + ((n * KBO + kb * KV) * OH + oh0) * OW * VW;
#else
    const float* rs = 0;
#endif
    const float* bp = a->bias + kb * KV * VW;
    const long nv = MIN(KV, KBO - kb * KV);
#else
    float* ob = 0;
    const float* rs = 0;
    const float* bp = 0;
    const long nv = 0;
#endif
#if CB_OUTER
    /* A channel block's weights stay in L1 while every tile of the rows goes by. */
    for (long cb = 0; cb < CBN; ++cb) {
      const float* wc = wp + cb * R_ * S_ * CB * WROW;
      const int last = OUT_BLOCKED && cb == CBN - 1;
      for (long y = 0; y < nrows; ++y) {
        const float* ic = ip + cb * HP * WP * CB + y * ST * WP * CB;
        float* rb = rows + y * OWP * KVW;
        const long oy = y * OW * VW;
        for (long t = 0; t < NT; ++t)
          tile_full(ic + t * T * ST * CB, wc, rb + t * T * KVW, 1, cb == 0, last,
                    ob + oy + t * T * VW, rs + oy + t * T * VW, bp, nv);
#if REM
        tile_rem(ic + NT * T * ST * CB, wc, rb + NT * T * KVW, 1, cb == 0, last,
                 ob + oy + NT * T * VW, rs + oy + NT * T * VW, bp, nv);
#endif
      }
    }
#else
    for (long y = 0; y < nrows; ++y) {
      const float* iy = ip + y * ST * WP * CB;
      float* rb = rows + y * OWP * KVW;
      const long oy = y * OW * VW;
      for (long t = 0; t < NT; ++t)
        tile_full(iy + t * T * ST * CB, wp, rb + t * T * KVW, CBN, 1, OUT_BLOCKED,
                  ob + oy + t * T * VW, rs + oy + t * T * VW, bp, nv);
#if REM
      tile_rem(iy + NT * T * ST * CB, wp, rb + NT * T * KVW, CBN, 1, OUT_BLOCKED,
               ob + oy + NT * T * VW, rs + oy + NT * T * VW, bp, nv);
#endif
    }
#endif
#if !OUT_BLOCKED
    for (long y = 0; y < nrows; ++y) store_row(a, rows + y * OWP * KVW, n, kb, oh0 + y);
#endif
  }
  return 0;
}

#endif /* GEMM */

)KERNEL";

}  // namespace

Expected<std::unique_ptr<Task>> templates::MakeConv2dTask(const std::vector<int64_t>& shape,
                                                          const builder::Target& target,
                                                          const TaskOptions& options) {
  return Conv2dTask::Make(shape, target, options);
}

}  // namespace crosstune::tuner
