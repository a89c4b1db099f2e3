// Graph passes: small, named, applied in order by a list (a new pass is one file plus one row in
// model/src/passes/passes.cc).
//
//   fuse_qdq_conv    a Conv between DequantizeLinear and QuantizeLinear nodes (a QDQ model's)
//                    becomes a QLinearConv of the uint8 data and int8 weight (first: before the
//                    weight's DequantizeLinear folds into a float constant)
//   fold_constants   nodes whose inputs are all constants (Constant, ConstantOfShape, Shape,
//                    a Reshape or Transpose of a weight, ...) become constants
//   remove_identity  Identity and Dropout (inference) pass their input through
//   fold_batchnorm   a BatchNormalization after a conv is folded into the conv's weight and bias
//   fuse_conv        conv + bias (+ residual add) (+ relu) become one FusedConv node: one task
//   gemm_to_dense    Gemm of a constant weight becomes Dense (y = x W^T + b, the weight stored
//                    [OUT, IN] as the dense template reads it)
//   fuse_layernorm   LayerNormalization written as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div
//                    (and a Mul and an Add of constant scale and bias) becomes one node
//
// Every pass keeps the graph's input and output names and every value's shape, and each can be
// run alone (tests compare a graph's interpreted outputs before and after).
//
// Thread-safety: none; passes edit the graph they are given.
#pragma once

#include <string>
#include <vector>

#include "crosstune/model/graph.h"
#include "crosstune/status.h"

namespace crosstune::model {

struct Pass {
  const char* name;
  Status (*run)(Graph& g);
};

// The passes above, in order.
const std::vector<Pass>& DefaultPasses();
const Pass* FindPass(const std::string& name);
// Runs the passes in order; an error names the pass.
Status RunPasses(Graph& g, const std::vector<Pass>& passes);

Status FuseQdqConv(Graph& g);
Status FoldConstants(Graph& g);
Status RemoveIdentity(Graph& g);
Status FoldBatchNorm(Graph& g);
Status FuseConv(Graph& g);
Status FuseLayerNorm(Graph& g);
Status GemmToDense(Graph& g);

}  // namespace crosstune::model
