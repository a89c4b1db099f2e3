"""Fixtures of the Python package's tests: real crosstune-servers (this machine's and the
aarch64 build under qemu-user) and a real crosstune-tracker, all on 127.0.0.1, port 0.

The programs come from the environment ctest sets (python/tests/CMakeLists.txt):
CROSSTUNE_TRACKER_BIN, CROSSTUNE_QEMU_AARCH64 and CROSSTUNE_SERVER_AARCH64; the package's own
crosstune-server otherwise.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pytest

import crosstune as ct

VADD = r"""
#include "crosstune/kernel_abi.h"
static float* F(const ct_arg* a, int i) { return (float*)a[i].value.v_tensor->data; }
static int64_t N(const ct_arg* a, int i) {
  int64_t n = 1;
  for (int d = 0; d < a[i].value.v_tensor->ndim; ++d) n *= a[i].value.v_tensor->shape[d];
  return n;
}
static int32_t vadd(const ct_arg* a, int32_t n) {
  if (n != 3) return 1;
  for (int64_t i = 0; i < N(a, 2); ++i) F(a, 2)[i] = F(a, 0)[i] + F(a, 1)[i];
  return 0;
}
static int32_t scale(const ct_arg* a, int32_t n) {
  if (n != 2) return 1;
  for (int64_t i = 0; i < N(a, 0); ++i) F(a, 0)[i] *= (float)a[1].value.v_float64;
  return 0;
}
static int32_t noop(const ct_arg* a, int32_t n) { (void)a; (void)n; return 0; }
static int32_t fails(const ct_arg* a, int32_t n) { (void)a; (void)n; return 3; }
static int32_t crash(const ct_arg* a, int32_t n) { (void)a; (void)n; *(volatile int*)0 = 1; return 0; }
static int32_t spin(const ct_arg* a, int32_t n) { (void)a; (void)n; for (volatile int i = 0;; ++i) {} return 0; }
static const ct_function kFns[] = {
  {"vadd", vadd, "ttt"}, {"scale", scale, "tf"}, {"noop", noop, ""}, {"fails", fails, ""},
  {"crash", crash, ""}, {"spin", spin, ""}};
CT_DEFINE_MODULE("llvm", kFns, 0)
"""


def wait_for(condition: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Polls `condition` until it is true (returns its value) or fails the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture(scope="session")
def tmp_root() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="crosstune-py-") as d:
        yield d


@pytest.fixture(scope="session")
def local_server() -> Iterator[ct.LocalServer]:
    server = ct.start_server()
    yield server
    server.stop()


@pytest.fixture()
def dev(local_server: ct.LocalServer) -> Iterator[ct.Device]:
    with ct.connect(local_server.address) as d:
        yield d


@pytest.fixture(scope="session")
def vadd_package(local_server: ct.LocalServer, tmp_root: str) -> ct.Package:
    with ct.connect(local_server.address) as d:
        return ct.build(VADD, device=d, out=os.path.join(tmp_root, "vadd.ctpkg"), name="vadd")


def tracker_bin() -> str:
    path = os.environ.get("CROSSTUNE_TRACKER_BIN", "")
    if not path or not os.path.exists(path):
        pytest.skip("no crosstune-tracker (CROSSTUNE_TRACKER_BIN)")
    return path


class Farm:
    """A tracker and servers registered with it under key 'cpu'."""

    def __init__(self) -> None:
        self.tracker = ct.start_server(
            [tracker_bin(), "--host", "127.0.0.1", "--port", "0", "--http-port", "0",
             "--startup-grace-s", "0", "--heartbeat-ms", "200"]
        )
        self.address = self.tracker.address
        self.servers: list[ct.LocalServer] = []

    def add_server(self, key: str = "cpu") -> ct.LocalServer:
        server = ct.start_server(args=["--tracker", self.address, "--key", key])
        self.servers.append(server)
        farm = ct.connect_tracker(self.address)
        wait_for(lambda: len(farm.query()["devices"]) == len(self.servers), what="registration")
        return server

    def stop(self) -> None:
        for s in self.servers:
            s.stop()
        self.tracker.stop()


@pytest.fixture()
def farm() -> Iterator[Farm]:
    f = Farm()
    try:
        yield f
    finally:
        f.stop()


class ModelFiles:
    """A model written by scripts/make-model.py and onnxruntime's answer for a seeded input
    (scripts/onnx-reference.py), both run with the model venv's Python."""

    def __init__(self, root: str, name: str, args: Sequence[str] = (),
                 reference_args: Sequence[str] = (), file: str = "") -> None:
        python = os.environ.get("CROSSTUNE_MODEL_PYTHON", "")
        scripts = os.environ.get("CROSSTUNE_SCRIPTS", "")
        if not (python and os.path.exists(python) and scripts):
            pytest.fail("no model venv (CROSSTUNE_MODEL_PYTHON, CROSSTUNE_SCRIPTS): run "
                        "scripts/install-deps.sh")
        file = file or name
        self.dir = os.path.join(root, file)
        os.makedirs(self.dir, exist_ok=True)
        self.onnx = os.path.join(self.dir, file + ".onnx")
        subprocess.run([python, os.path.join(scripts, "make-model.py"), name, *args, "-o",
                        self.onnx], check=True, capture_output=True)
        self.refs = os.path.join(self.dir, "ref")
        subprocess.run([python, os.path.join(scripts, "onnx-reference.py"), self.onnx, "--seed",
                        "1", "--write-inputs", self.dir, "--out-dir", self.refs,
                        *reference_args], check=True, capture_output=True)

    def input(self, name: str) -> Any:
        return np.load(os.path.join(self.dir, name + ".npy"))

    def reference(self, name: str) -> Any:
        return np.load(os.path.join(self.refs, name + ".npy"))


@pytest.fixture(scope="session")
def small_model(tmp_root: str) -> ModelFiles:
    return ModelFiles(tmp_root, "small")


@pytest.fixture(scope="session")
def half_model(tmp_root: str) -> ModelFiles:
    """The small model exported in half precision: float16 weights, input and output."""
    return ModelFiles(tmp_root, "small", ["--fp16"], file="small_fp16")


# A BERT-style encoder (make-model.py bert: int64 token ids, mask and token types in; the last
# hidden state and the pooled output out), its token ids seeded below its vocabulary.
BERT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
BERT_OUTPUTS = ("last_hidden_state", "pooler_output")


@pytest.fixture(scope="session")
def bert_model(tmp_root: str) -> ModelFiles:
    return ModelFiles(tmp_root, "bert", reference_args=["--int-high", "input_ids=1000"])


@pytest.fixture(scope="session")
def bert_ort_model(tmp_root: str) -> ModelFiles:
    """The encoder as onnxruntime's transformer optimizer rewrites it: com.microsoft's
    EmbedLayerNormalization, SkipLayerNormalization and BiasGelu."""
    return ModelFiles(tmp_root, "bert", ["--ort-optimize"], ["--int-high", "input_ids=1000"],
                      file="bert_ort")


@pytest.fixture(scope="session")
def bert_int8_model(tmp_root: str) -> ModelFiles:
    """Its int8 copy as onnxruntime's quantize_dynamic writes it, and onnxruntime's answer with
    its graph optimizations off: its fused int8 kernels (MatMulIntegerToFloat) round differently
    from the nodes ONNX defines, 0.03 apart from its own unfused run on this model."""
    return ModelFiles(tmp_root, "bert", ["--int8", "dynamic"],
                      ["--int-high", "input_ids=1000", "--no-optimize"], file="bert_int8")
