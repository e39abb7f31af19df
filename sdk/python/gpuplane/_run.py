"""A Run: buffers log() calls and sends them from one background thread.

log() appends a tuple under a lock and returns; the flusher thread encodes what waits into
batches of at most 10,000 points, each with its own Idempotency-Key fixed when the batch is cut,
and posts them in order, retrying a batch with the same key until the API takes it. Memory is
bounded by `max_buffer` points (waiting to be cut or cut and not yet stored); past it, the
newest points are dropped and counted. This file is the user's side; the flusher thread's
methods are in sdk/python/gpuplane/_flusher.py, the retry rules in sdk/python/gpuplane/_http.py,
finish() and the local file in sdk/python/gpuplane/_ending.py.
"""

from __future__ import annotations

import itertools
import os
import platform
import re
import socket
import threading
import time
import uuid
from collections import deque
from operator import index as _index
from typing import Any, Deque, Dict, List, Mapping, Optional, Union

from . import _hooks
from ._config import FLUSH_AT_POINTS, MAX_BATCH_BYTES, MAX_BATCH_POINTS, MAX_PENDING_EVENTS, Settings
from ._encode import Batch, Encoder, clean_json
from ._flusher import EventItem as _EventItem, Flusher
from ._http import ApiError, AuthContext, dumps
from ._offline import OfflineFile, notice
from ._ending import Ending
from ._rung import RungGate
from ._warn import GpuplaneWarning, _warn  # GpuplaneWarning: gpuplane exports it from here

__version__ = "0.1.0"

KIND_RE = re.compile(r"^[a-z][a-z0-9_.\-]{0,63}$")
LEVELS = ("info", "warning", "error")

_time = time.time
_monotonic = time.monotonic




