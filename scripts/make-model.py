#!/usr/bin/env python3
"""Writes the ONNX models crosstune's tests, demo and benchmarks use: seeded random weights through
onnx's helper API (no torch, nothing downloaded). Run it with the model venv's python
(scripts/install-deps.sh creates /opt/crosstune/model-venv).

  make-model.py resnet50 -o resnet50.onnx                 # ResNet-50 v1.5, 25.5 M params
  make-model.py resnet50 --width 16 -o r50w16.onnx        # same 53 convs, a quarter of the width
  make-model.py resnet50 --bn explicit -o r50bn.onnx      # BatchNormalization nodes, not folded
  make-model.py small -o small.onnx                       # a few layers of every fusion pattern
  make-model.py bert -o bert.onnx                         # a 2-layer BERT-style encoder
  make-model.py small --opset newest --ir newest -o s.onnx   # the same, as this onnx's newest
  make-model.py resnet50 --width 16 --int8 per-channel -o r50q.onnx  # int8 (QDQ) copy

Models:
  resnet50   ResNet-50 v1.5 (the stride of each stage's first block on its 3x3 conv), batch 1,
             input "input" [1,3,224,224], output "logits" [1,1000]. --bn folded (default) gives
             each conv a bias; --bn explicit keeps a BatchNormalization after each conv.
  small      conv + BN + relu, a residual block with a projection shortcut, max and average
             pools, global pool, flatten, gemm, softmax: a fast model for fusion tests.
  mobilenetv2  MobileNetV2 (inverted residuals: 1x1 expand, 3x3 depthwise, 1x1 project; ReLU6 as
             Clip), input "input" [1,3,224,224], output "logits" [1,1000]; --width is the stem's
             channels (32: the network at width multiplier 1.0, 3.5 M parameters) and scales
             every layer.
  bert       a BERT-style encoder as exporters write it: inputs "input_ids", "attention_mask",
             "token_type_ids" (int64 [--batch, --seq]); Gather embeddings, LayerNormalization
             (--ln decomposed: ReduceMean/Sub/Pow/Sqrt/Div, as exporters before opset 17 write
             it), per layer Q/K/V MatMuls whose head split is a Reshape to a shape computed from
             Shape/Gather/Concat, batched MatMuls for QK^T and PV, the mask as Unsqueeze/Cast/Sub/Mul,
             Softmax, a GELU written with Erf, residual Adds; outputs "last_hidden_state"
             [batch, seq, hidden] and "pooler_output" [batch, hidden] (the first token, Gemm-free
             MatMul + Tanh). --layers 2, --hidden 128, --heads 4, --seq 32, --vocab 1000.
  contrib-attention  onnxruntime's com.microsoft operators as its transformer optimizer writes
             them: Attention (packed Q/K/V weights and bias, --heads, --causal, an int32 key
             mask: --mask none|lengths|ones|per-query), SkipLayerNormalization (its sum as a second
             output "sum") and FastGelu; input "x" float32 [--batch, --seq, --hidden], output "y".
  shapes     a reshape whose target comes from Constant, Unsqueeze and Concat, and a
             ConstantOfShape of a Shape: what constant folding must remove.
  dynamic    an input with a symbolic batch dimension ("N"): import needs --shape.
  unsupported  a graph with an operator crosstune does not import (Hardmax).
  wide-resize  one linear Resize, x4 along the last axis, to --length columns (1,048,576): its
             kernel's tables make a build request of 27 MB (input "input", output "output").
  old-ir     IR version 3, opset 7, initializers listed among the graph inputs.
  external   weights in an external data file beside the model.

--fp16 writes the model in half precision as exporters do (float16 weights, inputs and outputs).
--int8 per-channel|per-tensor writes the model's int8 copy instead, as onnxruntime's quantizer
makes it (quantize_static, QDQ format: uint8 activations, int8 weights in 7 bits; calibrated on
four seeded inputs uniform in [-1, 1)); for models whose inputs are float32. --int8 dynamic
writes the copy quantize_dynamic makes (int8 weights in 7 bits; each MatMul's activations
quantized at run time by DynamicQuantizeLinear, the products by MatMulInteger), as for
transformers.
--ort-optimize (bert) rewrites the model as onnxruntime's transformer optimizer does: its
embeddings become com.microsoft's EmbedLayerNormalization, the residual layer norms
SkipLayerNormalization, the GELUs BiasGelu.
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

    def conv_bn(self, x, name, c, k, r, stride, pad, bn, relu, gain=1.0, groups=1):
        """conv (+ BatchNormalization, explicit or folded) (+ relu, or relu6 as Clip with
        relu="relu6")."""
        w = self.conv_weight(k, c, r, groups)
        gamma, beta, mean, var = self.bn_params(k, gain)
        eps = 1e-5
        attrs = dict(kernel_shape=[r, r], strides=[stride, stride], pads=[pad] * 4)
        if groups > 1:
            attrs["group"] = groups
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
        if relu == "relu6":
            if "relu6.min" not in self.count:
                self.name("relu6.min")
                self.const("relu6.min", np.array(0, np.float32))
                self.const("relu6.max", np.array(6, np.float32))
            y = self.node("Clip", [y, "relu6.min", "relu6.max"], name + ".relu6")
        elif relu:
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


def mobilenetv2(args):
    b = Builder(args.seed)
    mult = args.width / 32

    def channels(c):  # scaled, a multiple of 8, never 10% below the scaled count
        v = max(8, int(c * mult + 4) // 8 * 8)
        return v + 8 if v < 0.9 * c * mult else v

    c = channels(32)
    x = b.conv_bn("input", "features.0", 3, c, 3, 2, 1, args.bn, "relu6")
    block = 1
    for t, out, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                         (6, 160, 3, 2), (6, 320, 1, 1)]:
        out = channels(out)
        for i in range(n):
            p = f"features.{block}."
            stride = s if i == 0 else 1
            hidden = c * t
            y = x
            if t != 1:
                y = b.conv_bn(y, p + "expand", c, hidden, 1, 1, 0, args.bn, "relu6")
            y = b.conv_bn(y, p + "depthwise", hidden, hidden, 3, stride, 1, args.bn, "relu6",
                          groups=hidden)
            y = b.conv_bn(y, p + "project", hidden, out, 1, 1, 0, args.bn, False, gain=0.5)
            x = b.node("Add", [x, y], p + "add") if stride == 1 and c == out else y
            c = out
            block += 1
    last = max(1280, channels(1280))
    x = b.conv_bn(x, f"features.{block}", c, last, 1, 1, 0, args.bn, "relu6")
    x = b.node("GlobalAveragePool", [x], "pool")
    x = b.node("Flatten", [x], "flatten", axis=1)
    w = (b.rng.standard_normal((1000, last)) * np.sqrt(1.0 / last)).astype(np.float32)
    b.node("Gemm", [x, b.const("classifier.weight", w),
                    b.const("classifier.bias", np.zeros(1000, np.float32))], "classifier",
           ["logits"], transB=1)
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


def wide_resize(args):
    """A Resize (linear, x4 along the last axis) whose generated kernel holds a table entry per
    output column: at the default 1,048,576 columns its source is 27 MB and its object 21 MB,
    a build request far past the network protocol's frame."""
    b = Builder(args.seed)
    n = args.length
    if n < 4 or n % 4:
        raise SystemExit("make-model.py: --length must be a positive multiple of 4")
    scales = b.const("scales", np.array([1, 1, 1, 4], dtype=np.float32))
    b.node("Resize", ["input", "", scales], "resize", ["output"], mode="linear")
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 1, n // 4])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1, 1, n])]
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


