"""Tuning: search a kernel template's (or a network's) schedule space on real devices, read the
record logs, compare search strategies on recorded spaces, and export the best config."""

from __future__ import annotations

import json
import os
import warnings
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    Union,
)

from . import _core
from ._build import Package
from ._device import Tracker, _read_secret
from ._paths import server_binary
from ._progress import ProgressBar

if TYPE_CHECKING:
    from ._model import Model

PathLike = Union[str, "os.PathLike[str]"]


class _RecordTaskFields(TypedDict):
    template: str
    shape: List[int]
    dtype: str


class RecordTask(_RecordTaskFields, total=False):
    """A record's task: the template, its shape and element type (and ``threads`` when above 1)."""

    threads: int


class _RecordDeviceFields(TypedDict):
    name: str
    arch: str
    cpu: str
    key: str


class RecordDevice(_RecordDeviceFields, total=False):
    """The device a record was measured on. The rest of its fingerprint, where the server
    reported it: ``cores`` (the CPUs it may use; a GPU's multiprocessors for a CUDA target),
    ``memory_bytes`` (the GPU's own for a CUDA target), ``features`` (16 hex digits of the
    SHA-256 of its CPU feature names, sorted) and ``driver`` (a GPU's CUDA driver version)."""

    cores: int
    memory_bytes: int
    features: str
    driver: str


class RecordConfig(TypedDict):
    """The measured config: its index in the template's space and its knob values."""

    index: int
    values: Dict[str, Any]


class _RecordFields(TypedDict):
    v: int
    tool: str
    run: str
    tuner: str
    task: RecordTask
    target: str
    device: RecordDevice
    config: RecordConfig
    flops: float
    costs: List[float]
    mean: float
    error: str
    message: str
    build_s: float
    run_s: float
    timestamp: str


class Record(_RecordFields, total=False):
    """One tuning record: a line of a record log (``tuner/.../records.h`` describes each field),
    read into a plain dict with these keys (``pandas.DataFrame(records)`` takes a list of them).
    ``gflops`` is added by this package (0 for a failed trial); ``generator``, ``build_cached``,
    ``stopped_early`` (true: the device stopped timing a clear loser after its first round, so
    ``mean`` is a lower bound) and ``workload`` appear only where the run had them; ``source``
    only in a record another tool measured (``crosstune records import``: its format and what
    that tool's file held)."""

    gflops: float
    generator: str
    build_cached: bool
    stopped_early: bool
    workload: Dict[str, Any]
    source: Dict[str, Any]


ProgressCallback = Callable[[Dict[str, Any]], None]


class SVG:
    """An SVG image: shown inline in notebooks, ``save(path)`` writes it."""

    def __init__(self, text: str) -> None:
        #: The SVG document.
        self.text = text

    def _repr_svg_(self) -> str:
        return self.text

    def save(self, path: PathLike) -> None:
        """Writes the SVG document to ``path``."""
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            f.write(self.text)


