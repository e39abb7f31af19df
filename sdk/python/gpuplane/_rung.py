"""An ASHA sweep's trial waits at each rung for the sweep's verdict (docs/sweeps.md).

The sweep gives its trials GPUPLANE_SWEEP_METRIC and GPUPLANE_SWEEP_RUNGS (the rungs' steps). When
log() records that metric at or past a rung's step, the run sends what it buffered at once and
asks GET /runs/{id}/rung-verdict until the sweep has weighed it there: `continue` returns, and
`stop` waits for the SIGTERM that the sweep's stop sends (the trial trains no step past the rung
it was stopped at, as with Optuna's should_prune). GPUPLANE_SWEEP_RUNG_WAIT_S (default 30; 0:
never wait) bounds each wait: past it, or when the API cannot answer, the trial goes on training,
and the sweep's stop still comes, only later.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, List, Mapping, Optional

from ._config import _float_env
from ._http import ApiError, AuthContext, Transport, Unreachable
from ._offline import notice

DEFAULT_WAIT_S = 30.0


def _rungs_from_env() -> List[int]:
    raw = os.environ.get("GPUPLANE_SWEEP_RUNGS") or ""
    out = []
    for part in raw.split(","):
        part = part.strip()
        if part.isdigit():
            out.append(int(part))
    return sorted(out)


class RungGate:
    """Where a trial waits: the rungs not yet passed, the metric, and the bound on a wait."""

    def __init__(self) -> None:
        self.metric: Optional[str] = os.environ.get("GPUPLANE_SWEEP_METRIC") or None
        self.rungs: List[int] = _rungs_from_env() if self.metric else []
        self.wait_s = _float_env("GPUPLANE_SWEEP_RUNG_WAIT_S", DEFAULT_WAIT_S)

    def reached(self, step: int, data: Mapping[str, Any]) -> bool:
        """True once per rung: the metric logged at or past the next rung's step (all rungs up to `step` are passed)."""
        if not self.rungs or step < self.rungs[0] or self.metric not in data:
            return False
        while self.rungs and self.rungs[0] <= step:
            self.rungs.pop(0)
        return self.wait_s > 0

    def wait(
        self,
        step: int,
        run_id: str,
        api_url: str,
        token: Optional[str],
        auth: AuthContext,
        request_timeout_s: float,
        sent: Callable[[], Optional[bool]],
    ) -> None:
        """Blocks until the sweep's verdict at `step` lets the trial go on (or the bound runs out).

        `sent()` says whether what log() buffered has been stored: True, False (not yet), or
        None when it never will be now (the API is failing, the token refused): then no wait.
        """
        deadline = time.monotonic() + self.wait_s
        while True:
            s = sent()
            if s is None:
                return
            if s:
                break
            if time.monotonic() >= deadline:
                return
            time.sleep(0.005)
        t = Transport(api_url, request_timeout_s + 11, token, auth)
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                try:
                    v = t.request("GET", f"/runs/{run_id}/rung-verdict?step={step}&wait_s={int(min(10, left))}")
                except (ApiError, Unreachable):
                    return  # the plane's trouble never holds training up
                decision = v.get("decision") if isinstance(v, dict) else None
                if decision == "stop":
                    notice(f"gpuplane: {v.get('reason') or 'the sweep stopped this trial'}: waiting for its SIGTERM")
                    end = time.monotonic() + self.wait_s
                    while time.monotonic() < end:
                        time.sleep(0.05)
                    return
                if decision != "pending":
                    return
        finally:
            t.close()
