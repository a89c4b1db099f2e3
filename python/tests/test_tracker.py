"""Devices through a real crosstune-tracker: leases as context managers, queues, query."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from typing import Any

import numpy as np
import pytest

import crosstune as ct
from conftest import Farm, wait_for


def test_a_leased_device_is_used_and_released_on_exit(farm: Farm, vadd_package: ct.Package) -> None:
    farm.add_server()
    tracker = ct.connect_tracker(farm.address)
    with tracker.request("cpu", timeout=30) as dev:
        assert dev.name == farm.servers[0].address
        assert tracker.query()["devices"][0]["state"] != "free"
        mod = dev.load(vadd_package)
        a = np.ones(8, "f4")
        c = np.zeros(8, "f4")
        mod["vadd"](a, a, c)
        assert c[0] == 2
        # Held: another request waits in vain.
        with pytest.raises(ct.Timeout):
            tracker.request("cpu", timeout=0.5)
    # Released on exit: granted again at once.
    with tracker.request("cpu", timeout=5) as again:
        again.ping()
    host, port = farm.address.rsplit(":", 1)
    assert ct.connect_tracker(host, int(port)).address == farm.address


def test_a_key_no_device_has(farm: Farm) -> None:
    farm.add_server()
    with pytest.raises(ct.NoDevice):
        ct.connect_tracker(farm.address).request("gpu", timeout=5)


def test_the_gil_is_released_while_waiting_in_the_queue(farm: Farm) -> None:
    # The device is held; the main thread waits for it in the queue while a second Python thread
    # sees the wait on the tracker and releases the holder's lease. With the GIL held through the
    # wait, that thread never runs and the request ends by its timeout.
    farm.add_server()
    tracker = ct.connect_tracker(farm.address)
    holder = tracker.request("cpu", timeout=30)
    events = []

    def release_when_queued() -> None:
        wait_for(lambda: any(k["queue"] for k in tracker.query()["keys"]), what="a queued request")
        events.append("released")
        holder.close()

    helper = threading.Thread(target=release_when_queued, daemon=True)
    helper.start()
    queued = []
    with tracker.request("cpu", timeout=20, on_queue=lambda pos, n, note: queued.append(pos)) as dev:
        dev.ping()
    helper.join(5)
    assert events == ["released"]


def test_the_onnx_backend_runs_on_a_device_leased_from_the_tracker(farm: Farm,
                                                                   tmp_path: Any) -> None:
    # ONNX's own node tests through crosstune.onnx_backend with device "KEY@HOST:PORT": the
    # backend waits in the key's queue, compiles for the device it is lent and runs there; the
    # tracker's record of its sessions shows the lease. A key no device has is refused by name.
    farm.add_server("board")
    python = os.environ.get("CROSSTUNE_MODEL_PYTHON", "")
    scripts = os.environ.get("CROSSTUNE_SCRIPTS", "")
    if not (python and os.path.exists(python) and scripts):
        pytest.fail("no model venv (CROSSTUNE_MODEL_PYTHON, CROSSTUNE_SCRIPTS): run "
                    "scripts/install-deps.sh")

    def conformance(device: str, out: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run(
            [python, os.path.join(scripts, "onnx-conformance.py"), "--include",
             "^test_(relu|add)$", "--no-light", "--no-onnxruntime", "--jobs", "1", "--device",
             device, "--check", "--json", out], capture_output=True, text=True, timeout=300)

    run = conformance(f"board@{farm.address}", str(tmp_path / "board.json"))
    assert run.returncode == 0, run.stdout + run.stderr
    with open(tmp_path / "board.json") as f:
        results = json.load(f)["tests"]["crosstune"]
    assert sorted((r["name"], r["status"]) for r in results) == [
        ("test_add", "passed"), ("test_relu", "passed")]
    # The tracker granted the key's queue a lease (the backend's), now ended.
    farm_state = ct.connect_tracker(farm.address).query()
    assert [k["grants"] for k in farm_state["keys"] if k["key"] == "board"] == [1], farm_state
    assert [h["device"] for h in farm_state["history"]] == [farm.servers[0].address]

    run = conformance(f"gpu@{farm.address}", str(tmp_path / "gpu.json"))
    assert run.returncode == 1
    with open(tmp_path / "gpu.json") as f:
        why = json.load(f)["tests"]["crosstune"][0]["why"]
    assert "gpu" in why, why


def test_a_second_run_resumes_from_the_farms_records(farm: Farm) -> None:
    """tune(records="tracker"): the first run's records go to the farm, and a second run with
    no log of its own takes them instead of timing those configs again."""
    farm.add_server()
    args: dict[str, Any] = dict(shape=(32, 32, 32), tuner="random", batch=4, repeat=1,
                                min_repeat_ms=0, tracker=farm.address, key="cpu",
                                records="tracker", progress=False)
    first = ct.tune("matmul", trials=8, **args)
    assert first.report["farm"]["resumed"] == 0
    assert first.report["farm"]["unsent"] == 0
    assert len(first.records) == 8
    second = ct.tune("matmul", trials=12, **args)
    assert second.report["farm"]["device_kind"] == first.report["farm"]["device_kind"]
    assert second.report["farm"]["resumed"] == 8
    assert len(second.records) == 4  # only what the farm did not have
    assert second.report["trials_in_log"] == 12
