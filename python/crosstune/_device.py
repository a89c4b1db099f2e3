"""Devices: sessions with crosstune-servers, reached directly, through a tracker or started here."""

from __future__ import annotations

import os
import pathlib
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Type, Union

from . import _core
from ._paths import server_binary

if TYPE_CHECKING:
    from ._build import Package
    from ._model import Network

#: What a call accepts as an argument: an int (int64), a float (float64), an array (numpy or any
#: DLPack CPU array, sent from its own memory and written back in place) or a RemoteTensor.
Arg = Any


def _read_secret(auth_token_file: Optional[Union[str, "os.PathLike[str]"]]) -> str:
    path = auth_token_file or os.environ.get("CROSSTUNE_AUTH_TOKEN_FILE")
    if not path:
        return ""
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def _address(host: str, port: Optional[int]) -> str:
    return f"{host}:{port}" if port is not None else host


class Function:
    """One function of a loaded module: ``module["vadd"](a, b, c)`` calls it."""

    __slots__ = {
        "_call": "the module's call entry",
        "_module": "the Module the function belongs to",
        "name": "The function's name in the module.",
        "signature": "Its arguments as kernel_abi.h spells them: ``t`` tensor, ``i`` int64, "
        "``f`` float64.",
    }

    def __init__(self, module: "Module", name: str, signature: str) -> None:
        self._module = module
        self._call = module._handle.call
        self.name = name
        self.signature = signature

    def __call__(self, *args: Arg, timeout: float = 0.0, threads: int = 0) -> _core.CallResult:
        """Calls the function once on the device.

        Arrays are copied to the device from their own memory, and after the call copied back
        into it (read-only arrays are not copied back). ``timeout`` bounds the call on the device
        in seconds (0: the server's limit); ``threads`` sizes its parallel loops (0: the
        server's default). Returns the device's wall time of the call.
        """
        return self._call(self.name, args, timeout, threads)

    def time(self, *args: Arg, **options: Any) -> _core.TimeResult:
        """Times the function with the device's time evaluator; see :meth:`Module.time`."""
        return self._module.time(self.name, *args, **options)

    def __repr__(self) -> str:
        return f"<crosstune.Function {self.name}({self.signature})>"


class Module:
    """A module loaded on a device. ``module["name"]`` is one of its functions."""

    def __init__(self, handle: _core.RemoteModule, device: "Device") -> None:
        self._handle = handle
        self._device = device
        #: name -> signature of every function the module exports.
        self.functions: Dict[str, str] = dict(handle.functions)
        self.target: str = handle.target
        self.kind: str = handle.kind

    def __getitem__(self, name: str) -> Function:
        signature = self.functions.get(name)
        if signature is None:
            raise _errors_not_found(
                f"no function '{name}' (the module has: {', '.join(self.functions) or 'none'})"
            )
        return Function(self, name, signature)

    def __contains__(self, name: object) -> bool:
        return name in self.functions

    def call(self, function: str, *args: Arg, timeout: float = 0.0, threads: int = 0) -> _core.CallResult:
        """Calls ``function`` once; see :meth:`Function.__call__`."""
        return self._handle.call(function, args, timeout, threads)

    def time(
        self,
        function: str,
        *args: Arg,
        number: int = 10,
        repeat: int = 5,
        min_repeat_ms: int = 0,
        cooldown_ms: int = 0,
        flush_cache: bool = False,
        timeout: float = 0.0,
        threads: int = 0,
    ) -> _core.TimeResult:
        """Times ``function`` on the device as ``crosstune bench`` does.

        One warm-up call, then ``repeat`` rounds of ``number`` calls; a round shorter than
        ``min_repeat_ms`` grows ``number`` and is measured again. ``cooldown_ms`` pauses between
        rounds, ``flush_cache`` evicts the arguments from the CPU caches before each. Arrays are
        copied in before and back after, as for a call. Returns the rounds' seconds per call with their median,
        mean, min, max and std.
        """
        return self._handle.time(
            function, args, number, repeat, min_repeat_ms, cooldown_ms, flush_cache, timeout, threads
        )

    def unload(self) -> None:
        """Unloads the module on the device."""
        self._handle.unload()

    def __repr__(self) -> str:
        names = ", ".join(f"{n}({s})" for n, s in self.functions.items())
        return f"<crosstune.Module {self.kind} [{names}]>"


def _errors_not_found(message: str) -> Exception:
    from ._errors import NotFound

    return NotFound(message)


