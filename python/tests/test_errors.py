"""Errors are exceptions of one class per C++ error code, with the code as an attribute, and each
kind comes from a real cause."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import crosstune as ct
from crosstune import _core


def test_every_error_code_has_its_class() -> None:
    codes = _core.error_codes()
    assert len(codes) == 17
    for value, name in codes:
        cls = getattr(ct, name)
        assert issubclass(cls, ct.Error) and cls.code == name
        with pytest.raises(cls) as e:
            _core.raise_error(value, f"a {name}")
        assert type(e.value) is cls and e.value.code == name and str(e.value) == f"a {name}"
    assert ct.DeviceLost is ct.Disconnected
    assert issubclass(ct.Timeout, TimeoutError) and issubclass(ct.InvalidArgument, ValueError)
    # The kinds of failed trials.
    for kind in ("WrongAnswer", "InvalidConfig", "BuildTimeout", "LoadError", "RunTimeout"):
        assert ct.ERRORS[kind].code == kind
    assert ct.ERRORS["RuntimeError"] is ct.KernelError and ct.ERRORS["DeviceLost"] is ct.Disconnected


def test_kernel_errors_crashes_and_timeouts(dev: ct.Device, vadd_package: ct.Package) -> None:
    mod = dev.load(vadd_package)
    with pytest.raises(ct.KernelError):
        mod["fails"]()
    with pytest.raises(ct.RemoteCrash) as crash:
        mod["crash"]()
    assert "SIGSEGV" in str(crash.value) or "signal" in str(crash.value)


def test_a_call_past_its_timeout(local_server: ct.LocalServer, vadd_package: ct.Package) -> None:
    with ct.connect(local_server.address) as d:
        with pytest.raises(ct.Timeout) as e:
            d.load(vadd_package)["spin"](timeout=0.3)
        assert e.value.code == "Timeout"


def test_a_package_for_another_architecture(dev: ct.Device, tmp_path: pathlib.Path) -> None:
    other = "rpi4" if os.uname().machine == "x86_64" else "x86-64"
    from conftest import VADD

    package = ct.build(VADD, other, out=tmp_path / "other.ctpkg")
    with pytest.raises(ct.WrongArch):
        dev.load(package)


def test_build_errors_carry_the_diagnostics() -> None:
    with pytest.raises(ct.BuildError, match="undeclared|error"):
        ct.build("int f(void) { return nope; }", "x86-64")
    with pytest.raises(ct.InvalidArgument, match="cortex-a999|cpu"):
        ct.build("int x;", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a999")
    with pytest.raises(ct.InvalidArgument, match="device"):
        ct.build("int x;")  # target auto without a device


def test_a_server_that_goes_away(vadd_package: ct.Package) -> None:
    server = ct.start_server()
    address = server.address
    d = ct.connect(address)
    server.stop()
    with pytest.raises(ct.Disconnected):
        d.info()
    with pytest.raises(ct.Disconnected):
        ct.connect(address, connect_timeout=2)


def test_authentication_and_limits(tmp_path: pathlib.Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    server = ct.start_server(args=["--auth-token-file", str(secret)])
    try:
        with pytest.raises(ct.Unauthorized):
            ct.connect(server.address)
        wrong = tmp_path / "wrong"
        wrong.write_text("other\n")
        with pytest.raises(ct.Unauthorized):
            ct.connect(server.address, auth_token_file=wrong)
        with ct.connect(server.address, auth_token_file=secret) as d:
            d.ping()
    finally:
        server.stop()
    limited = ct.start_server(args=["--max-sessions", "1", "--max-upload-bytes", "1000"])
    try:
        with ct.connect(limited.address) as d:
            with pytest.raises(ct.LimitExceeded):
                d.upload_bytes(b"x" * 5000, "big.bin")
            with pytest.raises(ct.Busy):
                ct.connect(limited.address)
            np.testing.assert_equal(d.ls(), [])
    finally:
        limited.stop()
