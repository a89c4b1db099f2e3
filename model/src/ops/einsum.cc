// Einsum (opset 12 on): numpy's einsum over float32 or float64 inputs. The equation names each
// input's dimensions with letters ("bij,bjk->bik"); a letter repeated within an input takes its
// diagonal, letters missing from the output are summed over, "..." stands for dimensions that
// broadcast across the inputs; without "->" the output is "..." and the letters used once, in
// alphabetical order. One generated kernel per node (kernels/math.cc) loops over the output's
// elements and sums the products over the other letters.
#include <algorithm>
#include <cctype>
#include <map>

#include "ops/op_defs.h"

namespace crosstune::model {
namespace ops {
namespace {

// Labels: letters as themselves (0-255), the ellipsis' dimensions as 256 + k (right-aligned).
constexpr int kEllipsis = 256;

struct Term {
  std::vector<int> labels;  // one per dimension, after the ellipsis is expanded
  bool ellipsis = false;
};

// "bij" or "...ii" of an input of `rank` dimensions, `ell` being the broadcast ellipsis' rank
// (the largest any input has); writes the labels, or an error.
Status ParseTerm(const std::string& text, int64_t rank, int64_t* ell_rank, Term* t,
                 const std::string& what) {
  size_t dots = text.find("...");
  if (dots != std::string::npos && text.find("...", dots + 1) != std::string::npos) {
    return Status(ErrorCode::kInvalidArgument, what + " has '...' twice");
  }
  std::string letters = text;
  if (dots != std::string::npos) letters.erase(dots, 3);
  for (char c : letters) {
    if (!std::isalpha(static_cast<unsigned char>(c))) {
      return Status(ErrorCode::kInvalidArgument,
                    what + " has '" + std::string(1, c) + "', not a letter");
    }
  }
  t->ellipsis = dots != std::string::npos;
  const int64_t ell = rank - static_cast<int64_t>(letters.size());
  if (rank >= 0 && (ell < 0 || (!t->ellipsis && ell != 0))) {
    return Status(ErrorCode::kInvalidArgument, what + " '" + text + "' does not name the " +
                                                   std::to_string(rank) + " dimensions");
  }
  if (rank >= 0) *ell_rank = std::max(*ell_rank, ell);
  for (size_t i = 0; i < text.size(); ++i) {
    if (t->ellipsis && i == dots) {
      for (int64_t k = 0; k < (rank >= 0 ? ell : *ell_rank); ++k) {
        t->labels.push_back(kEllipsis + static_cast<int>((rank >= 0 ? ell : *ell_rank) - 1 - k));
      }
      i += 2;
      continue;
    }
    t->labels.push_back(static_cast<unsigned char>(text[i]));
  }
  return Status::Ok();
}

}  // namespace

Status PlanEinsum(const Graph& g, const Node& n, EinsumPlan* plan) {
  const std::string where = "Einsum node '" + n.name + "': ";
  auto fail = [&](const std::string& what) {
    return Status(ErrorCode::kInvalidArgument, where + what);
  };
  std::string eq;
  for (char c : n.String("equation", "")) {
    if (c != ' ') eq += c;
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  size_t from = 0;
  while (true) {
    const size_t comma = lhs.find(',', from);
    terms.push_back(lhs.substr(from, comma - from));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (terms.size() != n.inputs.size()) {
    return fail("the equation '" + n.String("equation", "") + "' names " +
                std::to_string(terms.size()) + " inputs, the node has " +
                std::to_string(n.inputs.size()));
  }
  int64_t ell_rank = 0;
  std::vector<Term> ins(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    const int64_t rank = static_cast<int64_t>(g.values[n.inputs[i]].shape.size());
    CT_RETURN_IF_ERROR(
        ParseTerm(terms[i], rank, &ell_rank, &ins[i], where + "input " + std::to_string(i)));
  }
  // Each label's size: letters must agree; the ellipsis' dimensions broadcast (1 or the same).
  std::map<int, int64_t> size;
  std::map<int, int> count;
  for (size_t i = 0; i < ins.size(); ++i) {
    const auto& shape = g.values[n.inputs[i]].shape;
    for (size_t d = 0; d < ins[i].labels.size(); ++d) {
      const int l = ins[i].labels[d];
      ++count[l];
      auto [it, fresh] = size.emplace(l, shape[d]);
      if (fresh || it->second == shape[d]) continue;
      if (l >= kEllipsis && (it->second == 1 || shape[d] == 1)) {
        it->second = std::max(it->second, shape[d]);
        continue;
      }
      return fail("dimension '" + (l >= kEllipsis ? std::string("...") : std::string(1, l)) +
                  "' is " + std::to_string(it->second) + " in one place and " +
                  std::to_string(shape[d]) + " in another");
    }
  }
  std::vector<int> out;
  if (arrow != std::string::npos) {
    Term t;
    int64_t r = ell_rank;
    CT_RETURN_IF_ERROR(ParseTerm(eq.substr(arrow + 2), -1, &r, &t, where + "the output"));
    for (size_t i = 0; i < t.labels.size(); ++i) {
      const int l = t.labels[i];
      if (l < kEllipsis && !size.count(l)) {
        return fail("output letter '" + std::string(1, static_cast<char>(l)) + "' is in no input");
      }
      if (std::count(t.labels.begin(), t.labels.end(), l) > 1) {
        return fail("output letter '" + std::string(1, static_cast<char>(l)) + "' is repeated");
      }
    }
    if (!t.ellipsis && ell_rank > 0) {
      return fail("the inputs have '...' dimensions the output does not name");
    }
    out = t.labels;
  } else {
    for (int64_t k = ell_rank - 1; k >= 0; --k) out.push_back(kEllipsis + static_cast<int>(k));
    for (const auto& [l, c] : count) {
      if (l < kEllipsis && c == 1) out.push_back(l);
    }
  }
  for (int l : out) size.emplace(l, 1);  // an ellipsis dimension no input has
  std::vector<int> summed;
  for (const auto& [l, s] : size) {
    if (std::find(out.begin(), out.end(), l) == out.end()) summed.push_back(l);
  }
  // Each input's element stride for each label (a repeated label: the sum: its diagonal).
  plan->out_dims.clear();
  plan->sum_dims.clear();
  for (int l : out) plan->out_dims.push_back(size[l]);
  for (int l : summed) plan->sum_dims.push_back(size[l]);
  plan->out_strides.assign(ins.size(), std::vector<int64_t>(out.size(), 0));
  plan->sum_strides.assign(ins.size(), std::vector<int64_t>(summed.size(), 0));
  for (size_t i = 0; i < ins.size(); ++i) {
    const auto& shape = g.values[n.inputs[i]].shape;
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      const int l = ins[i].labels[d];
      const int64_t s = shape[d] == 1 && size[l] != 1 ? 0 : stride;  // broadcast
      if (auto o = std::find(out.begin(), out.end(), l); o != out.end()) {
        plan->out_strides[i][o - out.begin()] += s;
      } else {
        auto m = std::find(summed.begin(), summed.end(), l);
        plan->sum_strides[i][m - summed.begin()] += s;
      }
      stride *= shape[d];
    }
  }
  return Status::Ok();
}

}  // namespace ops

namespace {

Status InferEinsum(OpContext& ctx) {
  if (!ctx.node().Has("equation")) return ctx.Error("the equation attribute is required");
  const DType t = ctx.in(0).dtype;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.Error("input " + std::to_string(i) + " is left out");
    if (ctx.in(i).dtype != t || (t != DType::kFloat32 && t != DType::kFloat64)) {
      return ctx.Error("the inputs must all be float32 or all float64");
    }
  }
  ops::EinsumPlan plan;
  CT_RETURN_IF_ERROR(ops::PlanEinsum(ctx.graph(), ctx.node(), &plan));
  // Its work is the output's elements times the summed ones: refused past 2^36 products, which
  // no attention layer comes near (BERT-large's QK^T: 2^28), so that a crafted file cannot make
  // the import or a kernel run for hours.
  const int64_t outs = NumElements(plan.out_dims), sums = NumElements(plan.sum_dims);
  if (outs < 0 || sums < 0 || (outs > 0 && sums > (int64_t{1} << 36) / outs)) {
    return ctx.Error("the equation asks for more than 2^36 products (" + ShapeText(plan.out_dims) +
                     " out, " + ShapeText(plan.sum_dims) + " summed)");
  }
  ctx.SetOutput(0, t, plan.out_dims);
  return Status::Ok();
}

Status EvalEinsum(OpContext& ctx) {
  ops::EinsumPlan p;
  CT_RETURN_IF_ERROR(ops::PlanEinsum(ctx.graph(), ctx.node(), &p));
  std::vector<std::vector<double>> in;
  for (int i = 0; i < ctx.num_inputs(); ++i) in.push_back(ctx.in(i).AsDoubles());
  const int64_t outs = NumElements(p.out_dims), sums = NumElements(p.sum_dims);
  const DType t = ctx.out(0).dtype;
  std::vector<uint8_t>& y = ctx.OutBytes(0);
  std::vector<int64_t> base(in.size()), off(in.size());
  for (int64_t o = 0; o < outs; ++o) {
    std::fill(base.begin(), base.end(), 0);
    int64_t r = o;
    for (size_t d = p.out_dims.size(); d-- > 0;) {
      const int64_t i = r % p.out_dims[d];
      r /= p.out_dims[d];
      for (size_t k = 0; k < in.size(); ++k) base[k] += i * p.out_strides[k][d];
    }
    double acc = 0;
    for (int64_t s = 0; s < sums; ++s) {
      off = base;
      int64_t q = s;
      for (size_t d = p.sum_dims.size(); d-- > 0;) {
        const int64_t i = q % p.sum_dims[d];
        q /= p.sum_dims[d];
        for (size_t k = 0; k < in.size(); ++k) off[k] += i * p.sum_strides[k][d];
      }
      double prod = 1;
      for (size_t k = 0; k < in.size(); ++k) prod *= in[k][off[k]];
      acc += prod;
    }
    PutElement(t, y.data(), static_cast<size_t>(o), acc, 0);
  }
  return Status::Ok();
}

double EinsumFlops(const Graph& g, const Node& n) {
  ops::EinsumPlan p;
  if (!ops::PlanEinsum(g, n, &p).ok()) return 0;
  return 2.0 * static_cast<double>(NumElements(p.out_dims)) *
         static_cast<double>(NumElements(p.sum_dims)) * static_cast<double>(n.inputs.size());
}

}  // namespace

const OpDef kEinsum = {
    "Einsum", {attr::String("equation")}, 1, 16, 1, InferEinsum, EvalEinsum, EinsumFlops, false,
    12};

}  // namespace crosstune::model