class Device:
    """A session with one crosstune-server: files, modules, tensors, calls and timing.

    Every device gets a fresh workspace on the server, removed when the session ends. Use it as
    a context manager (or call :meth:`close`): a device from :meth:`Tracker.request` gives its
    lease back then, and one from :func:`connect` without an address stops its local server.
    """

    def __init__(
        self,
        session: _core.Session,
        *,
        lease: Optional[_core.Lease] = None,
        local: Optional[_core.LocalServer] = None,
    ) -> None:
        self._session = session
        self._lease = lease
        self._local = local

    # --- The session ------------------------------------------------------------------------

    @property
    def server(self) -> str:
        """The HOST:PORT this session is connected to."""
        return self._session.server

    @property
    def name(self) -> str:
        """The tracker's name for the device, else its address."""
        return self._lease.device if self._lease is not None else self._session.server

    @property
    def connected(self) -> bool:
        """Whether the session is open (False after close, or once the server went away)."""
        return self._session.connected

    def info(self) -> Dict[str, Any]:
        """What the device is: arch, triple, cpu_model, cpu_features, cores, memory_bytes, os,
        gpus (and gpu_status when there are none), version and protocol."""
        return self._session.info()

    def target(self, cuda: bool = False) -> str:
        """The build target of this device (what ``--target auto`` means): its triple and CPU
        features, or its first GPU's CUDA architecture with ``cuda=True``."""
        return self._session.target(cuda)

    def ping(self) -> None:
        """One round trip to the server; raises :class:`Disconnected` when it is gone."""
        self._session.ping()

    # --- Files ------------------------------------------------------------------------------

    def upload(
        self, local: Union[str, "os.PathLike[str]"], remote: Optional[str] = None
    ) -> Dict[str, Any]:
        """Uploads a local file into the workspace (as its file name unless ``remote`` says
        otherwise); SHA-256 checked. Returns ``{"path", "size", "sha256"}``."""
        local = os.fspath(local)
        return self._session.upload(local, remote or os.path.basename(local))

    def upload_bytes(self, data: bytes, remote: str) -> Dict[str, Any]:
        """Uploads bytes as a file of the workspace."""
        return self._session.upload_bytes(data, remote)

    def download(
        self, remote: str, local: Optional[Union[str, "os.PathLike[str]"]] = None
    ) -> Dict[str, Any]:
        """Downloads a workspace file (to its file name here unless ``local`` says otherwise)."""
        return self._session.download(remote, os.fspath(local or os.path.basename(remote)))

    def ls(self) -> List[Dict[str, Any]]:
        """The workspace's files: ``[{"path", "size", "sha256"}, ...]``."""
        return self._session.ls()

    def rm(self, remote: str) -> None:
        """Removes a workspace file."""
        self._session.rm(remote)

    # --- Modules and tensors ----------------------------------------------------------------

    def load(self, module: Union[str, "os.PathLike[str]", "Package"], *, as_name: Optional[str] = None) -> Module:
        """Loads a module and returns it.

        ``module`` is a :class:`Package` from :func:`build` or :func:`export` (uploaded first),
        a local path given as ``pathlib.Path`` (uploaded first, as ``as_name`` or its file
        name), or, as a ``str``, the path of a file already in the workspace. The server checks
        a package's hashes, architecture and CPU features before loading it.
        """
        return Module(self._session.load(self._in_workspace(module, as_name)), self)

    def load_model(
        self, package: Union[str, "os.PathLike[str]", "Package"], *, as_name: Optional[str] = None
    ) -> "Network":
        """Loads a model package (from :func:`compile`, or a .ctpkg) on the device's graph
        executor and returns the :class:`Network`: ``set_input``, ``run``, ``get_output``,
        ``time``, ``profile``.

        ``package`` is given as for :meth:`load`. The server verifies the package first (hashes,
        architecture and CPU features, graph, storage plan, params, functions) and names what is
        wrong.
        """
        from ._model import Network

        remote = self._in_workspace(package, as_name)
        return Network(_core.RemoteModel.load(self._session, remote), self)

    def _in_workspace(
        self, module: Union[str, "os.PathLike[str]", "Package"], as_name: Optional[str]
    ) -> str:
        """The workspace path of a module: a Package or a local path is uploaded first."""
        from ._build import Package

        if isinstance(module, Package):
            module = pathlib.Path(module.path)
        if isinstance(module, str):
            return module
        local = os.fspath(module)
        remote = as_name or os.path.basename(local)
        self._session.upload(local, remote)
        return remote

    def empty(self, shape: Sequence[int], dtype: str = "f32") -> _core.RemoteTensor:
        """A tensor in the device's memory (contents undefined). dtypes: f16 f32 f64 i8..i64
        u8..u64 bool."""
        return self._session.alloc(list(shape), _dtype_name(dtype))

    def array(self, array: Any) -> _core.RemoteTensor:
        """A device tensor holding a copy of a C-ordered host array (sent from its memory)."""
        shape = list(array.shape)
        tensor = self._session.alloc(shape, _dtype_name(str(array.dtype)))
        try:
            tensor.copy_from(array)
        except BaseException:
            tensor.free()
            raise
        return tensor

    def copy_stats(self) -> _core.CopyStats:
        """This session's tensor copies, and the host addresses the last ones used."""
        return self._session.copy_stats()

    # --- Lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Ends the session (the server removes its workspace), gives back its lease and stops
        its local server, whichever it has."""
        if self._lease is not None:
            self._lease.release()
        elif self._session.connected:
            self._session.close()
        if self._local is not None:
            self._local.stop()

    def __enter__(self) -> "Device":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<crosstune.Device {self.name}>"


_NUMPY_DTYPES = {
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "bool": "bool",
}


def _dtype_name(dtype: str) -> str:
    return _NUMPY_DTYPES.get(dtype, dtype)


def connect(
    server: Optional[str] = None,
    port: Optional[int] = None,
    *,
    auth_token_file: Optional[Union[str, "os.PathLike[str]"]] = None,
    timeout: float = 60.0,
    connect_timeout: float = 10.0,
    server_args: Sequence[str] = (),
    server_log: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Device:
    """Connects to a crosstune-server and returns the :class:`Device`.

    ``server`` is ``"HOST:PORT"`` (or HOST with ``port``); without it, ``$CROSSTUNE_SERVER``;
    without that, a crosstune-server is started on this machine for this device (with
    ``server_args`` as its extra flags) and stopped when the device is closed, as
    ``crosstune tune`` does; its log goes to ``server_log`` (appended; default: nowhere).
    ``auth_token_file`` (or ``$CROSSTUNE_AUTH_TOKEN_FILE``) holds the
    server's shared secret. ``timeout`` is the wait for each reply in seconds (a kernel's own
    time comes on top).
    """
    address = _address(server, port) if server else os.environ.get("CROSSTUNE_SERVER", "")
    secret = _read_secret(auth_token_file)
    lease_token = os.environ.get("CROSSTUNE_LEASE", "") if address else ""
    local: Optional[_core.LocalServer] = None
    if not address:
        local = _core.LocalServer()
        local.start(server_binary(), list(server_args), os.fspath(server_log or os.devnull))
        address = local.address
    try:
        session = _core.Session.connect(address, secret, lease_token, connect_timeout, timeout)
    except BaseException:
        if local is not None:
            local.stop()
        raise
    return Device(session, local=local)


class Tracker:
    """A crosstune-tracker: the farm's devices, queues and leases.

    ``request`` waits in a key's queue and returns a :class:`Device` holding the lease, to be
    used as a context manager (the lease ends with it).
    """

    def __init__(self, handle: _core.Tracker, secret: str) -> None:
        self._handle = handle
        self._secret = secret

    @property
    def address(self) -> str:
        """The tracker's HOST:PORT."""
        return self._handle.address

    def request(
        self,
        key: str,
        *,
        timeout: float = 600.0,
        constraints: Sequence[str] = (),
        priority: int = 0,
        hold: float = 1800.0,
        reply_timeout: float = 60.0,
        on_queue: Optional[Callable[[int, int, str], None]] = None,
    ) -> Device:
        """Waits up to ``timeout`` seconds in ``key``'s queue for a device and opens a session
        on it.

        ``constraints`` are the tracker's (``"soc=bcm2711"``, ``"memory_mb>=2048"``,
        ``"+neon"``); higher ``priority`` goes first. The lease is renewed in the background
        until the device is closed. ``on_queue(position, length, note)`` hears of the queue.
        Raises :class:`Timeout` when the wait ends, :class:`NoDevice` when no registered device
        could ever match.
        """
        lease = self._handle.request(
            key,
            list(constraints),
            priority,
            timeout,
            hold,
            self._secret,
            reply_timeout,
            on_queue,
        )
        return Device(lease.session, lease=lease)

    def query(self) -> Dict[str, Any]:
        """The farm as the status page shows it: devices (state, holder, tags, info), queues and
        recent sessions."""
        import json

        result: Dict[str, Any] = json.loads(self._handle.query())
        return result

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        pass

    def __repr__(self) -> str:
        return f"<crosstune.Tracker {self.address}>"


