"""Whole models from Python: import an ONNX file written by the project's script, tune its
layers, compile it, run it on a real local server (and a leased one through a real tracker) and
compare with onnxruntime's answer."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import warnings
from typing import Any, Dict

import numpy as np
import pytest

import crosstune as ct
from conftest import BERT_INPUTS, BERT_OUTPUTS, Farm, ModelFiles, wait_for


def test_imports_a_model_with_its_inputs_outputs_and_tasks(small_model: ModelFiles) -> None:
    model = ct.import_onnx(small_model.onnx)
    assert model.name == "small"
    assert model.inputs == [{"name": "input", "shape": [1, 3, 16, 16], "dtype": "float32"}]
    assert [o["name"] for o in model.outputs] == ["probs"]
    assert [t["template"] for t in model.tasks] == ["conv2d"] * 4 + ["dense"]
    assert model.tasks[0]["layer"] == "stem"
    assert model.flops > 0
    assert model.summary["ops"]["Conv"] == 4
    assert "small" in repr(model)
    # A static shape is checked; a name for the records can be given.
    assert ct.import_onnx(small_model.onnx, {"input": (1, 3, 16, 16)}, name="s2").name == "s2"


def test_import_errors_are_named(small_model: ModelFiles, tmp_root: str) -> None:
    with pytest.raises(ct.NotFound):
        ct.import_onnx(os.path.join(tmp_root, "missing.onnx"))
    with pytest.raises(ct.InvalidArgument, match="input"):
        ct.import_onnx(small_model.onnx, {"input": (1, 3, 32, 32)})
    # The shapes and the budget are checked as --shape and --max-model-mb are.
    with pytest.raises(ct.InvalidArgument, match=r"shape of 'input' \(1,3,0,16\)"):
        ct.import_onnx(small_model.onnx, {"input": (1, 3, 0, 16)})
    with pytest.raises(ct.InvalidArgument, match="'input': no dimensions"):
        ct.import_onnx(small_model.onnx, {"input": ()})
    with pytest.raises(ct.InvalidArgument, match="max model size 0 MiB"):
        ct.import_onnx(small_model.onnx, max_model_mb=0)
    unsupported = ModelFiles(tmp_root, "unsupported")
    with pytest.raises(ct.InvalidArgument, match="not supported"):
        ct.import_onnx(unsupported.onnx)
    # The same list as `crosstune import --json` prints, without importing.
    found = ct.unsupported(unsupported.onnx)
    assert found["supported"] is False and found["opset"] == 13
    assert [(u["kind"], u["op"], u["nodes"]) for u in found["unsupported"]] == [
        ("operator", "Hardmax", ["hardmax"])]
    assert ct.unsupported(small_model.onnx)["unsupported"] == []
    with pytest.raises(ct.NotFound):
        ct.unsupported(os.path.join(tmp_root, "missing.onnx"))


def test_blocked_and_nchw_layouts_compute_the_same(dev: ct.Device, small_model: ModelFiles) -> None:
    model = ct.import_onnx(small_model.onnx)
    blocked = ct.compile(model, device=dev)
    nchw = ct.compile(model, device=dev, layouts="nchw")
    assert blocked.report["layouts"] == "blocked" and nchw.report["layouts"] == "nchw"
    x = small_model.input("input")
    outputs = []
    for pkg in (blocked, nchw):
        with dev.load_model(pkg) as net:
            (y,) = net(x)
            outputs.append(y)
    np.testing.assert_allclose(outputs[0], small_model.reference("probs"), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-7)
    with pytest.raises(ct.InvalidArgument, match="layouts"):
        ct.compile(model, device=dev, layouts="nhwc")


def test_runs_a_compiled_model_like_onnxruntime(dev: ct.Device, small_model: ModelFiles) -> None:
    model = ct.import_onnx(small_model.onnx)
    pkg = ct.compile(model, device=dev)
    assert pkg.report["tasks"] == 5 and pkg.report["tuned"] == 0
    assert pkg.target == dev.target()
    with dev.load_model(pkg) as net:
        assert net.info["nodes"] == pkg.report["nodes"]
        assert [i["name"] for i in net.inputs] == ["input"]
        x = small_model.input("input")
        net.set_input("input", x)
        net.run()
        y = net.get_output(0)
        np.testing.assert_allclose(y, small_model.reference("probs"), rtol=1e-4, atol=1e-6)
        # By name, and into a given array; calling the network does all three.
        by_name = np.zeros((1, 10), "f4")
        assert net.get_output("probs", out=by_name) is by_name
        np.testing.assert_array_equal(by_name, y)
        (again,) = net(x)
        np.testing.assert_array_equal(again, y)


def test_inputs_and_outputs_cross_without_copies(dev: ct.Device, small_model: ModelFiles) -> None:
    model = ct.import_onnx(small_model.onnx)
    with dev.load_model(ct.compile(model, device=dev)) as net:
        x = small_model.input("input")
        x.setflags(write=False)  # an input is only read
        net.set_input("input", x)
        assert dev.copy_stats().last_in_source == x.ctypes.data
        net.run()
        out = np.empty((1, 10), "f4")
        net.get_output(0, out=out)
        assert dev.copy_stats().last_out_destination == out.ctypes.data


def test_times_runs_and_profiles_every_node(dev: ct.Device, small_model: ModelFiles) -> None:
    model = ct.import_onnx(small_model.onnx)
    with dev.load_model(ct.compile(model, device=dev)) as net:
        net.set_input("input", small_model.input("input"))
        t = net.time(number=3, repeat=4)
        assert len(t.seconds_per_call) == 4 and t.median > 0
        profile = net.profile(number=2, repeat=2)
        assert len(profile) == net.info["nodes"]
        assert profile[0]["name"] == "stem" and profile[0]["op_type"] == "conv2d"
        assert all(n["median_s"] > 0 and n["in_run_median_s"] > 0 for n in profile)
        table = str(profile)
        assert "stem" in table and f"in {len(profile)} nodes" in table


def test_wrong_names_shapes_and_dtypes_are_named_and_the_model_goes_on(
    dev: ct.Device, small_model: ModelFiles
) -> None:
    model = ct.import_onnx(small_model.onnx)
    with dev.load_model(ct.compile(model, device=dev)) as net:
        x = small_model.input("input")
        with pytest.raises(ct.NotFound, match=r"no input 'data' \(its inputs: input\)"):
            net.set_input("data", x)
        with pytest.raises(ct.InvalidArgument, match="float64"):
            net.set_input("input", x.astype("f8"))
        with pytest.raises(ct.InvalidArgument, match="contiguous"):
            net.set_input("input", np.zeros((1, 3, 16, 32), "f4")[:, :, :, ::2])
        with pytest.raises(ct.InvalidArgument):
            net.set_input("input", [1.0, 2.0])
        net.set_input("input", x)
        net.run()
        with pytest.raises(ct.NotFound, match="probs"):
            net.get_output(3)
        with pytest.raises(ct.InvalidArgument, match="output 0 is 1x10 f32"):
            net.get_output(0, out=np.zeros((1, 10), "i4"))
        with pytest.raises(ct.InvalidArgument, match="read-only"):
            ro = np.zeros((1, 10), "f4")
            ro.setflags(write=False)
            net.get_output(0, out=ro)
        np.testing.assert_allclose(net.get_output(0), small_model.reference("probs"), rtol=1e-4,
                                   atol=1e-6)


def test_tunes_a_model_and_compiles_it_with_the_records(
    dev: ct.Device, small_model: ModelFiles, tmp_root: str
) -> None:
    model = ct.import_onnx(small_model.onnx)
    log = os.path.join(tmp_root, "small-model.jsonl")
    with pytest.raises(ct.InvalidArgument, match="needs a log"):
        ct.tune(model, trials=4, server=dev.server, progress=False)
    run = ct.tune(model, trials=6, round=3, server=dev.server, log=log, tuner="random",
                  number=1, repeat=1, min_repeat_ms=0, progress=False)
    assert run.report["workload"] == "small"
    assert len(run.records) == 6
    assert {r["workload"]["name"] for r in run.records} == {"small"}
    assert run.report["timing"] == {"number": 1, "repeat": 1, "min_repeat_ms": 0, "cooldown_ms": 0,
                                    "flush_cache": False}
    # No timing given: a network's layers are timed cold (caches flushed before each call).
    cold = ct.tune(model, trials=1, round=1, server=dev.server, tuner="random", progress=False,
                   log=os.path.join(tmp_root, "small-model-cold.jsonl"))
    assert cold.report["measured"] == 1
    assert cold.report["timing"] == {"number": 1, "repeat": 5, "min_repeat_ms": 0, "cooldown_ms": 0,
                                     "flush_cache": True}
    pkg = ct.compile(model, log=log, target=dev)
    assert pkg.tuned == 2  # two rounds of 3 trials: two tasks
    saved = pkg.save(pathlib.Path(tmp_root) / "small-tuned.ctpkg")
    assert saved.path.endswith("small-tuned.ctpkg") and saved.tuned == 2
    with dev.load_model(pathlib.Path(saved.path)) as net:
        (y,) = net(small_model.input("input"))
    np.testing.assert_allclose(y, small_model.reference("probs"), rtol=1e-4, atol=1e-6)


def test_compile_needs_a_target(small_model: ModelFiles) -> None:
    model = ct.import_onnx(small_model.onnx)
    with pytest.raises(ct.InvalidArgument, match="needs a device"):
        ct.compile(model)
    with pytest.raises(ct.InvalidArgument):
        ct.compile(model, target="llvm -mcpu=no-such-cpu")


def _cli(*args: str) -> "subprocess.CompletedProcess[str]":
    cli = os.environ.get("CROSSTUNE_CLI", "")
    if not cli:
        pytest.fail("no CROSSTUNE_CLI: run through ctest (python/tests/CMakeLists.txt)")
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=600)


def _same_compile(report: Dict[str, Any]) -> Dict[str, Any]:
    """A compile report less what differs between two compiles of one model: the package's
    path, its build id and the compile's wall time."""
    return {k: v for k, v in report.items() if k not in ("package", "build_id", "build_s")}


