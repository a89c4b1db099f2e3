// CPU fp32 dense layer (a classifier head): out = data · weightᵀ + bias, data [B, IN], weight
// [OUT, IN] as frameworks store it, bias [OUT], out [B, OUT]; no activation.
//
// With a small batch the layer is bound by reading the weight once, so the kernel streams it as
// stored: vectors run along IN, and a register tile of RO weight rows x BB batch rows keeps RO x
// BB vector partial sums, loading RO weight vectors and BB data vectors per step. The sums are
// reduced across lanes at the end; the IN % VW tail is added in scalar code. IN may be split into
// chunks (the data chunk of every batch row then stays in L1 while all weight rows pass by),
// each chunk adding into the output. Batch rows past a multiple of BB take a tile of exactly the
// rows left, as do weight rows past a multiple of RO.
//
// Items: (block of RO output rows, block of BB batch rows), split into contiguous ranges by task.
//
// Knobs: rows (RO), batch_tile (BB), tile_in (IN chunk, a split), unroll of the IN loop.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "crosstune/tuner/task.h"
#include "templates/common.h"
#include "templates/cuda.h"
#include "templates/reference.h"
#include "templates/registry.h"

namespace crosstune::tuner {
namespace {

using templates::CeilDiv;

// The task's sizes and the target's vector unit, and the config space they make.
struct DenseShape {
  int64_t b_ = 0, in_ = 0, out_ = 0;
  int vw_ = 4;
  int regs_ = 16;
  Expected<ConfigSpace> BuildSpace() const;
};

class DenseTask final : public Task, private DenseShape {
 public:
  DenseTask(TaskId id, builder::Target target, ConfigSpace space, const DenseShape& shape)
      : Task(std::move(id), std::move(target), std::move(space)), DenseShape(shape) {}

  static Expected<std::unique_ptr<Task>> Make(const std::vector<int64_t>& shape,
                                              const builder::Target& target,
                                              const TaskOptions& options) {
    const std::string usage = templates::ShapeUsage("dense");
    if (shape.size() != 3) {
      return Status(ErrorCode::kInvalidArgument,
                    usage + " (3 values, got " + std::to_string(shape.size()) + ")");
    }
    for (int64_t d : shape) {
      if (d < 1 || d > (int64_t{1} << 20)) {
        return Status(ErrorCode::kInvalidArgument, usage + ": sizes from 1 to 1048576");
      }
    }
    if (target.is_cuda()) return MakeCudaDenseTask(shape, target, options);
    const DenseShape s{shape[0], shape[1], shape[2], templates::VectorWidth(target),
                       templates::VectorRegisters(target)};
    return templates::NewTask<DenseTask>(TaskId{"dense", shape, "float32", options.threads}, target,
                                         s);
  }

  std::string function() const override { return "dense"; }

  std::vector<ArgSpec> args() const override {
    return {{"data", {b_, in_}},
            {"weight", {out_, in_}},
            {"bias", {out_}},
            {"out", {b_, out_}, {kDLFloat, 32, 1}, true}};
  }

  double flops() const override { return 2.0 * b_ * in_ * out_; }

  Config DefaultConfig() const override {
    // The whole batch (up to 8 rows) in one tile, so the weight streams by once or twice; IN
    // chunks that keep the batch's data chunk within 64 KiB (each chunk ends in lane sums, so
    // short ones cost more than they save).
    const int64_t bb = std::min<int64_t>(b_, 8);
    int64_t ro = 4;
    while (ro > 1 && ro * bb + ro + 1 > regs_) --ro;
    const Knob* tile_in = space().FindKnob("tile_in");
    nlohmann::json chunk = tile_in->values.front();
    for (const auto& v : tile_in->values) {
      if (v[1].get<int64_t>() * b_ * 4 <= 64 * 1024 || v == tile_in->values.front()) chunk = v;
    }
    nlohmann::json want = {{"rows", std::min<int64_t>(ro, out_)},
                           {"batch_tile", bb},
                           {"tile_in", chunk},
                           {"unroll_in", 2}};
    auto c = space().FromJson(want);
    if (c.ok() && space().IsValid(*c)) return *c;
    UniqueSampler s(space(), 1);
    return space().Get(s.Next().value_or(0));
  }

