#!/usr/bin/env python3
"""ONNX's own conformance tests through crosstune, beside onnxruntime in the same run.

Runs the node tests the installed onnx release generates (in memory: nothing is written or
downloaded) and the nine light_* models its wheel ships, through crosstune.onnx_backend
(import, compile, run on a device's graph executor) and through onnxruntime's backend, each
compared with the suite's expected outputs by the suite's own comparison. Prints one table: per
operator, tests passed / failed / refused by name, ours and onnxruntime's.

  onnx-conformance.py                          # every node test and the light models
  onnx-conformance.py --supported --check      # the node tests of the operators crosstune takes;
                                               # exit 1 if one fails (not passed, not refused)
  onnx-conformance.py --include 'gelu|relu' --json out.json
  scripts/bench-record.sh /opt/crosstune/model-venv/bin/python scripts/onnx-conformance.py \
      --print-json                             # the docs' table (scripts/bench-tables.py)

A refusal is the importer naming what it does not take (crosstune.InvalidArgument, before any
compile); anything else that does not match the expected outputs (a compile error, a crash, a
wrong answer) is a failure. For onnxruntime an error while preparing the model is its refusal.
Run it with the model venv's python (/opt/crosstune/model-venv) and the build's Python package
on PYTHONPATH (build/default/python).
"""
from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import os
import re
import sys
import time
import warnings

import numpy as np


def node_cases(include, exclude):
    """The suite's node tests: (name, model, data_sets, rtol, atol, op)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.loader import load_model_tests
        cases = load_model_tests(kind="node")
    by_name = {c.name: c for c in cases}
    out = []
    for c in sorted(cases, key=lambda c: c.name):
        if include and not re.search(include, c.name):
            continue
        if exclude and re.search(exclude, c.name):
            continue
        out.append((c.name, c.model, c.data_sets, c.rtol, c.atol, op_of(c, by_name)))
    return out


def op_of(case, by_name):
    """The operator a node test tests: its one node's; an _expanded test's, its sibling's."""
    nodes = case.model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    m = re.match(r"(.*)_expanded(_ver\d+)?$", case.name)
    if m and m.group(1) in by_name and len(by_name[m.group(1)].model.graph.node) == 1:
        return by_name[m.group(1)].model.graph.node[0].op_type
    return nodes[0].op_type if nodes else "?"


def light_cases(include, exclude):
    """The light_* models of the wheel, with the suite's inputs (arange / n) and outputs."""
    import onnx
    from onnx import numpy_helper

    folder = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    out = []
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".onnx"):
            continue
        name = "test_" + f[: -len(".onnx")]
        if include and not re.search(include, name):
            continue
        if exclude and re.search(exclude, name):
            continue
        model = onnx.load(os.path.join(folder, f))
        inits = {i.name for i in model.graph.initializer}
        inputs = []
        for x in model.graph.input:
            if x.name in inits:
                continue
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                          for d in x.type.tensor_type.shape.dim)
            n = int(np.prod(shape))
            inputs.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        outputs = []
        for i in range(len(model.graph.output)):
            t = onnx.TensorProto()
            with open(os.path.join(folder, f"{f[:-5]}_output_{i}.pb"), "rb") as fh:
                t.ParseFromString(fh.read())
            outputs.append(numpy_helper.to_array(t))
        out.append((name, model, [(inputs, outputs)], 1e-3, 1e-7, "(light model)"))
    return out


def normalize(item):
    from onnx import TensorProto, numpy_helper
    return numpy_helper.to_array(item) if isinstance(item, TensorProto) else item


def run_one(backend, refused_note, case, device):
    """'passed', 'failed' or 'refused', and the first line of why."""
    from onnx.backend.test.runner import Runner

    name, model, data_sets, rtol, atol, _ = case
    stage = "prepare"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = backend.prepare(model, device)
            stage = "run"
            for inputs, ref in data_sets:
                got = list(rep.run([normalize(x) for x in inputs]))
                Runner.assert_similar_outputs([normalize(x) for x in ref], got, rtol, atol)
        return "passed", ""
    except Exception as e:  # noqa: BLE001 - every outcome is classified
        why = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        if refused_note is not None:
            refused = refused_note in getattr(e, "__notes__", [])
        else:
            refused = stage == "prepare" and not isinstance(e, AssertionError)
        return ("refused" if refused else "failed"), why


_state = {}


def worker_init(which, device):
    if which == "crosstune":
        import multiprocessing.util

        import crosstune.onnx_backend as backend
        _state["backend"], _state["note"] = backend.CrosstuneBackend, backend.REFUSED_AT_IMPORT
        # A pool's worker ends by os._exit, past atexit: its server and scratch folder go here.
        multiprocessing.util.Finalize(None, backend.close, exitpriority=10)
    else:
        import onnxruntime
        import onnxruntime.backend as backend
        onnxruntime.set_default_logger_severity(3)  # errors only: no warning per unused initializer
        _state["backend"], _state["note"] = backend, None
    _state["device"] = device if which == "crosstune" else "CPU"


def worker_run(case):
    t0 = time.monotonic()
    status, why = run_one(_state["backend"], _state["note"], case, _state["device"])
    return case[0], case[5], status, why, time.monotonic() - t0


def run_all(which, cases, jobs, device):
    if jobs <= 1:
        worker_init(which, device)
        return [worker_run(c) for c in cases]
    ctx = multiprocessing.get_context("spawn")
    pool = ctx.Pool(jobs, initializer=worker_init, initargs=(which, device))
    try:
        return list(pool.imap_unordered(worker_run, cases, chunksize=4))
    finally:
        pool.close()  # the workers end on their own, running their finalizers (not terminate)
        pool.join()


