"""ONNX's backend interface (``onnx.backend.base``) over crosstune, so that ONNX's own test suite
(``onnx.backend.test.BackendTest``: the node tests its generators write, and the models shipped
in the onnx wheel) runs through crosstune's import, compiler and a device's graph executor::

    import crosstune.onnx_backend as backend
    rep = backend.prepare(onnx_model)              # compiled for the local device
    outputs = rep.run([x])                         # run there
    rep = backend.prepare(onnx_model, device="board:9090")   # a crosstune-server elsewhere
    rep = backend.prepare(onnx_model, device="rpi4@tracker:9190")  # a device of the farm's

``prepare`` imports the model and compiles it for the device: ``"CPU"`` (what ONNX's tests
ask for) is this machine, through a crosstune-server the module starts on first use and keeps
for the process; ``"HOST:PORT"`` is a crosstune-server there; ``"KEY@HOST:PORT"`` a device
of key KEY leased from the crosstune-tracker there (waiting in its queue; the lease is held
until :func:`close`). Every unsupported operator,
opset, attribute or type is refused at ``prepare`` by :class:`crosstune.InvalidArgument`,
naming them all. An operator input the compiler needs as a constant (a Reshape's shape, a
Clip's bounds) but which the model leaves as a graph input is bound at ``run`` to the value
given there, and the model compiled then (once per set of such values).

This module needs the ``onnx`` package (``crosstune`` itself does not).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx  # type: ignore[import-not-found, unused-ignore]
from onnx import numpy_helper  # type: ignore[import-not-found, unused-ignore]
from onnx.backend.base import Backend, BackendRep  # type: ignore[import-not-found, unused-ignore]

from . import _core, _device, _errors, _model

__all__ = [
    "CrosstuneBackend",
    "CrosstuneRep",
    "prepare",
    "run_model",
    "run_node",
    "supports_device",
    "supported_ops",
    "close",
    "REFUSED_AT_IMPORT",
]

#: The note (``__notes__``) on an error the import raised: the model was refused by name before
#: any compile, as opposed to a failure in compile, on the device or in its answers.
REFUSED_AT_IMPORT = "crosstune: refused at import"

_local_server: Optional[Any] = None
_devices: Dict[str, _device.Device] = {}
_trackers: Dict[str, _device.Tracker] = {}
_scratch = tempfile.TemporaryDirectory(prefix="crosstune-onnx-backend-")


def _connect(device: str) -> _device.Device:
    """The device for ONNX's device string: "CPU" is this machine (one local server for the
    process), "HOST:PORT" a crosstune-server there, "KEY@HOST:PORT" a device of the tracker
    there, leased from KEY's queue."""
    global _local_server
    key = "CPU" if device.upper() == "CPU" else device
    if key in _devices and _devices[key].connected:
        return _devices[key]
    if "@" in key:
        queue, _, tracker = key.partition("@")
        if not queue or not tracker:
            raise _errors.InvalidArgument(f"device {device!r}: expected KEY@HOST:PORT")
        if tracker not in _trackers:
            _trackers[tracker] = _device.connect_tracker(tracker)
        _devices[key] = _trackers[tracker].request(queue)
        return _devices[key]
    if key == "CPU":
        if _local_server is None:
            _local_server = _device.start_server()
        address = _local_server.address
    else:
        address = device
    _devices[key] = _device.connect(address)
    return _devices[key]


def close() -> None:
    """Closes the connections this module opened, stops the local server it started, ends the
    build workers its compiles shared and removes its scratch folder (also done at exit; a
    process that ends by os._exit, as a multiprocessing worker does, calls it itself)."""
    global _local_server
    for device in _devices.values():
        device.close()
    _devices.clear()
    _trackers.clear()
    if _local_server is not None:
        _local_server.stop()
        _local_server = None
    _core.release_shared_builders()
    _scratch.cleanup()


def supported_ops() -> Dict[str, Tuple[int, int]]:
    """The ONNX operators (default domain) the importer takes, each with the first and last
    opset its implementation follows."""
    return {op: (since, until) for op, since, until in _core.onnx_operators()}


def _needs_constants(error: Exception) -> bool:
    return isinstance(error, _errors.InvalidArgument) and "known at compile time" in str(error)