  Status CheckLimits(const Config& c, const msg::DeviceInfo& device) const override {
    (void)c;
    return templates::CheckThreads(threads(), device);
  }

  std::string Generate(const Config& c) const override {
    const int64_t ro = c.Int("rows"), bb = c.Int("batch_tile");
    const int64_t kc = c.Ints("tile_in")[1];
    std::ostringstream o;
    o << "/* crosstune dense " << id().Key() << ": " << c.ToString() << " */\n"
      << templates::KernelHeader() << "#define THREADS " << threads() << "\n"
      << "#define B_ " << b_ << "L\n#define IN_ " << in_ << "L\n#define OUT_ " << out_ << "L\n"
      << "#define VW " << vw_ << "\n#define RO " << ro << "\n#define BB " << bb << "\n"
      << "#define KC " << kc << "L\n#define UNROLL " << c.Int("unroll_in") << "\n"
      << "#define NOB " << CeilDiv(out_, ro) << "L\n#define NBB " << CeilDiv(b_, bb) << "L\n"
      << templates::KernelPrelude(vw_);
    // Tiles: full, fewer weight rows, fewer batch rows, both.
    const int64_t ro_rem = out_ % ro, bb_rem = b_ % bb;
    o << TileFunction("tile_full", ro, bb);
    o << TileFunction("tile_orem", ro_rem ? ro_rem : ro, bb);
    o << TileFunction("tile_brem", ro, bb_rem ? bb_rem : bb);
    o << TileFunction("tile_bothrem", ro_rem ? ro_rem : ro, bb_rem ? bb_rem : bb);
    o << templates::KernelArgsStruct(args()) << kKernelBody
      << templates::KernelEntry(function(), args(), {{"dense_items", "NOB * NBB"}});
    return o.str();
  }

  void Reference(HostArgs& args) const override {
    templates::DenseReference(args[0], args[1], args[2], args[3], b_, in_, out_);
  }

  double atol() const override { return 2e-6 * static_cast<double>(in_) + 1e-5; }
  double rtol() const override { return 1e-4; }

  std::vector<float> Features(const Config& c) const override {
    std::vector<float> f = space().Features(c);
    const double ro = c.Int("rows"), bb = c.Int("batch_tile");
    const double kc = c.Ints("tile_in")[1];
    f.insert(f.end(), {
                          static_cast<float>(ro * bb),               // accumulators
                          static_cast<float>(ro * bb / (ro + bb)),   // FMAs per load
                          static_cast<float>(std::ceil(in_ / kc)),   // chunks
                          static_cast<float>(kc * b_ * 4 / 1024.0),  // data chunk KiB
                          static_cast<float>(std::ceil(b_ / bb)),    // weight passes
                          static_cast<float>(in_ % vw_),             // scalar tail
                          static_cast<float>(std::ceil(out_ / ro) * ro / out_),
                          static_cast<float>(vw_),
                          static_cast<float>(threads()),
                      });
    return f;
  }

 private:
  // Tile of `ro` weight rows x `bb` batch rows over one IN chunk: sums into out (first chunk:
  // bias + sum).
  static std::string TileFunction(const char* name, int64_t ro, int64_t bb) {
    std::ostringstream o;
    o << "\nstatic inline __attribute__((always_inline)) void " << name
      << "(const float* restrict x, const float* restrict w, const float* restrict bias,\n"
      << "    float* restrict y, long i0, long kc) {\n"
      << "  enum { TO = " << ro << ", TB = " << bb << " };\n"
      << kTileBody;
    return o.str();
  }

