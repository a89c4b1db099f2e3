"""The default progress display of tune(): a tqdm bar where tqdm is installed (it draws in
terminals and notebooks alike), else one plain line, rewritten in place on a terminal and
printed per batch elsewhere, with what `crosstune tune` shows."""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, TextIO


def _errors_text(errors: Dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in errors.items()) or "none"


class ProgressBar:
    """Shows tune() progress dicts. ``use_tqdm`` None: tqdm when it can be imported."""

    def __init__(self, label: str, *, use_tqdm: Optional[bool] = None, stream: Optional[TextIO] = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self._bar: Any = None
        self._tqdm: Any = None
        if use_tqdm is not False:
            try:
                from tqdm.auto import tqdm  # type: ignore[import-untyped]

                self._tqdm = tqdm
            except ImportError:
                if use_tqdm:
                    raise
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._width = 0

    def update(self, p: Dict[str, Any]) -> None:
        postfix = (
            f"best {p['best_gflops']:.2f} GFLOP/s, errors: {_errors_text(p['errors'])}, "
            f"devices {p['devices_busy']}/{p['devices']} busy"
        )
        if self._tqdm is not None:
            if self._bar is None:
                self._bar = self._tqdm(total=p["total"], initial=p["done"] - p["measured"],
                                       desc=f"tune {self.label}", unit="trial", file=self.stream)
            self._bar.total = p["total"]
            self._bar.n = p["done"]
            self._bar.set_postfix_str(postfix, refresh=False)
            self._bar.refresh()
            return
        if not self._tty and not p["batch_end"]:
            return
        line = (
            f"tune {self.label}: {p['done']}/{p['total']} trials, {postfix}, "
            f"{p['rate']:.2f} trials/s"
        )
        if self._tty:
            self.stream.write("\r" + line.ljust(self._width))
            self._width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def interrupt(self) -> None:
        """Ends the current line, so a warning prints on its own."""
        if self._tty and self._width and self._tqdm is None:
            self.stream.write("\n")
            self._width = 0

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self.interrupt()
