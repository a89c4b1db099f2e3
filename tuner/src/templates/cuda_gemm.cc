// CUDA fp32 matmul, conv2d and dense: one tiled matrix-product kernel, three ways to read its
// operands.
//
// The kernel computes C (M x N) = A (M x K) · B (K x N). A block owns a BM x BN tile of C; it walks
// K in BK-deep slices, copying the slice of A (transposed, so a thread reads its rows from one
// shared row) and of B into shared memory, and each of its (BM/TM) x (BN/TN) threads keeps a TM x
// TN tile of C in registers, doing TM x TN FMAs for every TM + TN values it reads from shared
// memory. Global loads are float4 where the operand's layout allows (vec_a, vec_b), and with
// double_buffer the next slice is loaded into registers while the current one is computed (two
// shared stages, one barrier a slice). Tiles that run past M, N or K load zeros and store nothing,
// so every shape is correct; the guards are compiled out where the tiles divide the shape.
//
//   matmul  A, B, C as given (row-major).
//   conv2d  an implicit matrix product: A = weight (K x C*R*S, as stored), B = the input windows
//           (C*R*S x N*OH*OW, gathered while loading the slice, zero over the padding), C = out in
//           NCHW order, with the epilogue out = act(C + bias (+ residual)), act relu or none. A
//           1x1 stride-1 unpadded layer of one image reads its input planes as B directly
//           (float4 loads).
//   dense   C (OUT x B) = weight (OUT x IN, as stored) · dataᵀ, then + bias, written as
//   out[B][OUT].
//
// Knobs: block_m, block_n, block_k (block tile), thread_m, thread_n (thread tile), vec_a, vec_b
// (global load width), unroll_k (of the BK loop; BK unrolls it fully), double_buffer, pad (floats
// added to a shared row against bank conflicts). Constraints keep the block a whole number of
// warps within the architecture's limits; CheckLimits repeats the limit checks with what the
// device reports, before anything is compiled.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "crosstune/tuner/task.h"
#include "templates/common.h"
#include "templates/cuda.h"
#include "templates/reference.h"

namespace crosstune::tuner {

namespace templates {

GpuLimits ArchGpuLimits(const std::string& cuda_arch) {
  GpuLimits l;
  l.source = cuda_arch + " defaults";
  return l;  // the same for every architecture from sm_50 to sm_120
}

GpuLimits DeviceGpuLimits(const std::string& cuda_arch, const msg::DeviceInfo& device) {
  GpuLimits l = ArchGpuLimits(cuda_arch);
  if (device.gpus.empty()) return l;
  const msg::GpuInfo& g = device.gpus.front();
  l.source = "device " + (g.name.empty() ? g.arch : g.name);
  if (g.max_threads_per_block) l.threads_per_block = g.max_threads_per_block;
  if (g.max_shared_per_block) l.shared_per_block = g.max_shared_per_block;
  if (g.max_registers_per_block) l.registers_per_block = g.max_registers_per_block;
  if (g.multiprocessors) l.multiprocessors = g.multiprocessors;
  return l;
}

}  // namespace templates

namespace {

using templates::CeilDiv;

// The kernel, after the per-config #defines and before nothing: CT_ACCESSORS and CT_UNROLL are
// replaced by the task's operand lambdas and the BK loop's unroll pragma.
constexpr const char* kKernelBody = R"CUDA(
#ifndef LOAD4
#define LOAD4(p) (*reinterpret_cast<const float4*>(p))
#endif
#ifndef STORE4
#define STORE4(p, v) (*reinterpret_cast<float4*>(p) = (v))
#endif
#define IN_M(m) (EVEN_M || (m) < M_)
#define IN_N(n) (EVEN_N || (n) < N_)
#define IN_K(k) (EVEN_K || (k) < K_)
// A slice of A is A_GROUPS loads of VA floats, handed out to the threads in A_LOADS rounds; when
// the threads do not divide them, the last round leaves some threads idle. The same for B.
#define A_GROUPS (BM * BK / VA)
#define B_GROUPS (BK * BN / VB)
#define A_LOADS ((A_GROUPS + NT - 1) / NT)
#define B_LOADS ((B_GROUPS + NT - 1) / NT)
#define A_IDLE(e) (A_GROUPS % NT != 0 && (e) >= A_GROUPS)
#define B_IDLE(e) (B_GROUPS % NT != 0 && (e) >= B_GROUPS)

extern "C" __global__ void __launch_bounds__(NT) CT_FUNCTION(CT_PARAMS) {
  __shared__ __align__(16) float As[STAGES][BK][BM + SPAD];
  __shared__ __align__(16) float Bs[STAGES][BK][BN + SPAD];
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int m0 = static_cast<int>(blockIdx.y) * BM, n0 = static_cast<int>(blockIdx.x) * BN;
CT_ACCESSORS
  float ra[A_LOADS][VA], rb[B_LOADS][VB];
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
  }

