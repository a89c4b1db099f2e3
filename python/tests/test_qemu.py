"""The aarch64 crosstune-server under qemu-user as a remote board: build for its target, load,
call and time, a model compiled for it and run there, and a package for this machine refused
with WrongArch."""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np
import pytest

import crosstune as ct
from conftest import BERT_INPUTS, BERT_OUTPUTS, VADD, ModelFiles


@pytest.fixture(scope="module")
def board() -> Iterator[ct.Device]:
    qemu = os.environ.get("CROSSTUNE_QEMU_AARCH64", "")
    server = os.environ.get("CROSSTUNE_SERVER_AARCH64", "")
    if not (qemu and os.path.exists(qemu) and server and os.path.exists(server)):
        pytest.skip("no qemu-aarch64 or aarch64 crosstune-server (CROSSTUNE_QEMU_AARCH64, "
                    "CROSSTUNE_SERVER_AARCH64)")
    local = ct.start_server([qemu, "-L", "/usr/aarch64-linux-gnu", server, "--host", "127.0.0.1",
                             "--port", "0"], timeout=60)
    try:
        with ct.connect(local.address, timeout=120) as dev:
            yield dev
    finally:
        local.stop()


def test_builds_for_the_board_and_runs_there(board: ct.Device) -> None:
    info = board.info()
    assert info["arch"] == "aarch64"
    target = board.target()
    assert "aarch64-linux-gnu" in target
    mod = board.load(ct.build(VADD, device=board, name="vadd"))
    a = np.random.rand(1000).astype("f4")
    b = np.random.rand(1000).astype("f4")
    c = np.zeros(1000, "f4")
    mod["vadd"](a, b, c)
    np.testing.assert_array_equal(c, a + b)
    t = mod.time("vadd", a, b, c, number=2, repeat=2)
    assert len(t.seconds_per_call) == 2
    with pytest.raises(ct.WrongArch):
        board.load(ct.build(VADD, "x86-64", name="host"))


def test_tunes_on_the_board(board: ct.Device) -> None:
    run = ct.tune("matmul", shape=(8, 8, 8), trials=2, server=board.server, tuner="random",
                  batch=2, number=1, repeat=1, min_repeat_ms=0, progress=False, timeout=120)
    assert run.report["target"].startswith("llvm -mtriple=aarch64")
    assert run.best is not None


def test_runs_a_model_on_the_board(board: ct.Device, small_model: ModelFiles) -> None:
    model = ct.import_onnx(small_model.onnx)
    pkg = ct.compile(model, device=board)
    assert "aarch64-linux-gnu" in pkg.target
    with board.load_model(pkg) as net:
        (y,) = net(small_model.input("input"))
    np.testing.assert_allclose(y, small_model.reference("probs"), rtol=1e-4, atol=1e-6)


def test_runs_a_bert_style_encoder_on_the_board(board: ct.Device, bert_model: ModelFiles) -> None:
    pkg = ct.compile(ct.import_onnx(bert_model.onnx), device=board)
    with board.load_model(pkg) as net:
        outputs = net(*[bert_model.input(n) for n in BERT_INPUTS])
    for got, name in zip(outputs, BERT_OUTPUTS):
        np.testing.assert_allclose(got, bert_model.reference(name), rtol=1e-3, atol=1e-4)
