#!/usr/bin/env python3
"""Benchmark tables for the documentation, made from the JSON the benches print.

A recorded run is one file under docs/benchmarks/data/: the bench's own JSON object under
"result", with the command that ran it, the CPU it ran on (from lscpu) and the date, which every
table shows. Numbers reach the docs only this way, never copied by hand.

    scripts/bench-tables.py record --out docs/benchmarks/data -- build/default/bench/crosstune-bench-rpc
        runs the bench and writes its recorded run (scripts/bench-record.sh does this)
    scripts/bench-tables.py render docs/benchmarks/data
        prints the Markdown the benchmarks page shows (docs/_ext/bench_tables.py calls render())
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import os
import pathlib
import re
import subprocess
import sys

# Every bench the benchmarks page describes, in its order, with the figures its table shows
# first (glob patterns over the flattened keys; the rest follow, up to MAX_ROWS).
BENCHES = {
    "crosstune-bench-rpc": ["rpc_over_raw_rtt", "rpc_*_over_raw*", "upload_over_*",
                            "tensor_over_raw_stream", "targets_met*"],
    "python_call_overhead.py": ["python_added_us", "*_call_us", "*_round_trip_mb_s",
                                "python_copy_free"],
    "crosstune-bench-workspace": ["*_over_*"],
    "crosstune-bench-cli": ["speedup"],
    "crosstune-bench-log": ["summary_over_best_growth"],
    "crosstune-bench-kernels": ["matmul*", "conv2d*", "openblas_kernel"],
    "crosstune-bench-model": ["results[*].ratio_to_*", "results[*].crosstune.median_ms",
                              "results[*].onnxruntime.median_ms", "results[*].openvino.median_ms",
                              "results[*].fma_peak_gflops", "results[*].executor.overhead_ms"],
    "crosstune-bench-peak": ["isa", "per_threads*"],
    "crosstune-bench-tracker": ["grant_latency_us_p*", "requests_per_s", "tracker_rss_mb",
                                "tracker_cpu_us_per_grant", "target_*"],
    "tvm_tracker_bench.py": ["p50_speedup", "crosstune_grant_ms_p*", "tvm_tracker_grant_ms_p*"],
    "crosstune-bench-builder": ["speedup", "pool_builds_per_s", "subprocess_builds_per_s"],
    "python_tune_split.py": ["median_*", "min_shared_over_split", "max_shared_over_split"],
    "crosstune-bench-tune": ["timed_over_stopped_*", "stopped_over_timed_*",
                             "*.device_s_per_trial", "*.stopped_early", "same_configs*",
                             "*.trials_per_s", "*.wall_s", "*.best_gflops"],
    "crosstune-bench-tuners": ["warm_start.*_worst", "warm_start.meets_target",
                               "warm_start.pairs*.warm_over_cold_median",
                               "warm_start.pairs*.shuffled_over_cold_median",
                               "warm_start.pairs*.cold.median", "warm_start.pairs*.warm.median",
                               "kernel_tuner.*_over_random_median", "kernel_tuner.tuners.*.median",
                               "matmul.*_over_random_median"],
    "crosstune-bench-farm": ["*.trials_per_s", "*.fraction_of_capacity", "*.device_busy_mean",
                             "quality.*"],
    "onnx-conformance.py": ["*"],
}
MAX_ROWS = 40
# CPU features worth naming beside a figure (lscpu's flag names).
NOTABLE_FLAGS = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16",
                 "avx512_fp16", "amx_tile", "asimd", "sve"]
# Keys that name an element of a list better than its index.
LIST_KEYS = ["threads", "name", "tuner", "size", "tasks", "command", "kind"]


class DataError(Exception):
    """A recorded run that cannot be shown; the message names the file."""


def flatten(value, prefix=""):
    """Yields (dotted key, scalar) for every leaf; list elements are named by a key they hold."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(value, list):
        if all(not isinstance(v, (dict, list)) for v in value) and len(value) <= 8:
            yield prefix, ", ".join(fmt(v) for v in value)
            return
        for i, v in enumerate(value):
            label = str(i)
            if isinstance(v, dict):
                for k in LIST_KEYS:
                    if k in v and not isinstance(v[k], (dict, list)):
                        label = f"{k}={v[k]}"
                        break
            yield from flatten(v, f"{prefix}[{label}]")
    else:
        yield prefix, value