  // Global memory -> registers: the slice of A and B that starts at k0.
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
      const int e = tid + i * NT;
      if (A_IDLE(e)) break;
      const int m = m0 + e / (BK / VA), k = k0 + (e % (BK / VA)) * VA;
#if VA == 4
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (IN_M(m) && IN_K(k)) v = load_a4(m, k);
      ra[i][0] = v.x;
      ra[i][1] = v.y;
      ra[i][2] = v.z;
      ra[i][3] = v.w;
#else
      ra[i][0] = IN_M(m) && IN_K(k) ? load_a(m, k) : 0.f;
#endif
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
      const int e = tid + i * NT;
      if (B_IDLE(e)) break;
      const int k = k0 + e / (BN / VB), n = n0 + (e % (BN / VB)) * VB;
#if VB == 4
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (IN_K(k) && IN_N(n)) v = load_b4(k, n);
      rb[i][0] = v.x;
      rb[i][1] = v.y;
      rb[i][2] = v.z;
      rb[i][3] = v.w;
#else
      rb[i][0] = IN_K(k) && IN_N(n) ? load_b(k, n) : 0.f;
#endif
    }
  };
  // Registers -> shared stage s (A transposed to [k][m]).
  auto stash = [&](int s) {
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
      const int e = tid + i * NT;
      if (A_IDLE(e)) break;
      const int row = e / (BK / VA), kq = (e % (BK / VA)) * VA;
#pragma unroll
      for (int j = 0; j < VA; ++j) As[s][kq + j][row] = ra[i][j];
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
      const int e = tid + i * NT;
      if (B_IDLE(e)) break;
      const int kr = e / (BN / VB), nq = (e % (BN / VB)) * VB;
#pragma unroll
      for (int j = 0; j < VB; ++j) Bs[s][kr][nq + j] = rb[i][j];
    }
  };
  // TM x TN FMAs per step over the slice in stage s.
  auto compute = [&](int s) {
CT_UNROLL
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#if TM % 4 == 0
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const float4 v = LOAD4(&As[s][kk][ty * TM + i]);
        a[i] = v.x;
        a[i + 1] = v.y;
        a[i + 2] = v.z;
        a[i + 3] = v.w;
      }
#else
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[s][kk][ty * TM + i];
#endif
#if TN % 4 == 0
#pragma unroll
      for (int j = 0; j < TN; j += 4) {
        const float4 v = LOAD4(&Bs[s][kk][tx * TN + j]);
        b[j] = v.x;
        b[j + 1] = v.y;
        b[j + 2] = v.z;
        b[j + 3] = v.w;
      }
#else
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[s][kk][tx * TN + j];
#endif
#pragma unroll
      for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
  };

  const int kt_count = (K_ + BK - 1) / BK;
  fetch(0);
  stash(0);
  __syncthreads();
#if STAGES == 2
  for (int kt = 0; kt < kt_count; ++kt) {
    if (kt + 1 < kt_count) fetch((kt + 1) * BK);
    compute(kt & 1);
    if (kt + 1 < kt_count) stash((kt + 1) & 1);
    __syncthreads();
  }
#else
  for (int kt = 0; kt < kt_count; ++kt) {
    compute(0);
    __syncthreads();
    if (kt + 1 < kt_count) {
      fetch((kt + 1) * BK);
      stash(0);
      __syncthreads();
    }
  }
