"""`crosstune tune` and tune() take the same options with the same defaults.

The command's options come from `crosstune tune --list-options` (every option, its names and the
default it holds), tune()'s from its signature. An option one of them gains without the other
fails here; so does a default that differs. Names that differ by convention are in the tables
below, each with why.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
from typing import Any, Dict, List

import pytest

import crosstune as ct

# The command's option (its first long name, or the positional's name) -> tune()'s parameter,
# where the names differ by more than dashes against underscores.
RENAMED = {
    "template": "template",
    "--model": "template",  # a Model from import_onnx() in the template's place
    "--server": "server",
    "--devices": "max_devices",
    "--pin": "pins",
    "--no-check": "check",  # check=False
    "--no-default": "include_default",  # include_default=False
    "--no-stop-losers": "stop_losers",  # stop_losers=False
    "--quiet": "progress",  # progress=False
}
# Options with no parameter: what the command prints is what tune() returns.
CLI_ONLY = {"--json": "tune() returns the report (TuneRun.report)"}
# Parameters with no option.
PYTHON_ONLY = {
    "on_record": "a callback for each record as it is measured",
    "run_id": "the run's name in the tracker and the records (the command makes one)",
}
# Flags that switch something off: their parameter defaults to it being on.
INVERTED = {"--no-check": True, "--no-default": True, "--no-stop-losers": True, "--quiet": True}
# Decided by the tuning setup when not given (the devices decide overlap; the task's kind the
# timing): the parameter's default is None, "not given".
DECIDED = {"--overlap", "--number", "--repeat", "--min-repeat-ms", "--cooldown-ms",
           "--flush-cache"}
# Defaults not comparable as values: the positional, and the model (a file there, an object here).
UNCOMPARED = {"template", "--model"}
EMPTY = {"", "[]", "{}"}


def cli_options() -> List[Dict[str, Any]]:
    cli = os.environ.get("CROSSTUNE_CLI_BIN", "")
    if not cli or not os.path.exists(cli):
        pytest.skip("no crosstune command (CROSSTUNE_CLI_BIN)")
    out = subprocess.run([cli, "tune", "--list-options"], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    options: List[Dict[str, Any]] = json.loads(out)
    assert options, out
    return options


def key(option: Dict[str, Any]) -> str:
    if option["positional"]:
        return str(option["positional"])
    longs = [n for n in option["names"] if n.startswith("--")]
    return str(longs[0] if longs else option["names"][0])


def parameter_of(cli_key: str) -> str:
    return RENAMED.get(cli_key, cli_key.lstrip("-").replace("-", "_"))


def same_default(cli: Dict[str, Any], py: Any) -> bool:
    text = cli["default"]
    if py is None or py == () or py == "" or py == []:
        return text in EMPTY
    if isinstance(py, bool):
        return text.lower() in {"true", "false"} and (text.lower() == "true") == py
    if isinstance(py, (int, float)):
        try:
            return float(text) == float(py)
        except ValueError:
            return False
    return bool(text == str(py))


def test_every_option_of_the_command_is_a_parameter_of_tune_and_back() -> None:
    options = cli_options()
    params = inspect.signature(ct.tune).parameters
    cli_keys = {key(o) for o in options}
    wanted = {parameter_of(k) for k in cli_keys if k not in CLI_ONLY}
    missing_in_python = sorted(k for k in cli_keys
                               if k not in CLI_ONLY and parameter_of(k) not in params)
    assert not missing_in_python, (
        f"`crosstune tune` has {missing_in_python} but tune() has no such parameter: add it "
        f"(or a row in RENAMED / CLI_ONLY of {__file__})")
    missing_in_cli = sorted(p for p in params if p not in wanted and p not in PYTHON_ONLY)
    assert not missing_in_cli, (
        f"tune() has {missing_in_cli} but `crosstune tune` has no such option: add it "
        f"(or a row in PYTHON_ONLY of {__file__})")
    # The tables name only what exists (a stale row hides nothing).
    assert set(RENAMED) <= cli_keys and set(CLI_ONLY) <= cli_keys
    assert set(PYTHON_ONLY) <= set(params)


def test_every_option_has_the_same_default_in_both() -> None:
    params = inspect.signature(ct.tune).parameters
    wrong = []
    for o in cli_options():
        k = key(o)
        if k in CLI_ONLY or k in UNCOMPARED:
            continue
        py = params[parameter_of(k)].default
        if k in INVERTED:
            ok = o["flag"] and py is INVERTED[k]
        elif k in DECIDED:
            ok = py is None
        elif o["flag"]:
            ok = py is False
        else:
            ok = same_default(o, py)
        if not ok:
            wrong.append(f"{k} [{o['default']}] against {parameter_of(k)}={py!r}")
    assert not wrong, "defaults differ: " + "; ".join(wrong)


def test_the_options_object_holds_the_tuning_setups_defaults() -> None:
    # _core.TuneOptions() is the library's TuneSetupOptions: tune()'s defaults are its.
    o = ct._core.TuneOptions()
    params = inspect.signature(ct.tune).parameters
    for name in ("trials", "tuner", "batch", "early_stop", "threads", "round", "target", "wait",
                 "timeout", "workers", "build_cache_max_mb", "build_timeout", "run_timeout_ms",
                 "seed", "objective", "layouts", "check", "include_default", "stop_losers",
                 "max_devices"):
        assert getattr(o, name) == params[name].default, name
    for name in ("overlap", "number", "repeat", "min_repeat_ms", "cooldown_ms", "flush_cache"):
        assert getattr(o, name) is None, name


def test_help_on_tune_names_every_parameter() -> None:
    doc = inspect.getdoc(ct.tune) or ""
    missing = [p for p in inspect.signature(ct.tune).parameters if f"``{p}" not in doc]
    assert not missing, f"tune()'s docstring does not name {missing}"
