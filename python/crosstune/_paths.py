"""Where the package's programs are: crosstune/bin beside this file, in a wheel and in a build
tree alike (the build links them there)."""

from __future__ import annotations

import os

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def server_binary() -> str:
    """The crosstune-server the package starts for local devices."""
    return os.path.join(_BIN, "crosstune-server")


def build_worker_binary() -> str:
    """The builder's worker program (crosstune-build-worker)."""
    return os.path.join(_BIN, "crosstune-build-worker")


def use_package_programs() -> None:
    """Makes the builder start the package's worker program, unless the environment names one."""
    worker = build_worker_binary()
    if "CROSSTUNE_BUILD_WORKER" not in os.environ and os.path.exists(worker):
        os.environ["CROSSTUNE_BUILD_WORKER"] = worker
