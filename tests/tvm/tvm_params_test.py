#!/usr/bin/env python3
"""`crosstune params import|export` against Apache TVM's own params blobs.

A blob written by TVM's save_param_dict is imported into params.bin, exported back, and the
export is loaded by TVM's load_param_dict: every tensor must come back with its name, dtype, shape
and bytes. Needs the TVM virtual environment of scripts/install-deps.sh (CROSSTUNE_TVM_PYTHON);
without it the test is skipped (exit 77).

  tvm_params_test.py --cli-bin build/default/cli/crosstune
"""
import argparse
import os
import subprocess
import sys
import tempfile

from tvm_python import FLAG, rerun_in_tvm_python


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli-bin", required=True)
    ap.add_argument(FLAG, action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    rerun = rerun_in_tvm_python(__file__)
    if rerun is not None:
        return rerun

    import numpy as np
    import tvm
    import tvm.runtime

    make = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
    rng = np.random.default_rng(7)
    original = {
        "conv1.weight": rng.standard_normal((8, 3, 3, 3)).astype("float32"),
        "conv1.bias": rng.standard_normal((8,)).astype("float32"),
        "fc.weight": rng.standard_normal((10, 32)).astype("float64"),
        "ids": np.arange(-3, 5, dtype="int64"),
        "mask": (rng.standard_normal((2, 5)) > 0).astype("uint8"),
        "half": rng.standard_normal((4, 4)).astype("float16"),
        "scalar": np.array(3.5, dtype="float32"),
    }
    with tempfile.TemporaryDirectory() as d:
        blob = os.path.join(d, "tvm.params")
        with open(blob, "wb") as f:
            f.write(bytes(tvm.runtime.save_param_dict({k: make(v) for k, v in original.items()})))
        params_bin = os.path.join(d, "params.bin")
        back = os.path.join(d, "back.params")
        for cmd in (["params", "import", blob, "-o", params_bin, "--json"],
                    ["params", "export", params_bin, "-o", back, "--json"]):
            r = subprocess.run([args.cli_bin] + cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL: crosstune {' '.join(cmd)}: {r.stderr.strip()}")
                return 1
            print(r.stdout.strip())
        with open(back, "rb") as f:
            loaded = tvm.runtime.load_param_dict(f.read())
        if sorted(loaded.keys()) != sorted(original.keys()):
            print(f"FAIL: names {sorted(loaded.keys())} != {sorted(original.keys())}")
            return 1
        for name, want in original.items():
            got = loaded[name].numpy()
            if got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != want.tobytes():
                print(f"FAIL: {name}: {got.dtype} {got.shape} != {want.dtype} {want.shape}")
                return 1
        with open(blob, "rb") as f, open(back, "rb") as g:
            same = f.read() == g.read()
        print(f"ok: {len(original)} params round-trip through params.bin; "
              f"export byte-identical to TVM's blob: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