class TuneRun:
    """What :func:`tune` did: the report, the best and default records and this run's records.

    ``report`` is what ``crosstune tune --json`` prints (task, target, tuner, counts, errors by
    kind, wall time, device busy fraction, the best and default configs' figures); ``records``
    are dicts as the log holds them (``pandas.DataFrame(run.records)`` works).
    """

    def __init__(
        self,
        report: Dict[str, Any],
        records: List[Record],
        best: Optional[Record] = None,
        default: Optional[Record] = None,
    ) -> None:
        self.report = report
        #: This run's records, in the order they were measured.
        self.records = records
        #: The best record of the task in the log (this run's or an earlier one's); None when no
        #: trial worked, and for a workload (see ``report["tasks"]``).
        self.best = best
        #: The template's default (untuned) config's record, when it was measured.
        self.default = default

    @property
    def stopped(self) -> bool:
        """Whether the run was stopped before its budget (Ctrl-C after a batch)."""
        return bool(self.report.get("stopped"))

    @property
    def log(self) -> str:
        """The record log's path ("" when the run had none)."""
        return str(self.report.get("log", ""))

    def best_gflops(self) -> float:
        """The best record's GFLOP/s (0 when none)."""
        return float(self.best["gflops"]) if self.best else 0.0

    def curve(self) -> Tuple[List[int], List[float]]:
        """This run's best-so-far curve: (trial numbers 1..N, best GFLOP/s up to each trial, 0
        before the first success), in the order the trials were measured."""
        trials: List[int] = []
        best: List[float] = []
        so_far = 0.0
        for i, r in enumerate(self.records, 1):
            if r.get("error") == "ok":
                so_far = max(so_far, float(r.get("gflops", 0.0)))
            trials.append(i)
            best.append(so_far)
        return trials, best

    def plot(self, ax: Any = None) -> Any:
        """Draws this run's best-so-far GFLOP/s against its trials with matplotlib (:meth:`curve`)
        on ``ax``, or on a new figure's axes, and returns the axes (shown inline in notebooks).
        Needs matplotlib (``pip install matplotlib``); :meth:`svg` draws the log's runs without
        it."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError(
                "run.plot() draws with matplotlib (pip install matplotlib); run.svg() needs nothing"
            ) from e
        if ax is None:
            _figure, ax = plt.subplots()
        trials, best = self.curve()
        what = self.report.get("workload") or self.report.get("task", {}).get("template", "")
        ax.plot(trials, best, drawstyle="steps-post", label=f"{what} ({self.report.get('tuner', '')})")
        ax.set_xlabel("trials")
        ax.set_ylabel("best GFLOP/s so far")
        ax.legend()
        return ax

    def svg(self) -> SVG:
        """The best-so-far GFLOP/s of every run in the log against its trials (an SVG, shown
        inline in notebooks, ``.save(path)``); needs ``log=``."""
        if not self.log:
            raise _errors().InvalidArgument("svg() needs a run with a log (tune(..., log=PATH))")
        return plot_log(self.log)

    def __repr__(self) -> str:
        task = self.report.get("task")
        what = (
            f"{task['template']} {','.join(map(str, task['shape']))}"
            if task
            else str(self.report.get("workload", ""))
        )
        if not task:
            return (
                f"<crosstune.TuneRun {what}: {len(self.records)} measured over "
                f"{len(self.report.get('tasks', []))} tasks>"
            )
        return (
            f"<crosstune.TuneRun {what}: {len(self.records)} measured, "
            f"best {self.best_gflops():.2f} GFLOP/s>"
        )


def _pins_json(pins: Optional[Union[Mapping[str, Any], Sequence[str]]]) -> str:
    if not pins:
        return "{}"
    if isinstance(pins, Mapping):
        return json.dumps(dict(pins))
    return _core.parse_pins(list(pins))


def _progress_callback(progress: Union[bool, ProgressCallback], label: str) -> Tuple[Optional[ProgressCallback], Optional[ProgressBar]]:
    if progress is True:
        bar = ProgressBar(label)
        return bar.update, bar
    if progress is False or progress is None:
        return None, None
    return progress, None


def tune(
    template: Optional[Union[str, "Model"]] = None,
    *,
    shape: Optional[Union[Sequence[int], str]] = None,
    workload: Optional[str] = None,
    trials: int = 100,
    target: str = "auto",
    server: Optional[Union[str, Sequence[str]]] = None,
    tracker: Optional[Union[Tracker, str]] = None,
    key: Optional[str] = None,
    log: Optional[PathLike] = None,
    tuner: str = "xgb",
    batch: int = 0,
    early_stop: int = 0,
    threads: int = 1,
    round: int = 16,
    pins: Optional[Union[Mapping[str, Any], Sequence[str]]] = None,
    transfer: Sequence[PathLike] = (),
    include_default: bool = True,
    stop_losers: bool = True,
    check: bool = True,
    overlap: Optional[bool] = None,
    number: Optional[int] = None,
    repeat: Optional[int] = None,
    min_repeat_ms: Optional[int] = None,
    cooldown_ms: Optional[int] = None,
    flush_cache: Optional[bool] = None,
    run_timeout_ms: int = 10_000,
    build_timeout: float = 30.0,
    max_devices: int = 0,
    wait: float = 600.0,
    timeout: float = 60.0,
    workers: int = 0,
    build_cache: Optional[PathLike] = None,
    build_cache_max_mb: float = 1024.0,
    build_key: Optional[str] = None,
    records: Optional[str] = None,
    auth_token_file: Optional[PathLike] = None,
    seed: int = 1,
    objective: str = "mixed",
    run_id: Optional[str] = None,
    progress: Union[bool, ProgressCallback] = True,
    on_record: Optional[Callable[[Record], None]] = None,
    layouts: str = "blocked",
) -> TuneRun:
    """Tunes a kernel template for a shape (or a network's layers) on real devices, as
    ``crosstune tune`` does, and returns the :class:`TuneRun`.

    What: ``template`` (``"matmul"``, ``"conv2d"``, ``"depthwise_conv2d"``, ``"dense"``,
    ``"conv2d_int8"``; see :func:`templates`) with ``shape`` (matmul: M,N,K[,groups]; conv2d:
    N,C,H,W,K,R,S,stride,pad[,residual[,activation[,layout]]]; depthwise_conv2d:
    N,C,H,W,R,S,stride,pad[,activation[,layout]]; dense: B,IN,OUT; conv2d_int8:
    N,C,H,W,K,R,S,stride,pad[,in_zero[,out_zero[,relu]]]), ``workload="resnet50"`` (its
    distinct layers under one budget, ``round`` trials at a time; needs ``log``), or a
    :class:`Model` from :func:`import_onnx` in place of the template (its distinct tunable
    layers, as ``crosstune tune --model``: the records :func:`compile` looks up; needs ``log``). ``threads`` is
    the task's thread count. ``pins`` holds knobs at one value (``{"unroll_k": 4}``). A workload's
    or model's conv tasks carry the layout :func:`compile` gives them: ``layouts`` must be the
    one it compiles with (``"blocked"``, the default, or ``"nchw"``).

    Where: ``tracker`` (a :class:`Tracker` or ``"HOST:PORT"``) with ``key``: every free device
    of the key measures in parallel; ``server``: one ``"HOST:PORT"`` or several; neither: a
    crosstune-server started on this machine for the run. ``target="auto"`` builds for the first
    device's CPU, ``"cuda"`` for its GPU, else a target string or preset. ``max_devices`` (0: all
    of the key), ``wait`` for the first device and ``timeout`` for each reply, in seconds;
    ``auth_token_file`` (or ``$CROSSTUNE_AUTH_TOKEN_FILE``) holds the farm's shared secret.

    Builds: ``workers`` build processes (0: one per CPU they may use); ``build_cache``, a
    directory shared by runs (a config built before for the same target and compiler is not
    compiled again), within ``build_cache_max_mb`` (0: no limit); ``build_key``: the farm's build
    workers of that key (registered with ``tracker``) build beside this machine.

    The farm's records: ``records="tracker"`` (``tracker``'s) or a tracker's ``"HOST:PORT"``,
    as ``crosstune tune --records``: the run resumes from what the farm has of the task on its
    devices' kind, claims each config before timing it (one another run holds or the farm has is
    not timed here) and sends each record; ``report["farm"]`` counts what it took and left.

    The run is set up by the same code as ``crosstune tune``'s: with no device given, the server
    started here gets the kernel's CPUs to itself and the builds (and this thread, until tune()
    returns) the others, so builds overlap the timing without slowing it; ``report["cpus"]`` says
    which. ``overlap`` (None: decided as ``crosstune tune`` decides: yes for devices elsewhere and
    for that split server, no for servers given on this machine and when no CPU is left) builds
    the next batch while this one is timed; ``report["overlap"]`` says what was decided.

    How: ``tuner`` (``"xgb"``, ``"ga"``, ``"random"``, ``"grid"``), ``trials`` in all for the
    task in the log (a second run with the same ``log`` resumes and measures only the rest),
    ``batch`` (0: 8, or twice the devices when that is more, as ``crosstune tune`` without
    ``--batch``), ``early_stop``, the time evaluator's ``number``, ``repeat``, ``min_repeat_ms``,
    ``cooldown_ms``, ``flush_cache``, and per-candidate limits (``run_timeout_ms``,
    ``build_timeout`` in seconds). ``check=False`` skips the comparison with the reference;
    ``include_default=False`` skips measuring the template's default config first.
    ``stop_losers=False`` times every candidate for every round (``--no-stop-losers``; by
    default the device stops after a round once a candidate is clearly slower than the best so
    far, and its record says ``stopped_early``). ``transfer``:
    other logs whose records of the template warm-start the cost model. With
    none of the timing arguments given, the tuner's timing applies, as in ``crosstune tune``: a
    template is timed warm (1, 3, 50, 0, False) and a model's or workload's layers cold (1, 5, 0,
    0, True: each call's data evicted from the caches before it, as a layer finds them in the
    network);
    one given, the others take the warm values. ``seed`` and ``objective`` are the tuner's
    (``crosstune tune --seed``, ``--objective``); ``run_id`` names the run in the tracker's
    status page and the records (None: one made from the time).

    Progress: ``progress=True`` shows a bar (tqdm where installed, a plain line otherwise);
    a callable gets a dict after each measurement (done, total, measured, errors,
    best_gflops, devices, devices_busy, elapsed_s, rate, batch_end); False shows nothing.
    ``on_record`` gets each record as it is measured.

    Ctrl-C (KeyboardInterrupt) stops the run after the current batch, with every finished record
    in the log, and then raises KeyboardInterrupt. A run whose every trial failed raises the
    class of the commonest failure (:class:`WrongAnswer`, :class:`BuildError`, ...) with its
    message; the records stay in the log.
    """
    from ._model import Model

    model: Optional[Model] = None
    if isinstance(template, Model):
        model, template = template, None
        if shape is not None:
            raise _errors().InvalidArgument("a model's layers have their own shapes: no shape=")
    if (template is None and model is None) == (workload is None):
        raise _errors().InvalidArgument(
            "give a template (tune('matmul', shape=...)), a model or workload=, one of them"
        )
    if template is not None and shape is None:
        raise _errors().InvalidArgument("shape is required with a template")
    if isinstance(shape, str):
        shape_list = _core.parse_shape(shape)
    else:
        shape_list = [int(v) for v in (shape or ())]
    servers: List[str] = [server] if isinstance(server, str) else list(server or [])
    tracker_address = tracker.address if isinstance(tracker, Tracker) else (tracker or "")
    if tracker is not None and isinstance(tracker, Tracker):
        secret = tracker._secret or _read_secret(auth_token_file)
    else:
        secret = _read_secret(auth_token_file)
    if template:
        label = template + " " + ",".join(map(str, shape_list))
    else:
        label = model.name if model is not None else str(workload)
    callback, bar = _progress_callback(progress, label)
    measured: List[Record] = []

    def record(text: str) -> None:
        r: Record = json.loads(text)
        measured.append(r)
        if on_record is not None:
            on_record(r)

    def warn(message: str) -> None:
        if bar is not None:
            bar.interrupt()
        warnings.warn(message, RuntimeWarning, stacklevel=2)

    o = _core.TuneOptions()
    o.template = template or ""
    o.shape = shape_list
    o.workload = workload or ""
    o.layouts = layouts
    o.round = round
    o.threads = threads
    o.target = target
    o.servers = servers
    o.tracker = tracker_address
    o.key = key or ""
    o.auth_secret = secret
    o.max_devices = max_devices
    o.wait = wait
    o.timeout = timeout
    o.server_binary = server_binary()
    o.workers = workers
    o.build_cache = os.fspath(build_cache) if build_cache is not None else ""
    o.build_cache_max_mb = build_cache_max_mb
    o.build_key = build_key or ""
    o.records = records or ""
    o.build_timeout = build_timeout
    o.overlap = overlap
    o.tuner = tuner
    o.trials = trials
    o.batch = batch
    o.early_stop = early_stop
    o.include_default = include_default
    o.stop_losers = stop_losers
    o.log = os.fspath(log) if log is not None else ""
    o.run_id = run_id or ""
    o.transfer = [os.fspath(t) for t in transfer]
    o.pins_json = _pins_json(pins)
    # None: the tuner's timing (a network's tasks cold), as `crosstune tune` without the flags.
    o.number = number
    o.repeat = repeat
    o.min_repeat_ms = min_repeat_ms
    o.cooldown_ms = cooldown_ms
    o.flush_cache = flush_cache
    o.run_timeout_ms = run_timeout_ms
    o.check = check
    o.seed = seed
    o.objective = objective
    try:
        report = _core.tune(o, model._handle if model is not None else None, callback, record, warn)
    finally:
        if bar is not None:
            bar.close()
    result = json.loads(report)
    return TuneRun(result["report"], measured, result["best"], result["default"])


def _errors() -> Any:
    from . import _errors as errors

    return errors


def templates() -> List[str]:
    """The kernel templates :func:`tune` knows."""
    return list(_core.template_names())


def read_log(path: PathLike, *, warn: bool = True) -> List[Record]:
    """Every record of a log (JSON lines), as dicts. Lines that are not records (a torn last line
    of a killed run) are skipped with a warning. Raises :class:`NotFound` for a missing file."""
    text, skipped = _core.read_log(os.fspath(path))
    if warn:
        for w in skipped:
            warnings.warn(w, RuntimeWarning, stacklevel=2)
    records: List[Record] = json.loads(text)
    return records


def best_records(log: Union[PathLike, Sequence[Record]]) -> List[Record]:
    """The best successful record per task and target, from a log's path or from records."""
    records = read_log(log) if isinstance(log, (str, os.PathLike)) else list(log)
    best: List[Record] = json.loads(_core.best_records(json.dumps(records)))
    return best