class Run(Ending, Flusher):
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
        auth: Optional[AuthContext] = None,
        mode: str = "online",
        run_line: Optional[Dict[str, Any]] = None,
        upload_api_url: Optional[str] = None,
        muted: bool = False,
        resume_from: Optional[str] = None,
    ):
        self.settings = settings or Settings.from_env()
        s = self.settings
        self.api_url = api_url
        self.attached = attached_id is not None
        self.params = params
        # The path of the checkpoint to load before training (GPUPLANE_RESUME_FROM), or None:
        # under a job's later attempt (re-queued after LOST, or retried) the latest checkpoint an
        # earlier one registered, else the job's resume_from. What it saves next is chained to it.
        self.resume_from = resume_from
        self._token = token  # only ever handed to Transport
        self._auth = auth or AuthContext(token_from="token=" if token else None, attached=attached_id is not None)
        self._id: Optional[str] = attached_id
        self._key_prefix = uuid.uuid4().hex
        # The run's own name for itself: the id of its offline file's run line, and (as
        # jsonl:<that>) the external_key it registers with, so that importing a file written
        # after the API went away mid-run adds to this run instead of making a second one.
        self.local_id = f"sdk-{self._key_prefix}"
        if create is not None:
            create = {**create, "external_key": f"jsonl:{self.local_id}"}
        self._create_body = dumps(clean_json(create)) if create is not None else None
        self._patch_body = dumps(clean_json(patch)) if patch else None
        if mode not in ("online", "offline"):
            raise ValueError(f"gpuplane: mode {mode!r} must be online or offline (GPUPLANE_MODE)")
        self.mode = mode
        self._run_line: Dict[str, Any] = clean_json(run_line or {})
        self._run_line.setdefault("started_at", int(_time() * 1000))
        self._upload_api_url = upload_api_url
        self._offline: Optional[OfflineFile] = None
        self._seq = itertools.count(1)

        self._lock = threading.Lock()
        self._raw: List[Any] = []  # data, step, ts, data, step, ts...; an event fills 3 slots at an _event_at
        self._event_at: List[int] = []
        self._kick_at = FLUSH_AT_POINTS  # log() wakes the flusher when _pending reaches this
        self._pending = 0  # points accepted and not yet stored: in _raw or in a cut batch
        self._pending_events = 0
        self._max = s.max_buffer
        self._step = 0
        # Not rank 0 of a job of several processes: log(), event() and finish() return at once.
        self.muted = muted
        self._off = muted  # log() refuses: finished, or the run could not be set up, or muted
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
        self._failing = False  # the API failed the flusher's last try, and has taken nothing since
        # The API answered 429 (its limit on points a second per run or per project) and has taken
        # nothing since: the outbox waits the Retry-After of _throttle_s, and finish() waits on.
        self._throttled = False
        self._throttle_s: Optional[float] = None
        self._throttle_wait_s = 0.0  # the waits 429s asked for since the API last took something
        self._was_throttled = False
        self._taken_at = _monotonic()  # when the API last took a batch or an event
        self._spill_wanted = False  # log() found the buffer full while the API was failing
        self._spill_broken = False  # the offline file could not be written: drop past the bound
        self._thread = threading.Thread(target=self._flusher, name="gpuplane-flusher", daemon=True)
        # A trial of an ASHA sweep: where log() waits for the sweep's verdict (sdk/python/gpuplane/_rung.py).
        self._rung = RungGate() if self.attached and mode == "online" and not muted else None

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
            if not self.muted:
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
            # Full while the API is failing: the flusher moves what waits to the offline file
            # (the spill), so up to twice the bound may wait meanwhile; past that, or when the
            # file cannot be written, the newest points are dropped.
            spill = p > self._max and (self._failing or self._throttled) and not self._spill_broken and p <= 2 * self._max
            if p <= self._max or spill:
                self._pending = p
                # Flat (data, step, ts) triples: no tuple per call for the garbage collector to track.
                self._raw.extend((data.copy() if data.__class__ is dict else dict(data), step, _time()))
            else:
                self.dropped += len(data)
        if spill:
            self._spill_wanted = True
            self._wake.set()  # every time: a wake-up the flusher cleared must not leave it asleep
        elif p > self._max:
            self._tell("full", self._full_message())
        elif p >= self._kick_at and not self._kicked:
            self._kicked = True
            self._wake.set()
        if self._rung is not None and self._rung.reached(step, data) and self._id is not None:
            self._rung.wait(step, self._id, self.api_url, self._token, self._auth, self.settings.request_timeout_s, self._sent)

    def _sent(self) -> Optional[bool]:
        """For a rung's wait: whether every point logged so far is stored (None: it will not be, now)."""
        if self._failing or self._auth_error is not None or self._setup_error is not None or self._off:
            return None
        with self._lock:
            left = self._pending
        if left:
            self._wake.set()
        return left == 0

    def event(self, kind: str, message: str, data: Optional[Mapping[str, Any]] = None, level: str = "info") -> None:
        """Records an event (kind like "checkpoint.saved"); sent in order with the metrics."""
        if not isinstance(kind, str) or not KIND_RE.fullmatch(kind):
            raise ValueError(f"event kind {kind!r} must match {KIND_RE.pattern}")
        if level not in LEVELS:
            raise ValueError(f"event level {level!r} must be one of {', '.join(LEVELS)}")
        body: Dict[str, Any] = {"kind": kind, "message": str(message), "level": level}
        if data is not None:
            body["data"] = clean_json(dict(data))
        if self._off:
            if not self.muted:
                self._refuse()
            return
        item = _EventItem(dumps(body), self._new_key(), int(_time() * 1000))
        with self._lock:
            full = not self._enqueue_event(item)
        if full:
            self._tell("events", f"gpuplane: more than {MAX_PENDING_EVENTS} events waiting for the API: newer events are dropped (counted)")

    # ---- lifecycle --------------------------------------------------------------------------

    def _start(self, wait_s: float) -> None:
        """Starts the flusher and waits up to `wait_s` for the run to be registered (or patched)."""
        if self.mode == "offline":
            self._open_offline()
            self._setup_done.set()
            notice(f"gpuplane: offline mode (GPUPLANE_MODE=offline): writing the run to {self._offline.path}")  # type: ignore[union-attr]
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


def system_tags() -> Dict[str, str]:
    return {
        "sdk": f"gpuplane-python/{__version__}",
        "hostname": socket.gethostname(),
        "pid": str(os.getpid()),
        "python": platform.python_version(),
    }