def bert(args):
    b = Builder(args.seed)
    hidden, heads, seq, batch = args.hidden, args.heads, args.seq, args.batch
    if hidden % heads:
        raise SystemExit("make-model.py: --hidden must be a multiple of --heads")
    head_dim = hidden // heads
    ffn = 4 * hidden

    def weight(name, rows, cols):
        w = (b.rng.standard_normal((rows, cols)) * np.sqrt(1.0 / rows)).astype(np.float32)
        return b.const(name, w)

    def bias(name, n, scale=0.02):
        return b.const(name, (b.rng.standard_normal(n) * scale).astype(np.float32))

    def scalar(name, v, dtype=np.float32):
        return b.const(name, np.array(v, dtype))

    def layer_norm(x, name):
        gamma = b.const(name + ".weight", (1 + 0.1 * b.rng.standard_normal(hidden)).astype(
            np.float32))
        beta = bias(name + ".bias", hidden, 0.1)
        if args.ln == "op":
            return b.node("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=1e-12)
        if "ln.two" not in b.count:
            b.name("ln.two")
            scalar("ln.two", 2.0)
            scalar("ln.eps", 1e-12)
        mean = b.node("ReduceMean", [x], name + ".mean", axes=[-1], keepdims=1)
        d = b.node("Sub", [x, mean], name + ".sub")
        sq = b.node("Pow", [d, "ln.two"], name + ".pow")
        var = b.node("ReduceMean", [sq], name + ".var", axes=[-1], keepdims=1)
        std = b.node("Sqrt", [b.node("Add", [var, "ln.eps"], name + ".add_eps")], name + ".sqrt")
        y = b.node("Div", [d, std], name + ".div")
        return b.node("Add", [b.node("Mul", [y, gamma], name + ".mul"), beta], name + ".add")

    def dense(x, name, rows, cols):
        y = b.node("MatMul", [x, weight(name + ".weight", rows, cols)], name + ".matmul")
        return b.node("Add", [y, bias(name + ".bias", cols)], name)

    # Embeddings: word + position + token type, then LayerNorm.
    ids, types, mask = "input_ids", "token_type_ids", "attention_mask"
    word = b.const("embeddings.word", (b.rng.standard_normal((args.vocab, hidden)) * 0.5).astype(
        np.float32))
    pos = b.const("embeddings.position", (b.rng.standard_normal((seq, hidden)) * 0.5).astype(
        np.float32))
    tok = b.const("embeddings.token_type", (b.rng.standard_normal((2, hidden)) * 0.5).astype(
        np.float32))
    x = b.node("Gather", [word, ids], "embeddings.word_lookup", axis=0)
    # The position ids as exporters compute them: Range(0, Shape(input_ids)[1]), Unsqueezed.
    shape_ids = b.node("Shape", [ids], "embeddings.shape")
    seq_len = b.node("Gather", [shape_ids, scalar("one_i64", 1, np.int64)], "embeddings.seq_len",
                     axis=0)
    pos_ids = b.node("Range", [scalar("zero_i64", 0, np.int64), seq_len,
                               "one_i64"], "embeddings.position_ids")
    pos_ids = b.node("Unsqueeze", [pos_ids, b.const("axes0", np.array([0], np.int64))],
                     "embeddings.position_ids_2d")
    x = b.node("Add", [x, b.node("Gather", [pos, pos_ids], "embeddings.position_lookup", axis=0)],
               "embeddings.add_position")
    x = b.node("Add", [x, b.node("Gather", [tok, types], "embeddings.token_type_lookup", axis=0)],
               "embeddings.add_token_type")
    x = layer_norm(x, "embeddings.ln")

    # The mask: [batch, 1, 1, seq], 0 where attended and a large negative where not.
    m = b.node("Unsqueeze", [mask, b.const("axes12", np.array([1, 2], np.int64))], "mask.unsqueeze")
    m = b.node("Cast", [m], "mask.cast", to=TensorProto.FLOAT)
    m = b.node("Sub", [scalar("one_f32", 1.0), m], "mask.invert")
    m = b.node("Mul", [m, scalar("mask.large_negative", -10000.0)], "mask.bias")

    # The head split's target shape from the input's own shape: [batch, seq, heads, head_dim].
    shape_x = b.node("Shape", [ids], "heads.shape")
    batch_dim = b.node("Gather", [shape_x, b.const("index0", np.array([0], np.int64))],
                       "heads.batch", axis=0)
    seq_dim = b.node("Gather", [shape_x, b.const("index1", np.array([1], np.int64))], "heads.seq",
                     axis=0)
    split = b.node("Concat", [batch_dim, seq_dim, b.const("heads.dims", np.array(
        [heads, head_dim], np.int64))], "heads.split_shape", axis=0)
    merged = b.const("heads.merged_shape", np.array([0, 0, hidden], np.int64))
    scale = scalar("attention.scale", float(np.sqrt(head_dim)))
    sqrt2 = scalar("gelu.sqrt2", float(np.sqrt(2.0)))
    half = scalar("gelu.half", 0.5)

    for i in range(args.layers):
        p = f"layer{i}"
        def heads_of(t, name, perm):
            t = b.node("Reshape", [t, split], name + ".reshape")
            return b.node("Transpose", [t], name + ".transpose", perm=perm)
        q = heads_of(dense(x, p + ".query", hidden, hidden), p + ".q", [0, 2, 1, 3])
        k = heads_of(dense(x, p + ".key", hidden, hidden), p + ".k", [0, 2, 3, 1])
        v = heads_of(dense(x, p + ".value", hidden, hidden), p + ".v", [0, 2, 1, 3])
        s = b.node("MatMul", [q, k], p + ".scores")
        s = b.node("Div", [s, scale], p + ".scaled")
        s = b.node("Add", [s, m], p + ".masked")
        a = b.node("Softmax", [s], p + ".softmax", axis=-1)
        c = b.node("MatMul", [a, v], p + ".context")
        c = b.node("Transpose", [c], p + ".context.transpose", perm=[0, 2, 1, 3])
        c = b.node("Reshape", [c, merged], p + ".context.reshape")
        y = dense(c, p + ".attention.output", hidden, hidden)
        x = layer_norm(b.node("Add", [y, x], p + ".attention.residual"), p + ".attention.ln")
        h = dense(x, p + ".intermediate", hidden, ffn)
        e = b.node("Erf", [b.node("Div", [h, sqrt2], p + ".gelu.div")], p + ".gelu.erf")
        e = b.node("Add", [e, "one_f32"], p + ".gelu.add")
        h = b.node("Mul", [b.node("Mul", [h, e], p + ".gelu.mul"), half], p + ".gelu")
        y = dense(h, p + ".output", ffn, hidden)
        x = layer_norm(b.node("Add", [y, x], p + ".output.residual"), p + ".output.ln")

    b.node("Identity", [x], "last_hidden_state", ["last_hidden_state"])
    first = b.node("Gather", [x, scalar("index0_scalar", 0, np.int64)], "pooler.first", axis=1)
    first = dense(first, "pooler.dense", hidden, hidden)
    b.node("Tanh", [first], "pooler.tanh", ["pooler_output"])
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [batch, seq])
              for n in (ids, mask, types)]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             [batch, seq, hidden]),
               helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, [batch, hidden])]
    return b, inputs, outputs, 17 if args.ln == "op" else 14


