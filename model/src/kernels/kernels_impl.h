// The generators of model/src/kernels/*.cc (one row each in registry.cc).
#pragma once

#include <string>

#include "crosstune/model/kernels.h"
#include "kernels/kernel_text.h"

namespace crosstune::model::kernels {

using Generator = Expected<GeneratedKernel> (*)(const Graph& g, const Node& n,
                                                const std::string& function);

Expected<GeneratedKernel> Copy(const Graph&, const Node&, const std::string&);  // elementwise.cc
Expected<GeneratedKernel> Cast(const Graph&, const Node&, const std::string&);  // elementwise.cc
Expected<GeneratedKernel> Quantize(const Graph&, const Node&,
                                   const std::string&);  // elementwise.cc
Expected<GeneratedKernel> DynamicQuantize(const Graph&, const Node&,
                                          const std::string&);                   // elementwise.cc
Expected<GeneratedKernel> Unary(const Graph&, const Node&, const std::string&);  // elementwise.cc
Expected<GeneratedKernel> Broadcast(const Graph&, const Node&,
                                    const std::string&);  // elementwise.cc
Expected<GeneratedKernel> BatchNorm(const Graph&, const Node&,
                                    const std::string&);                        // elementwise.cc
Expected<GeneratedKernel> Pool(const Graph&, const Node&, const std::string&);  // pool.cc
Expected<GeneratedKernel> GlobalAvgPool(const Graph&, const Node&, const std::string&);  // pool.cc
Expected<GeneratedKernel> Concat(const Graph&, const Node&, const std::string&);     // layout.cc
Expected<GeneratedKernel> Transpose(const Graph&, const Node&, const std::string&);  // layout.cc
Expected<GeneratedKernel> Slice(const Graph&, const Node&, const std::string&);      // layout.cc
Expected<GeneratedKernel> Gather(const Graph&, const Node&, const std::string&);     // layout.cc
Expected<GeneratedKernel> Remap(const Graph&, const Node&, const std::string&);      // layout.cc
Expected<GeneratedKernel> Split(const Graph&, const Node&, const std::string&);      // layout.cc
Expected<GeneratedKernel> Resize(const Graph&, const Node&, const std::string&);     // layout.cc
Expected<GeneratedKernel> LayoutTransform(const Graph&, const Node&,
                                          const std::string&);                     // layout.cc
Expected<GeneratedKernel> Softmax(const Graph&, const Node&, const std::string&);  // math.cc
Expected<GeneratedKernel> Lrn(const Graph&, const Node&, const std::string&);      // math.cc
Expected<GeneratedKernel> MatrixProduct(const Graph&, const Node&, const std::string&);  // math.cc
Expected<GeneratedKernel> Attention(const Graph&, const Node&, const std::string&);      // math.cc
Expected<GeneratedKernel> Einsum(const Graph&, const Node&, const std::string&);         // math.cc
Expected<GeneratedKernel> QuantConv(const Graph&, const Node&, const std::string&);      // math.cc
Expected<GeneratedKernel> Conv2dInt8(const Graph&, const Node&, const std::string&);     // math.cc
Expected<GeneratedKernel> ConvTranspose(const Graph&, const Node&,
                                        const std::string&);                          // math.cc
Expected<GeneratedKernel> DirectConv(const Graph&, const Node&, const std::string&);  // math.cc
Expected<GeneratedKernel> Reduce(const Graph&, const Node&, const std::string&);      // reduce.cc
Expected<GeneratedKernel> LayerNorm(const Graph&, const Node&, const std::string&);   // reduce.cc
Expected<GeneratedKernel> InstanceNorm(const Graph&, const Node&,
                                       const std::string&);  // reduce.cc

}  // namespace crosstune::model::kernels
