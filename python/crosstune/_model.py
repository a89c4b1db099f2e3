"""Whole models: import an ONNX file, compile it with the tuned configs of a log into one
package, and run it on a device's graph executor (set inputs, run, read outputs, time, profile)."""

from __future__ import annotations

import atexit
import json
import os
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Type, Union

import numpy as np

from . import _core
from ._build import Package, _scratch

if TYPE_CHECKING:
    from ._device import Device

PathLike = Union[str, "os.PathLike[str]"]

# compile()'s build workers are started at its first call and shared by the later ones; they end
# here, before the interpreter tears the module down.
atexit.register(_core.release_shared_builders)


class Model:
    """An ONNX model imported and put through the compiler's passes (:func:`import_onnx`):
    what :func:`tune` tunes and :func:`compile` compiles."""

    def __init__(self, handle: _core.ImportedModel) -> None:
        self._handle = handle
        summary: Dict[str, Any] = json.loads(handle.summary_json())
        #: ``crosstune import --json``'s object: inputs, outputs, opset, ops (as written),
        #: compiled_ops (after the passes), tasks, params, params_mb, flops, activation_mb.
        self.summary = summary

    @property
    def name(self) -> str:
        """The model's name (its file's stem unless given): the workload name its records carry."""
        return self._handle.name

    @property
    def path(self) -> str:
        """The ONNX file it was imported from."""
        return self._handle.path

    @property
    def inputs(self) -> List[Dict[str, Any]]:
        """``[{"name", "shape", "dtype"}, ...]`` of the graph's inputs, in order."""
        inputs: List[Dict[str, Any]] = self.summary["inputs"]
        return inputs

    @property
    def outputs(self) -> List[Dict[str, Any]]:
        """``[{"name", "shape", "dtype"}, ...]`` of the graph's outputs, in order."""
        outputs: List[Dict[str, Any]] = self.summary["outputs"]
        return outputs

    @property
    def tasks(self) -> List[Dict[str, Any]]:
        """The distinct tunable layers: ``[{"layer", "template", "shape", "count"}, ...]``."""
        tasks: List[Dict[str, Any]] = self.summary["tasks"]
        return tasks

    @property
    def flops(self) -> float:
        """Floating-point operations of one run (multiply-adds count twice)."""
        return float(self.summary["flops"])

    def __repr__(self) -> str:
        return (
            f"<crosstune.Model {self.name}: {sum(self.summary['ops'].values())} ops, "
            f"{len(self.tasks)} tasks, {self.summary['params_mb']:.1f} MB params>"
        )


def import_onnx(
    path: PathLike,
    shapes: Optional[Mapping[str, Sequence[int]]] = None,
    *,
    name: Optional[str] = None,
    max_model_mb: int = 4096,
) -> Model:
    """Imports an ONNX model (``crosstune import``: the same C++ call) and returns the
    :class:`Model`.

    ``shapes`` gives an input's dimensions (``{"input": (1, 3, 224, 224)}``, ``--shape``): needed
    for a dynamic dimension, checked against a static one; each dimension from 1 to 2^31.
    ``name`` is the workload name its tuning records carry (default: the file's stem).
    ``max_model_mb`` is the import's memory budget (``--max-model-mb``): the file, every tensor
    and all constants together must fit. Raises :class:`NotFound` for a missing file,
    :class:`InvalidArgument` naming the node and operator the compiler lacks, a bad file, shape
    or budget, and :class:`LimitExceeded` naming the tensor past the budget.
    """
    dims = {k: [int(d) for d in v] for k, v in (shapes or {}).items()}
    return Model(_core.import_onnx(os.fspath(path), dims, name or "", int(max_model_mb)))


def unsupported(path: PathLike, *, max_model_mb: int = 4096) -> Dict[str, Any]:
    """What an ONNX model uses that the importer does not take (``crosstune import --json`` on
    a model it refuses: the same C++ call), without importing it: ``{"model", "opset",
    "supported", "unsupported": [{"kind": "operator" | "opset" | "attribute", "op", "domain",
    "attribute", "opsets", "count", "nodes"}]}``. ``supported`` is True and the list empty when
    every operator, opset and attribute is one the importer takes (shapes and tensors are
    checked by :func:`import_onnx`). Raises :class:`NotFound` for a missing file and
    :class:`InvalidArgument` for a file that is no ONNX model or of an IR version or opset out of
    range."""
    result: Dict[str, Any] = json.loads(_core.unsupported_json(os.fspath(path), int(max_model_mb)))
    return result