MODELS = {
    "resnet50": resnet50,
    "small": small,
    "mobilenetv2": mobilenetv2,
    "bert": bert,
    "shapes": shapes,
    "dynamic": dynamic,
    "unsupported": unsupported,
    "old-ir": old_ir,
    "external": small,
    "wide-resize": wide_resize,
}


def contrib_attention(args):
    """com.microsoft's Attention (packed Q/K/V weights, a key mask), SkipLayerNormalization and
    FastGelu, as onnxruntime's transformer optimizer writes them."""
    b = Builder(args.seed)
    batch, seq, hidden, heads = args.batch, args.seq, args.hidden, args.heads
    if hidden % heads:
        raise SystemExit("make-model.py: --hidden must be a multiple of --heads")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])
    inputs = [x]
    attention_inputs = ["x", b.const("qkv.weight", (b.rng.standard_normal((hidden, 3 * hidden)) *
                                                   0.1).astype(np.float32)),
                        b.const("qkv.bias", (b.rng.standard_normal(3 * hidden) * 0.02)
                                .astype(np.float32))]
    mask_shape = {"none": None, "lengths": [batch], "ones": [batch, seq],
                  "per-query": [batch, seq, seq]}[args.mask]
    if mask_shape:
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, mask_shape))
        attention_inputs.append("mask")
    a = b.name("attention")
    b.nodes.append(helper.make_node("Attention", attention_inputs, [a], name=a,
                                    domain="com.microsoft", num_heads=heads,
                                    unidirectional=int(args.causal)))
    s = b.name("skip_ln")
    b.nodes.append(helper.make_node(
        "SkipLayerNormalization",
        [a, "x", b.const("ln.gamma", (1 + b.rng.standard_normal(hidden) * 0.1).astype(np.float32)),
         b.const("ln.beta", (b.rng.standard_normal(hidden) * 0.1).astype(np.float32)),
         b.const("ln.bias", (b.rng.standard_normal(hidden) * 0.1).astype(np.float32))],
        [s, "", "", "sum"], name=s, domain="com.microsoft", epsilon=1e-5))
    g = b.name("fast_gelu")
    b.nodes.append(helper.make_node(
        "FastGelu", [s, b.const("gelu.bias", (b.rng.standard_normal(hidden) * 0.1)
                                .astype(np.float32))], ["y"], name=g, domain="com.microsoft"))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, hidden]),
               helper.make_tensor_value_info("sum", TensorProto.FLOAT, [batch, seq, hidden])]
    return b, inputs, outputs, 14


