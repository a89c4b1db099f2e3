// CPU fp32 matmul, C = A·B (row-major, A: MxK, B: KxN, C: MxN). With a fourth shape field, G
// groups, the tensors may have any leading dimensions (ArgSpec::flat_tail), as a transformer's
// MatMul nodes give them: G = 1 takes A [..., K] of M rows in all times one B [K, N] (3-D
// activations times a weight); G > 1 does G products one after another, A [..., M, K],
// B [..., K, N] and C [..., M, N] each holding G matrices (attention's batched products). A
// fifth field 1 (with G = 1) takes B packed in column panels one vector wide (matmul_layout.h),
// as the model compiler packs a constant weight once: the kernel then reads B as it is.
//
// The kernel follows the GotoBLAS structure: for each NC-wide column block and KC-deep slice, B
// is packed into zero-padded NR-wide panels (a packed B is read in place: NV panels of one vector
// each, NR wide together); for each MC-high row block, A is (optionally) packed
// into MR-high panels; an MR x NR register tile (NR = NV vectors of the target's width) then
// accumulates over the slice. The vectors are clang vector extensions, so one source becomes
// AVX-512, AVX2 or NEON code from the target's features. Rows and columns that do not fill a
// tile are handled by the same micro-kernel through zero-padded panels and a masked store, so
// every shape is correct.
//
// Knobs: mr, nv (register tile), tile_k / tile_m / tile_n (cache blocks, split knobs), order of
// the two panel loops, unroll of the k loop, pack_a, prefetch distance into the packed B panel.
//
// Threads (the task's, through the server's parallel launch in kernel_abi.h): B is packed by all
// threads, panel by panel, then each thread takes an equal share of the rows (whole MR panels)
// and blocks them by MC with its own packed-A buffer. With one thread the bodies run inline.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "crosstune/tuner/matmul_layout.h"
#include "crosstune/tuner/task.h"
#include "templates/common.h"
#include "templates/cuda.h"
#include "templates/reference.h"
#include "templates/registry.h"

namespace crosstune::tuner {
namespace {

using templates::AsCandidates;
using templates::CandidatesUpTo;
using templates::RoundUp;
using templates::VectorRegisters;
using templates::VectorWidth;

// The task's sizes and the target's vector unit, and the config space they make.
struct MatmulShape {
  int64_t m_ = 0, n_ = 0, k_ = 0;
  int64_t groups_ = 0;     // 0: 2-D A, B and C (three shape fields); else the fourth field
  bool packed_b_ = false;  // the fifth field: B in panels (matmul_layout.h)
  int vw_ = 4;
  int regs_ = 16;
  Expected<ConfigSpace> BuildSpace() const;
};

class MatmulTask final : public Task, private MatmulShape {
 public:
  MatmulTask(TaskId id, builder::Target target, ConfigSpace space, const MatmulShape& shape)
      : Task(std::move(id), std::move(target), std::move(space)), MatmulShape(shape) {}

  static Expected<std::unique_ptr<Task>> Make(const std::vector<int64_t>& shape,
                                              const builder::Target& target,
                                              const TaskOptions& options) {
    if (shape.size() < 3 || shape.size() > 5 ||
        std::any_of(shape.begin(), shape.begin() + std::min<size_t>(shape.size(), 4),
                    [](int64_t d) { return d < 1 || d > (int64_t{1} << 20); })) {
      return Status(
          ErrorCode::kInvalidArgument,
          templates::ShapeUsage("matmul") + " (three sizes and the groups, from 1 to 1048576)");
    }
    if (shape.size() == 5 && (shape[4] != 1 || shape[3] != 1)) {
      return Status(ErrorCode::kInvalidArgument,
                    templates::ShapeUsage("matmul") +
                        ": packed_b, where given, is 1, and only with one group (one B)");
    }
    if (target.is_cuda()) {
      if (shape.size() >= 4) {
        return Status(ErrorCode::kInvalidArgument,
                      templates::ShapeUsage("matmul") + ": groups are for CPU targets");
      }
      return MakeCudaMatmulTask(shape, target, options);
    }
    MatmulShape s;
    s.m_ = shape[0];
    s.n_ = shape[1];
    s.k_ = shape[2];
    s.groups_ = shape.size() >= 4 ? shape[3] : 0;
    s.packed_b_ = shape.size() == 5 && shape[4] == 1;
    s.vw_ = VectorWidth(target);
    s.regs_ = VectorRegisters(target);
    return templates::NewTask<MatmulTask>(TaskId{"matmul", shape, "float32", options.threads},
                                          target, s);
  }

