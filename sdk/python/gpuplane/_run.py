"""A Run: buffers log() calls and sends them from one background thread.

log() appends a tuple under a lock and returns; the flusher thread encodes what waits into
batches of at most 10,000 points, each with its own Idempotency-Key fixed when the batch is cut,
and posts them in order, retrying a batch with the same key until the API takes it. Memory is
bounded by `max_buffer` points (waiting to be cut or cut and not yet stored); past it, the
newest points are dropped and counted.
"""

from __future__ import annotations

import itertools
import os
import platform
import re
import socket
import sys
import threading
import time
import traceback
import uuid
import warnings
from collections import deque
from operator import index as _index
from typing import Any, Deque, Dict, List, Mapping, Optional, Union

from . import _hooks
from ._config import FLUSH_AT_POINTS, MAX_BATCH_BYTES, MAX_BATCH_POINTS, MAX_PENDING_EVENTS, Settings
from ._encode import Batch, Encoder, clean_json
from ._http import ApiError, Transport, Unreachable, dumps

__version__ = "0.1.0"

KIND_RE = re.compile(r"^[a-z][a-z0-9_.\-]{0,63}$")
LEVELS = ("info", "warning", "error")
FINISH_STATUSES = ("finished", "failed", "cancelled")

_time = time.time
_monotonic = time.monotonic


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


class _EventItem:
    __slots__ = ("body", "key")

    def __init__(self, body: bytes, key: str):
        self.body = body
        self.key = key


