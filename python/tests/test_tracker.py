"""Devices through a real crosstune-tracker: leases as context managers, queues, query."""

from __future__ import annotations

import threading

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
