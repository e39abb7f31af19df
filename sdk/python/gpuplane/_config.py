"""Settings from the environment, read once per run."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_API_URL = "http://127.0.0.1:8787"

# Server limits (the HTTP contract): points per POST, and a byte budget under Fastify's
# default 1 MiB body limit, whatever the key lengths.
MAX_BATCH_POINTS = 10_000
MAX_BATCH_BYTES = 900_000
# The flusher wakes early when this many points wait.
FLUSH_AT_POINTS = 5_000
# Events are few; their own bound keeps a runaway caller from growing the buffer.
MAX_PENDING_EVENTS = 10_000


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        v = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if not v >= 0:
        raise ValueError(f"{name}={raw!r} must be >= 0")
    return v


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        v = int(raw.replace("_", ""))
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    if v < 1:
        raise ValueError(f"{name}={raw!r} must be >= 1")
    return v


@dataclass(frozen=True)
class Settings:
    max_buffer: int
    heartbeat_s: float
    flush_interval_s: float
    flush_timeout_s: float
    init_timeout_s: float
    request_timeout_s: float
    max_backoff_s: float

    @staticmethod
    def from_env() -> "Settings":
        return Settings(
            max_buffer=_int_env("GPUPLANE_SDK_MAX_BUFFER", 1_000_000),
            heartbeat_s=_float_env("GPUPLANE_SDK_HEARTBEAT_S", 30.0),
            flush_interval_s=_float_env("GPUPLANE_SDK_FLUSH_INTERVAL_S", 1.0),
            flush_timeout_s=_float_env("GPUPLANE_SDK_FLUSH_TIMEOUT_S", 30.0),
            init_timeout_s=_float_env("GPUPLANE_SDK_INIT_TIMEOUT_S", 10.0),
            request_timeout_s=_float_env("GPUPLANE_SDK_REQUEST_TIMEOUT_S", 10.0),
            max_backoff_s=_float_env("GPUPLANE_SDK_MAX_BACKOFF_S", 5.0),
        )