#endif

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + ty * TM + i;
    if (!IN_M(m)) continue;
#if VC == 4
#pragma unroll
    for (int j = 0; j < TN; j += 4) {
      const int n = n0 + tx * TN + j;
      if (IN_N(n)) store_c4(m, n, make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
    }
#else
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = n0 + tx * TN + j;
      if (IN_N(n)) store_c(m, n, acc[i][j]);
    }
#endif
  }
}
)CUDA";

struct Tile {
  int64_t bm, bn, bk, tm, tn, va, vb, unroll, stages, pad;
  int64_t threads() const { return (bm / tm) * (bn / tn); }
  int64_t a_loads() const { return CeilDiv(bm * bk / va, threads()); }
  int64_t b_loads() const { return CeilDiv(bk * bn / vb, threads()); }
  uint64_t shared_bytes() const {
    return static_cast<uint64_t>(stages * bk * ((bm + pad) + (bn + pad)) * 4);
  }
  // Registers a thread needs, estimated before compiling: the accumulators, two steps' operands
  // (ptxas loads the next step's early), the staged loads with about four registers of address
  // each, and two dozen for indices. Fitted to ptxas 13.0 for sm_90 (e.g. 128 x 128 blocks of
  // 8 x 8 thread tiles: 128 registers with float4 loads and BK 8, 199 with scalar loads and BK
  // 16; the estimate says 136 and 200), and meant to stay above it: ptxas is held to the
  // block's share by __launch_bounds__(NT), so a config over it would spill rather than fail.
  // Within that share ptxas trades registers for occupancy itself: it may hold a kernel below
  // the estimate and spill a few bytes (seen: 64 registers and 4 bytes for a 64 x 64 block of
  // 4 x 4 tiles). __launch_bounds__(NT, 1) lets it take more instead, but then it spilled more
  // on 512-thread blocks (60 bytes at their 128-register share), so the block size alone it is.
  int64_t registers() const {
    return tm * tn + 2 * (tm + tn) + a_loads() * (va + 4) + b_loads() * (vb + 4) + 24;
  }
};

Tile TileOf(const Config& c) {
  return Tile{c.Int("block_m"),  c.Int("block_n"),  c.Int("block_k"),
              c.Int("thread_m"), c.Int("thread_n"), c.Int("vec_a"),
              c.Int("vec_b"),    c.Int("unroll_k"), c.Int("double_buffer") ? 2 : 1,
              c.Int("pad")};
}

// Powers of two from `lo` to `hi`, stopping at the first one that covers `extent`.
std::vector<int64_t> Pow2Upto(int64_t lo, int64_t hi, int64_t extent) {
  std::vector<int64_t> out;
  for (int64_t v = lo; v <= hi; v *= 2) {
    out.push_back(v);
    if (v >= extent) break;
  }
  return out;
}

// The matrix product's sizes, whether its operands allow float4 loads, and the config space they
// make for the target's architecture.
struct GemmShape {
  int64_t m_ = 0, n_ = 0, k_ = 0;  // the matrix product's M, N, K
  bool vec_a_ = false;             // float4 loads of A along K
  bool vec_b_ = false;             // float4 loads of B along N
  std::string cuda_arch_;
  Expected<ConfigSpace> BuildSpace() const;
};

// The matrix product shared by the operators; subclasses say how its operands are read.
class CudaGemmTask : public Task, protected GemmShape {
 public:
  Config DefaultConfig() const override {
    // 64 x 64 blocks of 256 threads with 4 x 4 thread tiles, 8-deep slices, double-buffered and
    // padded, float4 loads where allowed; smaller blocks for small matrices.
    const Knob* va = space().FindKnob("vec_a");
    const Knob* vb = space().FindKnob("vec_b");
    for (int64_t bm : {64, 32, 16}) {
      for (int64_t bn : {64, 32, 16}) {
        for (int64_t t : {4, 2, 1}) {
          nlohmann::json want = {{"block_m", bm},
                                 {"block_n", bn},
                                 {"block_k", 8},
                                 {"thread_m", t},
                                 {"thread_n", t},
                                 {"vec_a", va->values.back()},
                                 {"vec_b", vb->values.back()},
                                 {"unroll_k", 8},
                                 {"double_buffer", 1},
                                 {"pad", 4}};
          if (bm > 16 && bm / 2 >= m_) continue;
          if (bn > 16 && bn / 2 >= n_) continue;
          for (int64_t bk : {8, 4}) {
            want["block_k"] = bk;
            want["unroll_k"] = bk;
            auto c = space().FromJson(want);
            if (c.ok() && space().IsValid(*c)) return *c;
          }
        }
      }
    }
    UniqueSampler s(space(), 1);
    return space().Get(s.Next().value_or(0));
  }

