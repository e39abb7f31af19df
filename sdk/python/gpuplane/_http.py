"""A tiny JSON-over-HTTP client on http.client: one keep-alive connection per Transport, which
makes no retries of its own; the SDK's retry rules (the back-off, finishing a run within a
budget, halving a batch the API finds too large) are the functions at the end."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from typing import Any, Callable, List, Mapping, NamedTuple, Optional, Tuple
from urllib.parse import urlsplit

from ._encode import Batch

API_PREFIX = "/api/v1"


class Unreachable(Exception):
    """No answer: refused, reset, timed out. The request may or may not have been processed."""


class ApiError(Exception):
    """The API answered with a status that is not 2xx."""

    def __init__(self, status: int, body: Any, method: str, path: str, hint: Optional[str] = None, retry_after: Optional[str] = None):
        self.status = status
        self.body = body
        # A 429's Retry-After (seconds): when the API takes the same request again (its limit on
        # metric points a second per run and per project, or its requests a minute per token).
        self.retry_after_s = retry_after_s(retry_after)
        msg = body.get("message") if isinstance(body, dict) else None
        super().__init__(f"{method} {path}: HTTP {status}" + (f": {msg}" if msg else "") + (f" ({hint})" if hint else ""))

    @property
    def retryable(self) -> bool:
        # 408/429 and 5xx (503 = a dependency of the API is down) are worth another try.
        return self.status in (408, 429) or self.status >= 500

    @property
    def auth(self) -> bool:
        """401 (no or unknown token) or 403 (a token without the right): no retry will help."""
        return self.status in (401, 403)


class AuthContext(NamedTuple):
    """What a 401/403's message needs to name the fix: where the token came from, the project."""

    token_from: Optional[str] = None  # "token=", "GPUPLANE_TOKEN", a file's path; None: no token
    project: Optional[str] = None
    attached: bool = False  # under a job: the agent's run token


def auth_hint(status: int, ctx: AuthContext) -> Optional[str]:
    """What to do about a 401/403, in one line, for the error's message. Never the token itself."""
    if status not in (401, 403):
        return None
    p = ctx.project or "P"
    make = f"an admin makes one with `gpuctl token create --name NAME --role member --project {p}`"
    if ctx.attached:
        if status == 401:
            return "the run token the agent set (GPUPLANE_TOKEN) was not accepted: its attempt may have ended"
        return "the run token the agent set (GPUPLANE_TOKEN) may not write this run"
    if ctx.token_from is None:
        return (
            "the SDK found no token (token=, GPUPLANE_TOKEN, <home>/token, <home>/admin-token); "
            f"fix: `gpuctl login --token <token>` ({make})"
        )
    where = {"token=": "the token= argument", "GPUPLANE_TOKEN": "GPUPLANE_TOKEN"}.get(ctx.token_from, ctx.token_from)
    # gpuctl login only helps where nothing earlier in the lookup order hides its file.
    then = "`gpuctl login --token <token>`"
    if ctx.token_from == "token=":
        then = "pass a good token=, or drop it and run `gpuctl login --token <token>`"
    elif ctx.token_from == "GPUPLANE_TOKEN":
        then = "set GPUPLANE_TOKEN to a good token, or unset it and run `gpuctl login --token <token>`"
    if status == 401:
        return f"the token from {where} is unknown or revoked; fix: {then} ({make})"
    return f"the token from {where} may not write project {p!r}; fix: {make}, then {then}"


_TOKEN_RE = re.compile(r"^[\x21-\x7e]+$")


def clean_token(token: Optional[str]) -> Optional[str]:
    """The token to send (surrounding whitespace removed), or None. Raises ValueError, without
    the token in the message, for one that cannot go in a header (http.client's own error would
    quote it)."""
    if token is None:
        return None
    token = token.strip()
    if not token:
        return None
    if not _TOKEN_RE.match(token):
        raise ValueError("gpuplane: the token (token= or GPUPLANE_TOKEN) has spaces or characters that cannot be sent in a header")
    return token


def base_path(api_url: str) -> Tuple[str, str, int, str]:
    """(scheme, host, port, path prefix ending in /api/v1) of an API address, with or without /api/v1."""
    u = urlsplit(api_url.strip())
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"not an http(s) API address: {api_url!r}")
    port = u.port or (443 if u.scheme == "https" else 80)
    path = u.path.rstrip("/")
    if not path.endswith(API_PREFIX):
        path += API_PREFIX
    return u.scheme, u.hostname, port, path