  std::string function() const override { return "matmul"; }

  std::vector<ArgSpec> args() const override {
    if (groups_ > 0) {
      ArgSpec a{"A", {groups_ * m_, k_}}, b{"B", {k_, n_}};
      ArgSpec c{"C", {groups_ * m_, n_}, {kDLFloat, 32, 1}, true};
      a.flat_tail = c.flat_tail = 1;
      if (groups_ > 1) {
        b.shape = {groups_, k_, n_};
        b.flat_tail = 2;
      }
      if (packed_b_) b.shape = {MatmulPanels(n_, vw_), k_, vw_};
      return {a, b, c};
    }
    return {{"A", {m_, k_}}, {"B", {k_, n_}}, {"C", {m_, n_}, {kDLFloat, 32, 1}, true}};
  }

  double flops() const override { return 2.0 * std::max<int64_t>(groups_, 1) * m_ * n_ * k_; }

  Config DefaultConfig() const override {
    const bool wide = regs_ >= 32;
    nlohmann::json want = {{"mr", 6},           {"nv", wide ? 4 : 2}, {"tile_k", nullptr},
                           {"tile_m", nullptr}, {"tile_n", nullptr},  {"order", {"ir", "jr"}},
                           {"unroll_k", 4},     {"pack_a", 1},        {"prefetch", 0}};
    // Blocks: the largest candidate not above a sensible size. With the row panels outermost,
    // an MR x KC panel of A stays in L1 while the KC x NC block of B streams from L2.

    auto pick = [&](const char* knob, int64_t cap) {
      const Knob* kn = space().FindKnob(knob);
      nlohmann::json best = kn->values.front();
      for (const auto& v : kn->values) {
        if (v[1].get<int64_t>() <= cap) best = v;
      }
      want[knob] = best;
    };
    pick("tile_k", 512);
    pick("tile_m", 96);
    pick("tile_n", 256);
    auto c = space().FromJson(want);
    if (c.ok() && space().IsValid(*c)) return *c;
    // Smaller targets: walk down the register tile until the constraints hold.
    for (int64_t mr : {4, 2, 1}) {
      for (int64_t nv : {2, 1}) {
        want["mr"] = mr;
        want["nv"] = nv;
        c = space().FromJson(want);
        if (c.ok() && space().IsValid(*c)) return *c;
      }
    }
    UniqueSampler s(space(), 1);
    return space().Get(s.Next().value_or(0));
  }

  Status CheckLimits(const Config& c, const msg::DeviceInfo& device) const override {
    CT_RETURN_IF_ERROR(templates::CheckThreads(threads(), device));
    const uint64_t bytes = BufferFloats(c) * 4;
    if (device.memory_bytes > 0 && bytes > device.memory_bytes / 4) {
      return Status(ErrorCode::kInvalidArgument, "packing buffers need " +
                                                     std::to_string(bytes >> 20) +
                                                     " MiB, over a quarter of the device's memory");
    }
    return Status::Ok();
  }