  Status CheckLimits(const Config& c, const msg::DeviceInfo& device) const override {
    const templates::GpuLimits l = templates::DeviceGpuLimits(target().cuda_arch, device);
    const Tile t = TileOf(c);
    auto over = [&](const std::string& what, uint64_t need, uint64_t limit) {
      return Status(ErrorCode::kInvalidArgument, "the block needs " + std::to_string(need) + " " +
                                                     what + "; " + l.source + " allows " +
                                                     std::to_string(limit));
    };
    if (static_cast<uint64_t>(t.threads()) > l.threads_per_block) {
      return over("threads", static_cast<uint64_t>(t.threads()), l.threads_per_block);
    }
    if (t.shared_bytes() > l.shared_per_block) {
      return over("bytes of shared memory", t.shared_bytes(), l.shared_per_block);
    }
    const uint64_t regs = static_cast<uint64_t>(t.registers() * t.threads());
    if (static_cast<uint64_t>(t.registers()) > l.registers_per_thread ||
        regs > l.registers_per_block) {
      return over("registers (about " + std::to_string(t.registers()) + " a thread)", regs,
                  l.registers_per_block);
    }
    return Status::Ok();
  }

  std::string Generate(const Config& c) const override {
    const Tile t = TileOf(c);
    std::ostringstream o;
    o << "// crosstune " << id().template_name << " " << id().Key() << " for "
      << target().ToString() << ": " << c.ToString() << "\n"
      << "// crosstune: kernel " << function() << "(" << std::string(args().size(), 't')
      << ") grid=" << CeilDiv(n_, t.bn) << "," << CeilDiv(m_, t.bm) << ",1 block=" << t.threads()
      << "\n"
      << "#define CT_FUNCTION " << function() << "\n#define CT_PARAMS " << Params() << "\n"
      << "#define M_ " << m_ << "\n#define N_ " << n_ << "\n#define K_ " << k_ << "\n"
      << "#define BM " << t.bm << "\n#define BN " << t.bn << "\n#define BK " << t.bk << "\n"
      << "#define TM " << t.tm << "\n#define TN " << t.tn << "\n#define NT " << t.threads()
      << "\n#define VA " << t.va << "\n#define VB " << t.vb << "\n#define VC "
      << (t.tn % 4 == 0 && VectorStoreOk() ? 4 : 1) << "\n#define STAGES " << t.stages
      << "\n#define SPAD " << t.pad << "\n#define EVEN_M " << (m_ % t.bm == 0 ? 1 : 0)
      << "\n#define EVEN_N " << (n_ % t.bn == 0 ? 1 : 0) << "\n#define EVEN_K "
      << (k_ % t.bk == 0 ? 1 : 0) << "\n"
      << Defines();
    std::string body = kKernelBody;
    auto replace = [&](const std::string& key, const std::string& with) {
      body.replace(body.find(key), key.size(), with);
    };
    replace("CT_ACCESSORS", Accessors(t.va == 4, t.vb == 4, t.tn % 4 == 0 && VectorStoreOk()));
    replace("CT_UNROLL", t.unroll >= t.bk ? std::string("#pragma unroll")
                                          : "#pragma unroll " + std::to_string(t.unroll));
    o << body;
    return o.str();
  }