def connect_tracker(
    host: str,
    port: Optional[int] = None,
    *,
    auth_token_file: Optional[Union[str, "os.PathLike[str]"]] = None,
    timeout: float = 30.0,
) -> Tracker:
    """Connects to a crosstune-tracker at ``host`` and ``port`` (or ``"HOST:PORT"``).

    ``auth_token_file`` holds the farm's shared secret, for the tracker and its servers alike.
    """
    secret = _read_secret(auth_token_file)
    handle = _core.Tracker.connect(_address(host, port), secret, "", min(timeout, 10.0), timeout)
    return Tracker(handle, secret)


def start_server(
    argv: Optional[Sequence[str]] = None,
    *,
    args: Sequence[str] = (),
    timeout: float = 30.0,
    log: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> _core.LocalServer:
    """Starts a server on this machine and returns it once it listens (``.address``).

    Without ``argv``, the package's crosstune-server on 127.0.0.1, port 0, with ``args`` as
    extra flags. With ``argv``, that program as given: a cross-built server under qemu-user,
    or a crosstune-tracker; it must print crosstune's "listening on 127.0.0.1:PORT" line. Its
    log (stderr) goes to ``log`` (appended; default: nowhere). The server stops with the returned
    object (``.stop()``).
    """
    server = _core.LocalServer()
    log_path = os.fspath(log or os.devnull)
    if argv is None:
        server.start(server_binary(), list(args), log_path, timeout)
    else:
        server.start_argv(list(argv), timeout, log_path)
    return server


__all__ = [
    "Device",
    "Module",
    "Function",
    "Tracker",
    "connect",
    "connect_tracker",
    "start_server",
]
