"""crosstune: cross-deploy and auto-tune compute kernels on remote devices, from Python.

The C++ libraries do the work (client, builder, tuner, model compiler); this package gives them a Python shape.
Remote calls and tuning steps release the GIL, numpy arrays cross without copies on this side,
and errors are exceptions whose ``code`` is the C++ error code::

    import crosstune as ct, numpy as np
    with ct.connect() as dev:                       # a local server; or ct.connect("board:9090")
        mod = dev.load(ct.build(SOURCE, device=dev))
        a = np.ones(1024, "f4"); b = np.ones(1024, "f4"); c = np.zeros(1024, "f4")
        mod["vadd"](a, b, c)                        # c is written in place
        print(mod.time("vadd", a, b, c, number=100).median)

    farm = ct.connect_tracker("farm", 9190)
    with farm.request("rpi4", timeout=60) as dev:   # a leased device, released on exit
        print(dev.info())

    run = ct.tune("matmul", shape=(512, 512, 512), trials=200, log="mm.jsonl")
    run.best, run.records                           # dicts; pandas.DataFrame(run.records) works

    model = ct.import_onnx("resnet50.onnx", shapes={"input": (1, 3, 224, 224)})
    ct.tune(model, trials=2000, log="r50.jsonl")     # its layers, on the same devices as above
    with ct.connect() as dev:
        net = dev.load_model(ct.compile(model, log="r50.jsonl", device=dev))
        net.set_input("input", x); net.run(); y = net.get_output(0)
        net.time(number=10).median; print(net.profile())
"""

from __future__ import annotations

from . import _core
from ._build import Package, build, parse_target, presets
from ._device import Device, Function, Module, Tracker, connect, connect_tracker, start_server
from . import _errors
from ._errors import (
    Error,
    Disconnected,
    DeviceLost,
    Timeout,
    NotFound,
    InvalidArgument,
    RemoteCrash,
    WrongArch,
    Unauthorized,
    Busy,
    VersionMismatch,
    ProtocolError,
    LimitExceeded,
    IoError,
    BadHash,
    KernelError,
    BuildError,
    NoDevice,
    Internal,
    InvalidConfig,
    BuildTimeout,
    LoadError,
    RunTimeout,
    WrongAnswer,
    ERRORS,
)
from ._paths import use_package_programs

__version__: str = _core.version()

RemoteTensor = _core.RemoteTensor
CallResult = _core.CallResult
TimeResult = _core.TimeResult
CopyStats = _core.CopyStats
LocalServer = _core.LocalServer

_core.register_errors(dict(ERRORS))
use_package_programs()

from ._tune import (  # noqa: E402
    SVG,
    Record,
    RecordConfig,
    RecordDevice,
    RecordTask,
    TuneRun,
    best_records,
    export,
    plot_log,
    read_log,
    replay,
    summarize_log,
    templates,
    tune,
)
from ._model import (  # noqa: E402
    Model,
    ModelPackage,
    Network,
    Profile,
    compile,
    import_onnx,
    unsupported,
)

__all__ = [
    "Device",
    "Module",
    "Function",
    "Tracker",
    "Package",
    "RemoteTensor",
    "CallResult",
    "TimeResult",
    "CopyStats",
    "LocalServer",
    "TuneRun",
    "Record",
    "RecordTask",
    "RecordDevice",
    "RecordConfig",
    "SVG",
    "connect",
    "connect_tracker",
    "start_server",
    "build",
    "parse_target",
    "presets",
    "tune",
    "templates",
    "read_log",
    "best_records",
    "summarize_log",
    "plot_log",
    "export",
    "replay",
    "Model",
    "ModelPackage",
    "Network",
    "Profile",
    "import_onnx",
    "unsupported",
    "compile",
]
# The error classes, as the errors module lists them (one list, not two).
__all__ += _errors.__all__
