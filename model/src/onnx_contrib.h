// onnxruntime's com.microsoft operators that its transformer optimizer writes into BERT-style
// models, each imported as the ai.onnx nodes it stands for (onnxruntime's contrib operator
// documentation defines them): the graph passes and kernels then see only default-domain nodes.
//
//   BiasGelu(A, B)                 Gelu(A + B)
//   FastGelu(X[, bias])            Gelu(X + bias, approximate "tanh")
//   Gelu(X)                        Gelu(X)
//   SkipLayerNormalization(input, skip, gamma[, beta, bias])
//                                  LayerNormalization(input + skip + bias); output 3, the sum
//   EmbedLayerNormalization(input_ids[, segment_ids], word_embedding, position_embedding
//                           [, segment_embedding], gamma, beta[, mask, position_ids])
//                                  LayerNormalization of the three Gathers' sum; output 1 the
//                                  mask's count of ones per batch row, output 2 the sum
//   Attention(input, weights[, bias, mask_index, , attention_bias])
//                                  three MatMuls (the packed weights split at import) and the
//                                  ai.onnx Attention, mask_index as a key-padding mask (1-D: each
//                                  row's length; 2-D: ones and zeros; 3-D: per query), the
//                                  unmasked keys added mask_filter_value as onnxruntime does
//
// What these take is refused by name at import: past and present key/value, rotary embeddings,
// packed weights computed at run time, the training statistics of the layer norms.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "crosstune/model/graph.h"
#include "crosstune/status.h"

namespace crosstune::model {

inline constexpr const char* kContribDomain = "com.microsoft";

// The attributes com.microsoft's `op` takes, or null where the importer does not take the op.
const std::vector<std::string>* ContribAttributes(const std::string& op);

// Adds to `g` the default-domain nodes that compute contrib node `n`, each through `add` (which
// infers, checks, folds and appends one node). `n.inputs` are value ids (-1: left out);
// `n.outputs` the ids of its outputs' values, already in `g` (-1: an optional output nobody
// reads). Errors name the node (`where`).
Status ExpandContrib(Graph& g, const Node& n, const std::string& where,
                     const std::function<Status(Node&)>& add);

}  // namespace crosstune::model