class ModelPackage(Package):
    """A compiled model (.ctpkg: one library, graph.json, params.bin) and what the compiler
    did: ``report`` is ``crosstune compile --json``'s object (nodes, tasks, tuned, defaults,
    generated, activation_mb, params_mb, build_s, ...)."""

    def __init__(self, path: str, manifest: Dict[str, Any], report: Dict[str, Any]) -> None:
        super().__init__(path, manifest)
        self.report = report

    @property
    def tuned(self) -> int:
        """Tunable nodes that got a record's config from the log."""
        return int(self.report.get("tuned", 0))

    def save(self, path: PathLike) -> "ModelPackage":
        """Copies the package to ``path``; the returned ModelPackage is the copy."""
        copy = super().save(path)
        return ModelPackage(copy.path, self.manifest, dict(self.report, package=copy.path))

    def __repr__(self) -> str:
        return (
            f"<crosstune.ModelPackage {self.path} [{self.target}] {self.report.get('nodes')} nodes, "
            f"{self.tuned}/{self.report.get('tasks')} tasks tuned>"
        )


def compile(
    model: Model,
    *,
    log: Optional[PathLike] = None,
    target: Union[str, "Device"] = "auto",
    device: Optional["Device"] = None,
    threads: int = 1,
    out: Optional[PathLike] = None,
    workers: int = 0,
    layouts: str = "blocked",
) -> ModelPackage:
    """Compiles a model into one package for one target (``crosstune compile``: the same C++
    call, so the same defaults, warnings and report).

    Every tunable node takes its task's best record in ``log`` for this target and ``threads``
    (on this kind of device where the log has one), else its template's default config; every
    other node a generated kernel. ``target`` is a target string or preset, a :class:`Device`,
    or ``"auto"``: the target of ``device``, whose kind of device then picks the records (a
    target string asks no device, as on the command line). The package goes to ``out``, or to a
    temporary file that lasts as long as this process. ``workers`` build processes (0: one per
    core). ``layouts``: ``"blocked"`` keeps activations in blocked channels (NCHWc) between
    convs with their weights packed here, ``"nchw"`` keeps NCHW everywhere (their conv tasks
    differ: tune with the same choice). What the command line prints as ``crosstune: warning:``
    comes as a :class:`RuntimeWarning` each, and in ``report["warnings"]``: the log's unreadable
    lines, a log with no record for this target, records of code their template now generates
    differently, task nodes no template takes. A file with lines and not one record in them
    raises :class:`InvalidArgument`.
    """
    import warnings

    from ._device import Device

    if isinstance(target, Device):
        device, target = target, "auto"
    path = os.fspath(out) if out is not None else _scratch(model.name)
    manifest, report, found = _core.compile_model(
        model._handle,
        path,
        target=target,
        device=device._session if device is not None and target == "auto" else None,
        threads=threads,
        log=os.fspath(log) if log is not None else "",
        workers=workers,
        layouts=layouts,
    )
    for w in found:
        warnings.warn(w, RuntimeWarning, stacklevel=2)
    return ModelPackage(path, json.loads(manifest), json.loads(report))


