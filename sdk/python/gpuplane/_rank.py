"""Which processes of a distributed job send: rank 0 only, unless the script asks for every rank.

A job has one run per attempt, shared by all its processes: every member of a multi-node job,
and every worker torchrun starts on a node. Were each to log, the run would get every point N
times. So under a job (GPUPLANE_RUN_ID set) a process whose global rank is above 0 gets a muted
run: log(), event() and finish() do nothing and nothing is sent. The rank is RANK when set
(torchrun sets it per worker: the global rank across nodes), else GPUPLANE_NODE_RANK (the member's
rank in a multi-node job), else 0. Outside a job nothing is muted: RANK may mean anything there.
"""

from __future__ import annotations

from typing import Mapping, Optional

TRUE = ("1", "true", "yes", "on")
FALSE = ("", "0", "false", "no", "off")


def process_rank(env: Mapping[str, str]) -> int:
    """process_rank: this process's global rank in its job (RANK, else GPUPLANE_NODE_RANK, else 0).

    A value that is not an integer is passed over: better a rank that logs than one that crashes.
    """
    for name in ("RANK", "GPUPLANE_NODE_RANK"):
        raw = (env.get(name) or "").strip()
        if raw.isdigit():
            return int(raw)
    return 0


def all_ranks_from(env: Mapping[str, str]) -> bool:
    """all_ranks_from: GPUPLANE_LOG_ALL_RANKS as a boolean (unset: False)."""
    raw = (env.get("GPUPLANE_LOG_ALL_RANKS") or "").strip().lower()
    if raw in TRUE:
        return True
    if raw in FALSE:
        return False
    raise ValueError(f"gpuplane: GPUPLANE_LOG_ALL_RANKS={raw!r} must be 1 or 0")


def muted(env: Mapping[str, str], all_ranks: Optional[bool]) -> bool:
    """muted: True where this process must not send: under a job, rank above 0, no opt-in."""
    if not env.get("GPUPLANE_RUN_ID"):
        return False
    if all_ranks is None:
        all_ranks = all_ranks_from(env)
    return not all_ranks and process_rank(env) > 0
