// An imported model as the binding's files share it (model.cc binds it, tuner.cc tunes it).
#pragma once
#include <string>

#include "crosstune/model/graph.h"

namespace crosstune::python {

// An ONNX model imported and put through the default passes: the graph tune and compile take,
// and what the file held before the passes.
struct ImportedModel {
  std::string path, name;
  model::Graph graph;
  model::GraphStats imported;
};

}  // namespace crosstune::python