class Network:
    """A model package loaded on a device (:meth:`Device.load_model`): set its inputs, run it,
    read its outputs, time whole runs and profile its nodes. Arrays cross from and into their
    own memory (no copies on this side). Use it as a context manager (or call :meth:`unload`).
    """

    def __init__(self, handle: _core.RemoteModel, device: "Device") -> None:
        self._handle = handle
        self._device = device
        info: Dict[str, Any] = json.loads(handle.info_json())
        #: target, inputs, outputs (each ``{"name", "shape", "dtype", "nbytes"}``), nodes,
        #: storage_bytes, params, params_bytes, flops.
        self.info = info

    @property
    def inputs(self) -> List[Dict[str, Any]]:
        """The model's inputs: ``[{"name", "shape", "dtype", "nbytes"}, ...]``."""
        inputs: List[Dict[str, Any]] = self.info["inputs"]
        return inputs

    @property
    def outputs(self) -> List[Dict[str, Any]]:
        """The model's outputs: ``[{"name", "shape", "dtype", "nbytes"}, ...]``."""
        outputs: List[Dict[str, Any]] = self.info["outputs"]
        return outputs

    def set_input(self, name: str, array: Any) -> None:
        """Sends ``array`` (C-ordered, the input's shape and dtype) as input ``name``, from its
        own memory. A name the model lacks raises :class:`NotFound` listing its inputs; another
        shape or dtype :class:`InvalidArgument`; the model and session stay usable."""
        self._handle.set_input(name, array)

    def run(self, *, timeout: float = 0.0, threads: int = 0) -> _core.CallResult:
        """Runs every node once. ``timeout`` bounds the run in seconds (0: the server's call
        timeout); ``threads`` sizes the kernels' parallel loops (0: the server's default). A node
        that crashes or hangs raises :class:`RemoteCrash` / :class:`Timeout` naming it."""
        return self._handle.run(timeout, threads)

    def get_output(self, which: Union[int, str] = 0, out: Optional[Any] = None) -> Any:
        """Output ``which`` (its index or name) as a new numpy array, or read into ``out`` (a
        writable C-ordered array of its dtype and size) in place, which is returned."""
        if out is None:
            spec = self._output_spec(which)
            out = np.empty(spec["shape"], dtype=spec["dtype"])
        self._handle.get_output(which, out)
        return out

    def _output_spec(self, which: Union[int, str]) -> Dict[str, Any]:
        if isinstance(which, int):
            if 0 <= which < len(self.outputs):
                return self.outputs[which]
        else:
            for o in self.outputs:
                if o["name"] == which:
                    return o
        from ._errors import NotFound

        names = ", ".join(o["name"] for o in self.outputs)
        raise NotFound(f"the model has no output {which!r} (its outputs: {names})")

    def __call__(self, *inputs: Any, **named: Any) -> List[Any]:
        """Sets the inputs (in order, or by name), runs once and returns every output."""
        for spec, array in zip(self.inputs, inputs):
            self.set_input(spec["name"], array)
        for name, array in named.items():
            self.set_input(name, array)
        self.run()
        return [self.get_output(i) for i in range(len(self.outputs))]

    def time(
        self,
        *,
        number: int = 10,
        repeat: int = 5,
        min_repeat_ms: int = 0,
        cooldown_ms: int = 0,
        flush_cache: bool = False,
        timeout: float = 0.0,
        threads: int = 0,
    ) -> _core.TimeResult:
        """Times whole runs with the device's time evaluator (``crosstune bench-model``): one
        warm-up run, then ``repeat`` rounds of ``number`` runs; seconds per run with median,
        mean, min, max and std."""
        return self._handle.time(
            number, repeat, min_repeat_ms, cooldown_ms, flush_cache, timeout, threads
        )

    def profile(
        self,
        *,
        number: int = 10,
        repeat: int = 3,
        min_repeat_ms: int = 0,
        cooldown_ms: int = 0,
        flush_cache: bool = False,
        timeout: float = 0.0,
        threads: int = 0,
    ) -> "Profile":
        """Times every operator node on its own, in graph order, and within whole runs
        (``bench-model --profile``): a :class:`Profile`, a list of ``{"name", "op_type",
        "function", "shapes", "median_s", "min_s", "max_s", "number", "flops",
        "in_run_median_s"}`` that prints as a table (``pandas.DataFrame(net.profile())`` works).
        ``median_s`` is the node run alone, again and again (warm, as the tuner measures it);
        ``in_run_median_s`` its time within whole runs, with the caches as a run leaves them."""
        nodes, used = self._handle.profile_json(
            number, repeat, min_repeat_ms, cooldown_ms, flush_cache, timeout, threads
        )
        return Profile(json.loads(nodes), used)

    def unload(self) -> None:
        """Unloads the model on the device."""
        self._handle.unload()

    def __enter__(self) -> "Network":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._device.connected:
            self.unload()

    def __repr__(self) -> str:
        ins = ", ".join(f"{i['name']}{tuple(i['shape'])}" for i in self.inputs)
        return f"<crosstune.Network [{self.info['target']}] {self.info['nodes']} nodes ({ins})>"


class Profile(List[Dict[str, Any]]):
    """Per-node times of one profile, in graph order; ``str()`` makes a table of them."""

    def __init__(self, nodes: List[Dict[str, Any]], threads: int) -> None:
        super().__init__(nodes)
        #: The threads the nodes ran with.
        self.threads = threads

    @property
    def total_s(self) -> float:
        """The sum of the nodes' median times."""
        return float(sum(n["median_s"] for n in self))

    def __str__(self) -> str:
        total = self.total_s or 1.0
        lines = [f"{'share':>6} {'ms':>9} {'GFLOP/s':>8}  {'op':<17} node"]
        for n in self:
            gflops = n["flops"] / n["median_s"] / 1e9 if n["median_s"] > 0 else 0.0
            lines.append(
                f"{100 * n['median_s'] / total:5.1f}% {n['median_s'] * 1e3:9.3f} {gflops:8.2f}  "
                f"{n['op_type']:<17} {n['name']}"
            )
        lines.append(f"{'':6} {self.total_s * 1e3:9.3f} ms in {len(self)} nodes, {self.threads} threads")
        return "\n".join(lines)


__all__ = ["Model", "ModelPackage", "Network", "Profile", "import_onnx", "compile"]