  std::string Generate(const Config& c) const override {
    const int64_t mr = c.Int("mr"), nv = c.Int("nv"), nr = nv * vw_;
    const int64_t kc = c.Ints("tile_k")[1];
    const int64_t mc = std::max(mr, c.Ints("tile_m")[1] / mr * mr);
    const int64_t nc = std::max(nr, c.Ints("tile_n")[1] / nr * nr);
    const bool ir_outer = c.Ints("order")[0] == 1;
    std::ostringstream o;
    o << "/* crosstune matmul: " << c.ToString() << " */\n"
      << templates::KernelHeader() << "#define M_ " << m_ << "L\n#define N_ " << n_
      << "L\n#define K_ " << k_ << "L\n"
      << "#define MR " << mr << "\n#define NV " << nv << "\n#define VW " << vw_ << "\n"
      << "#define NR " << nr << "\n#define KC " << kc << "L\n#define MC " << mc << "L\n"
      << "#define NC " << nc << "L\n#define UNROLL " << c.Int("unroll_k") << "\n"
      << "#define PACK_A " << c.Int("pack_a") << "\n#define IR_OUTER " << (ir_outer ? 1 : 0)
      << "\n#define PREFETCH " << c.Int("prefetch") << "\n#define B_PACKED " << (packed_b_ ? 1 : 0)
      << "\n#define THREADS " << threads() << "\n#define NCB " << RoundUp(std::min(nc, n_), nr)
      << "L\n#define MCB " << RoundUp(std::min(mc, m_), mr) << "L\n"
      << templates::KernelPrelude(vw_) << templates::KernelArgsStruct(args());
    // G > 1: the one product's run() becomes run_one(), which kGroupsRun's run() calls per group.
    if (groups_ > 1) o << "#define GROUPS " << groups_ << "L\n#define run run_one\n";
    o << kKernelBody;
    if (groups_ > 1) o << kGroupsRun;
    o << templates::KernelEntry(function(), args(), {});
    return o.str();
  }

  void Reference(HostArgs& args) const override {
    if (packed_b_) {
      const std::vector<float> b = UnpackMatmulPanels(args[1].data(), k_, n_, vw_);
      templates::MatmulReference(args[0], b, args[2], m_, n_, k_);
      return;
    }
    if (groups_ <= 1) {
      templates::MatmulReference(args[0], args[1], args[2], m_, n_, k_);
      return;
    }
    std::vector<float> a(static_cast<size_t>(m_ * k_)), b(static_cast<size_t>(k_ * n_)),
        c(static_cast<size_t>(m_ * n_));
    for (int64_t g = 0; g < groups_; ++g) {
      std::copy_n(args[0].begin() + g * m_ * k_, a.size(), a.begin());
      std::copy_n(args[1].begin() + g * k_ * n_, b.size(), b.begin());
      templates::MatmulReference(a, b, c, m_, n_, k_);
      std::copy(c.begin(), c.end(), args[2].begin() + g * m_ * n_);
    }
  }

  // fp32 sums of K products in another order than the reference's (double) sum.
  double atol() const override { return 2e-6 * static_cast<double>(k_) + 1e-5; }
  double rtol() const override { return 1e-4; }

  std::vector<float> Features(const Config& c) const override {
    std::vector<float> f = space().Features(c);
    const double mr = c.Int("mr"), nr = c.Int("nv") * vw_;
    const double kc = c.Ints("tile_k")[1];
    const double mc = std::max(mr, std::floor(c.Ints("tile_m")[1] / mr) * mr);
    const double nc = std::max(nr, std::floor(c.Ints("tile_n")[1] / nr) * nr);
    const double padded_m = std::ceil(m_ / mr) * mr, padded_n = std::ceil(n_ / nr) * nr;
    f.insert(f.end(), {
                          static_cast<float>(nr),
                          static_cast<float>(mr * nr),               // accumulators
                          static_cast<float>(mr * nr / (mr + nr)),   // FMAs per load
                          static_cast<float>(kc * nr * 4 / 1024.0),  // B panel KiB (L1)
                          static_cast<float>(kc * mr * 4 / 1024.0),  // A panel KiB (L1)
                          static_cast<float>(kc * nc * 4 / 1024.0),  // packed B KiB (L2/L3)
                          static_cast<float>(kc * mc * 4 / 1024.0),  // packed A KiB (L2)
                          static_cast<float>(std::ceil(k_ / kc)),    // trip counts
                          static_cast<float>(std::ceil(m_ / mc)),
                          static_cast<float>(std::ceil(n_ / nc)),
                          static_cast<float>(padded_m * padded_n / (double(m_) * n_)),  // waste
                          static_cast<float>(vw_),
                          static_cast<float>(threads()),
                      });
    return f;
  }

