"""crosstune-bench-model: ResNet-50 batch 1 fp32 end to end, crosstune against onnxruntime and
OpenVINO, in one run; with --int8, its int8 copy as onnxruntime's static quantizer writes it (QDQ,
uint8 activations, int8 weights per channel: make-model.py --int8 per-channel), all three running
the same int8 model; with --model mobilenetv2, MobileNetV2 (width 1.0, ReLU6 as Clip, 17
depthwise convs) in fp32; with --model bert-base, a BERT-base encoder (12 layers, hidden 768, 12
heads, sequence 128; make-model.py bert, its default vocabulary of 1,000 tokens) in fp32, its
last_hidden_state compared.

Writes the model (scripts/make-model.py, seeded weights), starts a local crosstune-server, tunes
the model's tasks with `crosstune tune --model` under a trial budget (or reuses --log; with neither,
every task runs its default config), compiles it for each thread count and then times, alternating
round by round so that the machine's drift falls on all three alike:
  crosstune    the package on the local server's graph executor (`crosstune bench-model`)
  onnxruntime  CPU provider, sequential, intra-op threads = N (spinning off above one thread)
  openvino     CPU, latency hint, N inference threads, f32 inference precision
at each N of --threads. With --layouts blocked,nchw the package is compiled (and tuned) once per
layout plan, and each after the first is timed too, as `crosstune_nchw` beside `crosstune`: the
activations kept blocked between layers against every conv taking NCHW. Nothing else of the benchmark runs while one of them is timed. Prints one
JSON object: each one's median and min ms per N, the ratios to onnxruntime and OpenVINO, this run's
FMA peak (crosstune-bench-peak) and each result's fraction of it, the executor's overhead
(end-to-end median minus the sum of its nodes' medians), each layer's time against OpenVINO's
per-layer time (its performance counters: the oneDNN primitive it runs) with sums by conv kind,
the activation MB, the logits' max error against onnxruntime with the tolerance it must be within
(it exits 1 when any is not; with --int8 one quantization step of the output, the scale of the
DequantizeLinear that writes the logits: a requantization rounding a tie the other way moves a
logit by one step), and the tuning wall time and trials, with the wall time the tuning
took to bring its network estimate within 5% of its final one.

Run through the build's wrapper, build/default/bench/crosstune-bench-model, which names the
binaries and the model venv's python; --help lists the options.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


# The logits must agree with onnxruntime's within fp32 tolerance, element by element, as the
# compiler's own tests require (tests/model/compiled_model.cc): |ours - ref| <= ATOL + RTOL |ref|.
# A run whose logits are further off prints its JSON and exits 1: a wrong answer is no result.
LOGITS_ATOL = 1e-4
LOGITS_RTOL = 1e-3


def log(msg):
    print(f"bench-model: {msg}", file=sys.stderr, flush=True)


def run_json(cmd, what):
    """Runs a crosstune command that prints one JSON object; a failure names the command."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench-model: {what} failed (exit {p.returncode}): {' '.join(cmd)}\n"
                 f"{p.stderr.strip()[-2000:]}")
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        sys.exit(f"bench-model: {what} printed no JSON: {p.stdout[-500:]}")


def convergence(log_file):
    """Per tuning run in a log (its `run` id): the network estimate the records give (each task's
    best mean so far times its count in the network, once every task has a result) and the wall
    time and trials it took to come within 5% of the run's final estimate. The wall time counts
    from the first record's build; it is the tuner's estimate of the network, not a timed run."""
    from datetime import datetime
    runs = {}
    for line in open(log_file):
        r = json.loads(line)
        runs.setdefault(r.get("run", ""), []).append(r)
    out = []
    for run, records in runs.items():
        records.sort(key=lambda r: r["timestamp"])
        when = [datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")).timestamp()
                for r in records]
        start = when[0] - records[0].get("build_s", 0) - records[0].get("run_s", 0)
        tasks = {json.dumps(r["task"], sort_keys=True): r.get("workload", {}).get("count", 1)
                 for r in records}
        best = {}
        curve = []  # (seconds, trials, estimate)
        for i, r in enumerate(records):
            if r.get("error") == "ok":
                key = json.dumps(r["task"], sort_keys=True)
                best[key] = min(best.get(key, float("inf")), r["mean"])
            if len(best) == len(tasks):
                curve.append((when[i] - start, i + 1, sum(tasks[k] * best[k] for k in tasks)))
        entry = {"run": run, "trials": len(records), "tasks": len(tasks),
                 "wall_s": when[-1] - start}
        if curve:
            final = curve[-1][2]
            first = next(c for c in curve if c[2] <= 1.05 * final)
            entry.update({"estimate_ms": final * 1e3, "all_tasks_measured_s": curve[0][0],
                          "estimate_at_all_tasks_ms": curve[0][2] * 1e3,
                          "to_within_5pct_s": first[0], "to_within_5pct_trials": first[1]})
        out.append(entry)
    return out


