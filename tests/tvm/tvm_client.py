"""An unchanged TVM client: asks a tracker for a device by key with TVM's own client
(tvm.rpc.connect_tracker(...).request(key)), runs a remote function on it, prints "granted",
then keeps its session open until the file given with --hold exists.
"""

import argparse
import os
import sys
import time

import numpy as np
import tvm
from tvm import rpc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracker", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--priority", type=int, default=1)
    ap.add_argument("--hold", help="keep the session until this file exists")
    ap.add_argument("--name", default="client")
    args = ap.parse_args()
    host, port = args.tracker.rsplit(":", 1)
    try:
        remote = rpc.connect_tracker(host, int(port)).request(args.key, priority=args.priority)
    except RuntimeError as err:
        print(f"failed {err}", flush=True)
        return 1
    a = tvm.runtime.tensor(np.arange(8, dtype="float32"), remote.cpu())
    ok = np.array_equal(a.numpy(), np.arange(8, dtype="float32"))
    print(f"granted {args.name} {'ok' if ok else 'wrong-answer'}", flush=True)
    while args.hold and not os.path.exists(args.hold):
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