  std::vector<float> Features(const Config& c) const override {
    std::vector<float> f = space().Features(c);
    const Tile t = TileOf(c);
    const double blocks = static_cast<double>(CeilDiv(m_, t.bm) * CeilDiv(n_, t.bn));
    const double useful = static_cast<double>(m_) * static_cast<double>(n_) /
                          (blocks * static_cast<double>(t.bm * t.bn));
    f.insert(f.end(), {
                          static_cast<float>(t.threads()),
                          static_cast<float>(std::log2(blocks)),
                          static_cast<float>(useful),  // share of the tiles' work that counts
                          static_cast<float>(t.shared_bytes() / 1024.0),
                          static_cast<float>(t.registers()),
                          static_cast<float>(t.tm * t.tn / double(t.tm + t.tn)),  // FMAs a read
                          static_cast<float>(t.bm * t.bn / double(t.bm + t.bn)),  // block reuse
                          static_cast<float>(CeilDiv(k_, t.bk)),                  // slices
                          static_cast<float>(k_ % t.bk ? 1 : 0),
                      });
    return f;
  }

 protected:
  CudaGemmTask(TaskId id, builder::Target target, ConfigSpace space, const GemmShape& shape)
      : Task(std::move(id), std::move(target), std::move(space)), GemmShape(shape) {}

  // The kernel's parameter list, its extra #defines and the operand lambdas it pastes in:
  // load_a(m, k), load_b(k, n), store_c(m, n, v), or their float4 forms load_a4, load_b4 and
  // store_c4 where the config uses them (va4, vb4, vc4).
  virtual std::string Params() const = 0;
  virtual std::string Defines() const = 0;
  virtual std::string Accessors(bool va4, bool vb4, bool vc4) const = 0;
  virtual bool VectorStoreOk() const = 0;
};

Expected<ConfigSpace> GemmShape::BuildSpace() const {
  ConfigSpace space;
  CT_RETURN_IF_ERROR(space.AddCategorical("block_m", Pow2Upto(16, 128, m_)));
  CT_RETURN_IF_ERROR(space.AddCategorical("block_n", Pow2Upto(16, 128, n_)));
  CT_RETURN_IF_ERROR(space.AddCategorical("block_k", Pow2Upto(4, 32, k_)));
  CT_RETURN_IF_ERROR(space.AddCategorical("thread_m", {1, 2, 4, 8}));
  CT_RETURN_IF_ERROR(space.AddCategorical("thread_n", {1, 2, 4, 8}));
  CT_RETURN_IF_ERROR(
      space.AddCategorical("vec_a", vec_a_ ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1}));
  CT_RETURN_IF_ERROR(
      space.AddCategorical("vec_b", vec_b_ ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1}));
  CT_RETURN_IF_ERROR(space.AddCategorical("unroll_k", {1, 2, 4, 8, 16, 32}));
  CT_RETURN_IF_ERROR(space.AddCategorical("double_buffer", {0, 1}));
  CT_RETURN_IF_ERROR(space.AddCategorical("pad", {0, 4}));
  const templates::GpuLimits l = templates::ArchGpuLimits(cuda_arch_);
  space.AddConstraint("threads", [l](const Config& c) {
    const Tile t = TileOf(c);
    return t.threads() % 32 == 0 && t.threads() <= static_cast<int64_t>(l.threads_per_block);
  });
  space.AddConstraint(
      "shared", [l](const Config& c) { return TileOf(c).shared_bytes() <= l.shared_per_block; });
  space.AddConstraint("registers", [l](const Config& c) {
    const Tile t = TileOf(c);
    return t.registers() <= static_cast<int64_t>(l.registers_per_thread) &&
           t.registers() * t.threads() <= static_cast<int64_t>(l.registers_per_block);
  });
  // unroll_k >= block_k is a full unroll: only block_k itself stands for it.
  space.AddConstraint("unroll",
                      [](const Config& c) { return c.Int("unroll_k") <= c.Int("block_k"); });
  const int64_t rows = m_;
  space.AddConstraint("grid", [rows](const Config& c) {
    return CeilDiv(rows, c.Int("block_m")) <= 65535;  // gridDim.y
  });
  return space;
}

