"""tune() against real devices (a local server, given servers, a tracker), its records and logs,
replay, and Ctrl-C."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
from typing import Any, Dict

import numpy as np
import pytest

import crosstune as ct
from conftest import Farm, wait_for

QUICK = dict(number=1, repeat=1, min_repeat_ms=0, tuner="random", batch=4, progress=False)


def test_tunes_on_a_local_server_and_keeps_the_records(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "mm.jsonl"
    seen = []
    progress = []
    run = ct.tune("matmul", shape=(16, 16, 16), trials=6, log=log, on_record=seen.append,
                  **{**QUICK, "progress": progress.append})
    assert len(run.records) == 6 and seen == run.records
    assert run.report["measured"] == 6 and run.report["resumed"] == 0
    assert run.best is not None and run.best["error"] == "ok" and run.best_gflops() > 0
    assert run.default is not None  # the template's default config was measured first
    assert run.report["task"]["template"] == "matmul" and run.report["task"]["shape"] == [16, 16, 16]
    assert run.report["best"]["gflops"] == run.best["gflops"]
    assert progress and progress[-1]["done"] == 6 and progress[-1]["total"] == 6
    on_disk = ct.read_log(log)
    assert [r["config"] for r in on_disk] == [r["config"] for r in run.records]
    assert ct.best_records(log)[0]["mean"] == min(r["mean"] for r in on_disk if r["error"] == "ok")
    # The same log again: resumes, measures only the difference.
    more = ct.tune("matmul", shape="16,16,16", trials=8, log=log, **QUICK)
    assert more.report["resumed"] == 6 and more.report["measured"] == 2 and len(more.records) == 2
    # The log summarised and plotted as `crosstune log summary|plot` do.
    (summary,) = ct.summarize_log(log)
    assert summary["trials"] == 8 and summary["ok"] == sum(r["error"] == "ok" for r in ct.read_log(log))
    assert summary["best"]["mean_s"] == ct.best_records(log)[0]["mean"]
    svg = more.svg()
    assert svg.text.startswith("<svg") and svg._repr_svg_() == svg.text
    svg.save(tmp_path / "mm.svg")
    # This run's best-so-far curve, and the same drawn with matplotlib.
    trials, best = more.curve()
    assert trials == [1, 2] and best == sorted(best)
    assert best[-1] == max([r["gflops"] for r in more.records if r["error"] == "ok"] + [0.0])
    import matplotlib

    matplotlib.use("Agg")
    (line,) = more.plot().get_lines()
    assert list(line.get_xdata()) == trials and list(line.get_ydata()) == best
    assert (tmp_path / "mm.svg").read_text() == ct.plot_log(log).text
    # The best config exported as a package, deployed and checked against numpy.
    package = ct.export(log, tmp_path / "mm.ctpkg")
    assert package.manifest["tuning"]["record"]["mean"] == ct.best_records(log)[0]["mean"]
    with ct.connect() as dev:
        matmul = dev.load(package)[next(iter(package.functions))]
        x = np.random.rand(16, 16).astype("f4")
        y = np.random.rand(16, 16).astype("f4")
        z = np.zeros((16, 16), "f4")
        matmul(x, y, z)
        np.testing.assert_allclose(z, x @ y, rtol=1e-4, atol=1e-4)
    with pytest.raises(ct.NotFound, match="no successful record of task 'conv2d"):
        ct.export(log, tmp_path / "no.ctpkg", task="conv2d 1,1,1,1,1,1,1,1,0 float32")
    # The log as a replay table: every tuner finds its best within the table.
    result = ct.replay(log, tuners=["random", "xgb"], seeds=3, batch=2)
    assert result["valid_count"] == 8
    for name in ("random", "xgb"):
        assert result["tuners"][name]["reached"] == 3
    # Warm-started from a table of the same kernel (here the same log): xgb takes its points.
    warm = ct.replay(log, tuners=["xgb"], seeds=3, batch=2, warm_from=log)
    assert warm["warm_from"]["points"] == 8
    assert warm["warm"]["xgb"]["prior"]["taken_by_runs"] == 3
    assert warm["warm"]["xgb"]["median"] == 1  # the prior's best is the table's


def test_tunes_on_given_servers_and_through_a_tracker(
    farm: Farm, local_server: ct.LocalServer
) -> None:
    run = ct.tune("matmul", shape=(8, 8, 8), trials=3, server=local_server.address, **QUICK)
    assert {r["device"]["name"] for r in run.records} == {local_server.address}
    farm.add_server()
    tracker = ct.connect_tracker(farm.address)
    run = ct.tune("matmul", shape=(8, 8, 8), trials=3, tracker=tracker, key="cpu",
                  target="x86-64" if os.uname().machine == "x86_64" else "auto", **QUICK)
    assert len(run.records) == 3 and run.records[0]["device"]["key"] == "cpu"
    # The lease went back at the end.
    wait_for(lambda: tracker.query()["devices"][0]["state"] == "free", what="the lease's end")


def cli_bin() -> str:
    path = os.environ.get("CROSSTUNE_CLI_BIN", "")
    if not path or not os.path.exists(path):
        pytest.skip("no crosstune command (CROSSTUNE_CLI_BIN)")
    return path


def test_tunes_on_this_machine_as_the_command_does(tmp_path: pathlib.Path) -> None:
    # The same run through `crosstune tune` and tune(): one setup, so the same CPU split (the
    # server on the kernel's CPUs, the builds on the others) and the same overlap decision.
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: builds and runs take turns, unpinned")
    args = ["tune", "matmul", "--shape", "16,16,16", "--tuner", "random", "--trials", "3",
            "--batch", "3", "--repeat", "1", "--min-repeat-ms", "0", "--quiet", "--json"]
    for extra, kwargs in (([], {}), (["--no-overlap"], {"overlap": False})):
        out = subprocess.run([cli_bin(), *args, *extra, "--log", str(tmp_path / "cli.jsonl")],
                             check=True, capture_output=True, text=True, timeout=300).stdout
        cli = json.loads(out)
        before = os.sched_getaffinity(0)
        run = ct.tune("matmul", shape=(16, 16, 16), trials=3, log=tmp_path / "py.jsonl",
                      **{**QUICK, "batch": 3}, **kwargs)
        assert os.sched_getaffinity(0) == before  # this thread's CPUs given back
        assert run.report["overlap"] == cli["overlap"] == (not extra), (run.report, cli)
        assert run.report.get("cpus") == cli.get("cpus"), (run.report, cli)
        if not extra:
            assert run.report["cpus"]["kernel"] == str(max(before)) and run.report["cpus"]["build"]
        (tmp_path / "cli.jsonl").unlink()
        (tmp_path / "py.jsonl").unlink()


def test_a_build_cache_serves_the_second_run(tmp_path: pathlib.Path) -> None:
    cache = tmp_path / "cache"
    first = ct.tune("matmul", shape=(16, 16, 16), trials=4, build_cache=cache, seed=3,
                    include_default=False, **QUICK)
    second = ct.tune("matmul", shape=(16, 16, 16), trials=4, build_cache=cache, seed=3,
                     include_default=False, **QUICK)
    assert first.report["build_cache"]["hits"] == 0
    assert first.report["build_cache"]["entries"] >= 1
    assert first.report["build_cache"]["dir"] == str(cache)
    assert second.report["build_cache"]["hits"] == second.report["build_cache"]["builds"] > 0


def test_a_build_key_with_no_free_worker_builds_here_and_says_so(farm: Farm) -> None:
    farm.add_server()
    with pytest.warns(RuntimeWarning, match="no build worker of key 'builders'"):
        run = ct.tune("matmul", shape=(8, 8, 8), trials=2, tracker=farm.address, key="cpu",
                      build_key="builders",
                      target="x86-64" if os.uname().machine == "x86_64" else "auto", **QUICK)
    assert [w["name"] for w in run.report["build_workers"]] == ["local"]
    assert run.report["build_workers"][0]["builds"] >= 1


def test_refusals_name_what_is_wrong(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ct.InvalidArgument, match="build key \\(builders\\) needs a tracker"):
        ct.tune("matmul", shape=(8, 8, 8), trials=1, build_key="builders", **QUICK)
    with pytest.raises(ct.InvalidArgument, match="build cache budget -5 MB"):
        ct.tune("matmul", shape=(8, 8, 8), trials=1, build_cache=tmp_path / "c",
                build_cache_max_mb=-5, **QUICK)
    (tmp_path / "file").write_text("")
    with pytest.raises(ct.InvalidArgument, match="build cache .*file"):
        ct.tune("matmul", shape=(8, 8, 8), trials=1, build_cache=tmp_path / "file", **QUICK)
    with pytest.raises(ct.InvalidArgument, match="needs a device key"):
        ct.tune("matmul", shape=(8, 8, 8), trials=1, tracker="127.0.0.1:1", **QUICK)
    with pytest.raises(ct.InvalidArgument, match="shape"):
        ct.tune("matmul", trials=1)
    with pytest.raises(ct.InvalidArgument):
        ct.tune("nothing", shape=(1, 2, 3), trials=1, **QUICK)
    with pytest.raises(ct.NotFound, match="no knob 'no_such_knob'"):
        ct.tune("matmul", shape=(8, 8, 8), trials=1, pins={"no_such_knob": 1}, **QUICK)
    with pytest.raises(ct.InvalidArgument, match="log"):
        ct.tune(workload="resnet50", trials=1, **QUICK)
    assert "matmul" in ct.templates()


def test_a_run_whose_trials_all_fail_raises_the_commonest_kind(tmp_path: pathlib.Path) -> None:
    # More threads than the device has cores: every config is refused before compiling.
    log = tmp_path / "refused.jsonl"
    with pytest.raises(ct.InvalidConfig) as e:
        ct.tune("matmul", shape=(64, 64, 64), trials=2, log=log, threads=4096,
                **{**QUICK, "batch": 2})
    assert "all 2 trials failed" in str(e.value) and e.value.code == "InvalidConfig"
    assert {r["error"] for r in ct.read_log(log)} == {"InvalidConfig"}


def test_ctrl_c_stops_after_the_batch_and_keeps_its_records(tmp_path: pathlib.Path) -> None:
    # A real SIGINT to a Python process in tune(): it stops after the batch it is in, every
    # finished record is in the log, and KeyboardInterrupt reaches the script.
    log = tmp_path / "int.jsonl"
    script = textwrap.dedent(f"""
        import crosstune as ct
        try:
            ct.tune("matmul", shape=(24, 24, 24), trials=400, log={str(log)!r}, tuner="random",
                    batch=4, number=1, repeat=1, min_repeat_ms=0, include_default=False,
                    progress=False)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= 5, 120,
                 "the first records")
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert out.strip() == "interrupted"
    records = ct.read_log(log)
    assert 5 <= len(records) < 400
    assert len(records) % 4 == 0  # whole batches
    # Resumes from them.
    run = ct.tune("matmul", shape=(24, 24, 24), trials=len(records) + 2, log=log,
                  include_default=False, **QUICK)
    assert run.report["resumed"] == len(records) and run.report["measured"] == 2


