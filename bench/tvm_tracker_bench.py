"""TVM request -> grant latency through crosstune-tracker and through TVM's own tracker, same run.

Clients are TVM's own client code, unchanged: a socket from tvm.rpc.connect_tracker and
tvm.rpc.base.sendjson/recvjson, which is what TrackerSession.request does before it connects to
the granted server. Each client (a process of its own) loops: REQUEST (timed until the grant
arrives), then the RPC handshake "client:<matchkey>" with the granted server, which ends the use.
Servers follow TVM's server loop (PUT a match key, poll GET_PENDING_MATCHKEYS every 2 s while
idle, accept the client with the matching key, PUT a fresh key) without starting a session
process, so the run measures the trackers and not session start-up. There are twice as many
servers as clients, so a free server is always there and the time is the tracker's own.

The two trackers are measured in alternating rounds; prints one JSON object.
Run with the TVM virtual environment's python (scripts/install-deps.sh makes it):
  /opt/crosstune/tvm-venv/bin/python bench/tvm_tracker_bench.py \
      --tracker-bin build/default/tracker/crosstune-tracker [--clients 4] [--requests 50] [--rounds 2]
"""

import argparse
import json
import multiprocessing as mp
import os
import re
import select
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

from tvm import rpc
from tvm.rpc import base
from tvm.rpc.base import TrackerCode

HERE = os.path.dirname(os.path.abspath(__file__))
TVM_TRACKER = os.path.join(HERE, "..", "tests", "tvm", "tvm_tracker.py")


def serve(tracker_port, key, stop):
    """One TVM-protocol server, as TVM's _listen_loop/_accept_conn, minus the session."""
    listen = socket.socket()
    listen.bind(("127.0.0.1", 0))
    listen.listen(16)
    port = listen.getsockname()[1]
    conn = socket.create_connection(("127.0.0.1", tracker_port))
    conn.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
    assert struct.unpack("<i", base.recvall(conn, 4))[0] == base.RPC_TRACKER_MAGIC
    base.sendjson(conn, [TrackerCode.UPDATE_INFO, {"key": "server:" + key, "addr": [None, port]}])
    assert base.recvjson(conn) == TrackerCode.SUCCESS
    while not stop.is_set():
        matchkey = base.random_key(key)
        base.sendjson(conn, [TrackerCode.PUT, key, (port, matchkey), None])
        assert base.recvjson(conn) == TrackerCode.SUCCESS
        while not stop.is_set():
            if listen not in select.select([listen], [], [], 2)[0]:
                base.sendjson(conn, [TrackerCode.GET_PENDING_MATCHKEYS])
                base.recvjson(conn)
                continue
            c, _ = listen.accept()
            magic = struct.unpack("<i", base.recvall(c, 4))[0]
            if magic != base.RPC_MAGIC:
                c.close()
                continue
            n = struct.unpack("<i", base.recvall(c, 4))[0]
            got = base.recvall(c, n).decode()
            ok = got.split()[0] == "client:" + matchkey
            c.sendall(struct.pack("<i", base.RPC_CODE_SUCCESS if ok else base.RPC_CODE_MISMATCH))
            if ok:
                server_key = ("server:" + key).encode()
                c.sendall(struct.pack("<i", len(server_key)) + server_key)
            c.close()
            if ok:
                break
    conn.close()


def client(tracker_port, key, requests, out):
    t = rpc.connect_tracker("127.0.0.1", tracker_port)  # TVM's client, as a user has it
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        base.sendjson(t._sock, [TrackerCode.REQUEST, key, "", 1])
        code, (host, port, matchkey) = base.recvjson(t._sock)
        times.append(time.perf_counter() - start)
        assert code == TrackerCode.SUCCESS
        # What rpc.connect sends first: RPC magic and "client:<matchkey>".
        s = socket.create_connection((host, port))
        k = ("client:" + matchkey).encode()
        s.sendall(struct.pack("<i", base.RPC_MAGIC) + struct.pack("<i", len(k)) + k)
        assert struct.unpack("<i", base.recvall(s, 4))[0] == base.RPC_CODE_SUCCESS
        s.close()
    t.close()
    out.put(times)


def start(argv, pattern):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.search(pattern, p.stdout.readline())
    if not m:
        p.kill()
        raise SystemExit(f"{argv[0]} did not start")
    return p, int(m.group(1))


def measure(port, clients, servers, requests):
    stop = threading.Event()
    threads = [threading.Thread(target=serve, args=(port, "bench", stop), daemon=True)
               for _ in range(servers)]
    for th in threads:
        th.start()
    # Wait until every server has offered itself.
    t = rpc.connect_tracker("127.0.0.1", port)
    while t.summary()["queue_info"].get("bench", {}).get("free", 0) < servers:
        time.sleep(0.05)
    t.close()
    out = mp.Queue()
    procs = [mp.Process(target=client, args=(port, "bench", requests, out)) for _ in range(clients)]
    for p in procs:
        p.start()
    times = []
    for _ in procs:
        times += out.get()
    for p in procs:
        p.join()
    stop.set()
    return times


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracker-bin", required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--requests", type=int, default=50, help="per client per round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--db", help="give crosstune-tracker this SQLite database (default: in memory)")
    args = ap.parse_args()
    servers = 2 * args.clients

    argv = [args.tracker_bin, "--host", "127.0.0.1", "--port", "0", "--allow-tvm",
            "--log-level", "warn"] + (["--db", args.db] if args.db else [])
    ours, ours_port = start(argv, r"listening on 127\.0\.0\.1:(\d+)")
    theirs, theirs_port = start([sys.executable, TVM_TRACKER], r"listening on 127\.0\.0\.1:(\d+)")
    results = {"crosstune": [], "tvm": []}
    try:
        for _ in range(args.rounds):
            results["crosstune"] += measure(ours_port, args.clients, servers, args.requests)
            results["tvm"] += measure(theirs_port, args.clients, servers, args.requests)
    finally:
        ours.kill()
        theirs.kill()
    ms = {k: [v * 1e3 for v in vs] for k, vs in results.items()}
    report = {
        "clients": args.clients,
        "crosstune_db": "file" if args.db else "memory",
        "servers": servers,
        "grants_per_tracker": len(ms["crosstune"]),
        "crosstune_grant_ms_p50": round(pct(ms["crosstune"], 0.5), 3),
        "crosstune_grant_ms_p99": round(pct(ms["crosstune"], 0.99), 3),
        "tvm_tracker_grant_ms_p50": round(pct(ms["tvm"], 0.5), 3),
        "tvm_tracker_grant_ms_p99": round(pct(ms["tvm"], 0.99), 3),
        "crosstune_grant_ms_mean": round(statistics.mean(ms["crosstune"]), 3),
        "tvm_tracker_grant_ms_mean": round(statistics.mean(ms["tvm"]), 3),
        "target_crosstune_p50_ms": 1.0,
    }
    report["p50_speedup"] = round(report["tvm_tracker_grant_ms_p50"] /
                                  max(report["crosstune_grant_ms_p50"], 1e-6), 1)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
