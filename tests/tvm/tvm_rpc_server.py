"""A real TVM RPC server (TVM's own server loop, tvm.rpc.server._listen_loop) on a port the kernel
picks, registered with a tracker: what `python -m tvm.exec.rpc_server --tracker ... --key ...`
runs, except that TVM's launcher only binds ports from a range it scans.

Prints "listening on HOST:PORT" on stdout, then serves until killed.
"""

import argparse
import socket
import sys

from tvm.rpc import server


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracker", required=True, help="HOST:PORT of the tracker")
    ap.add_argument("--key", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args()
    host, port = args.tracker.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, 0))
    sock.listen(1)
    my_port = sock.getsockname()[1]
    print(f"listening on {args.host}:{my_port}", flush=True)
    server._listen_loop(sock, my_port, args.key, (host, int(port)), None, None)


if __name__ == "__main__":
    sys.exit(main())
