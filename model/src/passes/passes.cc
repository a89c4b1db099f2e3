// The pass list (passes.h).
#include "crosstune/model/passes.h"

namespace crosstune::model {

const std::vector<Pass>& DefaultPasses() {
  static const std::vector<Pass> passes = {
      {"fuse_qdq_conv", FuseQdqConv},
      {"fold_constants", FoldConstants},
      {"remove_identity", RemoveIdentity},
      {"fold_batchnorm", FoldBatchNorm},
      {"fuse_conv", FuseConv},
      {"gemm_to_dense", GemmToDense},
      {"fuse_layernorm", FuseLayerNorm},
  };
  return passes;
}

const Pass* FindPass(const std::string& name) {
  for (const Pass& p : DefaultPasses()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

Status RunPasses(Graph& g, const std::vector<Pass>& passes) {
  for (const Pass& p : passes) {
    Status s = p.run(g);
    if (!s.ok()) return Status(s.code(), std::string(p.name) + ": " + s.message());
  }
  return Status::Ok();
}

}  // namespace crosstune::model
