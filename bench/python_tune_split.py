"""What the CPU split does to the times Python's tune() measures, same run.

With the split (tune()'s default since it shares `crosstune tune`'s setup): the server started
for the run times kernels on CPUs of its own, the builds of the next batch run on the others.
Without (what tune() did before): a server on every CPU, the builds overlapping the timed kernel
on the same CPUs (here: a server started by this script, given to tune() with overlap=True).
Both sides tune the same configs (random tuner, same seed) into logs of their own, in turns
(--rounds); for each config both measured, its time without the split over its time with it.
Prints one JSON object: the CPUs of the split, the median config time of each side and the median,
min and max of the per-config ratio over every round.

    PYTHONPATH=build/default/python python bench/python_tune_split.py [--shape 256,256,256]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import tempfile
from typing import Any, Dict, List

import crosstune as ct


def tune(split: bool, log: pathlib.Path, args: argparse.Namespace) -> Dict[str, Any]:
    common: Dict[str, Any] = dict(shape=args.shape, trials=args.trials, tuner="random",
                                  seed=args.seed, batch=args.batch, log=log, progress=False)
    if split:
        run = ct.tune("matmul", **common)
    else:
        server = ct.start_server()
        try:
            run = ct.tune("matmul", server=server.address, overlap=True, **common)
        finally:
            server.stop()
    times = {r["config"]["index"]: r["mean"] for r in run.records if r["error"] == "ok"}
    return {"times": times, "cpus": run.report.get("cpus"), "overlap": run.report["overlap"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="256,256,256")
    p.add_argument("--trials", type=int, default=24)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    ratios: List[float] = []
    split_times: List[float] = []
    shared_times: List[float] = []
    cpus = None
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.rounds):
            # Alternate which side goes first: the machine's load drifts.
            order = (True, False) if i % 2 == 0 else (False, True)
            got = {s: tune(s, pathlib.Path(d) / f"{i}-{'split' if s else 'shared'}.jsonl", args)
                   for s in order}
            assert got[True]["overlap"] and got[False]["overlap"]
            cpus = got[True]["cpus"]
            both = sorted(set(got[True]["times"]) & set(got[False]["times"]))
            for c in both:
                split_times.append(got[True]["times"][c])
                shared_times.append(got[False]["times"][c])
                ratios.append(got[False]["times"][c] / got[True]["times"][c])
    if not ratios:
        raise SystemExit("no config measured ok by both sides")
    print(json.dumps({
        "shape": args.shape, "trials": args.trials, "rounds": args.rounds,
        "cpus_split": cpus,
        "configs": len(ratios),
        "median_ms_split": statistics.median(split_times) * 1e3,
        "median_ms_shared": statistics.median(shared_times) * 1e3,
        "median_shared_over_split": statistics.median(ratios),
        "min_shared_over_split": min(ratios),
        "max_shared_over_split": max(ratios),
    }, indent=2))


if __name__ == "__main__":
    main()
