"""Building kernels into packages (.ctpkg) for a target, with the in-process clang/LLVM builder."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _core

if TYPE_CHECKING:
    from ._device import Device


class Package:
    """A built package (.ctpkg): the library, its manifest and, for a tuned kernel, where its
    config came from. ``device.load(package)`` uploads and loads it."""

    def __init__(self, path: str, manifest: Dict[str, Any], diagnostics: str = "") -> None:
        #: Where the package file is.
        self.path = path
        #: manifest.json: format, target, triple, arch, cpu, required_features, functions, ...
        self.manifest = manifest
        #: The compiler's warnings, if any.
        self.diagnostics = diagnostics

    @property
    def target(self) -> str:
        """The target string the package was built for."""
        return str(self.manifest.get("target", ""))

    @property
    def functions(self) -> Dict[str, str]:
        """name -> signature of every function the library exports."""
        return {f["name"]: f["signature"] for f in self.manifest.get("functions", [])}

    def save(self, path: Union[str, "os.PathLike[str]"]) -> "Package":
        """Copies the package to ``path``; the returned Package is the copy."""
        dest = os.fspath(path)
        shutil.copyfile(self.path, dest)
        return Package(dest, self.manifest, self.diagnostics)

    def __repr__(self) -> str:
        names = ", ".join(f"{n}({s})" for n, s in self.functions.items())
        return f"<crosstune.Package {self.path} [{self.target}] {names}>"


_lock = threading.Lock()
_builder: Optional[_core.Builder] = None
_tempdir: Optional[str] = None


def _the_builder() -> _core.Builder:
    global _builder
    with _lock:
        if _builder is None:
            _builder = _core.Builder.create(1, _core.default_cache_dir(), 120.0)
        return _builder


def _scratch(name: str) -> str:
    """A path for a package nobody named, in a folder removed when the process ends."""
    global _tempdir
    with _lock:
        if _tempdir is None:
            _tempdir = tempfile.mkdtemp(prefix="crosstune-")
            atexit.register(shutil.rmtree, _tempdir, True)
        fd, path = tempfile.mkstemp(prefix=name + "-", suffix=".ctpkg", dir=_tempdir)
        os.close(fd)
        return path


def _source_text(source: Union[str, "os.PathLike[str]"]) -> Tuple[str, str]:
    """(text, file name) of a source given as text or as a path."""
    if not isinstance(source, str) or ("\n" not in source and os.path.isfile(source)):
        path = os.fspath(source)
        with open(path, encoding="utf-8") as f:
            return f.read(), os.path.basename(path)
    return source, ""


def build(
    source: Union[str, "os.PathLike[str]"],
    target: str = "auto",
    *,
    device: Optional["Device"] = None,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
    name: str = "kernel",
    flags: Sequence[str] = (),
    cuda: Optional[bool] = None,
) -> Package:
    """Compiles a kernel source and writes it as a package.

    ``source`` is the source text (freestanding C with kernel_abi.h's module table, or CUDA C),
    or a path to it. ``target`` is a target string (``"llvm -mtriple=aarch64-linux-gnu
    -mcpu=cortex-a72"``, ``"cuda -arch=sm_90"``), a preset (``"rpi4"``, ``"x86-avx2"``, see
    :func:`presets`), or ``"auto"``: the target of ``device`` (``device.target()``). ``flags`` are
    extra compiler flags (``-DN=4``). The package goes to ``out``, or to a temporary file that
    lasts as long as this process. Builds run in a worker process and are cached by content
    under ``~/.cache/crosstune/builds``. Raises :class:`BuildError` with the compiler's
    diagnostics when the source does not compile, :class:`InvalidArgument` for a bad target.
    """
    text, file_name = _source_text(source)
    if cuda is None:
        cuda = file_name.endswith(".cu") or target.startswith("cuda")
    if target == "auto":
        if device is None:
            from ._errors import InvalidArgument

            raise InvalidArgument("target='auto' needs a device: build(src, device=dev)")
        target = device.target(cuda)
    path = os.fspath(out) if out is not None else _scratch(name)
    source_name = file_name or (name + (".cu" if cuda else ".c"))
    manifest, diagnostics = _the_builder().build(
        text, target, path, name, source_name, list(flags)
    )
    return Package(path, json.loads(manifest), diagnostics)


def parse_target(target: str) -> str:
    """The canonical form of a target string or preset; refuses unknown CPUs and features with
    the valid names."""
    return _core.parse_target(target)


def presets() -> List[Tuple[str, str]]:
    """(name, target string) of every target preset."""
    return _core.presets()


__all__ = ["Package", "build", "parse_target", "presets"]