  static const char* const kTileBody;
  static const char* const kKernelBody;
};

Expected<ConfigSpace> DenseShape::BuildSpace() const {
  ConfigSpace space;
  std::vector<int64_t> rows;
  for (int64_t r : {1, 2, 3, 4, 5, 6, 8, 10, 12}) {
    if (r <= out_) rows.push_back(r);
  }
  CT_RETURN_IF_ERROR(space.AddCategorical("rows", rows));
  std::vector<int64_t> batch;
  for (int64_t b : {1, 2, 3, 4, 6, 8, 16}) {
    if (b <= b_) batch.push_back(b);
  }
  CT_RETURN_IF_ERROR(space.AddCategorical("batch_tile", batch));
  SplitOptions k{.policy = SplitPolicy::kCandidates};
  k.candidates =
      templates::AsCandidates(templates::CandidatesUpTo({256, 512, 1024, 2048, 4096}, in_));
  CT_RETURN_IF_ERROR(space.AddSplit("tile_in", in_, 2, k));
  CT_RETURN_IF_ERROR(space.AddCategorical("unroll_in", {1, 2, 4}));
  const int regs = regs_;
  // RO x BB sums, RO weight vectors and one data vector.
  space.AddConstraint("registers", [regs](const Config& c) {
    return c.Int("rows") * c.Int("batch_tile") + c.Int("rows") + 1 <= regs;
  });
  return space;
}

// x: the tile's first batch row; w: its first weight row; y: out at (first batch row, first
// weight row); [i0, i0 + kc): the IN chunk.
const char* const DenseTask::kTileBody = R"KERNEL(  vf acc[TB][TO];
  for (int b = 0; b < TB; ++b)
    for (int o = 0; o < TO; ++o) acc[b][o] = (vf){0};
  const long kv = kc / VW * VW;
#pragma clang loop unroll_count(UNROLL)
  for (long i = i0; i < i0 + kv; i += VW) {
    vf wv[TO];
    for (int o = 0; o < TO; ++o) wv[o] = *(const vfu*)(w + o * IN_ + i);
    for (int b = 0; b < TB; ++b) {
      const vf xv = *(const vfu*)(x + b * IN_ + i);
      for (int o = 0; o < TO; ++o) acc[b][o] += xv * wv[o];
    }
  }
  for (int b = 0; b < TB; ++b)
    for (int o = 0; o < TO; ++o) {
      float sum = hsum(acc[b][o]);
      for (long i = i0 + kv; i < i0 + kc; ++i) sum += x[b * IN_ + i] * w[o * IN_ + i];
      float* p = y + b * OUT_ + o;
      *p = (i0 == 0 ? bias[o] : *p) + sum;
    }
}
)KERNEL";

const char* const DenseTask::kKernelBody = R"KERNEL(
/* Items: (block of RO weight rows, block of BB batch rows); every IN chunk in order. */
static int32_t dense_items(int32_t task, int32_t num_tasks, void* closure) {
  const kernel_args* a = (const kernel_args*)closure;
  long begin, end;
  task_range(NOB * NBB, task, num_tasks, &begin, &end);
  for (long i0 = 0; i0 < IN_; i0 += KC) {
    const long kc = MIN(KC, IN_ - i0);
    for (long item = begin; item < end; ++item) {
      const long ob = item % NOB, bbk = item / NOB;
      const long o0 = ob * RO, b0 = bbk * BB;
      const int orem = o0 + RO > OUT_, brem = b0 + BB > B_;
      const float* x = a->data + b0 * IN_;
      const float* w = a->weight + o0 * IN_;
      float* y = a->out + b0 * OUT_ + o0;
      if (!orem && !brem) tile_full(x, w, a->bias + o0, y, i0, kc);
      else if (orem && !brem) tile_orem(x, w, a->bias + o0, y, i0, kc);
      else if (!orem) tile_brem(x, w, a->bias + o0, y, i0, kc);
      else tile_bothrem(x, w, a->bias + o0, y, i0, kc);
    }
  }
  return 0;
}

)KERNEL";

}  // namespace

Expected<std::unique_ptr<Task>> templates::MakeDenseTask(const std::vector<int64_t>& shape,
                                                         const builder::Target& target,
                                                         const TaskOptions& options) {
  return DenseTask::Make(shape, target, options);
}

}  // namespace crosstune::tuner