class CrosstuneRep(BackendRep):  # type: ignore[misc, unused-ignore]
    """A model prepared for one device: ``run(inputs)`` returns its outputs, in order."""

    def __init__(self, model: Any, device: _device.Device) -> None:
        self._model = model
        self._device = device
        self._inputs = [i.name for i in model.graph.input
                        if i.name not in {t.name for t in model.graph.initializer}]
        self._networks: Dict[str, _model.Network] = {}
        self._bound: Optional[Tuple[str, ...]] = None  # names bound at run, when any are

    def _compile(self, model: Any, key: str) -> _model.Network:
        path = os.path.join(_scratch.name, hashlib.sha256(model.SerializeToString()).hexdigest())
        onnx.save(model, path + ".onnx")
        try:
            imported = _model.import_onnx(path + ".onnx", name="node")
        except _errors.Error as e:
            e.add_note(REFUSED_AT_IMPORT)
            raise
        try:
            package = _model.compile(imported, target=self._device, out=path + ".ctpkg")
            network = self._device.load_model(package)
        finally:  # the device holds its copy once loaded: nothing stays on this disk
            for f in (path + ".onnx", path + ".ctpkg"):
                if os.path.exists(f):
                    os.remove(f)
        self._networks[key] = network
        return network

    def prepare(self) -> None:
        try:
            self._compile(self._model, "")
        except _errors.InvalidArgument as e:
            if not _needs_constants(e):
                raise
            # Every input but a float32 first one becomes a constant at run.
            first = self._model.graph.input[0] if self._model.graph.input else None
            float_first = (first is not None and first.name in self._inputs and
                           first.type.tensor_type.elem_type == onnx.TensorProto.FLOAT)
            self._bound = tuple(self._inputs[1:] if float_first else self._inputs)

    def run(self, inputs: Any, **kwargs: Any) -> List[np.ndarray]:
        if isinstance(inputs, dict):
            arrays = [np.asarray(inputs[name]) for name in self._inputs]
        elif isinstance(inputs, np.ndarray):
            arrays = [inputs]
        else:
            arrays = [np.asarray(a) for a in inputs]
        if len(arrays) != len(self._inputs):
            raise _errors.InvalidArgument(
                f"the model has {len(self._inputs)} inputs ({', '.join(self._inputs)}), "
                f"got {len(arrays)}")
        # The narrow types (bfloat16, float8, float4, int4, ...: numpy's ml_dtypes arrays, one
        # element per byte or two) travel as their bits: crosstune's packages take them as u8/u16.
        arrays = [_as_bits(a) for a in arrays]
        feed = dict(zip(self._inputs, arrays))
        key = ""
        model = self._model
        if self._bound:
            digest = hashlib.sha256()
            model = onnx.ModelProto()
            model.CopyFrom(self._model)
            for name in self._bound:
                array = feed.pop(name)
                digest.update(name.encode() + array.dtype.str.encode() +
                              str(array.shape).encode() + array.tobytes())
                model.graph.initializer.append(numpy_helper.from_array(array, name))
            key = digest.hexdigest()
        network = self._networks.get(key) or self._compile(model, key)
        outputs = [np.asarray(o) for o in network(**feed)]
        # A bool travels as one byte (crosstune's "bool" is u8): numpy's bool again here.
        for i, o in enumerate(self._model.graph.output[: len(outputs)]):
            elem = o.type.tensor_type.elem_type
            if elem == onnx.TensorProto.BOOL and outputs[i].dtype == np.uint8:
                outputs[i] = outputs[i].view(np.bool_)
            elif elem in _NARROW and outputs[i].dtype in (np.uint8, np.uint16):
                outputs[i] = outputs[i].view(onnx.helper.tensor_dtype_to_np_dtype(elem))
        return outputs


# ONNX's narrow element types, which crosstune's packages take as their bits (graph.h).
_NARROW = frozenset(getattr(onnx.TensorProto, name) for name in (
    "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4",
    "FLOAT4E2M1", "UINT2", "INT2") if hasattr(onnx.TensorProto, name))


def _as_bits(array: np.ndarray) -> np.ndarray:
    """An ml_dtypes array (numpy sees a type of its own, not a builtin one) as its bits."""
    if array.dtype.isbuiltin != 2 or array.dtype.itemsize not in (1, 2):  # 2: user-defined
        return array
    return np.ascontiguousarray(array).view(np.uint8 if array.dtype.itemsize == 1 else np.uint16)


class CrosstuneBackend(Backend):  # type: ignore[misc, unused-ignore]
    """The backend ONNX's ``BackendTest`` takes: ``prepare`` compiles, ``run`` runs on the
    device."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return True

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> CrosstuneRep:
        if isinstance(model, (str, bytes, os.PathLike)) and not isinstance(model, bytes):
            model = onnx.load(os.fspath(model))
        elif isinstance(model, bytes):
            model = onnx.load_from_string(model)
        rep = CrosstuneRep(model, _connect(device))
        rep.prepare()
        return rep

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> List[np.ndarray]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU",
                 outputs_info: Optional[Sequence[Tuple[Any, Any]]] = None,
                 **kwargs: Any) -> List[np.ndarray]:
        raise _errors.InvalidArgument(
            "run_node is not supported: crosstune compiles whole models (use run_model)")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU" or ":" in device


prepare = CrosstuneBackend.prepare
run_model = CrosstuneBackend.run_model
run_node = CrosstuneBackend.run_node
supports_device = CrosstuneBackend.supports_device