 private:
  uint64_t BufferFloats(const Config& c) const {
    const int64_t mr = c.Int("mr"), nr = c.Int("nv") * vw_;
    const int64_t kc = c.Ints("tile_k")[1];
    const int64_t mc = std::max(mr, c.Ints("tile_m")[1] / mr * mr);
    const int64_t nc = std::max(nr, c.Ints("tile_n")[1] / nr * nr);
    return static_cast<uint64_t>(kc) *
           ((packed_b_ ? 0 : RoundUp(std::min(nc, n_), nr)) +
            static_cast<uint64_t>(threads()) * (RoundUp(std::min(mc, m_), mr) + mr));
  }

  static const char* const kKernelBody;
  static const char* const kGroupsRun;
};

Expected<ConfigSpace> MatmulShape::BuildSpace() const {
  ConfigSpace space;
  CT_RETURN_IF_ERROR(space.AddCategorical("mr", {1, 2, 3, 4, 5, 6, 8, 10, 12, 14}));
  CT_RETURN_IF_ERROR(space.AddCategorical("nv", {1, 2, 3, 4}));
  SplitOptions k{.policy = SplitPolicy::kCandidates};
  k.candidates = AsCandidates(CandidatesUpTo({16, 32, 64, 128, 256, 384, 512, 768, 1024}, k_));
  CT_RETURN_IF_ERROR(space.AddSplit("tile_k", k_, 2, k));
  SplitOptions m{.policy = SplitPolicy::kCandidates};
  m.candidates = AsCandidates(CandidatesUpTo({24, 48, 72, 96, 144, 192, 288, 384}, m_));
  CT_RETURN_IF_ERROR(space.AddSplit("tile_m", m_, 2, m));
  SplitOptions n{.policy = SplitPolicy::kCandidates};
  n.candidates = AsCandidates(CandidatesUpTo({64, 128, 256, 512, 1024, 2048}, n_));
  CT_RETURN_IF_ERROR(space.AddSplit("tile_n", n_, 2, n));
  CT_RETURN_IF_ERROR(space.AddReorder("order", {"jr", "ir"}));
  CT_RETURN_IF_ERROR(space.AddCategorical("unroll_k", {1, 2, 4, 8}));
  CT_RETURN_IF_ERROR(space.AddCategorical("pack_a", {0, 1}));
  CT_RETURN_IF_ERROR(space.AddCategorical("prefetch", {0, 4, 8, 16}));
  const int regs = regs_, vw = vw_;
  const int64_t m_dim = m_, n_dim = n_;
  // The register tile plus one B vector per column and an A broadcast must fit the register
  // file, or the accumulators spill and the tile is slower than a smaller one.
  space.AddConstraint("registers", [regs](const Config& c) {
    return c.Int("mr") * c.Int("nv") + c.Int("nv") + 1 <= regs;
  });
  // No tile larger than the matrix it covers.
  space.AddConstraint("tile_fits", [vw, m_dim, n_dim](const Config& c) {
    return c.Int("mr") <= m_dim && (c.Int("nv") - 1) * vw < n_dim &&
           c.Ints("tile_m")[1] >= c.Int("mr");
  });
  return space;
}

// The kernel text after the #defines, the shared prelude and kernel_args; run() is called by the
// generated entry. Loops with constant bounds over MR and NV are unrolled by clang, so the
// accumulators stay in registers (nothing indexes them with a run-time value). Its two parallel
// steps per block launch THREADS tasks (the packing no more than there are panels) with
// ct_parallel_for, as each task owns its packing buffers.
const char* const MatmulTask::kKernelBody = R"KERNEL(

#if B_PACKED
/* B as given: NV panels of one vector a step, each K_ * VW floats apart; an unaligned load (the
   panels are a parameter of the model, aligned as the executor places it). */
#define B_STEP VW
#define B_VEC ((long)K_ * VW)
typedef vfu vb;
#else
static float Bp[KC * NCB] __attribute__((aligned(64)));
#define B_STEP NR
#define B_VEC VW
typedef vf vb;
#endif
#if PACK_A
static float Ap[THREADS][MCB * KC] __attribute__((aligned(64)));
#endif
static float Aedge[THREADS][MR * KC] __attribute__((aligned(64)));

/* C[rows x cols] = (first ? 0 : C) + A(MR x kc) * Bpanel(kc x NR); A(i, k) = a[i*si + k*sk],
   vector v of B's row k at b + k*B_STEP + v*B_VEC. */
static inline __attribute__((always_inline)) void tile(long kc, const float* restrict a, long si,
                                                       long sk, const float* restrict b,
                                                       float* restrict c, long rows, long cols,
                                                       int first) {
  vf acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = (vf){0};
#pragma clang loop unroll_count(UNROLL)
  for (long k = 0; k < kc; ++k) {
#if PREFETCH
    for (int v = 0; v < (B_PACKED ? NV : 1); ++v)
      __builtin_prefetch(b + (k + PREFETCH) * B_STEP + v * B_VEC, 0, 3);
#endif
    vf bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = *(const vb*)(b + k * B_STEP + v * B_VEC);
    for (int i = 0; i < MR; ++i) {
      float av = a[i * si + k * sk];
      for (int v = 0; v < NV; ++v) acc[i][v] += av * bv[v];
    }
  }
  if (rows == MR && cols == NR) {
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) {
        vfu* p = (vfu*)(c + i * N_ + v * VW);
        if (first) *p = acc[i][v]; else *p += acc[i][v];
      }
    return;
  }
  float t[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) *(vfu*)&t[i][v * VW] = acc[i][v];
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) {
      float* p = c + i * N_ + j;
      *p = first ? t[i][j] : *p + t[i][j];
    }
}