class CudaMatmulTask final : public CudaGemmTask {
 public:
  CudaMatmulTask(TaskId id, builder::Target target, ConfigSpace space, const GemmShape& shape)
      : CudaGemmTask(std::move(id), std::move(target), std::move(space), shape) {}
  static Expected<std::unique_ptr<Task>> Make(const std::vector<int64_t>& shape,
                                              const builder::Target& target) {
    GemmShape g;
    g.m_ = shape[0];
    g.n_ = shape[1];
    g.k_ = shape[2];
    g.vec_a_ = g.k_ % 4 == 0;
    g.vec_b_ = g.n_ % 4 == 0;
    g.cuda_arch_ = target.cuda_arch;
    return templates::NewTask<CudaMatmulTask>(TaskId{"matmul", shape, "float32", 1}, target, g);
  }
  std::string function() const override { return "matmul"; }
  std::vector<ArgSpec> args() const override {
    return {{"A", {m_, k_}}, {"B", {k_, n_}}, {"C", {m_, n_}, {kDLFloat, 32, 1}, true}};
  }
  double flops() const override { return 2.0 * m_ * n_ * k_; }
  void Reference(HostArgs& args) const override {
    templates::MatmulReference(args[0], args[1], args[2], m_, n_, k_);
  }
  double atol() const override { return 2e-6 * static_cast<double>(k_) + 1e-5; }

 protected:
  std::string Params() const override {
    return "const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C";
  }
  std::string Defines() const override { return ""; }
  std::string Accessors(bool va4, bool vb4, bool vc4) const override {
    std::string s;
    s += va4 ? "  auto load_a4 = [&](int m, int k) { return LOAD4(&A[(long long)m * K_ + k]); };\n"
             : "  auto load_a = [&](int m, int k) { return A[(long long)m * K_ + k]; };\n";
    s += vb4 ? "  auto load_b4 = [&](int k, int n) { return LOAD4(&B[(long long)k * N_ + n]); };\n"
             : "  auto load_b = [&](int k, int n) { return B[(long long)k * N_ + n]; };\n";
    s += vc4 ? "  auto store_c4 = [&](int m, int n, float4 v) { STORE4(&C[(long long)m * N_ + n], "
               "v); "
               "};\n"
             : "  auto store_c = [&](int m, int n, float v) { C[(long long)m * N_ + n] = v; };\n";
    return s;
  }
  bool VectorStoreOk() const override { return n_ % 4 == 0; }
};

struct CudaConv2dShape : GemmShape {
  templates::ConvShape g_{};
};

class CudaConv2dTask final : public CudaGemmTask {
 public:
  CudaConv2dTask(TaskId id, builder::Target target, ConfigSpace space, const CudaConv2dShape& shape)
      : CudaGemmTask(std::move(id), std::move(target), std::move(space), shape), g_(shape.g_) {}
  static Expected<std::unique_ptr<Task>> Make(const std::vector<int64_t>& shape,
                                              const builder::Target& target) {
    CudaConv2dShape s;
    s.g_ = templates::ConvShapeOf(shape);
    const templates::ConvShape& g = s.g_;
    s.m_ = g.k;
    s.n_ = g.n * g.oh * g.ow;
    s.k_ = g.c * g.r * g.s;
    s.vec_a_ = s.k_ % 4 == 0;
    s.vec_b_ = Plain(g) && s.n_ % 4 == 0;
    s.cuda_arch_ = target.cuda_arch;
    // The kernel indexes rows, columns and the reduction with int.
    if (std::string big = templates::OversizedArgument(Args(g), INT32_MAX); !big.empty()) {
      return Status(
          ErrorCode::kInvalidArgument,
          "the CUDA conv2d template takes tensors of under 2^31 elements; " + big + " has more");
    }
    return templates::NewTask<CudaConv2dTask>(TaskId{"conv2d", templates::ConvKey(g), "float32", 1},
                                              target, s);
  }
  std::string function() const override { return "conv2d"; }
  std::vector<ArgSpec> args() const override { return Args(g_); }
  double flops() const override { return 2.0 * static_cast<double>(m_) * n_ * k_; }
  void Reference(HostArgs& args) const override {
    templates::Conv2dReference(g_, args[0], args[1], args[2], g_.residual ? &args[3] : nullptr,
                               args.back());
  }
  double atol() const override { return 2e-6 * static_cast<double>(k_) + 1e-5; }

