"""The sending half of a Run: the one background thread that cuts what log() and event()
buffered into batches and posts them in order, sets the run up, beats its heartbeat, and stops
for good on a refusal no retry can help. Its state is the Run's (sdk/python/gpuplane/_run.py, under its
lock where log() touches it too); this class only holds the methods that run on the thread.
"""

from __future__ import annotations

import time
import traceback
from typing import Any, List, Optional

from ._config import FLUSH_AT_POINTS
from ._encode import Batch
from ._http import ApiError, Transport, Unreachable, backoff_s, split_batch
from ._warn import _warn

_monotonic = time.monotonic


class EventItem:
    """An event as it waits in the outbox, with the Idempotency-Key it keeps across retries."""

    __slots__ = ("body", "key", "ts")

    def __init__(self, body: bytes, key: str, ts: Optional[int] = None):
        self.body = body
        self.key = key
        self.ts = ts  # epoch ms of the event() call: kept in the offline file


class Flusher:
    """Mixed into Run: the methods its flusher thread runs."""

    def _flusher(self) -> None:
        s = self.settings
        t = Transport(self.api_url, s.request_timeout_s, self._token, self._auth)
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
                    if self._spill_wanted and (self._failing or self._throttled) and self.mode != "offline":
                        self._spill_now()
                    now = _monotonic()
                    if failures == 0 or now >= retry_at:
                        tried = bool(self._outbox) or not self._setup_done.is_set()
                        if self._send_all(t):
                            failures = 0
                            if tried:
                                self._failing = False  # the API took something: it is back
                        else:
                            failures += 1
                            if self._throttle_s is not None:
                                # 429: the API is there and said when to send again (Retry-After); the
                                # batch waits in the outbox, whole, with its key.
                                retry_at = _monotonic() + self._throttle_s
                                self._throttle_s = None
                            else:
                                self._failing = True
                                retry_at = _monotonic() + backoff_s(failures, s.max_backoff_s)
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
                self._throttle(err)
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
        if self._offline is not None and self.mode == "offline":
            return self._write_all()
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
                    self._throttle(err)
                    return False
                if err.auth:
                    self._lose_auth(err)
                    return True
                if err.status == 413 and item.__class__ is Batch and item.points > 1:
                    box.popleft()
                    box.extendleft(reversed(split_batch(item, self._new_key)))
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
            self._taken_at = _monotonic()
            self._throttled = False
            self._throttle_wait_s = 0.0
            with self._lock:
                if item.__class__ is Batch:
                    self._pending -= item.points
                else:
                    self._pending_events -= 1
        return True

    def _throttle(self, err: ApiError) -> None:
        """A 429 (the API's limit on points a second per run or per project): the next try waits
        its Retry-After (the back-off when it gives none), and the run is throttled, not failing."""
        if err.status != 429:
            return
        self._throttled = True
        self._throttle_s = err.retry_after_s if err.retry_after_s is not None else backoff_s(2, self.settings.max_backoff_s)
        self._throttle_wait_s += self._throttle_s
        self._was_throttled = True
        self._tell("throttled", f"gpuplane: the API is rate-limiting this run; its points wait in the buffer and are sent again after the wait it asks for: {err}")

    def _write_all(self) -> bool:
        """Offline mode: the outbox goes to the run's file instead of the API."""
        box = self._outbox
        items = list(box)
        box.clear()
        self._offline.write(items)
        points = sum(i.points for i in items if i.__class__ is Batch)
        with self._lock:
            self._pending -= points
            self._pending_events -= len(items) - sum(1 for i in items if i.__class__ is Batch)
        return True

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
