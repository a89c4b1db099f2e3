"""TVM's own RPC tracker (tvm.rpc.tracker's TrackerServerHandler, what
`python -m tvm.exec.rpc_tracker` runs) on a port the kernel picks.

Prints "listening on HOST:PORT" on stdout, then serves until killed.
"""

import argparse
import socket
import sys

from tvm.rpc import tracker


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    args = ap.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)
    print(f"listening on {args.host}:{sock.getsockname()[1]}", flush=True)
    tracker._tracker_server(sock, "tracker:stop-key-unused")


if __name__ == "__main__":
    sys.exit(main())