MODELS["contrib-attention"] = contrib_attention


def ort_optimize(path, args):
    """Rewrites the BERT-style model at `path` as onnxruntime's transformer optimizer does
    (com.microsoft's EmbedLayerNormalization, SkipLayerNormalization, BiasGelu)."""
    import logging

    from onnxruntime.transformers import optimizer
    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    optimized = optimizer.optimize_model(path, model_type="bert", num_heads=args.heads,
                                         hidden_size=args.hidden, opt_level=0)
    optimized.save_model_to_file(path)


def to_half(model):
    """float32 weights, graph inputs and outputs to float16, in place."""
    g = model.graph
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            half = numpy_helper.to_array(t).astype(np.float16)
            g.initializer[i].CopyFrom(numpy_helper.from_array(half, t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16


def quantize(model, out, how, seed):
    """Writes `model`'s int8 copy to `out` through onnxruntime's quantizer: static QDQ
    (`how` per-channel or per-tensor) or dynamic.

    The weights take 7 bits (reduce_range), as onnxruntime advises for x86 CPUs without VNNI:
    there its uint8 x int8 kernels add each pair of products in 16 bits (vpmaddubsw) and
    saturate, so its answer is not the exact one the model defines (101 of 128 sums off, by up
    to 35,057, in a 64-deep MatMulInteger on an AVX2 AMD EPYC (Zen 3), onnxruntime 1.32,
    2026-12-07; an int8 ResNet 6 quantization steps from ours). With them every pair fits and
    onnxruntime is exact on any x86 CPU."""
    import tempfile

    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)
    if how == "dynamic":
        with tempfile.TemporaryDirectory() as tmp:
            fp32 = os.path.join(tmp, "fp32.onnx")
            onnx.save_model(model, fp32)
            quantize_dynamic(fp32, out, weight_type=QuantType.QInt8, reduce_range=True)
        return
    inputs = [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in
              model.graph.input if i.type.tensor_type.elem_type == TensorProto.FLOAT]
    if len(inputs) != len(model.graph.input):
        raise SystemExit("make-model.py: --int8 takes models whose inputs are float32")
    rng = np.random.default_rng(seed + 7)
    batches = [{n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in inputs} for _ in range(4)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(batches)

        def get_next(self):
            return next(self.it, None)

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = os.path.join(tmp, "fp32.onnx")
        onnx.save_model(model, fp32)
        quantize_static(fp32, out, Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=how == "per-channel", activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, reduce_range=True)  # 7 bits: see above


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model", choices=sorted(MODELS))
    p.add_argument("-o", "--out", required=True, help="the .onnx file to write")
    p.add_argument("--width", type=int, default=0,
                   help="resnet50: the stem's channels (64); mobilenetv2: (32)")
    p.add_argument("--bn", choices=["folded", "explicit"], default="folded")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ln", choices=["op", "decomposed"], default="op",
                   help="bert: LayerNormalization nodes (opset 17) or their ReduceMean/Sub/Pow/"
                        "Sqrt/Div form (opset 14)")
    for name, default in (("layers", 2), ("hidden", 128), ("heads", 4), ("seq", 32),
                          ("vocab", 1000), ("batch", 1)):
        p.add_argument("--" + name, type=int, default=default, help=f"bert ({default})")
    p.add_argument("--opset", default="",
                   help="the default domain's opset to declare instead of the model's own "
                        "(a number, or 'newest': the newest this onnx release knows)")
    p.add_argument("--ir", default="",
                   help="the IR version to write (a number, or 'newest': this onnx release's)")
    p.add_argument("--fp16", action="store_true",
                   help="float16 weights, inputs and outputs (a half-precision export)")
    p.add_argument("--int8", choices=["per-channel", "per-tensor", "dynamic"],
                   help="write the int8 (QDQ) copy onnxruntime's quantizer makes")
    p.add_argument("--ort-optimize", action="store_true",
                   help="bert: as onnxruntime's transformer optimizer rewrites it (com.microsoft "
                        "operators)")
    p.add_argument("--mask", choices=["none", "lengths", "ones", "per-query"], default="ones",
                   help="contrib-attention: the key mask (int32 [batch] lengths, [batch, seq] "
                        "ones and zeros, or [batch, seq, seq])")
    p.add_argument("--causal", action="store_true", help="contrib-attention: unidirectional")
    p.add_argument("--length", type=int, default=1 << 20,
                   help="wide-resize: the output's columns (1048576)")
    args = p.parse_args()
    if args.width == 0:
        args.width = 32 if args.model == "mobilenetv2" else 64
    if args.width < 1:
        p.error("--width must be positive")
    b, inputs, outputs, opset = MODELS[args.model](args)
    if args.opset:
        opset = onnx.defs.onnx_opset_version() if args.opset == "newest" else int(args.opset)
    graph = helper.make_graph(b.nodes, args.model, inputs, outputs, b.inits)
    opsets = [helper.make_opsetid("", opset)]
    if any(n.domain == "com.microsoft" for n in b.nodes):
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    model = helper.make_model(graph, producer_name="crosstune make-model.py",
                              opset_imports=opsets)
    model.ir_version = 3 if args.model == "old-ir" else 8
    if args.ir:
        model.ir_version = onnx.IR_VERSION if args.ir == "newest" else int(args.ir)
    if args.fp16:
        to_half(model)
    onnx.checker.check_model(model)
    if args.model == "external":
        location = os.path.basename(args.out) + ".data"
        onnx.save_model(model, args.out, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=location, size_threshold=0)
    elif args.int8:
        quantize(model, args.out, args.int8, args.seed)
    else:
        onnx.save_model(model, args.out)
    if args.ort_optimize:
        ort_optimize(args.out, args)
    params = sum(int(np.prod(t.dims)) for t in b.inits)
    print(f"{args.out}: {args.model}, {len(b.nodes)} nodes, {params} parameters", file=sys.stderr)


if __name__ == "__main__":
    main()