 protected:
  static std::vector<ArgSpec> Args(const templates::ConvShape& g) {
    std::vector<ArgSpec> a = {
        {"data", {g.n, g.c, g.h, g.w}}, {"weight", {g.k, g.c, g.r, g.s}}, {"bias", {g.k}}};
    if (g.residual) a.push_back({"residual", {g.n, g.k, g.oh, g.ow}});
    a.push_back({"out", {g.n, g.k, g.oh, g.ow}, {kDLFloat, 32, 1}, true});
    return a;
  }
  // One image, 1x1, stride 1, no padding: B is the input planes as they lie (C x H*W).
  static bool Plain(const templates::ConvShape& g) {
    return g.n == 1 && g.r == 1 && g.s == 1 && g.stride == 1 && g.pad == 0;
  }
  bool Plain() const { return Plain(g_); }
  std::string Params() const override {
    return std::string("const float* __restrict__ data, const float* __restrict__ weight, ") +
           "const float* __restrict__ bias, " +
           (g_.residual ? "const float* __restrict__ residual, " : "") + "float* __restrict__ out";
  }
  std::string Defines() const override {
    std::ostringstream o;
    o << "#define C_ " << g_.c << "\n#define H_ " << g_.h << "\n#define W_ " << g_.w
      << "\n#define R_ " << g_.r << "\n#define S_ " << g_.s << "\n#define ST_ " << g_.stride
      << "\n#define CPAD_ " << g_.pad << "\n#define OW_ " << g_.ow << "\n#define P_ "
      << g_.oh * g_.ow << "\n#define RESIDUAL " << (g_.residual ? 1 : 0) << "\n"
      << (g_.act == 2   ? "#define ACT(x) fminf(fmaxf(x, 0.f), 6.f)\n"
          : g_.act == 1 ? "#define ACT(x) fmaxf(x, 0.f)\n"
                        : "#define ACT(x) (x)\n");
    return o.str();
  }
  std::string Accessors(bool va4, bool vb4, bool vc4) const override {
    std::string s =
        va4 ? "  auto load_a4 = [&](int m, int k) { return LOAD4(&weight[(long long)m * K_ + k]); "
              "};\n"
            : "  auto load_a = [&](int m, int k) { return weight[(long long)m * K_ + k]; };\n";
    if (vb4) {  // only where Plain()
      s += "  auto load_b4 = [&](int k, int n) { return LOAD4(&data[(long long)k * N_ + n]); };\n";
    } else if (Plain()) {
      s += "  auto load_b = [&](int k, int n) { return data[(long long)k * N_ + n]; };\n";
    } else {
      s += R"CUDA(  auto load_b = [&](int k, int n) {
    const int c = k / (R_ * S_), rs = k - c * (R_ * S_), r = rs / S_, s = rs - r * S_;
    const int img = n / P_, p = n - img * P_, oh = p / OW_, ow = p - oh * OW_;
    const int ih = oh * ST_ - CPAD_ + r, iw = ow * ST_ - CPAD_ + s;
    return ih >= 0 && ih < H_ && iw >= 0 && iw < W_
               ? data[(((long long)img * C_ + c) * H_ + ih) * W_ + iw] : 0.f;
  };
)CUDA";
    }
    if (!vc4) {
      return s + R"CUDA(  auto store_c = [&](int m, int n, float v) {
    const int img = n / P_, p = n - img * P_;
    const long long o = ((long long)img * M_ + m) * P_ + p;
    float r = v + bias[m];
#if RESIDUAL
    r += residual[o];
#endif
    out[o] = ACT(r);
  };
)CUDA";
    }
    return s +
           R"CUDA(  auto store_c4 = [&](int m, int n, float4 v) {  // P_ % 4 == 0: the four are in one image
    const int img = n / P_, p = n - img * P_;
    const long long o = ((long long)img * M_ + m) * P_ + p;
    const float b = bias[m];
#if RESIDUAL
    const float4 q = LOAD4(&residual[o]);
    v.x += q.x;
    v.y += q.y;
    v.z += q.z;
    v.w += q.w;
