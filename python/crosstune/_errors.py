"""crosstune's exceptions: one class per error code of the C++ libraries.

Every error raised by a crosstune call is a :class:`crosstune.Error`; its class says what went
wrong and its ``code`` attribute is the C++ error code's name (``"Timeout"``,
``"Disconnected"``, ...). Catch a base class to catch a family: :class:`Timeout` is also Python's
``TimeoutError``, :class:`InvalidArgument` a ``ValueError``, :class:`Disconnected` (alias
:data:`DeviceLost`) a ``ConnectionError``, :class:`NotFound` a ``LookupError``.

A tuning run whose every trial failed raises the class of the commonest failure among them
(:class:`WrongAnswer`, :class:`InvalidConfig`, :class:`BuildError`, :class:`RemoteCrash`, ...);
its ``code`` is the record's error kind.
"""

from __future__ import annotations

from typing import ClassVar, Dict, Type


class Error(Exception):
    """A crosstune error. ``code`` names the C++ error code; the text is its message."""

    code: ClassVar[str] = "Internal"

    @property
    def message(self) -> str:
        """The C++ error's message (the exception's text)."""
        return str(self)


class Disconnected(Error, ConnectionError):
    """The device or tracker went away (the connection dropped); retrying elsewhere is safe."""

    code = "Disconnected"


DeviceLost = Disconnected


class Timeout(Error, TimeoutError):
    """A deadline passed: a network wait, a call on the device, a queue wait."""

    code = "Timeout"


class NotFound(Error, LookupError):
    """A file, function, module or task that does not exist."""

    code = "NotFound"


class InvalidArgument(Error, ValueError):
    """A refused argument: a bad target, shape, dtype, array layout, knob or option."""

    code = "InvalidArgument"


class RemoteCrash(Error):
    """Uploaded code died by a signal on the device; the session ended, the server goes on."""

    code = "RemoteCrash"


class WrongArch(Error):
    """A module built for another architecture, or needing a CPU feature the device lacks."""

    code = "WrongArch"


class Unauthorized(Error, PermissionError):
    """A missing or wrong secret, or a lease that is not (or no longer) this client's."""

    code = "Unauthorized"


class Busy(Error):
    """The server or tracker refused more work now (session or handshake limits)."""

    code = "Busy"


class VersionMismatch(Error):
    """Another protocol major version, kernel ABI or package format."""

    code = "VersionMismatch"


class ProtocolError(Error):
    """A malformed frame or message from the peer."""

    code = "ProtocolError"


class LimitExceeded(Error):
    """A frame, upload, tensor or workspace limit of the server."""

    code = "LimitExceeded"


class IoError(Error, OSError):
    """A file could not be read or written."""

    code = "IoError"


class BadHash(Error):
    """A file whose SHA-256 does not match (nothing mismatched is kept)."""

    code = "BadHash"


class KernelError(Error):
    """The kernel returned non-zero (its message comes with it)."""

    code = "KernelError"


class BuildError(Error):
    """The compiler refused the source; the message holds its diagnostics."""

    code = "BuildError"


class NoDevice(Error):
    """No device could ever match the request, or no GPU or driver is present."""

    code = "NoDevice"


class Internal(Error):
    """A bug or an unexpected state inside crosstune."""

    code = "Internal"


# --- The kinds of failed trials that have no error code of their own ---------------------------


class InvalidConfig(InvalidArgument):
    """Every trial's config was refused before compiling (a constraint or a device limit)."""

    code = "InvalidConfig"


class BuildTimeout(Timeout):
    """Every trial's build ran past its time limit."""

    code = "BuildTimeout"


class LoadError(Error):
    """Every trial's module was refused by the device (upload or load)."""

    code = "LoadError"


class RunTimeout(Timeout):
    """Every trial's kernel ran past its time limit."""

    code = "RunTimeout"


class WrongAnswer(Error):
    """Every trial's output differed from the reference (the first bad element is named)."""

    code = "WrongAnswer"


#: The class of each C++ error code, and of each trial error kind, by name.
ERRORS: Dict[str, Type[Error]] = {
    cls.code: cls
    for cls in (
        Error,
        Disconnected,
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
    )
}
ERRORS["Error"] = Error
# A record's "RuntimeError" (the kernel returned non-zero) and "DeviceLost" are these codes.
ERRORS["RuntimeError"] = KernelError
ERRORS["DeviceLost"] = Disconnected

__all__ = [
    "Error",
    "Disconnected",
    "DeviceLost",
    "Timeout",
    "NotFound",
    "InvalidArgument",
    "RemoteCrash",
    "WrongArch",
    "Unauthorized",
    "Busy",
    "VersionMismatch",
    "ProtocolError",
    "LimitExceeded",
    "IoError",
    "BadHash",
    "KernelError",
    "BuildError",
    "NoDevice",
    "Internal",
    "InvalidConfig",
    "BuildTimeout",
    "LoadError",
    "RunTimeout",
    "WrongAnswer",
    "ERRORS",
]
