#!/usr/bin/env python3
"""onnxruntime, the reference: runs a model on given or seeded inputs, writes each output as .npy,
and optionally times it. Run it with the model venv's python (/opt/crosstune/model-venv).

  onnx-reference.py model.onnx --input input=x.npy --out logits=ref.npy
  onnx-reference.py model.onnx --seed 1 --write-inputs DIR --out-dir DIR   # seeded inputs
  onnx-reference.py model.onnx --seed 1 --time --threads 1 --json          # latency (median ms)

Seeded inputs come from numpy's default_rng(seed), one array per graph input in order: floats
uniform in [-1, 1) (drawn as float64, then of the input's float type), integers uniform in [0, 2) unless --int-high NAME=N raises the bound (token ids
below a vocabulary's size; 0/1 fits masks and token types); --write-inputs saves them as
<name>.npy so another runtime gets the same bytes.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], help="NAME=FILE.npy")
    p.add_argument("--out", action="append", default=[], help="NAME=FILE.npy (one per output)")
    p.add_argument("--out-dir", help="write every output as DIR/<name>.npy")
    p.add_argument("--seed", type=int, default=0, help="inputs not given are seeded from this")
    p.add_argument("--int-high", action="append", default=[],
                   help="NAME=N: seed integer input NAME uniform in [0, N) (default 2)")
    p.add_argument("--write-inputs", help="save the inputs used as DIR/<name>.npy")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads")
    p.add_argument("--no-optimize", action="store_true",
                   help="graph optimizations off: each node as ONNX defines it (onnxruntime's "
                        "fused int8 kernels round differently from its own unfused run)")
    p.add_argument("--time", action="store_true", help="time runs (median of --runs)")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if args.no_optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if args.threads > 1:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])

    given = dict(s.split("=", 1) for s in args.input)
    high = {k: int(v) for k, v in (s.split("=", 1) for s in args.int_high)}
    rng = np.random.default_rng(args.seed)
    feeds = {}
    for i in sess.get_inputs():
        if i.name in given:
            feeds[i.name] = np.load(given.pop(i.name))
            continue
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if i.type in ("tensor(int64)", "tensor(int32)"):
            dtype = np.int64 if i.type == "tensor(int64)" else np.int32
            feeds[i.name] = rng.integers(0, high.pop(i.name, 2), shape).astype(dtype)
        else:
            dtype = {"tensor(float16)": np.float16, "tensor(double)": np.float64}.get(
                i.type, np.float32)
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(dtype)
    if given or high:
        sys.exit(f"onnx-reference: error: the model has no input {sorted({**given, **high})[0]}")
    if args.write_inputs:
        os.makedirs(args.write_inputs, exist_ok=True)
        for name, a in feeds.items():
            np.save(os.path.join(args.write_inputs, name + ".npy"), a)

    names = [o.name for o in sess.get_outputs()]
    outs = sess.run(names, feeds)
    wanted = dict(s.split("=", 1) for s in args.out)
    for name, a in zip(names, outs):
        if name in wanted:
            np.save(wanted.pop(name), a)
        if args.out_dir:
            os.makedirs(args.out_dir, exist_ok=True)
            np.save(os.path.join(args.out_dir, name + ".npy"), a)
    if wanted:
        sys.exit(f"onnx-reference: error: the model has no output {sorted(wanted)[0]}")

    result = {"onnxruntime": ort.__version__, "threads": args.threads, "outputs": names}
    if args.time:
        for _ in range(3):
            sess.run(names, feeds)
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            sess.run(names, feeds)
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        result.update(median_ms=times[len(times) // 2], min_ms=times[0], runs=args.runs)
    if args.json:
        print(json.dumps(result))
    elif args.time:
        print(f"onnxruntime {ort.__version__}, {args.threads} threads: median "
              f"{result['median_ms']:.3f} ms, min {result['min_ms']:.3f} ms over {args.runs} runs")


if __name__ == "__main__":
    main()
