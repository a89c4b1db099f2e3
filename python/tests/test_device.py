"""Devices against a real local crosstune-server: info, files, build, load, calls, timing,
tensors; arrays cross without copies; the GIL is released during remote calls."""

from __future__ import annotations

import os
import pathlib
import threading

import numpy as np
import pytest

import crosstune as ct
from conftest import VADD


def test_info_and_target_describe_this_machine(dev: ct.Device) -> None:
    info = dev.info()
    assert info["arch"] == os.uname().machine
    assert info["cores"] > 0 and info["memory_bytes"] > 0
    assert info["version"] == ct.__version__
    target = dev.target()
    assert target.startswith("llvm -mtriple=") and info["triple"] in target
    assert ct.parse_target(target) == target


def test_files_upload_download_list_and_remove(dev: ct.Device, tmp_path: pathlib.Path) -> None:
    src = tmp_path / "data.bin"
    src.write_bytes(os.urandom(300_000))
    entry = dev.upload(src, "dir/data.bin")
    assert entry["path"] == "dir/data.bin" and entry["size"] == 300_000
    dev.upload_bytes(b"hello", "hello.txt")
    assert {f["path"] for f in dev.ls()} == {"dir/data.bin", "hello.txt"}
    dev.download("dir/data.bin", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
    dev.rm("hello.txt")
    assert [f["path"] for f in dev.ls()] == ["dir/data.bin"]
    with pytest.raises(ct.NotFound) as e:
        dev.download("missing.bin", tmp_path / "x")
    assert e.value.code == "NotFound"
    with pytest.raises(ct.InvalidArgument):
        dev.upload_bytes(b"x", "../outside.txt")


def test_builds_loads_and_calls_with_numpy_in_and_out(dev: ct.Device) -> None:
    mod = dev.load(ct.build(VADD, device=dev, name="vadd"))
    assert mod.functions["vadd"] == "ttt" and "scale" in mod
    a = np.random.rand(64, 16).astype("f4")
    b = np.random.rand(64, 16).astype("f4")
    c = np.zeros((64, 16), "f4")
    result = mod["vadd"](a, b, c)
    np.testing.assert_array_equal(c, a + b)
    assert result.seconds >= 0
    mod["scale"](c, 0.5)
    np.testing.assert_allclose(c, (a + b) * 0.5)
    t = mod.time("vadd", a, b, c, number=10, repeat=3)
    assert len(t.seconds_per_call) == 3 and t.min <= t.median <= t.max and t.number >= 10
    with pytest.raises(ct.NotFound):
        mod["nothing"]


def test_loads_an_uploaded_module_by_its_workspace_name(dev: ct.Device, vadd_package: ct.Package) -> None:
    dev.upload(vadd_package.path, "k.ctpkg")
    mod = dev.load("k.ctpkg")
    assert "vadd" in mod.functions
    # A local path (pathlib) is uploaded first.
    assert "noop" in dev.load(pathlib.Path(vadd_package.path), as_name="again.ctpkg").functions


def test_remote_tensors_stay_on_the_device_between_calls(dev: ct.Device, vadd_package: ct.Package) -> None:
    mod = dev.load(vadd_package)
    a = dev.array(np.arange(10, dtype="f4"))
    b = dev.array(np.ones(10, "f4"))
    c = dev.empty((10,), "f32")
    assert c.shape == [10] and c.dtype == "f32" and c.nbytes == 40
    mod["vadd"](a, b, c)
    mod["vadd"](c, b, c)
    np.testing.assert_array_equal(c.numpy(), np.arange(10, dtype="f4") + 2)
    out = np.empty(10, "f4")
    c.copy_to(out)
    assert out[9] == 11
    c.free()


def test_arrays_are_sent_from_and_received_into_their_own_memory(
    dev: ct.Device, vadd_package: ct.Package
) -> None:
    mod = dev.load(vadd_package)
    a = np.ones(1 << 16, "f4")
    b = np.ones(1 << 16, "f4")
    c = np.zeros(1 << 16, "f4")
    mod["vadd"](a, b, c)
    stats = dev.copy_stats()
    # The last copy in was c's and the last copy out went into c: no staging buffer. (Writable
    # arrays all come back: the kernel may write any of them.)
    assert stats.last_in_source == c.ctypes.data
    assert stats.last_out_destination == c.ctypes.data
    assert stats.copies_out == 3 and stats.bytes_out == 3 * c.nbytes
    # A tensor round trip, in place both ways.
    t = dev.array(a)
    assert dev.copy_stats().last_in_source == a.ctypes.data
    t.copy_to(c)
    assert dev.copy_stats().last_out_destination == c.ctypes.data
    np.testing.assert_array_equal(c, a)


def test_read_only_inputs_are_not_written_back(dev: ct.Device, vadd_package: ct.Package) -> None:
    mod = dev.load(vadd_package)
    a = np.ones(100, "f4")
    a.flags.writeable = False
    b = np.ones(100, "f4")
    b.flags.writeable = False
    c = np.zeros(100, "f4")
    before = dev.copy_stats().copies_out
    mod["vadd"](a, b, c)
    assert dev.copy_stats().copies_out == before + 1
    assert c[0] == 2


def test_refuses_arrays_that_are_not_contiguous_instead_of_copying_them(
    dev: ct.Device, vadd_package: ct.Package
) -> None:
    mod = dev.load(vadd_package)
    a = np.ones((8, 8), "f4")
    with pytest.raises(ct.InvalidArgument, match="not contiguous"):
        mod["vadd"](a.T, a, np.zeros((8, 8), "f4"))
    with pytest.raises(ct.InvalidArgument, match="argument 0"):
        mod["vadd"]("a string", a, a)
    # Tensor copies too: a transpose, another size, another dtype; nothing is sent.
    t = dev.empty((8, 8), "f32")
    before = dev.copy_stats()
    with pytest.raises(ct.InvalidArgument, match="not contiguous"):
        t.copy_from(a.T)
    with pytest.raises(ct.InvalidArgument, match="element count"):
        t.copy_to(np.zeros(63, "f4"))
    with pytest.raises(ct.InvalidArgument, match="element count"):
        t.copy_from(np.zeros(64, "i4"))
    after = dev.copy_stats()
    assert (after.copies_in, after.copies_out) == (before.copies_in, before.copies_out)


def test_the_gil_is_released_while_a_remote_call_runs(
    dev: ct.Device, tmp_path: pathlib.Path
) -> None:
    # The kernel blocks until it reads a byte from a FIFO that only a second Python thread
    # writes. With the GIL held through the call, that thread never runs and the call ends by
    # its timeout instead.
    if os.uname().machine != "x86_64":
        pytest.skip("the FIFO kernel makes x86_64 system calls")
    fifo = tmp_path / "gate"
    os.mkfifo(fifo)
    source = r"""
#include "crosstune/kernel_abi.h"
static long sys(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}
static int32_t wait_gate(const ct_arg* args, int32_t n) {
  (void)args; (void)n;
  long fd = sys(2, (long)"PATH", 0, 0);  /* open(PATH, O_RDONLY): blocks until a writer */
  if (fd < 0) return 1;
  char c = 0;
  long got = sys(0, fd, (long)&c, 1);    /* read one byte */
  sys(3, fd, 0, 0);
  return got == 1 && c == 'g' ? 0 : 2;
}
static const ct_function kFns[] = {{"wait_gate", wait_gate, ""}};
CT_DEFINE_MODULE("llvm", kFns, 0)
""".replace("PATH", str(fifo))
    mod = dev.load(ct.build(source, device=dev, name="gate"))
    progress = []

    def open_the_gate() -> None:
        with open(fifo, "wb") as f:  # returns once the kernel has the FIFO open
            progress.append("opened")
            f.write(b"g")

    helper = threading.Thread(target=open_the_gate, daemon=True)
    helper.start()
    mod["wait_gate"](timeout=30)
    helper.join(5)
    assert progress == ["opened"]


def test_a_device_from_connect_without_an_address_is_a_local_server() -> None:
    with ct.connect() as d:
        assert d.server.startswith("127.0.0.1:")
        assert d.info()["arch"] == os.uname().machine
    assert not d.connected
