"""Ends open runs when the program does: atexit finishes them, an uncaught exception fails them.

The hooks are installed once, on the first init(); sys.excepthook is chained, so whatever hook was
there before (IPython's, a crash reporter's) still runs, first, so the traceback shows before the
bounded flush.
"""

from __future__ import annotations

import atexit
import sys
import threading
import traceback
from typing import Any, List

_open: List[Any] = []
_lock = threading.Lock()
_installed = False


def remember(run: Any) -> None:
    global _installed
    with _lock:
        _open.append(run)
        if _installed:
            return
        _installed = True
    atexit.register(_at_exit)
    previous = sys.excepthook

    def hook(exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            previous(exc_type, exc, tb)
        finally:
            _on_uncaught(exc_type, exc, tb)

    sys.excepthook = hook


def forget(run: Any) -> None:
    with _lock:
        if run in _open:
            _open.remove(run)


def _open_runs() -> List[Any]:
    with _lock:
        return list(reversed(_open))


def _on_uncaught(exc_type: Any, exc: Any, tb: Any) -> None:
    # Ctrl-C is the user stopping the run, not the run failing.
    status = "cancelled" if issubclass(exc_type, KeyboardInterrupt) else "failed"
    for run in _open_runs():
        try:
            lines = traceback.format_exception(exc_type, exc, tb)
            run.event(
                "sdk.exception",
                f"{exc_type.__name__}: {exc}"[:1000],
                {"traceback": "".join(lines)[-8000:]},
                "error" if status == "failed" else "warning",
            )
            run.finish(status)
        except Exception as err:  # noqa: BLE001
            sys.stderr.write(f"gpuplane: could not finish run on exit: {err!r}\n")


def _at_exit() -> None:
    for run in _open_runs():
        try:
            run.finish("finished")
        except Exception as err:  # noqa: BLE001
            sys.stderr.write(f"gpuplane: could not finish run on exit: {err!r}\n")
