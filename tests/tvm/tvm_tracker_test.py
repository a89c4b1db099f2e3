"""crosstune-tracker as a drop-in tracker for Apache TVM, tested against the real apache-tvm.

Real TVM RPC servers (TVM's server loop, tvm_rpc_server.py) and TVM's own client code talk to a
crosstune-tracker started with --allow-tvm. The flows shared by both trackers (TrackerFlows) also
run against TVM's own tracker (tvm_tracker.py), so a difference in behaviour shows up side by side.

Run with the TVM virtual environment's python (scripts/install-deps.sh makes it); with any other
python this file re-executes itself under it, or exits 77 (skipped) with a message when it is
absent. Usage: tvm_tracker_test.py --tracker-bin PATH [--server-bin PATH] [--cli-bin PATH] [Class]
"""

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

TVM_PYTHON = os.environ.get("CROSSTUNE_TVM_PYTHON", "/opt/crosstune/tvm-venv/bin/python")
HERE = os.path.dirname(os.path.abspath(__file__))
BINS = {"tracker": None, "server": None, "cli": None}


def reexec_under_tvm_python():
    try:
        import tvm  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel

        return
    except ImportError:
        pass
    if not os.path.exists(TVM_PYTHON) or os.environ.get("CROSSTUNE_TVM_REEXEC"):
        print(
            f"SKIPPED: no Apache TVM environment at {TVM_PYTHON} "
            "(scripts/install-deps.sh installs it; CROSSTUNE_TVM_PYTHON names another)"
        )
        sys.exit(77)
    os.environ["CROSSTUNE_TVM_REEXEC"] = "1"
    os.execv(TVM_PYTHON, [TVM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])


reexec_under_tvm_python()

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import rpc  # noqa: E402
from tvm.rpc import base  # noqa: E402
from tvm.rpc.base import TrackerCode  # noqa: E402
from tvm_fork_server import ForkedProcess, ForkServer  # noqa: E402

# Started in main(), before any test: the Python programs the tests run are forks of it.
FORKS = None