#if !B_PACKED
/* NR-wide panels [p0, p1) of the KC x nc block of B at (pc, jc), zero-padded. */
static void pack_b(const float* B, long pc, long jc, long kc, long nc, long p0, long p1) {
  for (long jp = p0 * NR; jp < nc && jp < p1 * NR; jp += NR) {
    float* dst = Bp + (jp / NR) * kc * NR;
    const long w = MIN(NR, nc - jp);
    for (long k = 0; k < kc; ++k) {
      const float* src = B + (pc + k) * N_ + jc + jp;
      if (w == NR) {
        for (int j = 0; j < NR; ++j) dst[k * NR + j] = src[j];
      } else {
        for (int j = 0; j < NR; ++j) dst[k * NR + j] = j < w ? src[j] : 0.0f;
      }
    }
  }
}
#endif

/* MR-high panel of rows [r0, r0 + rows) of A, columns [pc, pc + kc), zero-padded, k-major. */
static void pack_a_panel(float* dst, const float* A, long r0, long rows, long pc, long kc) {
  for (int i = 0; i < MR; ++i) {
    const float* src = A + (r0 + i) * K_ + pc;
    if (i < rows) {
      for (long k = 0; k < kc; ++k) dst[k * MR + i] = src[k];
    } else {
      for (long k = 0; k < kc; ++k) dst[k * MR + i] = 0.0f;
    }
  }
}

/* One (jc, pc) step: the B block is packed by pack_task, then rows are shared by row_task. */
struct step {
  const float* A;
  const float* B;
  float* C;
  long jc, nc, pc, kc;
  int first;
};

#if !B_PACKED
static int32_t pack_task(int32_t t, int32_t nt, void* closure) {
  const struct step* s = (const struct step*)closure;
  const long panels = (s->nc + NR - 1) / NR;
  pack_b(s->B, s->pc, s->jc, s->kc, s->nc, panels * t / nt, panels * (t + 1) / nt);
  return 0;
}
#endif