def summarize_log(path: PathLike) -> List[Dict[str, Any]]:
    """Per task and target of a log: trials, unique configs, successes, devices, tuners, errors
    by kind (with the commonest message), the best record and, for a network's layers, their
    share of the estimated network time (``crosstune log summary --json``)."""
    summary: List[Dict[str, Any]] = json.loads(_core.summarize_log(os.fspath(path)))
    return summary


def plot_log(path: PathLike) -> SVG:
    """The best-so-far GFLOP/s of each run of a log against its trials, one line per task, tuner
    and run (``crosstune log plot``), as an SVG shown inline in notebooks."""
    svg, _lines, _max_trials = _core.plot_log(os.fspath(path))
    return SVG(svg)


def export(log: PathLike, out: PathLike, *, task: str = "") -> Package:
    """Builds the best config of a log's task into a package at ``out`` and returns the
    :class:`Package` (``crosstune export``); its manifest keeps the tuning record.

    ``task`` picks one when the log has several (``"matmul 512,512,512 float32"``, or with
    ``"|TARGET"``). Raises :class:`NotFound` when the log has no successful record of it.
    """
    manifest, _function, _record = _core.export_best(os.fspath(log), os.fspath(out), task)
    return Package(os.fspath(out), json.loads(manifest))


def replay(
    space: PathLike,
    *,
    tuners: Sequence[str] = ("random", "ga", "xgb"),
    seeds: int = 50,
    batch: int = 8,
    max_trials: int = 0,
    target_fraction: float = 0.95,
    task: str = "",
    objective: str = "mixed",
    warm_from: Optional[PathLike] = None,
    with_runs: bool = False,
) -> Dict[str, Any]:
    """Compares search strategies on a table of measured points instead of a device, as
    ``crosstune replay`` does.

    ``space`` is a full-space record log of ours (``task`` picks one of its tasks) or a Kernel
    Tuner cache file (``.json`` / ``.json.gz``). Each tuner runs for seeds 1..``seeds``; returns
    the table's facts and, under ``"tuners"``, per tuner the median, p90 and mean trials to a
    point within ``target_fraction`` of the best and how many seeds ``reached`` it.
    ``warm_from``, the same kernel's table measured on another device, runs each tuner again
    warm-started from it (under ``"warm"``; ``"warm_from"`` says how many of its points matched).
    """
    out: Dict[str, Any] = json.loads(
        _core.compare_tuners(
            os.fspath(space),
            list(tuners),
            seeds,
            batch,
            max_trials,
            target_fraction,
            task,
            objective,
            os.fspath(warm_from) if warm_from is not None else "",
            with_runs,
        )
    )
    for w in out.pop("warnings", []):
        warnings.warn(w, RuntimeWarning, stacklevel=2)
    return out


__all__ = [
    "SVG",
    "TuneRun",
    "tune",
    "templates",
    "read_log",
    "best_records",
    "summarize_log",
    "plot_log",
    "export",
    "replay",
]