#endif
    STORE4(&out[o], make_float4(ACT(v.x + b), ACT(v.y + b), ACT(v.z + b), ACT(v.w + b)));
  };
)CUDA";
  }
  bool VectorStoreOk() const override { return (g_.oh * g_.ow) % 4 == 0; }

 private:
  templates::ConvShape g_{};
};

// y = x·wᵀ + bias as the product C (OUT x B) = w (OUT x IN) · xᵀ: the weight, the large operand,
// is A and streams along IN with float4 loads; the batch, often 1, is the narrow N side.
class CudaDenseTask final : public CudaGemmTask {
 public:
  CudaDenseTask(TaskId id, builder::Target target, ConfigSpace space, const GemmShape& shape)
      : CudaGemmTask(std::move(id), std::move(target), std::move(space), shape), batch_(n_) {}
  static Expected<std::unique_ptr<Task>> Make(const std::vector<int64_t>& shape,
                                              const builder::Target& target) {
    GemmShape g;
    g.k_ = shape[1];
    g.m_ = shape[2];
    g.n_ = shape[0];  // the batch
    g.vec_a_ = g.k_ % 4 == 0;
    g.vec_b_ = false;  // x is read across its rows
    g.cuda_arch_ = target.cuda_arch;
    return templates::NewTask<CudaDenseTask>(TaskId{"dense", shape, "float32", 1}, target, g);
  }
  std::string function() const override { return "dense"; }
  std::vector<ArgSpec> args() const override {
    return {{"data", {batch_, k_}},
            {"weight", {m_, k_}},
            {"bias", {m_}},
            {"out", {batch_, m_}, {kDLFloat, 32, 1}, true}};
  }
  double flops() const override { return 2.0 * static_cast<double>(m_) * n_ * k_; }
  void Reference(HostArgs& args) const override {
    templates::DenseReference(args[0], args[1], args[2], args[3], batch_, k_, m_);
  }
  double atol() const override { return 2e-6 * static_cast<double>(k_) + 1e-5; }

 protected:
  std::string Params() const override {
    return "const float* __restrict__ data, const float* __restrict__ weight, "
           "const float* __restrict__ bias, float* __restrict__ out";
  }
  std::string Defines() const override { return ""; }
  std::string Accessors(bool va4, bool /*vb4*/, bool /*vc4*/) const override {
    return std::string(
               va4 ? "  auto load_a4 = [&](int m, int k) { return LOAD4(&weight[(long long)m * "
                     "K_ + k]); };\n"
                   : "  auto load_a = [&](int m, int k) { return weight[(long long)m * K_ + k]; "
                     "};\n") +
           "  auto load_b = [&](int k, int n) { return data[(long long)n * K_ + k]; };\n"
           "  auto store_c = [&](int m, int n, float v) { out[(long long)n * M_ + m] = v + "
           "bias[m]; };\n";
  }
  bool VectorStoreOk() const override { return false; }  // out is written down its columns

 private:
  int64_t batch_ = 0;
};

// The factories' common part: a CUDA task's parallelism is its config, never a thread count.
template <typename T>
Expected<std::unique_ptr<Task>> MakeCuda(const std::vector<int64_t>& shape,
                                         const builder::Target& target,
                                         const TaskOptions& options) {
  if (options.threads != 1) {
    return Status(ErrorCode::kInvalidArgument,
                  "threads is for CPU tasks; a CUDA task's parallelism is its config");
  }
  return T::Make(shape, target);
}

}  // namespace

Expected<std::unique_ptr<Task>> MakeCudaDenseTask(const std::vector<int64_t>& shape,
                                                  const builder::Target& target,
                                                  const TaskOptions& options) {
  return MakeCuda<CudaDenseTask>(shape, target, options);
}

Expected<std::unique_ptr<Task>> MakeCudaMatmulTask(const std::vector<int64_t>& shape,
                                                   const builder::Target& target,
                                                   const TaskOptions& options) {
  return MakeCuda<CudaMatmulTask>(shape, target, options);
}

Expected<std::unique_ptr<Task>> MakeCudaConv2dTask(const std::vector<int64_t>& shape,
                                                   const builder::Target& target,
                                                   const TaskOptions& options) {
  return MakeCuda<CudaConv2dTask>(shape, target, options);
}

}  // namespace crosstune::tuner