class Transport:
    """Not thread-safe: each thread that talks to the API has its own."""

    def __init__(self, api_url: str, timeout_s: float, token: Optional[str] = None, auth: Optional[AuthContext] = None):
        self.api_url = api_url
        self._auth = auth or AuthContext(token_from="token=" if token else None)
        self._scheme, self._host, self._port, self._prefix = base_path(api_url)
        self._timeout = timeout_s
        self._conn: Optional[http.client.HTTPConnection] = None
        # Sent on every request; kept out of every message and repr.
        self._authorization = f"Bearer {token}" if token else None

    def __repr__(self) -> str:
        return f"Transport({self.api_url!r}, token={'set' if self._authorization else 'none'})"

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout)
        return self._conn

    def request(self, method: str, path: str, body: Optional[bytes] = None, headers: Optional[Mapping[str, str]] = None) -> Any:
        """The parsed JSON answer (None when empty). Raises Unreachable or ApiError."""
        h = {"Accept": "application/json"}
        if body is not None:
            h["Content-Type"] = "application/json"
        if self._authorization:
            h["Authorization"] = self._authorization
        if headers:
            h.update(headers)
        full = self._prefix + path
        # A kept-alive connection the server has closed fails on first use: one fresh try, at once.
        for attempt in (0, 1):
            reused = self._conn is not None
            conn = self._connection()
            try:
                conn.request(method, full, body=body, headers=h)
                resp = conn.getresponse()
                raw = resp.read()
                status = resp.status
                retry_after = resp.getheader("retry-after")
                if resp.getheader("connection", "").lower() == "close":
                    self.close()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as err:
                self.close()
                if reused and attempt == 0:
                    continue
                raise Unreachable(f"{method} {full}: {err!r}") from None
            except (OSError, http.client.HTTPException, socket.timeout) as err:
                self.close()
                raise Unreachable(f"{method} {full}: {err!r}") from None
        parsed: Any = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode("utf-8", "replace")
        if not 200 <= status < 300:
            raise ApiError(status, parsed, method, full, auth_hint(status, self._auth), retry_after)
        return parsed


MAX_RETRY_AFTER_S = 60.0


def retry_after_s(value: Optional[str]) -> Optional[float]:
    """A Retry-After header in seconds (at most MAX_RETRY_AFTER_S), or None when absent or not a number of seconds."""
    if value is None:
        return None
    try:
        v = float(value.strip())
    except ValueError:
        return None
    if not v >= 0:
        return None
    return min(v, MAX_RETRY_AFTER_S)


def dumps(obj: Any) -> bytes:
    """Strict JSON (allow_nan=False): callers pass values through clean_json first, so a NaN here is a bug."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode("utf-8")


def backoff_s(failures: int, max_s: float) -> float:
    """The wait before the next try after `failures` failed tries in a row: 0.25 s, doubling, at most max_s."""
    return min(max_s, 0.25 * 2 ** min(failures - 1, 10))


def split_batch(b: Batch, new_key: Callable[[], str]) -> List[Batch]:
    """A batch the API refused whole as too large (413), so not stored: two halves under new keys."""
    pts = json.loads(b.body)["points"]
    h = len(pts) // 2
    return [Batch(dumps({"points": part}), new_key(), len(part)) for part in (pts[:h], pts[h:])]


def finish_run(api_url: str, token: Optional[str], run_id: str, status: str, budget_s: float, request_timeout_s: float, auth: Optional[AuthContext] = None) -> Optional[str]:
    """Ends the run, retrying (0.2 s, doubling to 2 s) within budget_s; the warning to give when it could not, else None."""
    t = Transport(api_url, min(request_timeout_s, budget_s), token, auth)
    deadline = time.monotonic() + budget_s
    delay = 0.2
    try:
        while True:
            try:
                t.request("POST", f"/runs/{run_id}/finish", dumps({"status": status}))
                return None
            except ApiError as err:
                if not err.retryable:
                    return f"gpuplane: could not finish run {run_id}: {err}"
                last: Exception = err
            except Unreachable as err:
                last = err
            if time.monotonic() + delay > deadline:
                return f"gpuplane: could not finish run {run_id} ({last}); the server marks it crashed when its heartbeats stop"
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
    finally:
        t.close()