class Run:
    """One run in GPUPlane. Make one with gpuplane.init()."""

    def __init__(
        self,
        api_url: str,
        *,
        attached_id: Optional[str],
        create: Optional[Dict[str, Any]],
        patch: Optional[Dict[str, Any]],
        params: Dict[str, Any],
        settings: Optional[Settings] = None,
        token: Optional[str] = None,
    ):
        self.settings = settings or Settings.from_env()
        s = self.settings
        self.api_url = api_url
        self.attached = attached_id is not None
        self.params = params
        self._token = token  # only ever handed to Transport
        self._id: Optional[str] = attached_id
        self._create_body = dumps(clean_json(create)) if create is not None else None
        self._patch_body = dumps(clean_json(patch)) if patch else None
        self._key_prefix = uuid.uuid4().hex
        self._seq = itertools.count(1)

        self._lock = threading.Lock()
        self._raw: List[Any] = []  # data, step, ts, data, step, ts...; an event fills 3 slots at an _event_at
        self._event_at: List[int] = []
        self._kick_at = FLUSH_AT_POINTS  # log() wakes the flusher when _pending reaches this
        self._pending = 0  # points accepted and not yet stored: in _raw or in a cut batch
        self._pending_events = 0
        self._max = s.max_buffer
        self._step = 0
        self._off = False  # log() refuses: finished, or the run could not be set up
        self._kicked = False
        self._finished = False
        self.dropped = 0  # points refused because the buffer was full (the newest ones)
        self.dropped_events = 0
        self.rejected = 0  # points the API refused (400) or the encoder found invalid
        self._told: set = set()

        self._outbox: Deque[Union[Batch, _EventItem]] = deque()
        self._encoder = Encoder(MAX_BATCH_POINTS, MAX_BATCH_BYTES, self._new_key, _warn)
        self._wake = threading.Event()
        self._setup_done = threading.Event()
        self._setup_error: Optional[BaseException] = None
        self._auth_error: Optional[ApiError] = None  # a 401/403 after setup: nothing more is sent
        self._drained = threading.Event()
        self._stop = False
        self._abandon = False
        self._init_waiting = False
        self._thread = threading.Thread(target=self._flusher, name="gpuplane-flusher", daemon=True)

    # ---- the user's side ------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"<gpuplane.Run id={self._id!r} api_url={self.api_url!r}>"

    @property
    def id(self) -> Optional[str]:
        """The run's id; None while a self-registering run has not reached the API yet."""
        return self._id

    def log(self, data: Mapping[str, Any], step: Optional[int] = None) -> None:
        """Buffers {key: value} at `step` (default: one more than the last step logged)."""
        if self._off:
            self._refuse()
            return
        # Warnings are given outside the lock: a warnings handler that logs must not deadlock.
        with self._lock:
            if step is None:
                step = self._step
            elif step.__class__ is not int:
                step = _index(step)
            if step < 0:
                raise ValueError(f"step must be >= 0, got {step}")
            self._step = step + 1
            p = self._pending + len(data)
            if p <= self._max:
                self._pending = p
                # Flat (data, step, ts) triples: no tuple per call for the garbage collector to track.
                self._raw.extend((data.copy() if data.__class__ is dict else dict(data), step, _time()))
            else:
                self.dropped += len(data)
        if p > self._max:
            self._tell("full", self._full_message())
        elif p >= self._kick_at and not self._kicked:
            self._kicked = True
            self._wake.set()

    def event(self, kind: str, message: str, data: Optional[Mapping[str, Any]] = None, level: str = "info") -> None:
        """Records an event (kind like "checkpoint.saved"); sent in order with the metrics."""
        if not isinstance(kind, str) or not KIND_RE.match(kind):
            raise ValueError(f"event kind {kind!r} must match {KIND_RE.pattern}")
        if level not in LEVELS:
            raise ValueError(f"event level {level!r} must be one of {', '.join(LEVELS)}")
        body: Dict[str, Any] = {"kind": kind, "message": str(message), "level": level}
        if data is not None:
            body["data"] = clean_json(dict(data))
        item = _EventItem(dumps(body), self._new_key())
        if self._off:
            self._refuse()
            return
        with self._lock:
            full = not self._enqueue_event(item)
        if full:
            self._tell("events", f"gpuplane: more than {MAX_PENDING_EVENTS} events waiting for the API: newer events are dropped (counted)")

    def finish(self, status: str = "finished", timeout: Optional[float] = None) -> None:
        """Flushes (waiting at most `timeout` s, default GPUPLANE_SDK_FLUSH_TIMEOUT_S) and ends the run.

        Under a job (GPUPLANE_RUN_ID set) it only flushes: the job's outcome sets the run's status.
        """
        if status not in FINISH_STATUSES:
            raise ValueError(f"status {status!r} must be one of {', '.join(FINISH_STATUSES)}")
        with self._lock:
            if self._finished:
                return
            self._finished = True
            lost = self.dropped
            if lost or self.dropped_events:
                # Tell the run itself, so whoever reads it knows its series have a hole.
                body = {
                    "kind": "sdk.points_dropped",
                    "message": f"the SDK's buffer was full ({self._max} points): the {lost} newest points were dropped",
                    "level": "warning",
                    "data": {"dropped_points": lost, "dropped_events": self.dropped_events, "max_buffer": self._max},
                }
                self._enqueue_event(_EventItem(dumps(body), self._new_key()))
            self._off = True
        _hooks.forget(self)
        if timeout is None:
            timeout = self.settings.flush_timeout_s
        deadline = _monotonic() + timeout
        self._stop = True
        self._wake.set()
        if not self._thread.is_alive() and not self._drained.is_set():
            self._drained.set()  # never started (init failed)
        if not self._drained.wait(timeout):
            self._abandon = True
            self._wake.set()
            with self._lock:
                left = self._pending
            _warn(f"gpuplane: gave up flushing after {timeout:g} s (API at {self.api_url} unreachable?): {left} points not stored")
        if self.attached or self._setup_error is not None or self._auth_error is not None:
            return
        if self._id is None:
            _warn("gpuplane: the run never reached the API: nothing was stored")
            return
        self._finish_call(status, max(deadline - _monotonic(), 2.0))

    # ---- lifecycle --------------------------------------------------------------------------

    def _start(self, wait_s: float) -> None:
        """Starts the flusher and waits up to `wait_s` for the run to be registered (or patched)."""
        if self._create_body is None and self._patch_body is None:
            self._setup_done.set()
        _hooks.remember(self)
        self._init_waiting = True
        self._thread.start()
        ok = self._setup_done.wait(wait_s)
        self._init_waiting = False
        if not ok:
            _warn(f"gpuplane: API at {self.api_url} not reachable yet: logging to the buffer, and registering the run in the background")
            return
        if self._setup_error is not None:
            _hooks.forget(self)
            raise self._setup_error

    def _finish_call(self, status: str, budget_s: float) -> None:
        t = Transport(self.api_url, min(self.settings.request_timeout_s, budget_s), self._token)
        deadline = _monotonic() + budget_s
        delay = 0.2
        try:
            while True:
                try:
                    t.request("POST", f"/runs/{self._id}/finish", dumps({"status": status}))
                    return
                except ApiError as err:
                    if not err.retryable:
                        _warn(f"gpuplane: could not finish run {self._id}: {err}")
                        return
                    last: Exception = err
                except Unreachable as err:
                    last = err
                if _monotonic() + delay > deadline:
                    _warn(f"gpuplane: could not finish run {self._id} ({last}); the server marks it crashed when its heartbeats stop")
                    return
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        finally:
            t.close()

    # ---- helpers under the lock ---------------------------------------------------------------

    def _enqueue_event(self, item: _EventItem) -> bool:
        """Under the lock. False when the events' bound is reached (the event is dropped and counted)."""
        if self._pending_events >= MAX_PENDING_EVENTS:
            self.dropped_events += 1
            return False
        self._pending_events += 1
        self._event_at.append(len(self._raw))
        self._raw.extend((item, None, None))
        self._wake.set()
        return True

    def _full_message(self) -> str:
        return (
            f"gpuplane: {self._max} points are waiting for the API (GPUPLANE_SDK_MAX_BUFFER): "
            "newer points are dropped and counted until it catches up"
        )

    def _refuse(self) -> None:
        self._tell("off", "gpuplane: log()/event() after finish(), or on a run the API refused: ignored")

    def _tell(self, what: str, msg: str) -> None:
        if what not in self._told:
            self._told.add(what)
            _warn(msg)

    def _new_key(self) -> str:
        return f"{self._key_prefix}-{next(self._seq)}"

    # ---- the flusher thread -------------------------------------------------------------------

    def _flusher(self) -> None:
        s = self.settings
        t = Transport(self.api_url, s.request_timeout_s, self._token)
        failures = 0
        retry_at = 0.0
        next_beat = _monotonic() + s.heartbeat_s
        try:
            while not self._abandon:
                now = _monotonic()
                if failures:
                    wait = retry_at - now
                elif self._stop:
                    wait = 0.0
                else:
                    wait = s.flush_interval_s
                if not self.attached and self._id is not None:
                    wait = min(wait, next_beat - now)
                if wait > 0:
                    self._wake.wait(wait)
                self._wake.clear()
                self._kicked = False
                if self._abandon:
                    break
                try:
                    self._cut()
                    now = _monotonic()
                    if failures == 0 or now >= retry_at:
                        if self._send_all(t):
                            failures = 0
                        else:
                            failures += 1
                            retry_at = _monotonic() + min(s.max_backoff_s, 0.25 * 2 ** min(failures - 1, 10))
                    if failures == 0 and self._auth_error is None and not self.attached and self._id is not None and _monotonic() >= next_beat:
                        next_beat = _monotonic() + s.heartbeat_s
                        self._heartbeat(t)
                except Exception as err:  # noqa: BLE001  (a bug must not silently stop all sending)
                    self._tell("bug", f"gpuplane: flusher error, retrying: {err!r}\n{traceback.format_exc()}")
                    failures += 1
                    retry_at = _monotonic() + s.max_backoff_s
                # Nothing more to send: finished and drained, or refused for good (4xx at setup, 401/403).
                if self._auth_error is not None or self._setup_error is not None or (self._stop and failures == 0 and self._idle()):
                    self._drained.set()
                    return
        finally:
            t.close()

    def _idle(self) -> bool:
        with self._lock:
            return not self._raw and not self._outbox

    def _cut(self) -> None:
        """Moves what log()/event() buffered into encoded batches, each with its key."""
        with self._lock:
            raw = self._raw
            if not raw:
                return
            at = self._event_at
            self._raw = []
            self._event_at = []
            self._kick_at = self._pending + FLUSH_AT_POINTS
        out: List[Any] = []
        invalid = 0
        start = 0
        for i in at:
            if i > start:
                invalid += self._encoder.encode(raw[start:i], out)
            out.append(raw[i])
            start = i + 3
        if start < len(raw):
            invalid += self._encoder.encode(raw[start:] if start else raw, out)
        if invalid:
            with self._lock:
                self._pending -= invalid
                self.rejected += invalid
        self._outbox.extend(out)

    def _setup(self, t: Transport) -> bool:
        try:
            if self._create_body is not None:
                run = t.request("POST", "/runs", self._create_body, {"Idempotency-Key": f"{self._key_prefix}-run"})
                self._id = run["id"]
            elif self._patch_body is not None:
                t.request("PATCH", f"/runs/{self._id}", self._patch_body)
        except Unreachable:
            return False
        except ApiError as err:
            if err.retryable:
                return False
            self._fail_setup(err)
            return True
        self._setup_done.set()
        return True

    def _fail_setup(self, err: ApiError) -> None:
        self._setup_error = err
        with self._lock:
            self._off = True
            self._raw = []
            self._event_at = []
            self._pending = 0
        self._outbox.clear()
        self._setup_done.set()
        if not self._init_waiting:
            # init() has returned (the API was away then): a warning is all that is left to give.
            _warn(f"gpuplane: the run could not be set up, nothing will be sent: {err}")

    def _send_all(self, t: Transport) -> bool:
        """Sends the outbox in order; False at the first failure worth retrying."""
        if not self._setup_done.is_set() and not self._setup(t):
            return False
        if self._setup_error is not None:
            self._outbox.clear()
            return True
        box = self._outbox
        while box and not self._abandon:
            item = box[0]
            if item.__class__ is Batch:
                path = f"/runs/{self._id}/metrics"
            else:
                path = f"/runs/{self._id}/events"
            try:
                t.request("POST", path, item.body, {"Idempotency-Key": item.key})
            except Unreachable:
                return False
            except ApiError as err:
                if err.retryable:
                    return False
                if err.auth:
                    self._lose_auth(err)
                    return True
                if err.status == 413 and item.__class__ is Batch and item.points > 1:
                    box.popleft()
                    box.extendleft(reversed(self._split(item)))
                    continue
                self._tell(f"reject-{err.status}", f"gpuplane: the API refused a {'metrics batch' if item.__class__ is Batch else 'event'}: {err}")
                box.popleft()
                with self._lock:
                    if item.__class__ is Batch:
                        self._pending -= item.points
                        self.rejected += item.points
                    else:
                        self._pending_events -= 1
                continue
            box.popleft()
            with self._lock:
                if item.__class__ is Batch:
                    self._pending -= item.points
                else:
                    self._pending_events -= 1
        return True

    def _split(self, b: Batch) -> List[Batch]:
        # Not stored (the server refused it whole): two halves under new keys.
        import json

        pts = json.loads(b.body)["points"]
        h = len(pts) // 2
        return [Batch(dumps({"points": part}), self._new_key(), len(part)) for part in (pts[:h], pts[h:])]

    def _heartbeat(self, t: Transport) -> None:
        try:
            t.request("POST", f"/runs/{self._id}/heartbeat", b"{}")
        except Unreachable:
            pass
        except ApiError as err:
            if err.auth:
                self._lose_auth(err)
            else:
                self._tell(f"beat-{err.status}", f"gpuplane: heartbeat refused: {err}")

    def _lose_auth(self, err: ApiError) -> None:
        """A 401/403 once the run is set up (a revoked token, one of another project): retrying
        cannot help, so the run stops sending, with one warning, and training goes on."""
        self._auth_error = err
        with self._lock:
            self._off = True
            lost = self._pending
            self.rejected += lost
            self._raw = []
            self._event_at = []
            self._pending = 0
            self._pending_events = 0
        self._outbox.clear()
        self._tell("auth", f"gpuplane: the API refused the SDK's token: {err}; nothing more is sent for this run ({lost} points dropped)")


def system_tags() -> Dict[str, str]:
    return {
        "sdk": f"gpuplane-python/{__version__}",
        "hostname": socket.gethostname(),
        "pid": str(os.getpid()),
        "python": platform.python_version(),
    }
