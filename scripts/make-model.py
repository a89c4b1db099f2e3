#!/usr/bin/env python3
"""Writes the ONNX models crosstune's tests, demo and benchmarks use: seeded random weights through
onnx's helper API (no torch, nothing downloaded). Run it with the model venv's python
(scripts/install-deps.sh creates /opt/crosstune/model-venv).

  make-model.py resnet50 -o resnet50.onnx                 # ResNet-50 v1.5, 25.5 M params
  make-model.py resnet50 --width 16 -o r50w16.onnx        # same 53 convs, a quarter of the width
  make-model.py resnet50 --bn explicit -o r50bn.onnx      # BatchNormalization nodes, not folded
  make-model.py small -o small.onnx                       # a few layers of every fusion pattern
  make-model.py small --opset newest --ir newest -o s.onnx   # the same, as this onnx's newest

Models:
  resnet50   ResNet-50 v1.5 (the stride of each stage's first block on its 3x3 conv), batch 1,
             input "input" [1,3,224,224], output "logits" [1,1000]. --bn folded (default) gives
             each conv a bias; --bn explicit keeps a BatchNormalization after each conv.
  small      conv + BN + relu, a residual block with a projection shortcut, max and average
             pools, global pool, flatten, gemm, softmax: a fast model for fusion tests.
  shapes     a reshape whose target comes from Constant, Unsqueeze and Concat, and a
             ConstantOfShape of a Shape: what constant folding must remove.
  dynamic    an input with a symbolic batch dimension ("N"): import needs --shape.
  unsupported  a graph with an operator crosstune does not import (Hardmax).
  old-ir     IR version 3, opset 7, initializers listed among the graph inputs.
  external   weights in an external data file beside the model.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """Nodes and initializers of one graph, with seeded weights."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = {}

    def name(self, prefix):
        n = self.count.get(prefix, 0)
        self.count[prefix] = n + 1
        return prefix if n == 0 else f"{prefix}_{n}"

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, name, outputs=None, **attrs):
        outputs = outputs or [name]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0]

    def conv_weight(self, k, c, r, groups=1):
        fan_in = c // groups * r * r
        return (self.rng.standard_normal((k, c // groups, r, r)) * np.sqrt(2.0 / fan_in)).astype(
            np.float32)

    def bn_params(self, k, gain):
        gamma = (self.rng.uniform(0.5, 1.0, k) * gain).astype(np.float32)
        beta = self.rng.uniform(-0.1, 0.1, k).astype(np.float32)
        mean = self.rng.uniform(-0.1, 0.1, k).astype(np.float32)
        var = self.rng.uniform(0.5, 1.5, k).astype(np.float32)
        return gamma, beta, mean, var

    def conv_bn(self, x, name, c, k, r, stride, pad, bn, relu, gain=1.0):
        """conv (+ BatchNormalization, explicit or folded) (+ relu)."""
        w = self.conv_weight(k, c, r)
        gamma, beta, mean, var = self.bn_params(k, gain)
        eps = 1e-5
        attrs = dict(kernel_shape=[r, r], strides=[stride, stride], pads=[pad] * 4)
        if bn == "explicit":
            y = self.node("Conv", [x, self.const(name + ".weight", w)], name, **attrs)
            y = self.node("BatchNormalization", [
                y,
                self.const(name + ".bn.scale", gamma),
                self.const(name + ".bn.bias", beta),
                self.const(name + ".bn.mean", mean),
                self.const(name + ".bn.var", var)
            ],
                          name + ".bn",
                          epsilon=eps)
        else:
            scale = gamma / np.sqrt(var + eps)
            wf = (w * scale[:, None, None, None]).astype(np.float32)
            bf = (beta - mean * scale).astype(np.float32)
            y = self.node("Conv",
                          [x, self.const(name + ".weight", wf),
                           self.const(name + ".bias", bf)], name, **attrs)
        if relu:
            y = self.node("Relu", [y], name + ".relu")
        return y


def resnet50(args):
    b = Builder(args.seed)
    width = args.width
    x = b.conv_bn("input", "conv1", 3, width, 7, 2, 3, args.bn, True)
    x = b.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = width
    for s, (blocks, mult, stride) in enumerate([(3, 1, 1), (4, 2, 2), (6, 4, 2), (3, 8, 2)]):
        planes = width * mult
        out = planes * 4
        for i in range(blocks):
            n = f"layer{s + 1}.{i}."
            st = stride if i == 0 else 1
            y = b.conv_bn(x, n + "conv1", channels, planes, 1, 1, 0, args.bn, True)
            y = b.conv_bn(y, n + "conv2", planes, planes, 3, st, 1, args.bn, True)
            # The block's last BN starts small so that activations stay bounded over 16 blocks.
            y = b.conv_bn(y, n + "conv3", planes, out, 1, 1, 0, args.bn, False, gain=0.3)
            shortcut = x
            if i == 0:
                shortcut = b.conv_bn(x, n + "downsample", channels, out, 1, st, 0, args.bn, False)
            y = b.node("Add", [y, shortcut], n + "add")
            x = b.node("Relu", [y], n + "relu")
            channels = out
    x = b.node("GlobalAveragePool", [x], "avgpool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    fc_w = (b.rng.standard_normal((1000, channels)) / np.sqrt(channels)).astype(np.float32)
    fc_b = b.rng.uniform(-0.1, 0.1, 1000).astype(np.float32)
    b.node("Gemm", [x, b.const("fc.weight", fc_w), b.const("fc.bias", fc_b)], "fc", ["logits"],
           transB=1)
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])]
    return b, inputs, outputs, 13