def eventually(cond, timeout=40.0, what="condition"):
    """Polls cond() until it is true; fails the test if it never is. Waits on events of other
    processes; never asserts how long they took."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Proc:
    """A child process in its own process group, its stdout lines collected by a thread. A Python
    program (argv starting with this interpreter) is a fork of the fork server, with TVM
    imported already (tvm_fork_server.py)."""

    def __init__(self, argv, log_path):
        self.log = open(log_path, "ab")
        if FORKS and argv[0] == sys.executable:
            self.p = ForkedProcess(FORKS, argv[1:], self.log)
        else:
            self.p = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=self.log, start_new_session=True, text=True
            )
        self.lines = queue.Queue()
        self.all = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.all.append(line.rstrip("\n"))
            self.lines.put(line.rstrip("\n"))

    def line(self, timeout=60.0):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return ""

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)  # the server's session children too
            except ProcessLookupError:
                pass
        self.p.wait()
        self.p.stdout.close()
        self.log.close()


class Farm:
    def __init__(self, test):
        self.dir = tempfile.mkdtemp(prefix="crosstune-tvm-")
        self.procs = []
        self.servers = []
        self.tracker = None
        self.port = 0
        self.http_port = 0
        test.addCleanup(self.close)

    def close(self):
        for p in reversed(self.procs):
            p.kill()
        if not os.environ.get("CROSSTUNE_KEEP_FARM"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def spawn(self, argv, log):
        p = Proc(argv, self.path(log))
        self.procs.append(p)
        return p

    def start_crosstune_tracker(self, extra=(), port=0):
        argv = [BINS["tracker"], "--host", "127.0.0.1", "--port", str(port), "--http-port", "0",
                "--startup-grace-s", "0", "--tvm-probe-s", "1", "--log-level", "debug"]
        self.tracker = self.spawn(argv + list(extra), "tracker.log")
        m = re.search(r"listening on 127\.0\.0\.1:(\d+) http 127\.0\.0\.1:(\d+)", self.tracker.line())
        assert m, "crosstune-tracker did not start: " + self.read("tracker.log")
        self.port, self.http_port = int(m.group(1)), int(m.group(2))

    def start_tvm_tracker(self, port=0):
        argv = [sys.executable, os.path.join(HERE, "tvm_tracker.py"), "--port", str(port)]
        self.tracker = self.spawn(argv, "tvm-tracker.log")
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", self.tracker.line())
        assert m, "TVM's tracker did not start: " + self.read("tvm-tracker.log")
        self.port = int(m.group(1))

    def start_server(self, key):
        i = len(self.servers)
        argv = [sys.executable, os.path.join(HERE, "tvm_rpc_server.py"),
                "--tracker", f"127.0.0.1:{self.port}", "--key", key]
        p = self.spawn(argv, f"server{i}.log")
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", p.line())
        assert m, "TVM RPC server did not start: " + self.read(f"server{i}.log")
        p.port = int(m.group(1))
        self.servers.append(p)
        return p

    def start_exec_server(self, key):
        """TVM's own launcher, `python -m tvm.exec.rpc_server`. It binds the first free port of a
        range it scans, so the range starts at a port the kernel just gave out."""
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        start = probe.getsockname()[1]
        probe.close()
        i = len(self.servers)
        argv = [sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1",
                "--port", str(start), "--port-end", str(min(start + 200, 65535)),
                "--tracker", f"127.0.0.1:{self.port}", "--key", key]
        p = self.spawn(argv, f"server{i}.log")
        m = eventually(lambda: re.search(r"bind to 127\.0\.0\.1:(\d+)", self.read(f"server{i}.log")),
                       what="TVM's rpc_server to bind")
        p.port = int(m.group(1))
        self.servers.append(p)
        return p

    def start_client(self, key, priority, name, hold=True):
        argv = [sys.executable, os.path.join(HERE, "tvm_client.py"),
                "--tracker", f"127.0.0.1:{self.port}", "--key", key,
                "--priority", str(priority), "--name", name]
        if hold:
            argv += ["--hold", self.path(name + ".release")]
        return self.spawn(argv, name + ".log")

    def release(self, name):
        open(self.path(name + ".release"), "w").close()

    def read(self, log):
        with open(self.path(log), errors="replace") as f:
            return f.read()

    def summary(self):
        """TVM's SUMMARY, through TVM's own client."""
        t = rpc.connect_tracker("127.0.0.1", self.port)
        try:
            return t.summary()
        finally:
            t.close()

    def queue(self, key):
        return self.summary()["queue_info"].get(key, {"free": 0, "pending": 0})

    def server_ports(self):
        return sorted(int(s["addr"][1]) for s in self.summary()["server_info"])

    def http(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=10) as r:
            return r.read().decode()

    def api_summary(self):
        return json.loads(self.http("/api/summary"))


def raw_request(port, key, priority=1):
    """What TrackerSession.request sends, on TVM's own client socket; returns the socket."""
    t = rpc.connect_tracker("127.0.0.1", port)
    base.sendjson(t._sock, [TrackerCode.REQUEST, key, "", priority])
    return t


def run_remote_functions(port, key):
    remote = rpc.connect_tracker("127.0.0.1", port).request(key)
    remote.upload(bytearray(b"crosstune + tvm"), "hello.txt")
    data = remote.download("hello.txt")
    a = tvm.runtime.tensor(np.arange(16, dtype="float32") * 2, remote.cpu())
    back = a.numpy()
    del a, remote  # ends the session
    return bytes(data), back