def test_the_cli_and_python_load_and_compile_through_the_same_calls(
    dev: ct.Device, small_model: ModelFiles, tmp_root: str
) -> None:
    # One model and one log through `crosstune import/compile` and ct.import_onnx/ct.compile:
    # the same objects, the same warnings (a line that is not a record, no record for this
    # target), the same target and kind of device asked from the same server.
    log = os.path.join(tmp_root, "front-doors.jsonl")
    other_target = {"v": 1, "task": {"template": "conv2d", "shape": [1, 3, 16, 16, 8, 3, 3, 1, 1]},
                    "target": "llvm -mtriple=aarch64-linux-gnu", "config": {"index": 0},
                    "error": "ok", "costs": [1e-3], "mean": 1e-3}
    with open(log, "w") as f:
        f.write("not JSON\n" + json.dumps(other_target) + "\n")
    imported = _cli("import", small_model.onnx, "--shape", "input=1,3,16,16", "--json")
    assert imported.returncode == 0, imported.stderr
    model = ct.import_onnx(small_model.onnx, {"input": (1, 3, 16, 16)})
    assert json.loads(imported.stdout) == model.summary

    for target, cli_target in (("auto", ["--target", "auto", "--server", dev.server]),
                               (dev.target(), ["--target", dev.target()])):
        out = os.path.join(tmp_root, "front-door-cli.ctpkg")
        compiled = _cli("compile", small_model.onnx, "--log", log, "-o", out, "--json",
                        *cli_target)
        assert compiled.returncode == 0, compiled.stderr
        cli_report = json.loads(compiled.stdout)
        cli_warnings = [line[len("crosstune: warning: "):] for line in compiled.stderr.splitlines()
                        if line.startswith("crosstune: warning: ")]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            pkg = ct.compile(model, log=log, target=target, device=dev,
                             out=os.path.join(tmp_root, "front-door-py.ctpkg"))
        py_warnings = [str(w.message) for w in caught if w.category is RuntimeWarning]
        assert len(cli_warnings) == 2, compiled.stderr
        assert "front-doors.jsonl:1: skipped a line that is not JSON" in cli_warnings[0]
        assert "none of its 1 records is for" in cli_warnings[1]
        assert py_warnings == cli_warnings == pkg.report["warnings"] == cli_report["warnings"]
        assert _same_compile(pkg.report) == _same_compile(cli_report)
        assert pkg.report["target"] == dev.target()
        info = dev.info()
        # "auto" asks the device, whose kind picks the records; a target string asks none.
        kind = f"{info['arch']}/{info['cpu_model']}" if target == "auto" else ""
        assert pkg.report["device_kind"] == kind


