"""What a call through the Python package adds to one through the C++ client, same run.

Starts a crosstune-server, then in turns (--rounds): one block of the C++ client
(crosstune-bench-call: `noop` calls and round trips of a tensor, in its own session) and one
block of the Python package (the same, through crosstune in this process). Prints one JSON
object: per-call microseconds of each side (median over rounds), the difference and the ratio,
and the copy rates; plus whether the Python round trip ran copy-free (the client sent from and
received into the arrays' own memory, as its copy stats report).

    PYTHONPATH=build/default/python python bench/python_call_overhead.py \\
        --bench-call build/default/bench/crosstune-bench-call --noop build/default/bench/noop.so
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import time

import numpy as np

import crosstune as ct


def python_block(dev: ct.Device, noop: ct.Function, iters: int, mib: int, rounds: int) -> dict:
    for _ in range(1000):
        noop()
    t0 = time.perf_counter()
    for _ in range(iters):
        noop()
    call_us = (time.perf_counter() - t0) / iters * 1e6
    host = np.ones((mib << 20) // 4, "f4")
    back = np.empty_like(host)
    back.fill(0)  # its pages faulted in before the timing, as the C++ side's are
    tensor = dev.array(host)
    t0 = time.perf_counter()
    for _ in range(rounds):
        tensor.copy_from(host)
        tensor.copy_to(back)
    seconds = time.perf_counter() - t0
    stats = dev.copy_stats()
    in_place = stats.last_in_source == host.ctypes.data and stats.last_out_destination == back.ctypes.data
    tensor.free()
    return {"call_us": call_us, "round_trip_mb_s": 2 * rounds * host.nbytes / seconds / 1e6,
            "copy_free": in_place and bool(np.array_equal(back, host))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench-call", required=True, help="crosstune-bench-call")
    parser.add_argument("--noop", required=True, help="module with an empty `noop` function")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20000)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--copy-rounds", type=int, default=4)
    args = parser.parse_args()

    server = ct.start_server()
    cpp, py = [], []
    with ct.connect(server.address) as dev:
        noop = dev.load(pathlib.Path(args.noop), as_name="noop.so")["noop"]
        for _ in range(args.rounds):
            out = subprocess.run(
                [args.bench_call, "--server", server.address, "--noop", args.noop,
                 "--iters", str(args.iters), "--mib", str(args.mib),
                 "--copy-rounds", str(args.copy_rounds)],
                check=True, capture_output=True, text=True)
            cpp.append(json.loads(out.stdout))
            py.append(python_block(dev, noop, args.iters, args.mib, args.copy_rounds))
    server.stop()
    med = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
    print(json.dumps({
        "cpp_call_us": med(cpp, "call_us"),
        "python_call_us": med(py, "call_us"),
        "python_added_us": statistics.median(p["call_us"] - c["call_us"] for p, c in zip(py, cpp)),
        # The same as a ratio, per round (each Python block right after its C++ block).
        "python_over_cpp_call": statistics.median(p["call_us"] / c["call_us"]
                                                  for p, c in zip(py, cpp)),
        "cpp_round_trip_mb_s": med(cpp, "round_trip_mb_s"),
        "python_round_trip_mb_s": med(py, "round_trip_mb_s"),
        "python_copy_free": all(p["copy_free"] for p in py),
        "rounds": args.rounds, "iters": args.iters, "mib": args.mib,
    }, indent=2))


if __name__ == "__main__":
    main()
