"""How the SDK tells the user what it could not do: a warning, never an exception in their code."""

from __future__ import annotations

import sys
import warnings


class GpuplaneWarning(UserWarning):
    """Something the SDK could not do (points dropped, API unreachable at exit). Training goes on."""


def _warn(msg: str) -> None:
    # A warnings filter set to "error" must not kill the flusher thread or a training step.
    try:
        warnings.warn(msg, GpuplaneWarning, stacklevel=3)
    except Exception:  # noqa: BLE001
        try:
            sys.stderr.write(f"{msg}\n")
        except Exception:  # noqa: BLE001
            pass
