"""Starts the TVM tests' Python programs (TVM RPC servers, clients, TVM's tracker and its
rpc_server launcher) as forks of one process that has imported TVM already.

Each of those programs spent about 2.5 s of CPU importing TVM before it did anything (the
tracker tests start about 50 of them); a fork of this process starts with TVM imported. The
fork server is itself forked from the test process before the tests start any thread, and runs
nothing of its own: it forks once per request and goes back to waiting.

A request is the program's argv as a Python command line would take it (`SCRIPT ARGS...` or
`-m MODULE ARGS...`), with the file descriptors to use as its stdout and stderr (passed over a
Unix socket); the reply is the new process's pid. Each program runs in a session of its own (as
subprocess's start_new_session=True), so killing its process group kills what it forked too. The
fork server ignores SIGCHLD, so the kernel reaps the programs it started; they restore the default.
"""

import json
import os
import runpy
import signal
import socket
import sys
import time
import traceback


class ForkServer:
    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            _serve(theirs)  # never returns
        theirs.close()
        self.sock = ours

    def spawn(self, argv, stdout_fd, stderr_fd):
        """Starts `argv` (a Python command line, without the interpreter) and returns its pid."""
        socket.send_fds(self.sock, [json.dumps(argv).encode()], [stdout_fd, stderr_fd])
        reply = self.sock.recv(64)
        if not reply:
            raise RuntimeError("the TVM fork server went away")
        return int(reply)


def _serve(sock):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 2)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)  # the tests are over
        pid = os.fork()
        if pid == 0:
            sock.close()
            _run(json.loads(msg), fds)  # never returns
        for fd in fds:
            os.close(fd)
        sock.send(str(pid).encode())


def _run(argv, fds):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        os.close(fd)
    code = 0
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # pylint: disable=broad-except
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass
    os._exit(code)


class ForkedProcess:
    """What the tests use of subprocess.Popen, for a program the fork server started: its pid,
    its stdout (a text pipe), poll() and wait()."""

    def __init__(self, server, argv, stderr):
        r, w = os.pipe()
        try:
            self.pid = server.spawn(argv, w, stderr.fileno())
        finally:
            os.close(w)
        self.stdout = os.fdopen(r, "r")
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -1  # reaped by the kernel: its status is not kept
        return self.returncode

    def wait(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"process {self.pid} did not end")
            time.sleep(0.01)
        return self.returncode
