"""Turns buffered log() calls into metric batches: JSON bytes of at most 10,000 points each.

This runs on the flusher thread, so log() itself only appends a tuple.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Dict, List, Optional

KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/ :]{0,249}$")
MAX_STEP = 2**53 - 1

_NAN = '"NaN"'
_INF = '"Infinity"'
_NINF = '"-Infinity"'


def value_json(v: Any) -> Optional[str]:
    """The JSON of one metric value, or None when it is not a number."""
    if v.__class__ is not float:
        try:
            v = float(v)  # ints, bools, numpy scalars, 1-element tensors
        except (TypeError, ValueError, OverflowError):
            return None
    if v - v == 0:
        return repr(v)  # a finite float's repr is valid JSON
    if v != v:
        return _NAN
    return _INF if v > 0 else _NINF


def clean_json(obj: Any, depth: int = 0) -> Any:
    """Params and event data as strict JSON: non-finite floats as strings, unknown types as text."""
    if depth > 64:
        return str(obj)
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "NaN" if obj != obj else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {str(k): clean_json(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v, depth + 1) for v in obj]
    try:
        return clean_json(float(obj), depth + 1)  # numpy scalars and the like
    except (TypeError, ValueError, OverflowError):
        return str(obj)


class Batch:
    __slots__ = ("body", "key", "points")

    def __init__(self, body: bytes, key: str, points: int):
        self.body = body
        self.key = key
        self.points = points


class Encoder:
    """Stateful: remembers which keys are valid and tells about a bad key or value once."""

    def __init__(self, max_points: int, max_bytes: int, new_key: Callable[[], str], warn: Callable[[str], None]):
        self.max_points = max_points
        self.max_bytes = max_bytes
        self._new_key = new_key
        self._warn = warn
        self._keys: Dict[str, Optional[str]] = {}
        self._longest = 0
        self._cap = max_points
        self._told_values: set = set()
        self.invalid = 0  # points dropped as not sendable (bad key, value or step)

    def _key_json(self, k: Any) -> Optional[str]:
        try:
            return self._keys[k]
        except (KeyError, TypeError):
            pass
        ok = isinstance(k, str) and KEY_RE.fullmatch(k) is not None  # match() would take "loss\n" ($ before a last newline)
        kj = '{"key":' + json.dumps(k) if ok else None
        if kj is not None:
            # Points per batch so that the body stays under max_bytes whatever the key lengths:
            # a point is its key, ~50 bytes of step and ts, a value of at most 24 and 2 of syntax.
            self._longest = max(self._longest, len(kj))
            self._cap = max(1, min(self.max_points, self.max_bytes // (self._longest + 80)))
        else:
            self._warn(f"gpuplane: metric key {k!r} is not valid (letters, digits and _ . - / space :, at most 250): its points are dropped")
        try:
            self._keys[k] = kj
        except TypeError:
            pass
        return kj

    def encode(self, raw: List[Any], out: List[Batch]) -> int:
        """Appends batches for `raw` (flat: data, step, ts, data, step, ts...) to `out`.

        Returns how many points were dropped as invalid. The hot loop is written for speed: it
        runs on the flusher thread, which shares the GIL with the training loop.
        """
        parts: List[str] = []
        dropped = 0
        keys = self._keys
        cap = self._cap
        append = parts.append
        it = iter(raw)
        for data, step, ts in zip(it, it, it):
            if step > MAX_STEP:
                dropped += len(data)
                self._warn_once(("step",), f"gpuplane: step {step} is above 2^53-1: points dropped")
                continue
            tail = f',"step":{step},"ts":{int(ts * 1000)},"value":'
            for k, v in data.items():
                kj = keys.get(k)  # keys of a dict are hashable
                if kj is None:
                    kj = self._key_json(k)
                    if kj is None:
                        dropped += 1
                        continue
                    cap = self._cap
                if v.__class__ is float and v - v == 0:
                    append(f"{kj}{tail}{v!r}}}")
                else:
                    vj = value_json(v)
                    if vj is None:
                        dropped += 1
                        self._warn_once(("value", k), f"gpuplane: value {v!r} of {k!r} is not a number: dropped")
                        continue
                    append(f"{kj}{tail}{vj}}}")
                if len(parts) >= cap:
                    self._cut(parts, out)
                    parts = []
                    append = parts.append
        if parts:
            self._cut(parts, out)
        self.invalid += dropped
        return dropped

    def _cut(self, parts: List[str], out: List[Batch]) -> None:
        body = ('{"points":[' + ",".join(parts) + "]}").encode("utf-8")
        out.append(Batch(body, self._new_key(), len(parts)))

    def _warn_once(self, what: Any, msg: str) -> None:
        if what not in self._told_values:
            self._told_values.add(what)
            self._warn(msg)
