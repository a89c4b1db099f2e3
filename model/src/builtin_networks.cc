// The built-in networks (tasks.h): graphs made node by node through the operator table, as an
// ONNX import would make them, with weights that have shapes but no data.
#include "crosstune/model/ops.h"
#include "crosstune/model/passes.h"
#include "crosstune/model/tasks.h"

namespace crosstune::model {
namespace {

class NetBuilder {
 public:
  NetBuilder(const std::string& name) {
    g_.name = name;
    g_.opset = 13;
  }
  int Input(const std::string& name, std::vector<int64_t> shape) {
    const int v = Value(name, std::move(shape));
    g_.inputs.push_back(v);
    return v;
  }
  // A weight: its shape only.
  int Param(const std::string& name, std::vector<int64_t> shape) {
    return Value(name, std::move(shape));
  }
  // Adds a node whose one output is named after it; its shape is inferred.
  Expected<int> Op(const std::string& op, const std::string& name, std::vector<int> inputs,
                   std::map<std::string, Attr> attrs = {}) {
    Node n;
    n.op = op;
    n.name = name;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    n.outputs = {Value(name, {})};
    CT_RETURN_IF_ERROR(InferNode(g_, n));
    g_.nodes.push_back(std::move(n));
    return g_.nodes.back().outputs[0];
  }
  Graph Take(int output) {
    g_.outputs = {output};
    return std::move(g_);
  }

 private:
  int Value(const std::string& name, std::vector<int64_t> shape) {
    model::Value v;
    v.name = name;
    v.shape = std::move(shape);
    return g_.AddValue(std::move(v));
  }
  Graph g_;
};

Attr Ints(std::vector<int64_t> v) {
  Attr a;
  a.kind = Attr::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
Attr Int(int64_t v) {
  Attr a;
  a.kind = Attr::Kind::kInt;
  a.i = v;
  return a;
}

// ResNet-50 v1.5 at batch 1, 224x224 (the stride of each stage's first block on its 3x3 conv):
// 53 convs with folded BatchNormalization (each has a bias), as scripts/make-model.py writes it.
Expected<Graph> ResNet50() {
  NetBuilder b("resnet50");
  auto conv = [&](int x, const std::string& name, int64_t c, int64_t k, int64_t r, int64_t stride,
                  int64_t pad, bool relu) -> Expected<int> {
    const int w = b.Param(name + ".weight", {k, c, r, r});
    const int bias = b.Param(name + ".bias", {k});
    CT_ASSIGN_OR_RETURN(int y, b.Op("Conv", name, {x, w, bias},
                                    {{"kernel_shape", Ints({r, r})},
                                     {"strides", Ints({stride, stride})},
                                     {"pads", Ints({pad, pad, pad, pad})}}));
    if (!relu) return y;
    return b.Op("Relu", name + ".relu", {y});
  };
  const int64_t width = 64;
  CT_ASSIGN_OR_RETURN(int x,
                      conv(b.Input("input", {1, 3, 224, 224}), "conv1", 3, width, 7, 2, 3, true));
  CT_ASSIGN_OR_RETURN(x, b.Op("MaxPool", "maxpool", {x},
                              {{"kernel_shape", Ints({3, 3})},
                               {"strides", Ints({2, 2})},
                               {"pads", Ints({1, 1, 1, 1})}}));
  struct Stage {
    int blocks;
    int64_t mult, stride;
  };
  const Stage stages[] = {{3, 1, 1}, {4, 2, 2}, {6, 4, 2}, {3, 8, 2}};
  int64_t channels = width;
  for (int s = 0; s < 4; ++s) {
    const int64_t planes = width * stages[s].mult, out = planes * 4;
    for (int i = 0; i < stages[s].blocks; ++i) {
      const std::string n = "layer" + std::to_string(s + 1) + "." + std::to_string(i) + ".";
      const int64_t st = i == 0 ? stages[s].stride : 1;
      CT_ASSIGN_OR_RETURN(int y, conv(x, n + "conv1", channels, planes, 1, 1, 0, true));
      CT_ASSIGN_OR_RETURN(y, conv(y, n + "conv2", planes, planes, 3, st, 1, true));
      CT_ASSIGN_OR_RETURN(y, conv(y, n + "conv3", planes, out, 1, 1, 0, false));
      int shortcut = x;
      if (i == 0) {
        CT_ASSIGN_OR_RETURN(shortcut, conv(x, n + "downsample", channels, out, 1, st, 0, false));
      }
      CT_ASSIGN_OR_RETURN(y, b.Op("Add", n + "add", {y, shortcut}));
      CT_ASSIGN_OR_RETURN(x, b.Op("Relu", n + "relu", {y}));
      channels = out;
    }
  }
  CT_ASSIGN_OR_RETURN(x, b.Op("GlobalAveragePool", "avgpool", {x}));
  CT_ASSIGN_OR_RETURN(x, b.Op("Flatten", "flatten", {x}, {{"axis", Int(1)}}));
  const int w = b.Param("fc.weight", {1000, channels});
  const int bias = b.Param("fc.bias", {1000});
  CT_ASSIGN_OR_RETURN(x, b.Op("Gemm", "fc", {x, w, bias}, {{"transB", Int(1)}}));
  Graph g = b.Take(x);
  CT_RETURN_IF_ERROR(RunPasses(g, DefaultPasses()));
  return g;
}

}  // namespace

const std::vector<std::string>& BuiltinNetworks() {
  static const std::vector<std::string> names = {"resnet50"};
  return names;
}

Expected<Graph> BuiltinGraph(const std::string& name) {
  if (name == "resnet50") return ResNet50();
  std::string known;
  for (const auto& n : BuiltinNetworks()) known += (known.empty() ? "" : ", ") + n;
  return Status(ErrorCode::kInvalidArgument,
                "unknown workload '" + name + "' (workloads: " + known + ")");
}

}  // namespace crosstune::model