class TrackerFlows:
    """The flows a TVM user runs; each runs against crosstune-tracker and TVM's own tracker."""

    crosstune = True

    def start_tracker(self, farm, port=0, extra=()):
        if self.crosstune:
            farm.start_crosstune_tracker(["--allow-tvm", *extra], port=port)
        else:
            farm.start_tvm_tracker(port=port)

    def test_runs_a_remote_function_on_a_device_requested_by_key(self):
        farm = Farm(self)
        self.start_tracker(farm)
        server = farm.start_server("cpu")
        eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server to offer itself")
        data, back = run_remote_functions(farm.port, "cpu")
        self.assertEqual(data, b"crosstune + tvm")
        np.testing.assert_array_equal(back, np.arange(16, dtype="float32") * 2)
        # The server offers itself again once the session is over.
        eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server to offer itself again")
        if not self.crosstune:
            return
        # The views mark it as an unauthenticated TVM device; its session is in the history.
        device = f"127.0.0.1:{server.port}"
        s = eventually(lambda: (lambda j: j if j["history"] else None)(farm.api_summary()),
                       what="a history row")
        [d] = [d for d in s["devices"] if d["name"] == device]
        self.assertEqual((d["protocol"], d["authenticated"], d["tags"]["protocol"]),
                         ("tvm", False, "tvm"))
        self.assertEqual((s["history"][0]["device"], s["history"][0]["outcome"]),
                         (device, "session ended"))
        self.assertIn(f'device="{device}",key="cpu",state="free",protocol="tvm"',
                      farm.http("/metrics"))
        # Port probes pass without disturbing the server: it registered once only.
        eventually(lambda: farm.read("tracker.log").count(f"TVM server {device}: probe passed") >= 3,
                   what="three port probes")
        self.assertEqual(farm.read("tracker.log").count(f"registered TVM server {device}"), 1)

    def test_uploads_loads_and_times_a_compiled_module(self):
        # What a tuning run does with each candidate: compile, upload, load, check, time.
        from tvm import te  # pylint: disable=import-outside-toplevel
        from tvm.support import utils  # pylint: disable=import-outside-toplevel

        farm = Farm(self)
        self.start_tracker(farm)
        farm.start_server("cpu")
        n = 1024
        a_ph = te.placeholder((n,), name="A")
        b_ph = te.compute((n,), lambda i: a_ph[i] * 2.0, name="B")
        lib = tvm.compile(tvm.IRModule({"main": te.create_prim_func([a_ph, b_ph])}),
                          target={"kind": "llvm"})
        tmp = utils.tempdir()
        lib.export_library(tmp.relpath("vscale.so"))
        eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server")
        remote = rpc.connect_tracker("127.0.0.1", farm.port).request("cpu")
        remote.upload(tmp.relpath("vscale.so"))
        rlib = remote.load_module("vscale.so")
        dev = remote.cpu()
        a = tvm.runtime.tensor(np.arange(n, dtype="float32"), dev)
        b = tvm.runtime.tensor(np.zeros(n, dtype="float32"), dev)
        rlib["main"](a, b)
        np.testing.assert_array_equal(b.numpy(), np.arange(n, dtype="float32") * 2)
        self.assertGreater(rlib.time_evaluator("main", dev, number=10, repeat=2)(a, b).mean, 0)

    def test_metaschedule_rpc_runner_measures_candidates(self):
        # pylint: disable=import-outside-toplevel
        from tvm import te
        from tvm.s_tir.meta_schedule.arg_info import TensorInfo
        from tvm.s_tir.meta_schedule.runner import (EvaluatorConfig, RPCConfig, RPCRunner,
                                                    RunnerInput)
        from tvm.support import utils

        farm = Farm(self)
        self.start_tracker(farm)
        farm.start_server("cpu")
        farm.start_server("cpu")
        n = 4096
        a_ph = te.placeholder((n,), name="A")
        b_ph = te.compute((n,), lambda i: a_ph[i] * 2.0, name="B")
        lib = tvm.compile(tvm.IRModule({"main": te.create_prim_func([a_ph, b_ph])}),
                          target={"kind": "llvm"})
        tmp = utils.tempdir()
        inputs = []
        for i in range(4):
            lib.export_library(tmp.relpath(f"candidate{i}.tar"))
            inputs.append(RunnerInput(tmp.relpath(f"candidate{i}.tar"), "cpu",
                                      [TensorInfo("float32", [n]), TensorInfo("float32", [n])]))
        eventually(lambda: farm.queue("cpu")["free"] == 2, what="two servers")
        runner = RPCRunner(RPCConfig("127.0.0.1", farm.port, "cpu", session_timeout_sec=60),
                           EvaluatorConfig(number=3, repeat=1, min_repeat_ms=0), max_workers=2)
        results = [f.result() for f in runner.run(inputs)]
        self.assertEqual([r.error_msg for r in results], [None] * 4)
        self.assertTrue(all(len(r.run_secs) == 1 for r in results))

    def test_serves_waiting_clients_in_priority_order(self):
        farm = Farm(self)
        self.start_tracker(farm)
        farm.start_server("cpu")
        eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server")
        holder = farm.start_client("cpu", 0, "holder")
        self.assertEqual(holder.line(), "granted holder ok")
        low = farm.start_client("cpu", 1, "low")
        eventually(lambda: farm.queue("cpu")["pending"] == 1, what="the low-priority request")
        high = farm.start_client("cpu", 9, "high")
        eventually(lambda: farm.queue("cpu")["pending"] == 2, what="the high-priority request")
        farm.release("holder")
        self.assertEqual(high.line(), "granted high ok")
        self.assertEqual(low.all, [])  # still waiting
        farm.release("high")
        self.assertEqual(low.line(), "granted low ok")
        farm.release("low")

    def test_client_that_disconnects_while_queued_leaves_the_queue(self):
        farm = Farm(self)
        self.start_tracker(farm)
        farm.start_server("cpu")
        eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server")
        holder = farm.start_client("cpu", 0, "holder")
        self.assertEqual(holder.line(), "granted holder ok")
        gone = raw_request(farm.port, "cpu", priority=5)
        eventually(lambda: farm.queue("cpu")["pending"] == 1, what="the queued request")
        gone.close()
        if self.crosstune:
            eventually(lambda: farm.queue("cpu")["pending"] == 0, what="the request to leave")
        else:
            # TVM's tracker keeps a dead request in its heap (and skips it at grant time).
            print("TVM's tracker: pending after the client left:", farm.queue("cpu")["pending"])
        waiter = farm.start_client("cpu", 0, "waiter")
        eventually(lambda: farm.queue("cpu")["pending"] >= 1, what="the waiter")
        farm.release("holder")
        self.assertEqual(waiter.line(), "granted waiter ok")
        farm.release("waiter")

    def test_query_rpc_tracker_prints_the_summary(self):
        farm = Farm(self)
        self.start_tracker(farm)
        server = farm.start_exec_server("cpu")  # python -m tvm.exec.rpc_server, unchanged
        eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server")
        out = subprocess.run(
            [sys.executable, "-m", "tvm.exec.query_rpc_tracker", "--host", "127.0.0.1",
             "--port", str(farm.port)],
            capture_output=True, text=True, timeout=60, check=True).stdout
        self.assertRegex(out, rf"127\.0\.0\.1:{server.port}\s+server:cpu")
        self.assertRegex(out, r"\ncpu\s+1\s+1\s+0\s*\n")

    def test_killed_server_is_removed(self):
        farm = Farm(self)
        self.start_tracker(farm)
        doomed = farm.start_server("cpu")
        alive = farm.start_server("cpu")
        eventually(lambda: farm.queue("cpu")["free"] == 2, what="two servers")
        doomed.kill()
        eventually(lambda: farm.server_ports() == [alive.port], what="the killed server to go")
        self.assertEqual(farm.queue("cpu")["free"], 1)
        t = raw_request(farm.port, "cpu")
        code, (host, port, matchkey) = base.recvjson(t._sock)
        t.close()
        self.assertEqual((code, port), (TrackerCode.SUCCESS, alive.port))
        self.assertTrue(matchkey.startswith("cpu:"))

    def test_restarted_tracker_gets_its_servers_back(self):
        farm = Farm(self)
        extra = ["--db", farm.path("tracker.sqlite")]
        self.start_tracker(farm, extra=extra)
        server = farm.start_server("cpu")
        eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server")
        self.assertEqual(run_remote_functions(farm.port, "cpu")[0], b"crosstune + tvm")
        if self.crosstune:
            eventually(lambda: farm.api_summary()["history"], what="a history row")
        farm.tracker.kill()
        self.start_tracker(farm, port=farm.port, extra=extra)
        # TVM's server notices at its next poll and reconnects (every 5 s, for 60 s).
        eventually(lambda: farm.queue("cpu")["free"] == 1, timeout=60, what="the server back")
        self.assertEqual(farm.server_ports(), [server.port])
        self.assertEqual(run_remote_functions(farm.port, "cpu")[0], b"crosstune + tvm")
        if self.crosstune:
            device = f"127.0.0.1:{server.port}"
            eventually(lambda: len(farm.api_summary()["history"]) == 2, what="both sessions")
            self.assertTrue(all(h["device"] == device for h in farm.api_summary()["history"]))


