"""A stand-in for the GPUPlane API's run routes, with faults to inject. For the SDK's unit tests only:
the end-to-end tests (test/sdk-python.test.ts) run the SDK against the real API."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional


class StubApi:
    def __init__(self) -> None:
        self.runs: Dict[str, Dict[str, Any]] = {}
        self.points: Dict[str, List[Dict[str, Any]]] = {}
        self.events: Dict[str, List[Dict[str, Any]]] = {}
        self.batch_keys: Dict[str, set] = {}
        self.run_keys: Dict[str, str] = {}
        self.requests: List[tuple] = []
        self.replays = 0
        self.heartbeats = 0
        # Faults: answer 503 to the next N requests; process the next N metrics posts but drop the
        # connection instead of answering; refuse everything (close at once) while `down`.
        self.fail_next = 0
        self.drop_metrics_responses = 0
        self.down = False
        # Auth like the real API's: when `token` is set, a request without "Bearer <token>" gets
        # 401; a path containing `forbid` gets 403. `auth_headers` records what each request sent.
        self.token: Optional[str] = None
        self.forbid: Optional[str] = None
        self.auth_headers: List[Optional[str]] = []
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> Any:
                n = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(n) if n else b""
                return json.loads(raw) if raw else None

            def _send(self, status: int, obj: Any = None) -> None:
                data = b"" if obj is None else json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                body = self._body()
                with stub.lock:
                    stub.requests.append((method, self.path, self.headers.get("idempotency-key")))
                    auth = self.headers.get("authorization")
                    stub.auth_headers.append(auth)
                    if stub.down:
                        self.close_connection = True
                        self.connection.close()
                        return
                    if stub.token is not None and auth != f"Bearer {stub.token}":
                        self._send(401, {"error": "unauthorized", "message": "unknown or revoked token" if auth else "this needs a token"})
                        return
                    if stub.forbid is not None and stub.forbid in self.path:
                        self._send(403, {"error": "forbidden", "message": "stub forbids this"})
                        return
                    if stub.fail_next > 0:
                        stub.fail_next -= 1
                        self._send(503, {"error": "unavailable", "message": "stub says no"})
                        return
                    status, out, drop = stub.route(method, self.path, body, self.headers.get("idempotency-key"))
                    if drop:
                        self.close_connection = True
                        self.connection.close()
                        return
                    self._send(status, out)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PATCH(self) -> None:
                self._handle("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def route(self, method: str, path: str, body: Any, key: Optional[str]) -> tuple:
        parts = path.split("/")[3:]  # after /api/v1
        if method == "POST" and parts == ["runs"]:
            if key and key in self.run_keys:
                return 201, self.runs[self.run_keys[key]], False
            rid = "run-" + uuid.uuid4().hex[:8]
            self.runs[rid] = {"id": rid, "status": "running", "params": body.get("params") or {}, **body}
            self.points[rid] = []
            self.events[rid] = []
            self.batch_keys[rid] = set()
            if key:
                self.run_keys[key] = rid
            return 201, self.runs[rid], False
        if len(parts) < 2 or parts[1] not in self.runs:
            return 404, {"error": "not_found", "message": "no such run"}, False
        rid = parts[1]
        run = self.runs[rid]
        tail = parts[2:]
        if method == "PATCH" and not tail:
            run["params"] = {**run.get("params", {}), **(body.get("params") or {})}
            for k in ("name", "tags"):
                if k in body:
                    run[k] = body[k]
            return 200, run, False
        if method == "POST" and tail == ["metrics"]:
            pts = body["points"]
            for i, p in enumerate(pts):
                v = p["value"]
                if not isinstance(v, (int, float)) and v not in ("NaN", "Infinity", "-Infinity"):
                    return 400, {"error": "invalid", "message": f"points/{i}/value: {v!r} is not a number"}, False
            if key in self.batch_keys[rid]:
                self.replays += 1
                return 200, {"stored": 0, "replayed": True, "points": len(pts)}, False
            self.batch_keys[rid].add(key)
            self.points[rid].extend(pts)
            if self.drop_metrics_responses > 0:
                self.drop_metrics_responses -= 1
                return 0, None, True
            return 200, {"stored": len(pts), "replayed": False}, False
        if method == "POST" and tail == ["events"]:
            self.events[rid].append(body)
            return 201, {"id": len(self.events[rid]), **body}, False
        if method == "POST" and tail == ["heartbeat"]:
            self.heartbeats += 1
            return 204, None, False
        if method == "POST" and tail == ["finish"]:
            run["status"] = (body or {}).get("status", "finished")
            return 200, run, False
        return 404, {"error": "not_found", "message": path}, False


if __name__ == "__main__":
    # python3 sdk/python/tests/stub_api.py: serve until killed, printing the address (for benchmarks).
    import time

    api = StubApi()
    print(api.url, flush=True)
    while True:
        time.sleep(3600)
