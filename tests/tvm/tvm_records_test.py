#!/usr/bin/env python3
"""`crosstune records import` of a MetaSchedule database that Apache TVM itself writes.

TVM's JSONDatabase gets a matmul workload and three tuning records (two timed schedules and one
failed candidate); the folder goes into a real crosstune-tracker's records. What the tracker then
holds must be what TVM reads from the same database: the workload's structural hash in the task,
the records' number, the best's time, and the best's trace, which TVM applies to a fresh schedule
of the workload again. Needs the TVM virtual environment of scripts/install-deps.sh
(CROSSTUNE_TVM_PYTHON); without it the test is skipped (exit 77).

  tvm_records_test.py --cli-bin build/default/cli/crosstune --tracker-bin build/default/tracker/...
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from tvm_python import FLAG, rerun_in_tvm_python


def crosstune(cli, *args):
    r = subprocess.run([cli, *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: crosstune {' '.join(args)}: {r.stderr.strip()}")
    return r


def make_database(work_dir):
    """Three records of one matmul workload, as a MetaSchedule search would commit them."""
    import tvm
    from tvm import te
    from tvm.s_tir import Schedule
    from tvm.s_tir import meta_schedule as ms

    a = te.placeholder((64, 32), name="A")
    b = te.placeholder((32, 48), name="B")
    k = te.reduce_axis((0, 32), name="k")
    c = te.compute((64, 48), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    func = te.create_prim_func([a, b, c])
    mod = tvm.IRModule({"main": func})
    db = ms.database.JSONDatabase(work_dir=work_dir)
    workload = db.commit_workload(mod)
    target = tvm.target.Target({"kind": "llvm", "mcpu": "znver3", "num-cores": 2})
    args_info = ms.arg_info.ArgInfo.from_prim_func(func)
    for factor, run_secs in ((4, [0.004, 0.0044]), (8, [0.002, 0.0022]), (16, None)):
        sch = Schedule(mod)
        i, _, _ = sch.get_loops(sch.get_sblock("C"))
        sch.split(i, [None, factor])
        db.commit_tuning_record(
            ms.database.TuningRecord(sch.trace, workload, run_secs, target, args_info))
    return mod, db


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli-bin", required=True)
    ap.add_argument("--tracker-bin", required=True)
    ap.add_argument(FLAG, action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    rerun = rerun_in_tvm_python(__file__)
    if rerun is not None:
        return rerun

    from tvm.s_tir import Schedule
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.schedule import Trace

    with tempfile.TemporaryDirectory() as d:
        work_dir = os.path.join(d, "ms")
        os.makedirs(work_dir)
        mod, db = make_database(work_dir)
        # What TVM reads back from its own database: the reference.
        records = db.get_all_tuning_records()
        shash = records[0].workload.as_json()[0]
        timed = [r for r in records if r.run_secs]
        best = min(timed, key=lambda r: sum(float(s) for s in r.run_secs) / len(r.run_secs))
        best_mean = sum(float(s) for s in best.run_secs) / len(best.run_secs)

        tracker = subprocess.Popen([args.tracker_bin, "--port", "0"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        try:
            line = tracker.stdout.readline()  # its first line says where it listens
            m = re.search(r"listening on (\S+:\d+)", line)
            if not m:
                print(f"FAIL: the tracker did not say where it listens: {line!r}")
                return 1
            farm = ["--tracker", m.group(1)]
            r = crosstune(args.cli_bin, "records", "import", work_dir, *farm,
                          "--device-kind", "x86_64/AMD EPYC", "--json")
            got = json.loads(r.stdout)
            print(r.stdout.strip())
            assert got["files"] == [{"path": work_dir, "format": "metaschedule"}], got
            assert got["read"] == len(records) == 3 and got["added"] == 3, got

            rows = json.loads(crosstune(args.cli_bin, "records", "ls", *farm, "--json").stdout)
            assert len(rows["rows"]) == 1, rows
            row = rows["rows"][0]
            print(json.dumps(row))
            assert row["task"] == f"metaschedule:{shash} 64,32,32,48,64,48 float32", row
            assert row["target"] == "llvm -mcpu=znver3 -num-cores=2", row
            assert row["records"] == 3, row
            assert abs(row["best_mean_s"] - best_mean) < 1e-9, (row, best_mean)

            r = crosstune(args.cli_bin, "records", "best", *farm, "--task", row["task"],
                          "--target", row["target"], "--device-kind", "x86_64/AMD EPYC", "--json")
            ours = json.loads(r.stdout)["records"]
            assert len(ours) == 1, ours
            trace = ours[0]["config"]["values"]["trace"]
            assert trace == best.as_json()[0], "the best's trace is not the one TVM holds"
            # The trace the farm gives back schedules the workload in TVM again.
            sch = Schedule(mod)
            Trace.apply_json_to_schedule(trace, sch)
            assert str(sch.trace) == str(best.trace), (str(sch.trace), str(best.trace))
        finally:
            tracker.terminate()
            tracker.wait(timeout=30)
    print("PASS: a MetaSchedule database TVM wrote is in the farm's records as TVM reads it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