class CrosstuneTrackerFlows(TrackerFlows, unittest.TestCase):
    crosstune = True


class TvmTrackerFlows(TrackerFlows, unittest.TestCase):
    crosstune = False


class CrosstuneTvmOnly(unittest.TestCase):
    """What only crosstune-tracker does for TVM peers."""

    def test_tvm_peers_are_refused_without_allow_tvm(self):
        farm = Farm(self)
        farm.start_crosstune_tracker()
        with self.assertRaisesRegex(RuntimeError, "is not RPC Tracker"):
            rpc.connect_tracker("127.0.0.1", farm.port)
        eventually(lambda: "start the tracker with --allow-tvm" in farm.read("tracker.log"),
                   what="the refusal in the log")

    def test_tvm_peers_outside_the_allowed_networks_are_refused(self):
        farm = Farm(self)
        farm.start_crosstune_tracker(["--allow-tvm", "--tvm-network", "10.0.0.0/8",
                                      "--tvm-network", "fd00::/8"])
        with self.assertRaisesRegex(RuntimeError, "is not RPC Tracker"):
            rpc.connect_tracker("127.0.0.1", farm.port)
        eventually(lambda: "not in the networks of --tvm-network" in farm.read("tracker.log"),
                   what="the refusal in the log")
        farm2 = Farm(self)
        farm2.start_crosstune_tracker(["--allow-tvm", "--tvm-network", "127.0.0.0/8"])
        self.assertEqual(farm2.summary()["server_info"], [])

    def test_bad_tvm_network_is_a_clear_error(self):
        out = subprocess.run([BINS["tracker"], "--port", "0", "--allow-tvm",
                              "--tvm-network", "10.0.0.0/33"], capture_output=True, text=True,
                             timeout=30)
        self.assertEqual(out.returncode, 1)
        self.assertIn("bad --tvm-network '10.0.0.0/33'", out.stderr)

    def test_tvm_request_times_out(self):
        farm = Farm(self)
        farm.start_crosstune_tracker(["--allow-tvm", "--tvm-wait-s", "1"])
        farm.start_server("cpu")
        eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server")
        holder = farm.start_client("cpu", 0, "holder")
        self.assertEqual(holder.line(), "granted holder ok")
        late = farm.start_client("cpu", 0, "late", hold=False)
        # TVM's client retries 5 times, then reports the tracker's answer.
        self.assertRegex(late.line(), r"^failed Cannot request cpu after 5 retry.*queue timeout")
        farm.release("holder")

    def test_port_probe_takes_a_server_whose_port_is_closed_out_of_the_pool(self):
        farm = Farm(self)
        farm.start_crosstune_tracker(["--allow-tvm"])
        # A server whose tracker connection stays open but whose port is gone.
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
        closed.close()
        t = rpc.connect_tracker("127.0.0.1", farm.port)
        base.sendjson(t._sock, [TrackerCode.UPDATE_INFO, {"key": "server:cpu",
                                                          "addr": [None, dead_port]}])
        self.assertEqual(base.recvjson(t._sock), TrackerCode.SUCCESS)
        base.sendjson(t._sock, [TrackerCode.PUT, "cpu", [dead_port, "cpu:0.5"], None])
        self.assertEqual(base.recvjson(t._sock), TrackerCode.SUCCESS)
        self.assertEqual(farm.queue("cpu")["free"], 1)
        # Two failed probes (one a second) and it is out of the pool; the peer is not told: its
        # connection stays open and answers as before (closing it would tell whoever names a
        # port whether it listens).
        eventually(lambda: farm.queue("cpu")["free"] == 0, what="the dead server out of the pool")
        self.assertIn("out of the pool until a probe passes", farm.read("tracker.log"))
        base.sendjson(t._sock, [TrackerCode.GET_PENDING_MATCHKEYS])
        self.assertEqual(base.recvjson(t._sock), ["cpu:0.5"])
        # Its port answers again: back in the pool.
        back = socket.socket()
        back.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        back.bind(("127.0.0.1", dead_port))
        back.listen(8)
        try:
            eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server back in the pool")
            self.assertIn("back in the pool", farm.read("tracker.log"))
        finally:
            back.close()

    def test_admins_drain_undrain_and_kick_a_tvm_device(self):
        if not BINS["cli"]:
            self.skipTest("the crosstune CLI was not built")
        farm = Farm(self)
        with open(farm.path("admin.secret"), "w") as f:
            f.write("admin-secret-for-tests\n")
        farm.start_crosstune_tracker(["--allow-tvm", "--admin-token-file", farm.path("admin.secret")])
        server = farm.start_server("cpu")
        device = f"127.0.0.1:{server.port}"
        eventually(lambda: farm.queue("cpu")["free"] == 1, what="the server")

        def admin(action):
            subprocess.run([BINS["cli"], action, "--tracker", f"127.0.0.1:{farm.port}", device,
                            "--admin-token-file", farm.path("admin.secret")],
                           capture_output=True, text=True, timeout=30, check=True)

        admin("drain")
        waiter = farm.start_client("cpu", 0, "waiter")
        eventually(lambda: farm.queue("cpu")["pending"] == 1, what="the request to wait")
        self.assertEqual(farm.queue("cpu")["free"], 0)
        admin("undrain")
        self.assertEqual(waiter.line(), "granted waiter ok")
        # Kick: TVM cannot end the session, so the tracker closes the server's tracker link; the
        # server registers again once its session is over.
        admin("kick")
        eventually(lambda: farm.server_ports() == [], what="the kicked server to go")
        self.assertIn("kicked by an admin",
                      [h["outcome"] for h in farm.api_summary()["history"]])
        farm.release("waiter")
        eventually(lambda: farm.server_ports() == [server.port], what="the server to come back")

    def test_tvm_and_crosstune_devices_are_never_mixed(self):
        if not BINS["server"] or not BINS["cli"]:
            self.skipTest("crosstune-server or the crosstune CLI was not built")
        farm = Farm(self)
        farm.start_crosstune_tracker(["--allow-tvm"])
        ct = farm.spawn([BINS["server"], "--host", "127.0.0.1", "--port", "0",
                         "--tracker", f"127.0.0.1:{farm.port}", "--key", "cpu"], "ct-server.log")
        ct_port = int(re.search(r"listening on [^:]+:(\d+)", ct.line()).group(1))
        tvm_server = farm.start_server("cpu")
        eventually(lambda: len(farm.api_summary()["devices"]) == 2, what="both devices")
        # Both are free; each protocol gets its own kind, twice over.
        for _ in range(2):
            t = raw_request(farm.port, "cpu")
            code, (_, port, _) = base.recvjson(t._sock)
            t.close()
            self.assertEqual((code, port), (TrackerCode.SUCCESS, tvm_server.port))
            out = subprocess.run([BINS["cli"], "lease", "--tracker", f"127.0.0.1:{farm.port}",
                                  "--key", "cpu", "--wait", "20", "--", "sh", "-c",
                                  "echo $CROSSTUNE_SERVER"],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(out.stdout.strip(), f"127.0.0.1:{ct_port}", out.stderr)
            # The TVM server's key went unused: it offers a fresh one after a few seconds.
            eventually(lambda: farm.queue("cpu")["free"] == 1, what="a fresh TVM offer")
        self.assertIn("session ended: no client used the TVM match key",
                      [h["outcome"] for h in farm.api_summary()["history"]])
        query = subprocess.run([BINS["cli"], "query", "--tracker", f"127.0.0.1:{farm.port}"],
                               capture_output=True, text=True, timeout=30, check=True).stdout
        self.assertRegex(query, rf"127\.0\.0\.1:{tvm_server.port}\s+cpu\s+free.*protocol=tvm")
        # A key only a TVM server has is no key for a crosstune client, and the other way round.
        farm.start_server("tvmonly")
        eventually(lambda: farm.queue("tvmonly")["free"] == 1, what="the tvmonly server")
        out = subprocess.run([BINS["cli"], "lease", "--tracker", f"127.0.0.1:{farm.port}",
                              "--key", "tvmonly", "--wait", "5", "--", "true"],
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("no device is registered with key 'tvmonly'", out.stderr)
        farm.spawn([BINS["server"], "--host", "127.0.0.1", "--port", "0", "--tracker",
                    f"127.0.0.1:{farm.port}", "--key", "ctonly"], "ct-server2.log").line()
        eventually(lambda: len(farm.api_summary()["devices"]) == 4, what="four devices")
        with self.assertRaisesRegex(RuntimeError, "no TVM device is registered with key 'ctonly'"):
            rpc.connect_tracker("127.0.0.1", farm.port).request("ctonly", max_retry=1)


class TvmBenchSmoke(unittest.TestCase):
    """bench/tvm_tracker_bench.py at a tiny size: it runs and prints every figure (no timing
    asserts: only its numbers side by side mean anything)."""

    def test_bench_prints_both_trackers_latencies(self):
        bench = os.path.join(HERE, "..", "..", "bench", "tvm_tracker_bench.py")
        out = subprocess.run([sys.executable, bench, "--tracker-bin", BINS["tracker"],
                              "--clients", "1", "--requests", "10", "--rounds", "1"],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        report = json.loads(out)
        for key in ["crosstune_grant_ms_p50", "crosstune_grant_ms_p99",
                    "tvm_tracker_grant_ms_p50", "tvm_tracker_grant_ms_p99", "p50_speedup"]:
            self.assertGreater(report[key], 0, key)
        self.assertEqual(report["grants_per_tracker"], 10)


def main():
    args = sys.argv[1:]
    for name in BINS:
        flag = f"--{name}-bin"
        if flag in args:
            i = args.index(flag)
            BINS[name] = args[i + 1] or None
            del args[i:i + 2]
    if not BINS["tracker"]:
        print("usage: tvm_tracker_test.py --tracker-bin PATH [...]", file=sys.stderr)
        return 2
    global FORKS  # pylint: disable=global-statement
    FORKS = ForkServer()
    prog = unittest.main(argv=[sys.argv[0], "-v", *args], exit=False)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