def table(results):
    """Per op: {ours: Counter, onnxruntime: Counter}."""
    rows = collections.defaultdict(lambda: {"crosstune": collections.Counter(),
                                            "onnxruntime": collections.Counter()})
    for which, res in results.items():
        for name, op, status, why, secs in res:
            rows[op][which][status] += 1
    return rows


def summary(results, rows, supported, timing, tests):
    """The table as one JSON object: per operator, each runtime's counts; totals; versions."""
    import onnx

    versions = {"onnx": onnx.__version__}
    if "onnxruntime" in results:
        import onnxruntime
        versions["onnxruntime"] = onnxruntime.__version__
    ops = {}
    totals = {"supported": {w: collections.Counter() for w in results},
              "all": {w: collections.Counter() for w in results}}
    for op, r in sorted(rows.items()):
        ops[op] = {"supported": op in supported,
                   **{w: {k: r[w][k] for k in ("passed", "failed", "refused")} for w in results}}
        for w in results:
            totals["all"][w].update(r[w])
            if op in supported:
                totals["supported"][w].update(r[w])
    return {"tests": tests, "versions": versions,
            "seconds": {w: round(t, 1) for w, t in timing.items()},
            "totals": {k: {w: {s: c[s] for s in ("passed", "failed", "refused")}
                           for w, c in v.items()} for k, v in totals.items()},
            "ops": ops}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--include", help="only tests whose name matches this regex")
    p.add_argument("--exclude", help="leave out tests whose name matches this regex")
    p.add_argument("--supported", action="store_true",
                   help="only the node tests of the operators crosstune takes (no light models)")
    p.add_argument("--no-light", action="store_true", help="leave out the light_* models")
    p.add_argument("--no-onnxruntime", action="store_true", help="crosstune only")
    p.add_argument("--device", default="CPU",
                   help="CPU (a crosstune-server on this machine), HOST:PORT (a "
                        "crosstune-server there) or KEY@HOST:PORT (a device of the tracker "
                        "there)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="processes (each with its own local server)")
    p.add_argument("--json", help="write every test's outcome and the table here")
    p.add_argument("--print-json", action="store_true",
                   help="print the table as one JSON object, last (what bench-record.sh records)")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when a test of an operator crosstune takes fails")
    p.add_argument("--failures", type=int, default=20, help="failures listed (default 20)")
    args = p.parse_args()

    import crosstune.onnx_backend as backend

    supported = backend.supported_ops()
    t0 = time.monotonic()
    cases = node_cases(args.include, args.exclude)
    if args.supported:
        cases = [c for c in cases if c[5] in supported]
    elif not args.no_light:
        cases += light_cases(args.include, args.exclude)
    print(f"onnx-conformance: {len(cases)} tests ({time.monotonic() - t0:.0f} s to generate)",
          file=sys.stderr, flush=True)

    results = {}
    timing = {}
    for which in ["crosstune"] + ([] if args.no_onnxruntime else ["onnxruntime"]):
        t = time.monotonic()
        results[which] = sorted(run_all(which, cases, args.jobs, args.device))
        timing[which] = time.monotonic() - t
        print(f"onnx-conformance: {which}: {timing[which]:.0f} s", file=sys.stderr, flush=True)

    rows = table(results)
    result = summary(results, rows, supported, timing, len(cases))
    header = f"{'operator':28} {'tests':>5}  {'crosstune pass/fail/refused':>28}"
    if "onnxruntime" in results:
        header += f"  {'onnxruntime pass/fail/refused':>30}"
    print(header)
    ops = result["ops"]
    for op in sorted(ops, key=lambda o: (not ops[o]["supported"], o)):
        line = f"{'*' if ops[op]['supported'] else ' '}{op:27} {sum(ops[op]['crosstune'].values()):>5}"
        for w in results:
            c = ops[op][w]
            cell = f"{c['passed']}/{c['failed']}/{c['refused']}"
            line += f"  {cell:>{24 if w == 'crosstune' else 28}}"
        print(line)
    print("(* an operator crosstune takes)")
    for label, key in (("supported operators", "supported"), ("all", "all")):
        parts = []
        for w in results:
            tot = result["totals"][key][w]
            n = sum(tot.values())
            parts.append(f"{w} {tot['passed']}/{n} passed ({100 * tot['passed'] / max(n, 1):.1f}%),"
                         f" {tot['failed']} failed, {tot['refused']} refused")
        print(f"{label}: " + "; ".join(parts))
    failed = [r for r in results["crosstune"] if r[2] == "failed"]
    failed_supported = [r for r in failed if r[1] in supported]
    for name, op, status, why, secs in failed[: args.failures]:
        print(f"failed: {name} ({op}): {why}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({
                "tests": {w: [{"name": n, "op": o, "status": s, "why": y, "seconds": round(t, 3)}
                              for n, o, s, y, t in res] for w, res in results.items()},
                "table": {op: {w: dict(c) for w, c in r.items()} for op, r in rows.items()},
                "supported": sorted(supported),
                "seconds": {w: round(t, 1) for w, t in timing.items()},
            }, f, indent=1)
    if args.print_json:
        print(json.dumps(result))
    if args.check and failed_supported:
        print(f"onnx-conformance: {len(failed_supported)} tests of supported operators failed",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