def fmt(value) -> str:
    """A figure as a table shows it: 4 significant digits, booleans and text as they are."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        return f"{value:.4g}"
    if value is None:
        return "—"
    return str(value).replace("|", "\\|")


def cpu_line(cpu: dict) -> str:
    """'AMD EPYC 9R14 (family 25, model 17; 2 CPUs; avx2, avx512f, ...)' from a run's cpu."""
    parts = []
    if cpu.get("family") or cpu.get("model"):
        parts.append(f"family {cpu.get('family', '?')}, model {cpu.get('model', '?')}")
    if cpu.get("cpus"):
        parts.append(f"{cpu['cpus']} CPUs")
    if cpu.get("flags"):
        parts.append(", ".join(cpu["flags"]))
    name = cpu.get("model_name") or cpu.get("architecture") or "unknown CPU"
    return f"{name} ({'; '.join(parts)})" if parts else name


def load(path: pathlib.Path) -> dict:
    """Reads one recorded run and checks its shape."""
    try:
        run = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: not a recorded run: {e}") from e
    if not isinstance(run, dict):
        raise DataError(f"{path}: not a recorded run (a JSON object is expected)")
    for key in ("bench", "date", "cpu", "result"):
        if key not in run:
            raise DataError(f"{path}: not a recorded run (key '{key}' is missing)")
    if not isinstance(run["result"], dict) or not isinstance(run["cpu"], dict):
        raise DataError(f"{path}: 'result' and 'cpu' must be JSON objects")
    return run


def table(run: dict, patterns: list[str]) -> list[str]:
    """The figure/value table of one run: the bench's headline figures first, then the rest."""
    leaves = list(flatten(run["result"]))
    first = [kv for kv in leaves if any(fnmatch.fnmatchcase(kv[0], p) for p in patterns)]
    rest = [kv for kv in leaves if kv not in first]
    rows = (first + rest)[:MAX_ROWS]
    lines = ["| figure | value |", "|---|---|"]
    lines += [f"| `{k}` | {fmt(v)} |" for k, v in rows]
    if len(leaves) > len(rows):
        lines.append(f"| ({len(leaves) - len(rows)} more in the file) | |")
    return lines


def conformance_table(run: dict) -> list[str]:
    """scripts/onnx-conformance.py's run: per operator, passed / failed / refused of each
    runtime, the operators crosstune takes first, then the totals."""
    result = run["result"]
    runtimes = [w for w in ("crosstune", "onnxruntime") if w in result.get("totals", {}).get("all", {})]
    if not runtimes or not isinstance(result.get("ops"), dict):
        raise DataError(f"{run['bench']}: a conformance run needs 'ops' and 'totals'")
    versions = ", ".join(f"{k} {v}" for k, v in result.get("versions", {}).items())

    def cell(counts: dict) -> str:
        return f"{counts['passed']} / {counts['failed']} / {counts['refused']}"

    lines = [f"{result.get('tests', '?')} tests ({versions}); each cell: passed / failed / "
             "refused by name.", ""]
    lines.append("| | " + " | ".join(runtimes) + " |")
    lines.append("|---|" + "---|" * len(runtimes))
    for key, label in (("supported", "operators crosstune takes"), ("all", "the whole suite")):
        tot = result["totals"][key]
        cells = []
        for w in runtimes:
            n = sum(tot[w].values())
            cells.append(f"{cell(tot[w])} ({100 * tot[w]['passed'] / max(n, 1):.1f}% passed)")
        lines.append(f"| **{label}** | " + " | ".join(cells) + " |")
    lines += ["", "| operator | tests | " + " | ".join(runtimes) + " |",
              "|---|---|" + "---|" * len(runtimes)]
    ops = result["ops"]
    for op in sorted(ops, key=lambda o: (not ops[o].get("supported"), o)):
        row = ops[op]
        n = sum(row[runtimes[0]].values())
        name = f"**{fmt(op)}**" if row.get("supported") else fmt(op)
        lines.append(f"| {name} | {n} | " + " | ".join(cell(row[w]) for w in runtimes) + " |")
    lines.append("")
    lines.append("(In bold: an operator crosstune takes.)")
    return lines


# Benches whose run is shown as a table of its own, not as figure/value rows.
TABLES = {"onnx-conformance.py": conformance_table}