def small(args):
    b = Builder(args.seed)
    x = b.conv_bn("input", "stem", 3, 16, 3, 1, 1, args.bn, True)
    x = b.node("MaxPool", [x], "pool", kernel_shape=[2, 2], strides=[2, 2])
    y = b.conv_bn(x, "block.conv1", 16, 16, 3, 1, 1, args.bn, True)
    y = b.conv_bn(y, "block.conv2", 16, 32, 1, 1, 0, args.bn, False)
    s = b.conv_bn(x, "block.downsample", 16, 32, 1, 1, 0, args.bn, False)
    y = b.node("Add", [y, s], "block.add")
    x = b.node("Relu", [y], "block.relu")
    x = b.node("Dropout", [x], "dropout")
    x = b.node("AveragePool", [x], "avgpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = b.node("GlobalAveragePool", [x], "gap")
    x = b.node("Flatten", [x], "flatten")
    w = (b.rng.standard_normal((10, 32)) * 0.3).astype(np.float32)
    x = b.node("Gemm", [x, b.const("fc.weight", w), b.const("fc.bias", np.zeros(10, np.float32))],
               "fc", transB=1)
    b.node("Softmax", [x], "softmax", ["probs"], axis=1)
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])]
    outputs = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])]
    return b, inputs, outputs, 13


def shapes(args):
    b = Builder(args.seed)
    x = b.conv_bn("input", "conv", 3, 8, 3, 1, 1, "folded", True)
    one = b.node("Constant", [], "one", value=numpy_helper.from_array(np.array(1, np.int64)))
    batch = b.node("Unsqueeze", [one, b.const("axes", np.array([0], np.int64))], "batch")
    minus = b.node("Constant", [], "minus_one",
                   value=numpy_helper.from_array(np.array([-1], np.int64)))
    target = b.node("Concat", [batch, minus], "target", axis=0)
    x = b.node("Reshape", [x, target], "reshape")
    shape = b.node("Shape", [x], "shape")  # [1, 512], known once the input's shape is
    fill = b.node("ConstantOfShape", [shape], "fill",
                  value=numpy_helper.from_array(np.array([0.5], np.float32)))
    b.node("Add", [x, fill], "add", ["out"])
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 512])]
    return b, inputs, outputs, 13


def dynamic(args):
    b = Builder(args.seed)
    b.conv_bn("input", "conv", 3, 4, 3, 1, 1, "folded", True)
    b.nodes[-1].output[0] = "out"
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 8, 8])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 4, 8, 8])]
    return b, inputs, outputs, 13


def unsupported(args):
    b = Builder(args.seed)
    x = b.conv_bn("input", "conv", 3, 4, 3, 1, 1, "folded", True)
    b.node("Hardmax", [x], "hardmax", ["out"])
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 8, 8])]
    return b, inputs, outputs, 13


def old_ir(args):
    b = Builder(args.seed)
    x = b.conv_bn("input", "conv", 3, 4, 3, 1, 1, "folded", True)
    b.node("Flatten", [x], "flatten", ["out"], axis=1)
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])]
    # IR 3 lists every initializer among the inputs.
    for t in b.inits:
        inputs.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 256])]
    return b, inputs, outputs, 7


MODELS = {
    "resnet50": resnet50,
    "small": small,
    "shapes": shapes,
    "dynamic": dynamic,
    "unsupported": unsupported,
    "old-ir": old_ir,
    "external": small,
}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model", choices=sorted(MODELS))
    p.add_argument("-o", "--out", required=True, help="the .onnx file to write")
    p.add_argument("--width", type=int, default=64, help="resnet50: the stem's channels (64)")
    p.add_argument("--bn", choices=["folded", "explicit"], default="folded")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--opset", default="",
                   help="the default domain's opset to declare instead of the model's own "
                        "(a number, or 'newest': the newest this onnx release knows)")
    p.add_argument("--ir", default="",
                   help="the IR version to write (a number, or 'newest': this onnx release's)")
    args = p.parse_args()
    if args.width < 1:
        p.error("--width must be positive")
    b, inputs, outputs, opset = MODELS[args.model](args)
    if args.opset:
        opset = onnx.defs.onnx_opset_version() if args.opset == "newest" else int(args.opset)
    graph = helper.make_graph(b.nodes, args.model, inputs, outputs, b.inits)
    model = helper.make_model(graph,
                              producer_name="crosstune make-model.py",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 3 if args.model == "old-ir" else 8
    if args.ir:
        model.ir_version = onnx.IR_VERSION if args.ir == "newest" else int(args.ir)
    onnx.checker.check_model(model)
    if args.model == "external":
        location = os.path.basename(args.out) + ".data"
        onnx.save_model(model, args.out, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=location, size_threshold=0)
    else:
        onnx.save_model(model, args.out)
    params = sum(int(np.prod(t.dims)) for t in b.inits)
    print(f"{args.out}: {args.model}, {len(b.nodes)} nodes, {params} parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
