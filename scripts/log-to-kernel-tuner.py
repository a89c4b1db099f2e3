#!/usr/bin/env python3
"""Writes the records of one task in a crosstune record log as a Kernel Tuner cache file (JSON), so
the measurements can be replayed by `crosstune replay`, by Kernel Tuner's strategies, or by any tool
that reads that format.

  log-to-kernel-tuner.py mm.jsonl -o mm-cache.json            # the log's only (or first) task
  log-to-kernel-tuner.py mm.jsonl --task 'matmul [64, 64, 64]' -o mm-cache.json

The cache's parameters are the knobs whose value varies among the task's records (knobs held at
one value, e.g. with `crosstune tune --pin`, are left out and listed under "crosstune"."fixed"); a
list-valued knob becomes a string of its items joined by '-'. "time" is the mean of a record's
rounds in milliseconds and "times" its rounds; a failed record is "CompilationFailedConfig" (a build
error) or "RuntimeFailedConfig" (any other error); a record the device stopped timing early (its time
a lower bound) has "stopped_early": true. A config measured more than once keeps its best success.
The "crosstune" block says what `crosstune records import` needs to read the cache back as our
records (task, threads, dtype, arch, target, the pinned knobs). Uses only the standard library.
"""
import argparse
import json
import sys


def task_key(record):
    t = record["task"]
    return f"{t['template']} {json.dumps(t['shape'])}"


def scalar(value):
    if isinstance(value, list):
        return "-".join(str(v) for v in value)
    return value


def py_str(value):
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("log", help="a crosstune JSON-lines record log")
    p.add_argument("--task", help="which task ('TEMPLATE [SHAPE]'); default: the log's first")
    p.add_argument("-o", "--out", required=True, help="the cache file to write")
    args = p.parse_args()

    records = []
    with open(args.log, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"log-to-kernel-tuner: {args.log}:{n}: not JSON: {e}")
    if not records:
        sys.exit(f"log-to-kernel-tuner: {args.log}: no records")
    chosen = args.task or task_key(records[0])
    records = [r for r in records if task_key(r) == chosen]
    if not records:
        sys.exit(f"log-to-kernel-tuner: {args.log}: no records of task '{chosen}'")

    knobs = list(records[0]["config"]["values"].keys())
    seen = {k: set() for k in knobs}
    for r in records:
        for k in knobs:
            seen[k].add(json.dumps(r["config"]["values"][k]))
    params = sorted(k for k in knobs if len(seen[k]) > 1)
    fixed = {k: json.loads(next(iter(seen[k]))) for k in knobs if len(seen[k]) == 1}

    cache = {}
    for r in records:
        values = {k: scalar(r["config"]["values"][k]) for k in params}
        key = ",".join(py_str(values[k]) for k in params)
        if r["error"] == "ok":
            entry = dict(values, time=r["mean"] * 1e3, times=[c * 1e3 for c in r["costs"]])
            if r.get("stopped_early"):
                entry["stopped_early"] = True  # its time is a lower bound
        else:
            failure = "CompilationFailedConfig" if r["error"] == "BuildError" else "RuntimeFailedConfig"
            entry = dict(values, time=failure)
        old = cache.get(key)
        if old is None or (isinstance(entry["time"], float) and
                           (not isinstance(old["time"], float) or entry["time"] < old["time"])):
            cache[key] = entry

    tune_params = {}
    for k in params:
        vals = {json.dumps(scalar(json.loads(v))) for v in seen[k]}
        tune_params[k] = sorted((json.loads(v) for v in vals), key=lambda v: (str(type(v)), v))
    first = records[0]
    out = {
        "device_name": first["device"].get("cpu") or first["device"].get("name", ""),
        "kernel_name": first["task"]["template"],
        "problem_size": first["task"]["shape"],
        "tune_params_keys": params,
        "tune_params": tune_params,
        "objective": "time",
        # What `crosstune records import` needs to give the records back as ours.
        "crosstune": {"task": chosen, "threads": first["task"].get("threads", 1),
                      "dtype": first["task"].get("dtype", "float32"),
                      "arch": first["device"].get("arch", ""),
                      "target": first.get("target", ""), "fixed": fixed,
                      "tool": first.get("tool", "")},
        "cache": cache,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"log-to-kernel-tuner: {len(cache)} configs of '{chosen}' ({len(params)} parameters) "
          f"-> {args.out}")


if __name__ == "__main__":
    main()
