"""How a Run ends (the Run class in _run.py takes these methods): finish(), its wait for the
flusher to drain, and the run's local JSONL file where the API is away: offline mode, the spill
of a full buffer, and what the API had not taken when finish() gave up on it. Each way out says,
once, where the file is and the command that uploads it.
"""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

from . import _hooks
from ._encode import Batch
from ._flusher import EventItem as _EventItem
from ._http import MAX_RETRY_AFTER_S, dumps, finish_run
from ._offline import OfflineFile, file_path, notice, offline_dir, upload_command
from ._warn import _warn

FINISH_STATUSES = ("finished", "failed", "cancelled")

_time = time.time
_monotonic = time.monotonic


def _offline_event(message: str, status: str, path: str) -> "_EventItem":
    """The `sdk.offline` event that tells, in the run itself, that part of it came from the offline file."""
    return _EventItem(dumps({"kind": "sdk.offline", "message": message, "level": "warning", "data": {"status": status, "file": path}}), "", int(_time() * 1000))


class Ending:
    """finish() and the local file, as methods of a Run (the state they read is the Run's own)."""

    def finish(self, status: str = "finished", timeout: Optional[float] = None) -> None:
        """Flushes (waiting at most `timeout` s, default GPUPLANE_SDK_FLUSH_TIMEOUT_S) and ends the run.

        Under a job (GPUPLANE_RUN_ID set) it only flushes: the job's outcome sets the run's status.
        """
        if status not in FINISH_STATUSES:
            raise ValueError(f"status {status!r} must be one of {', '.join(FINISH_STATUSES)}")
        if self.muted:
            self._finished = True
            return
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
                self._enqueue_event(_EventItem(dumps(body), self._new_key(), int(_time() * 1000)))
            self._off = True
        _hooks.forget(self)
        if timeout is None:
            timeout = self.settings.flush_timeout_s
        deadline = _monotonic() + timeout
        self._stop = True
        self._wake.set()
        if not self._thread.is_alive() and not self._drained.is_set():
            self._drained.set()  # never started (init failed)
        first = min(1.0, timeout)
        drained = self._drained.wait(first)
        if not drained and timeout > first:
            if self._failing and self.mode != "offline" and self._setup_error is None and self._auth_error is None:
                # Say what the wait is for: a script that seems to hang at its end is a surprise.
                with self._lock:
                    left = self._pending
                notice(
                    f"gpuplane: the API at {self.api_url} is not answering: waiting up to {timeout - first:g} s more for it to take "
                    f"{left} points (GPUPLANE_SDK_FLUSH_TIMEOUT_S); after that they are written to a local file"
                )
            drained = self._wait_drained(deadline, timeout)
        if not drained:
            self._abandon = True
            self._wake.set()
            # Let a request in flight end (it is answered or times out), then keep what is left.
            self._thread.join(self.settings.request_timeout_s + 1)
        if self.mode == "offline":
            if not drained and self._offline is not None:
                self._cut()
                self._write_all()
            self._close_offline(status)
            return
        if drained and self._offline is not None:
            self._close_spilled(status)
        if not drained and (self._setup_error is not None or self._auth_error is not None or not self._write_rest(status)):
            with self._lock:
                left = self._pending
            _warn(f"gpuplane: gave up flushing after {timeout:g} s (API at {self.api_url} unreachable?): {left} points not stored")
        if self.attached or self._setup_error is not None or self._auth_error is not None:
            return
        if self._id is None:
            return  # never registered: the whole run is in its file (or a warning said why not)
        failed = finish_run(self.api_url, self._token, self._id, status, max(deadline - _monotonic(), 2.0), self.settings.request_timeout_s, self._auth)
        if failed:
            _warn(failed)

    def _wait_drained(self, deadline: float, timeout: float) -> bool:
        """Waits for the flusher to drain until `deadline`. A run the API rate-limits (429) waits
        on while the API keeps taking its batches: until it has taken nothing for `timeout` s
        beyond the waits its 429s asked for since (those counted up to MAX_RETRY_AFTER_S)."""
        told = False
        while True:
            end = deadline
            # Throttled at some point: between a batch taken and the next 429 the flag is down.
            if self._was_throttled:
                end = max(end, self._taken_at + min(self._throttle_wait_s, MAX_RETRY_AFTER_S) + timeout)
                if not told and end > deadline:
                    told = True
                    with self._lock:
                        left = self._pending
                    notice(
                        f"gpuplane: the API at {self.api_url} is rate-limiting this run (HTTP 429): waiting for it to take the {left} points "
                        f"left, as fast as it allows; the wait ends if it takes nothing for {timeout:g} s (GPUPLANE_SDK_FLUSH_TIMEOUT_S) beyond the waits it asks for"
                    )
            now = _monotonic()
            if now >= end:
                return self._drained.is_set()
            if self._drained.wait(min(end - now, 1.0)):
                return True

    @property
    def offline_file(self) -> Optional[str]:
        """The path of the run's local JSONL file, when it has one (offline mode, or the API away at the end)."""
        return self._offline.path if self._offline is not None else None

    # ---- the run's local file -----------------------------------------------------------------

    def _open_offline(self, extra: Optional[Dict[str, Any]] = None) -> OfflineFile:
        line = {"id": self.local_id, **self._run_line, **(extra or {})}
        label = line.get("name") or line.get("project")
        self._offline = OfflineFile(file_path(offline_dir(), label, self._key_prefix), line)
        return self._offline

    def _write_rest(self, status: str) -> bool:
        """The API stayed away past finish()'s wait: what it did not take goes to the run's file,
        with the upload command on stderr. False when the file could not be written."""
        try:
            self._cut()
            items = list(self._outbox)
            self._outbox.clear()
            whole = self._id is None and not self.attached
            extra: Dict[str, Any] = {}
            if self.attached:
                extra["system_tags"] = {**self._run_line.get("system_tags", {}), "sdk.job_run": str(self._id)}
            f = self._offline or self._open_offline(extra)
            if not whole:
                f.write([_offline_event(f"the API was away at the end of the run: what it had not stored was written to {f.path} and imported from there; the script ended {status}", status, f.path)])
            f.write(items)
            with self._lock:
                self._pending = 0
                self._pending_events = 0
            f.close(status)
        except Exception as err:  # noqa: BLE001
            _warn(f"gpuplane: could not write the run's offline file ({err!r})")
            return False
        what = "the run" if whole else ("what the job's run had not stored" if self.attached else f"what run {self._id} had not stored")
        notice(
            f"gpuplane: WARNING: the API at {self.api_url} could not be reached: {what} ({f.points} points, {f.events} events) was written to\n"
            f"gpuplane:   {f.path}\n"
            f"gpuplane: upload it when the API is back:\n"
            f"gpuplane:   {upload_command(f.path, self._upload_api_url)}"
        )
        return True

    def _spill_now(self) -> None:
        """On the flusher thread: the buffer is full and the API away, so what waits goes to the
        run's file, making room; the API gets what is logged from now on when it comes back."""
        self._spill_wanted = False
        items = list(self._outbox)
        self._outbox.clear()
        try:
            extra = {"system_tags": {**self._run_line.get("system_tags", {}), "sdk.job_run": str(self._id)}} if self.attached else None
            first = self._offline is None
            f = self._offline or self._open_offline(extra)
            f.write(items)
        except Exception as err:  # noqa: BLE001
            self._outbox.extendleft(reversed(items))
            self._spill_broken = True
            _warn(f"gpuplane: could not write the run's offline file ({err!r}): past GPUPLANE_SDK_MAX_BUFFER the newest points are dropped")
            return
        points = sum(i.points for i in items if i.__class__ is Batch)
        with self._lock:
            self._pending -= points
            self._pending_events -= len(items) - sum(1 for i in items if i.__class__ is Batch)
        if first:
            away = "is rate-limiting this run (HTTP 429)" if self._throttled and not self._failing else "is away"
            notice(
                f"gpuplane: the API at {self.api_url} {away} and {self._max} points wait (GPUPLANE_SDK_MAX_BUFFER): "
                f"what waits goes to {f.path} (the end of the run says how to upload it)"
            )

    def _close_spilled(self, status: str) -> None:
        """The API took the end of the run, but part of it was spilled to the file earlier."""
        f = self._offline
        first = [_offline_event(f"the API was away during the run: {f.points} points it had not stored were written to {f.path} and imported from there", status, f.path)] if self._id is not None else []
        self._close_file(f, status, first, f"the API at {self.api_url} was away during the run: part of it", "is only in", "upload it:")

    def _close_offline(self, status: str) -> None:
        f = self._offline
        if f is None:
            return
        self._close_file(f, status, [], "offline mode (GPUPLANE_MODE=offline): nothing was sent to an API; the run", "is in", "upload it with:")

    def _close_file(self, f: OfflineFile, status: str, last: list, what: str, where: str, how: str) -> None:
        """Writes `last` and closes the file, then says where it is and how to upload it (or why it could not be completed)."""
        try:
            if last:
                f.write(last)
            f.close(status)
        except Exception as err:  # noqa: BLE001
            notice(f"gpuplane: WARNING: could not complete the offline file {f.path}: {err!r}")
            return
        notice(
            f"gpuplane: WARNING: {what} ({f.points} points, {f.events} events) {where}\n"
            f"gpuplane:   {f.path}\n"
            f"gpuplane: {how}\n"
            f"gpuplane:   {upload_command(f.path, self._upload_api_url)}"
        )