static int32_t row_task(int32_t t, int32_t nt, void* closure) {
  const struct step* s = (const struct step*)closure;
  const long kc = s->kc, nc = s->nc, pc = s->pc, jc = s->jc;
  const long mpanels = (M_ + MR - 1) / MR;
  const long r0 = mpanels * t / nt * MR, r1 = MIN(M_, mpanels * (t + 1) / nt * MR);
#if PACK_A
  float* ap = Ap[t];
#endif
  float* aedge = Aedge[t];
  for (long ic = r0; ic < r1; ic += MC) {
    const long mc = MIN(MC, r1 - ic);
#if PACK_A
    for (long ip = 0; ip < mc; ip += MR)
      pack_a_panel(ap + (ip / MR) * kc * MR, s->A, ic + ip, MIN(MR, mc - ip), pc, kc);
#endif
#if IR_OUTER
    for (long ir = 0; ir < mc; ir += MR)
      for (long jr = 0; jr < nc; jr += NR) {
#else
    for (long jr = 0; jr < nc; jr += NR)
      for (long ir = 0; ir < mc; ir += MR) {
#endif
        const long rows = MIN(MR, mc - ir), cols = MIN(NR, nc - jr);
#if B_PACKED
        const float* bpan = s->B + (jc + jr) / VW * B_VEC + pc * VW;
#else
        const float* bpan = Bp + (jr / NR) * kc * NR;
#endif
        float* cp = s->C + (ic + ir) * N_ + jc + jr;
#if PACK_A
        tile(kc, ap + (ir / MR) * kc * MR, 1, MR, bpan, cp, rows, cols, s->first);
#else
        if (rows == MR) {
          tile(kc, s->A + (ic + ir) * K_ + pc, K_, 1, bpan, cp, rows, cols, s->first);
        } else {
          pack_a_panel(aedge, s->A, ic + ir, rows, pc, kc);
          tile(kc, aedge, 1, MR, bpan, cp, rows, cols, s->first);
        }
#endif
      }
  }
  (void)aedge;
  return 0;
}

static int32_t run(kernel_args* a) {
  struct step s;
  s.A = a->A;
  s.B = a->B;
  s.C = a->C;
  for (long jc = 0; jc < N_; jc += NC) {
    s.jc = jc;
    s.nc = MIN(NC, N_ - jc);
    for (long pc = 0; pc < K_; pc += KC) {
      s.pc = pc;
      s.kc = MIN(KC, K_ - pc);
      s.first = pc == 0;
#if B_PACKED
      int32_t r = ct_parallel_for(row_task, &s, THREADS);
#else
      const long panels = (s.nc + NR - 1) / NR;
      int32_t r = ct_parallel_for(pack_task, &s, (int32_t)MIN(THREADS, panels));
      if (r == 0) r = ct_parallel_for(row_task, &s, THREADS);
#endif
      if (r != 0) { g_error = "matmul: a parallel task failed"; return r; }
    }
  }
  return 0;
}
)KERNEL";

const char* const MatmulTask::kGroupsRun = R"KERNEL(
/* GROUPS products one after another: A, B and C each hold GROUPS matrices in a row. */
#undef run
static int32_t run(kernel_args* a) {
  for (long g = 0; g < GROUPS; ++g) {
    kernel_args one = *a;
    one.A = a->A + g * M_ * K_;
    one.B = a->B + g * K_ * N_;
    one.C = a->C + g * M_ * N_;
    const int32_t r = run_one(&one);
    if (r != 0) return r;
  }
  return 0;
}
)KERNEL";

}  // namespace

Expected<std::unique_ptr<Task>> templates::MakeMatmulTask(const std::vector<int64_t>& shape,
                                                          const builder::Target& target,
                                                          const TaskOptions& options) {
  return MatmulTask::Make(shape, target, options);
}

}  // namespace crosstune::tuner