def test_tunes_and_runs_a_model_on_a_farm(farm: Farm, small_model: ModelFiles,
                                          tmp_root: str) -> None:
    farm.add_server()
    tracker = ct.connect_tracker(farm.address)
    model = ct.import_onnx(small_model.onnx)
    log = os.path.join(tmp_root, "small-farm.jsonl")
    run = ct.tune(model, trials=2, round=2, tracker=tracker, key="cpu", log=log, tuner="random",
                  number=1, repeat=1, min_repeat_ms=0, progress=False)
    assert {r["device"]["key"] for r in run.records} == {"cpu"}
    wait_for(lambda: tracker.query()["devices"][0]["state"] == "free", what="the tune's lease end")
    with tracker.request("cpu", timeout=60) as dev:
        pkg = ct.compile(model, log=log, target=dev)
        assert pkg.tuned == 1
        with dev.load_model(pkg) as net:
            (y,) = net(small_model.input("input"))
    np.testing.assert_allclose(y, small_model.reference("probs"), rtol=1e-4, atol=1e-6)


def test_a_bert_style_encoder_runs_and_matches_onnxruntime(dev: ct.Device,
                                                          bert_model: ModelFiles) -> None:
    # Token ids through Gather, the int64 mask cast to float at run time, position ids from
    # Shape and Range (folded), heads split by a Reshape to a shape from Shape/Gather/Concat,
    # batched MatMuls, Softmax, LayerNormalization, Erf's GELU, the pooler's Tanh.
    model = ct.import_onnx(bert_model.onnx)
    assert [i["name"] for i in model.inputs] == list(BERT_INPUTS)
    assert all(i["dtype"] == "int64" for i in model.inputs)
    # Every MatMul is the matmul template's: the 3-D activations times a weight (groups 1, the
    # weight packed at compile time: a fifth field 1), attention's batched products (groups:
    # batch x heads) and the pooler's 2-D one (no groups).
    shapes = [t["shape"] for t in model.tasks]
    assert any(len(s) == 5 and s[3:] == [1, 1] for s in shapes), model.tasks
    groups = [s[3] for s in shapes if len(s) == 4]
    assert groups and min(groups) > 1, model.tasks
    assert sum(t["count"] for t in model.tasks) == model.summary["compiled_ops"]["MatMul"]
    pkg = ct.compile(model, device=dev)
    assert pkg.report["untemplated"] == 0
    assert pkg.report["tasks"] == model.summary["compiled_ops"]["MatMul"]
    with dev.load_model(pkg) as net:
        outputs = net(*[bert_model.input(n) for n in BERT_INPUTS])
    assert len(outputs) == len(BERT_OUTPUTS)
    for got, name in zip(outputs, BERT_OUTPUTS):
        np.testing.assert_allclose(got, bert_model.reference(name), rtol=1e-3, atol=1e-4)