class LocalServer:
    """A crosstune-server on loopback, port from the kernel, stopped on exit."""

    def __init__(self, binary, threads, work):
        self.out = open(os.path.join(work, "server.log"), "w+")
        self.proc = subprocess.Popen([binary, "--host", "127.0.0.1", "--port", "0",
                                      "--threads", str(threads)],
                                     stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        self.address = None
        while self.address is None:
            if self.proc.poll() is not None:
                self.out.seek(0)
                sys.exit(f"bench-model: crosstune-server exited: {self.out.read()[-1000:]}")
            if time.monotonic() > deadline:
                self.stop()
                sys.exit("bench-model: crosstune-server did not listen within 60 s")
            self.out.seek(0)
            m = re.search(r"listening on (\S+):(\d+)", self.out.read())
            if m:
                self.address = f"127.0.0.1:{m.group(2)}"
            else:
                time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def ort_session(ort, model, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if threads > 1:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ov_request(core, model, threads, perf_count=False):
    config = {
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": threads,
        "INFERENCE_PRECISION_HINT": "f32",
        "NUM_STREAMS": 1,
    }
    if perf_count:
        config["PERF_COUNT"] = True
    return core.compile_model(model, "CPU", config).create_infer_request()


def ov_layer_times(request, feeds, runs):
    """OpenVINO's per-layer times (its performance counters: oneDNN's primitives on this CPU),
    the median of `runs` inferences per layer, by layer name, each with the names of the model's
    nodes it was made from (the runtime model's originalLayersNames: a FullyConnected layer and
    the GELU fused into it); layers that did not run (fused into a neighbour) are left out."""
    originals = {}
    for op in request.get_compiled_model().get_runtime_model().get_ops():
        info = op.get_rt_info()
        if "originalLayersNames" in info:
            names = info["originalLayersNames"].astype(str)
            originals[op.get_friendly_name()] = [n for n in names.split(",") if n]
    request.infer(feeds)
    seen = {}
    for _ in range(runs):
        request.infer(feeds)
        for e in request.get_profiling_info():
            if e.status.name != "EXECUTED":
                continue
            row = seen.setdefault(e.node_name, {"type": e.node_type, "kernel": e.exec_type,
                                                "originals": originals.get(e.node_name, []),
                                                "us": []})
            row["us"].append(e.real_time.total_seconds() * 1e6)
    return {name: dict(row, us=statistics.median(row["us"])) for name, row in seen.items()}


def conv_kind(shapes):
    """'RxS' of a conv node from its weight's shape, the second input in our profile's shapes
    ("1x64x56x56, 64x64x3x3, 64 -> 1x64x56x56"; a blocked conv's packed weight is K/cb x C x R x
    S x cb; an int8 conv's K/L x R x S x C/4 x L x 4), else ''."""
    inputs = shapes.split("->")[0].split(",")
    dims = inputs[1].strip().split("x") if len(inputs) > 1 else []
    if len(dims) == 6:
        return f"{dims[1]}x{dims[2]}"
    return f"{dims[2]}x{dims[3]}" if len(dims) in (4, 5) else ""


def layer_profile(ours, theirs):
    """Our nodes against OpenVINO's layers: each of our nodes goes to the layer of its name
    (OpenVINO names a conv's layer after the ONNX node, with '/WithoutBiases' once its bias is
    folded in), or to the layer made from a node of its name (originalLayersNames: a GELU fused
    into the FullyConnected before it), or else to the layer of the name it extends by a
    ".part" (a MatMul "x.matmul" whose bias Add "x" names OpenVINO's FullyConnected of both).
    Each layer's times (ours summed over the nodes it took) and ratio, the sums by conv kind (1x1,
    3x3, 7x7) and for everything else, our time by operator (every node, matched or not), and the
    five layers where we lose the most time."""
    by_name, owner = {}, {}
    for name, row in theirs.items():
        base = name.split("/")[0]
        by_name.setdefault(base, []).append(row)
        owner[base] = base
    for base, rows in by_name.items():
        for row in rows:
            for original in row.get("originals", []):
                owner.setdefault(original.split("/")[0], base)

    def layer_of(name):
        while name:
            if name in owner:
                return owner[name]
            name = name.rpartition(".")[0]
        return None

    layers, kinds, by_op, taken = [], {}, {}, {}
    for n in ours:
        by_op[n["op_type"]] = by_op.get(n["op_type"], 0.0) + n["median_us"] / 1e3
        kind = conv_kind(n.get("shapes", "")) if "conv" in n["op_type"].lower() else ""
        if kind and "depthwise" in n["op_type"].lower():
            kind = "depthwise " + kind
        base = layer_of(n["name"])
        if base is None:
            group = kinds.setdefault(kind or "other", {"crosstune_ms": 0.0, "openvino_ms": 0.0,
                                                       "layers": 0})
            group["crosstune_ms"] += n["median_us"] / 1e3
            continue
        t = taken.setdefault(base, {"nodes": [], "us": 0.0, "top": None})
        t["nodes"].append(n["name"])
        t["us"] += n["median_us"]
        if t["top"] is None or n["median_us"] > t["top"][0]:
            t["top"] = (n["median_us"], n["op_type"], kind)
    for base, t in taken.items():
        match = by_name.pop(base)
        _, op, kind = t["top"]
        group = kinds.setdefault(kind or "other", {"crosstune_ms": 0.0, "openvino_ms": 0.0,
                                                   "layers": 0})
        ov_us = sum(r["us"] for r in match)
        group["crosstune_ms"] += t["us"] / 1e3
        group["openvino_ms"] += ov_us / 1e3
        group["layers"] += 1
        layers.append({"name": base, "op": op, "kind": kind, "crosstune_nodes": t["nodes"],
                       "crosstune_us": t["us"], "openvino_us": ov_us,
                       "ratio": t["us"] / ov_us if ov_us > 0 else None,
                       "openvino_kernel": "+".join(r["kernel"] for r in match)})
    # OpenVINO's layers that match none of ours (reorders, fused pools) count as 'other'.
    other = kinds.setdefault("other", {"crosstune_ms": 0.0, "openvino_ms": 0.0, "layers": 0})
    for rows in by_name.values():
        other["openvino_ms"] += sum(r["us"] for r in rows) / 1e3
    for g in kinds.values():
        g["ratio"] = g["crosstune_ms"] / g["openvino_ms"] if g["openvino_ms"] > 0 else None
    worst = sorted(layers, key=lambda r: r["openvino_us"] - r["crosstune_us"])[:5]
    return {"by_kind": kinds, "crosstune_ms_by_op": by_op,
            "most_time_lost": [r["name"] for r in worst], "layers": layers}


def timed_runs(fn, count):
    fn()  # warm-up, as the server's evaluator does
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def output_step(onnx_path):
    """One quantization step of an int8 (QDQ) model's logits: the scale of the
    DequantizeLinear that writes its first output."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(onnx_path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    last = [n for n in m.graph.node if n.output[0] == m.graph.output[0].name]
    if not last or last[0].op_type != "DequantizeLinear":
        sys.exit(f"bench-model: {onnx_path}'s output is not written by a DequantizeLinear")
    return float(inits[last[0].input[1]])


def stats(seconds):
    return {"median_ms": statistics.median(seconds) * 1e3, "min_ms": min(seconds) * 1e3,
            "samples": len(seconds)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--crosstune", required=True, help="the crosstune CLI")
    p.add_argument("--server-bin", required=True, help="crosstune-server")
    p.add_argument("--peak-bin", required=True, help="crosstune-bench-peak")
    p.add_argument("--make-model", required=True, help="scripts/make-model.py")
    p.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    p.add_argument("--trials", type=int, default=0,
                   help="trials of `tune --model` per thread count (0: no tuning)")
    p.add_argument("--log", action="append", default=[],
                   help="reuse a tuning log: N=FILE for thread count N, or FILE for all "
                        "(no tuning then)")
    p.add_argument("--model", default="resnet50", choices=("resnet50", "mobilenetv2", "bert-base"),
                   help="the network make-model.py writes (default resnet50)")
    p.add_argument("--width", type=int, default=64,
                   help="resnet50's base width (64: ResNet-50)")
    p.add_argument("--int8", action="store_true",
                   help="the model's int8 (QDQ) copy, as onnxruntime's quantizer writes it")
    p.add_argument("--rounds", type=int, default=4, help="alternating rounds (default 4)")
    p.add_argument("--runs", type=int, default=5, help="timed runs of each per round (default 5)")
    p.add_argument("--work", help="folder for the model, logs and packages (default: a temporary "
                                  "one, removed at the end)")
    p.add_argument("--workers", type=int, default=0, help="build processes (0: one per core)")
    p.add_argument("--layouts", default="blocked",
                   help="layout plans to compile, tune and time, the first one as `crosstune` "
                        "(default blocked; blocked,nchw times the NCHW plan beside it)")
    a = p.parse_args()
    layouts = a.layouts.split(",")
    if not layouts or any(l not in ("blocked", "nchw") for l in layouts) or \
            len(set(layouts)) != len(layouts):
        sys.exit("bench-model: --layouts takes blocked and/or nchw, e.g. blocked,nchw")
    # The names the results go by: the first plan is `crosstune`.
    ours_names = {l: ("crosstune" if i == 0 else f"crosstune_{l}") for i, l in enumerate(layouts)}
    threads = [int(t) for t in a.threads.split(",")]
    if not threads or min(threads) < 1:
        sys.exit("bench-model: --threads takes positive counts, e.g. 1,2")
    if a.model != "resnet50" and (a.int8 or a.width != 64):
        sys.exit("bench-model: --int8 and --width are resnet50's")
    if a.rounds < 1 or a.runs < 1:
        sys.exit("bench-model: --rounds and --runs must be at least 1")
    logs = {}
    for spec in a.log:
        n, sep, f = spec.partition("=")
        if sep and n.isdigit():
            logs[int(n)] = f
        else:
            logs.update({t: spec for t in threads})
    for f in logs.values():
        if not os.path.isfile(f):
            sys.exit(f"bench-model: --log {f}: no such file")

    import onnxruntime as ort
    import openvino as ov

    work = a.work or tempfile.mkdtemp(prefix="crosstune-bench-model-")
    os.makedirs(work, exist_ok=True)
    server = None
    try:
        kind = "int8" if a.int8 else "fp32"
        generator = a.model
        if a.model == "resnet50":
            name = f"resnet50-w{a.width}"
            extra = ["--width", str(a.width)] + (["--int8", "per-channel"] if a.int8 else [])
        elif a.model == "bert-base":
            name, generator = a.model, "bert"
            extra = ["--layers", "12", "--hidden", "768", "--heads", "12", "--seq", "128"]
        else:
            name, extra = a.model, []
        onnx_path = os.path.join(work, f"{name}-{kind}.onnx")
        if not os.path.isfile(onnx_path):
            log(f"writing the model ({onnx_path})")
            subprocess.run([sys.executable, a.make_model, generator, *extra, "-o", onnx_path],
                           check=True, stdout=subprocess.DEVNULL)

        # The peak first, with nothing else running.
        peak = run_json([a.peak_bin, "--threads", ",".join(map(str, threads))], "crosstune-bench-peak")
        peak_of = {e["threads"]: e["gflops"] for e in peak["per_threads"]}

        server = LocalServer(a.server_bin, max(threads), work)
        log(f"local server {server.address}")
        ct = [a.crosstune]
        where = ["--server", server.address]
        tuning = {}
        packages = {}
        for t in threads:
            # One log per thread count holds every layout plan's tasks (their keys differ).
            log_file = logs.get(t)
            tune_now = log_file is None and a.trials > 0
            if tune_now:
                log_file = os.path.join(work, f"tune-t{t}.jsonl")
            elif log_file is not None:
                tuning[(t, layouts[0])] = {"log": log_file, "reused": True}
            for lay in layouts:
                if tune_now:
                    log(f"tuning {a.trials} trials at {t} thread(s), {lay} layouts, into {log_file}")
                    t0 = time.monotonic()
                    report = run_json(ct + ["tune", "--model", onnx_path, *where, "--threads",
                                            str(t), "--layouts", lay, "--trials", str(a.trials),
                                            "--log", log_file, "--workers", str(a.workers),
                                            "--json"], "tune --model")
                    tuning[(t, lay)] = {"wall_s": time.monotonic() - t0, "trials": a.trials,
                                        "log": log_file, "report": report}
                pkg = os.path.join(work, f"{a.model}-t{t}-{lay}.ctpkg")
                cmd = ct + ["compile", onnx_path, *where, "--threads", str(t), "--layouts", lay,
                            "-o", pkg, "--workers", str(a.workers), "--json"]
                if log_file is not None:
                    cmd += ["--log", log_file]
                log(f"compiling for {t} thread(s), {lay} layouts")
                packages[(t, lay)] = {"path": pkg, "compile": run_json(cmd, "compile")}

        core = ov.Core()
        ov_model = core.read_model(onnx_path)
        sessions = {t: ort_session(ort, onnx_path, t) for t in threads}
        requests = {t: ov_request(core, ov_model, t) for t in threads}
        # The inputs, by name, each saved for the CLI: an image, or token ids (below the
        # vocabulary), a mask of ones and token types of zero.
        rng = np.random.default_rng(0)
        feeds = {}
        for i in sessions[threads[0]].get_inputs():
            if a.model == "bert-base":
                shape = tuple(i.shape)  # [1, 128]: make-model.py writes static dimensions
                feeds[i.name] = (rng.integers(0, 1000, shape) if i.name == "input_ids" else
                                 np.ones(shape) if i.name == "attention_mask" else
                                 np.zeros(shape)).astype(np.int64)
            else:
                feeds[i.name] = rng.standard_normal((1, 3, 224, 224), dtype=np.float32)
        input_flags = []
        for k, v in feeds.items():
            path = os.path.join(work, f"input-{k}.npy")
            np.save(path, v)
            input_flags += ["--input", f"{k}={path}"]
        out_name = sessions[threads[0]].get_outputs()[0].name

        # The logits: ours against onnxruntime's on the same input, and OpenVINO's too.
        ref = sessions[threads[0]].run(None, feeds)[0]
        atol, rtol = LOGITS_ATOL, LOGITS_RTOL
        if a.int8:
            atol, rtol = output_step(onnx_path) * (1 + 1e-4), 0.0
        errors = {}
        wrong = []  # (threads, layouts) whose logits are outside the tolerance
        for t in threads:
            for lay in layouts:
                y_path = os.path.join(work, f"logits-t{t}-{lay}.npy")
                run_json(ct + ["run-model", packages[(t, lay)]["path"], *where, "--threads", str(t),
                               *input_flags, "--out", f"{out_name}={y_path}", "--json"],
                         "run-model")
                y = np.load(y_path)
                diff = np.abs(y.astype(np.float64) - ref.astype(np.float64))
                errors[(t, lay)] = float(np.max(diff))
                if y.shape != ref.shape or not np.all(
                        diff <= atol + rtol * np.abs(ref.astype(np.float64))):
                    wrong.append((t, lay))
        ov_out = requests[threads[0]].infer(feeds)
        ov_error = float(np.max(np.abs(np.asarray(list(ov_out.values())[0], np.float64) - ref)))

        samples = {t: {**{ours_names[l]: [] for l in layouts}, "onnxruntime": [], "openvino": []}
                   for t in threads}
        model_info = {}
        for r in range(a.rounds):
            log(f"round {r + 1} of {a.rounds}")
            for t in threads:
                for lay in layouts:
                    j = run_json(ct + ["bench-model", packages[(t, lay)]["path"], *where,
                                       "--threads", str(t), "--number", "1", "--repeat",
                                       str(a.runs), *input_flags, "--json"], "bench-model")
                    samples[t][ours_names[lay]] += j["seconds_per_run"]
                    if lay == layouts[0]:
                        model_info = j["model"]
                s = sessions[t]
                samples[t]["onnxruntime"] += timed_runs(lambda: s.run(None, feeds), a.runs)
                q = requests[t]
                samples[t]["openvino"] += timed_runs(lambda: q.infer(feeds), a.runs)

        # Per-node times once per thread count, after the timed rounds: the executor's overhead,
        # and each layer against OpenVINO's (its performance counters, on a request of its own so
        # that counting never slows the timed one).
        profiles, ov_layers = {}, {}
        for t in threads:
            j = run_json(ct + ["bench-model", packages[(t, layouts[0])]["path"], *where,
                               "--threads", str(t),
                               "--number", "3", "--repeat", "3", "--profile", *input_flags,
                               "--json"],
                         "bench-model --profile")
            profiles[t] = j
            ov_layers[t] = ov_layer_times(ov_request(core, ov_model, t, perf_count=True), feeds, 5)

        flops = model_info.get("flops", 0)
        results = []
        for t in threads:
            row = {"threads": t, "fma_peak_gflops": peak_of[t]}
            for name in samples[t]:
                s = stats(samples[t][name])
                gflops = flops / (s["median_ms"] / 1e3) / 1e9 if flops else 0.0
                s["gflops"] = gflops
                s["fraction_of_peak"] = gflops / peak_of[t] if peak_of[t] else 0.0
                row[name] = s
            ours = row["crosstune"]["median_ms"]
            row["ratio_to_onnxruntime"] = ours / row["onnxruntime"]["median_ms"]
            row["ratio_to_openvino"] = ours / row["openvino"]["median_ms"]
            for lay in layouts[1:]:
                other = row[ours_names[lay]]["median_ms"]
                row[f"ratio_to_{ours_names[lay]}"] = ours / other
                row[ours_names[lay]]["logits_max_abs_error_vs_onnxruntime"] = errors[(t, lay)]
            prof = profiles[t]
            row["executor"] = {
                "end_to_end_median_ms": prof["median_s"] * 1e3,
                "node_sum_ms": prof["node_sum_s"] * 1e3,
                "overhead_ms": prof["overhead_s"] * 1e3,
                "overhead_fraction": prof["overhead_s"] / prof["median_s"] if prof["median_s"] else 0,
            }
            row["layers_vs_openvino"] = layer_profile(prof.get("nodes", []), ov_layers[t])
            row["logits_max_abs_error_vs_onnxruntime"] = errors[(t, layouts[0])]
            row["layouts"] = layouts[0]
            for lay in layouts:
                if (t, lay) in tuning:
                    key = "tuning" if lay == layouts[0] else f"tuning_{lay}"
                    row[key] = {k: v for k, v in tuning[(t, lay)].items() if k != "report"}
                    if os.path.exists(tuning[(t, lay)]["log"]):
                        row[key]["convergence"] = convergence(tuning[(t, lay)]["log"])
            results.append(row)
        out = {
            "benchmark": "crosstune-bench-model",
            "model": (f"resnet50 width {a.width}" if a.model == "resnet50" else
                      "bert-base (12 layers, hidden 768, 12 heads, sequence 128, vocabulary 1000)"
                      if a.model == "bert-base" else a.model) +
                     " (make-model.py, seeded), batch 1, " +
                     ("int8 (onnxruntime's static quantizer, QDQ, per-channel)" if a.int8 else "fp32"),
            "gflop_per_image": flops / 1e9,
            "activation_mb": model_info.get("activation_bytes", 0) / 1e6,
            "params_mb": model_info.get("params_bytes", 0) / 1e6,
            "fma_peak": peak,
            "onnxruntime_version": ort.__version__,
            "openvino_version": ov.get_version(),
            "openvino_logits_max_abs_error_vs_onnxruntime": ov_error,
            # The largest error the elementwise rule above allows on these logits (at the largest
            # reference logit); each logits_max_abs_error_vs_onnxruntime must be within it.
            "logits_tolerance": atol + rtol * float(np.max(np.abs(ref))),
            "logits_within_tolerance": not wrong,
            "rounds": a.rounds,
            "runs_per_round": a.runs,
            "results": results,
        }
        print(json.dumps(out, indent=2))
        if wrong:
            sys.exit("bench-model: logits differ from onnxruntime's by more than "
                     f"{atol:g} + {rtol:g} |ref| at (threads, layouts) {wrong}")
    finally:
        if server is not None:
            server.stop()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