def render(data_dir: pathlib.Path, only: str | None = None) -> str:
    """The Markdown of every recorded run under data_dir, newest first per bench, and a line
    naming the benches with no recorded run; with `only`, that bench's runs alone (a page that
    quotes one bench's figure), and a DataError when it has none."""
    runs = [(p, load(p)) for p in sorted(data_dir.glob("*.json"))] if data_dir.is_dir() else []
    by_bench: dict[str, list] = {}
    for path, run in runs:
        by_bench.setdefault(run["bench"], []).append((path, run))
    out = []
    order = [b for b in BENCHES if b in by_bench] + sorted(b for b in by_bench if b not in BENCHES)
    if only is not None:
        if only not in by_bench:
            raise DataError(f"{data_dir}: no recorded run of {only}")
        order = [only]
    for bench in order:
        out.append(f"### Runs of {bench}")
        out.append("")
        for path, run in sorted(by_bench[bench], key=lambda pr: pr[1]["date"], reverse=True):
            command = " ".join(run.get("command", [])) or bench
            out.append(f"Run on {run['date']} on {cpu_line(run['cpu'])}: `{command}` "
                       f"(`{path.name}`)")
            out.append("")
            out += TABLES[bench](run) if bench in TABLES else table(run, BENCHES.get(bench, ["*"]))
            out.append("")
    missing = [b for b in BENCHES if b not in by_bench]
    if missing and only is None:
        out.append("No recorded run yet: " + ", ".join(f"`{b}`" for b in missing) + ".")
        out.append("")
    return "\n".join(out)


def lscpu() -> dict:
    """The CPU this machine has, from lscpu: model name, family, model, CPUs, notable flags."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True,
                              env=dict(os.environ, LC_ALL="C")).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    flags = set(fields.get("Flags", "").split())
    return {
        "model_name": fields.get("Model name", ""),
        "architecture": fields.get("Architecture", ""),
        "family": fields.get("CPU family", ""),
        "model": fields.get("Model", ""),
        "cpus": fields.get("CPU(s)", ""),
        "flags": [f for f in NOTABLE_FLAGS if f in flags],
    }


def bench_name(argv: list[str]) -> str:
    """The bench a command runs: its first .py file, else the program's own name."""
    for word in argv:
        if word.endswith(".py"):
            return pathlib.Path(word).name
    return pathlib.Path(argv[0]).name


def parse_output(stdout: str) -> dict:
    """The JSON object a bench printed: the whole output, else its last line that parses."""
    try:
        value = json.loads(stdout)
        if isinstance(value, dict):
            return value
    except ValueError:
        pass
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    raise DataError("the bench printed no JSON object")


ROOT = pathlib.Path(__file__).resolve().parent.parent


def without_machine_paths(value, root: pathlib.Path = ROOT):
    """The value with every string path inside the source tree made relative to it (normalised):
    a recorded run says build/default/cli/crosstune, not where this machine keeps the checkout."""
    if isinstance(value, dict):
        return {k: without_machine_paths(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [without_machine_paths(v, root) for v in value]
    if isinstance(value, str) and value.startswith("/"):
        path = pathlib.Path(os.path.normpath(value))
        if path.is_relative_to(root):
            return str(path.relative_to(root))
        if path.is_relative_to(root.parent):  # a sibling checkout's data, e.g. ../shared
            return str(pathlib.Path("..") / path.relative_to(root.parent))
    return value


def record(argv: list[str], out_dir: pathlib.Path) -> pathlib.Path:
    """Runs a bench and writes its recorded run into out_dir; returns the file."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise DataError(f"{' '.join(argv)} exited with {p.returncode}")
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    run = {"bench": bench_name(argv), "command": [pathlib.Path(argv[0]).name, *argv[1:]],
           "date": now.isoformat().replace("+00:00", "Z"), "cpu": lscpu(),
           "result": without_machine_paths(parse_output(p.stdout))}
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", run["bench"].removesuffix(".py"))
    path = out_dir / f"{stem}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("render", help="print the tables of the recorded runs in DIR")
    r.add_argument("dir", type=pathlib.Path)
    w = sub.add_parser("record", help="run a bench and record its JSON with the CPU and date")
    w.add_argument("--out", type=pathlib.Path, default=pathlib.Path("docs/benchmarks/data"))
    w.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    try:
        if args.what == "render":
            print(render(args.dir))
        else:
            command = args.command[1:] if args.command[:1] == ["--"] else args.command
            if not command:
                ap.error("record: give the bench's command line after --")
            print(record(command, args.out))
    except DataError as e:
        print(f"bench-tables: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