def test_its_copy_from_onnxruntimes_transformer_optimizer_matches_onnxruntime(
        dev: ct.Device, bert_ort_model: ModelFiles) -> None:
    # com.microsoft's EmbedLayerNormalization, SkipLayerNormalization and BiasGelu import as the
    # Gathers, Adds, LayerNormalization and Gelu they stand for.
    model = ct.import_onnx(bert_ort_model.onnx)
    assert model.summary["ops"]["LayerNormalization"] == 5
    assert model.summary["ops"]["Gelu"] == 2
    with dev.load_model(ct.compile(model, device=dev)) as net:
        outputs = net(*[bert_ort_model.input(n) for n in BERT_INPUTS])
    for got, name in zip(outputs, BERT_OUTPUTS):
        np.testing.assert_allclose(got, bert_ort_model.reference(name), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("mask,causal", [("none", False), ("lengths", True), ("ones", False),
                                         ("per-query", True)])
def test_com_microsoft_attention_matches_onnxruntime(dev: ct.Device, tmp_root: str, mask: str,
                                                     causal: bool) -> None:
    # The packed Q/K/V weights split into three MatMuls, the int32 key mask added as
    # onnxruntime adds it (mask_filter_value where a key is not attended), unidirectional as
    # the causal frontier; then SkipLayerNormalization (and its sum output) and FastGelu.
    args = ["--mask", mask, "--batch", "2", "--seq", "8", "--hidden", "32", "--heads", "2"]
    files = ModelFiles(tmp_root, "contrib-attention", args + (["--causal"] if causal else []),
                       ["--int-high", "mask=9"] if mask == "lengths" else [],
                       file=f"contrib_attention_{mask}_{int(causal)}")
    model = ct.import_onnx(files.onnx)
    assert model.summary["ops"]["Attention"] == 1
    with dev.load_model(ct.compile(model, device=dev)) as net:
        outputs = net(*[files.input(i["name"]) for i in model.inputs])
    for got, name in zip(outputs, ("y", "sum")):
        np.testing.assert_allclose(got, files.reference(name), rtol=1e-3, atol=1e-4)


def test_its_int8_copy_from_onnxruntimes_dynamic_quantizer_matches_onnxruntime(
        dev: ct.Device, bert_int8_model: ModelFiles) -> None:
    # DynamicQuantizeLinear on each MatMul's activations, MatMulInteger, the int32 sums cast to
    # float and scaled: the same integers as onnxruntime, so fp32's tolerance holds.
    model = ct.import_onnx(bert_int8_model.onnx)
    assert model.summary["ops"]["MatMulInteger"] > 0
    with dev.load_model(ct.compile(model, device=dev)) as net:
        outputs = net(*[bert_int8_model.input(n) for n in BERT_INPUTS])
    for got, name in zip(outputs, BERT_OUTPUTS):
        np.testing.assert_allclose(got, bert_int8_model.reference(name), rtol=1e-3, atol=1e-4)


def test_a_half_precision_model_runs_with_float16_at_its_edges(dev: ct.Device,
                                                             half_model: ModelFiles) -> None:
    # float16 weights widen to float32 at import; the input and output stay float16, cast at
    # the graph's edge, so the package takes and gives what the model declares.
    model = ct.import_onnx(half_model.onnx)
    assert model.inputs[0]["dtype"] == "float16"
    assert model.outputs[0]["dtype"] == "float16"
    with dev.load_model(ct.compile(model, device=dev)) as net:
        (y,) = net(half_model.input("input"))
    assert y.dtype == np.float16
    # onnxruntime computes this model in float32 between casts too: one half ulp apart at most.
    np.testing.assert_allclose(y.astype(np.float32), half_model.reference("probs").astype(np.float32),
                               rtol=2e-3, atol=1e-4)