def test_progress_bar_prints_a_plain_line_without_tqdm(capsys: pytest.CaptureFixture[str]) -> None:
    from crosstune._progress import ProgressBar

    bar = ProgressBar("matmul 8,8,8", use_tqdm=False)
    p = dict(done=4, total=8, measured=4, errors={"WrongAnswer": 1}, best_gflops=1.5, devices=1,
             devices_busy=1, elapsed_s=1.0, rate=4.0, batch_end=True)
    bar.update(p)
    bar.close()
    err = capsys.readouterr().err
    assert "tune matmul 8,8,8: 4/8 trials, best 1.50 GFLOP/s, errors: WrongAnswer 1" in err


def test_records_are_plain_json(tmp_path: pathlib.Path) -> None:
    run = ct.tune("matmul", shape=(8, 8, 8), trials=2, **QUICK)
    json.dumps(run.records)
    json.dumps(run.report)


def test_records_have_exactly_the_typed_fields(tmp_path: pathlib.Path) -> None:
    """ct.Record and its parts name every key a record has, and a record has every required one:
    a field the tuner adds or drops fails here until the TypedDict follows."""
    log = tmp_path / "typed.jsonl"
    run = ct.tune("matmul", shape=(8, 8, 8), trials=2, threads=2, log=log, **QUICK)
    parts = {"task": ct.RecordTask, "device": ct.RecordDevice, "config": ct.RecordConfig}
    for r in run.records + ct.read_log(log) + ct.best_records(log):
        plain: Dict[str, Any] = dict(r)
        for typed, value in [(ct.Record, plain)] + [(t, plain[k]) for k, t in parts.items()]:
            keys = set(value)
            assert typed.__required_keys__ <= keys, (typed.__name__, keys)
            assert keys <= typed.__required_keys__ | typed.__optional_keys__, (typed.__name__, keys)
        assert r["task"]["threads"] == 2 and isinstance(r["gflops"], float)
