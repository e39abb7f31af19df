"""The run as a local file, in the JSONL format `gpuctl import-run` reads (docs/import-jsonl.md).

Written when the API stays away past the SDK's retry window (what finish() could not send), or
for the whole run in offline mode (GPUPLANE_MODE=offline). The default folder is
<home>/offline-runs (GPUPLANE_OFFLINE_DIR overrides): one place, private to its user (0700, files
0600), that outlives the script's working folder, so `gpuctl import-run <home>/offline-runs`
uploads every waiting run at once (a second import of a file stores nothing twice).

The run line goes first and is rewritten in place when the run ends (it is padded for that), so
a file cut short by a kill is still a valid run: `running`, which the importer records as crashed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from typing import Any, Dict, Iterable, Optional

from ._creds import home
from ._encode import Batch

PAD = 96  # room for the final status and ended_at


def offline_dir() -> str:
    return os.environ.get("GPUPLANE_OFFLINE_DIR") or os.path.join(home(), "offline-runs")


def file_path(folder: str, label: Optional[str], local_id: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", label or "run").strip("-.")[:60] or "run"
    return os.path.join(folder, f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}-{local_id[:8]}.jsonl")


def upload_command(path: str, api_url: Optional[str]) -> str:
    """The gpuctl command that uploads the file; --api only where the address was not gpuctl's default."""
    api = f" --api {shlex.quote(api_url)}" if api_url else ""
    return f"gpuctl{api} import-run {shlex.quote(path)}"


def notice(msg: str) -> None:
    """The final word about a run's file: straight to stderr, whatever the warnings filters say."""
    try:
        sys.stderr.write(msg if msg.endswith("\n") else msg + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


class OfflineFile:
    """Appends a run's metric and event lines; close() writes its final run line."""

    def __init__(self, path: str, run_line: Dict[str, Any]):
        self.path = path
        self.points = 0
        self.events = 0
        self._run = dict(run_line)
        folder = os.path.dirname(path)
        os.makedirs(os.path.dirname(folder) or ".", mode=0o700, exist_ok=True)  # a new home is private too
        os.makedirs(folder, mode=0o700, exist_ok=True)
        try:
            os.chmod(folder, 0o700)
        except OSError:
            pass
        first = self._run_json("running", None)
        self._room = len(first) + PAD
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self._f = os.fdopen(fd, "wb")
        self._f.write(first.ljust(self._room).encode("utf-8") + b"\n")
        self._f.flush()

    def _run_json(self, status: str, ended_ms: Optional[int]) -> str:
        line = {"type": "run", **self._run, "status": status}
        if ended_ms is not None:
            line["ended_at"] = ended_ms
        return json.dumps(line, allow_nan=False, separators=(",", ":"), ensure_ascii=True)

    def write(self, items: Iterable[Any]) -> None:
        """Writes outbox items (metric batches and events) as JSONL lines."""
        out = []
        for item in items:
            if item.__class__ is Batch:
                for p in json.loads(item.body)["points"]:
                    out.append(json.dumps({"type": "metric", **p}, separators=(",", ":")))
                    self.points += 1
            else:
                ev = json.loads(item.body)
                ev["type"] = "event"
                if getattr(item, "ts", None) is not None:
                    ev["ts"] = item.ts
                out.append(json.dumps(ev, separators=(",", ":")))
                self.events += 1
        if out:
            self._f.write(("\n".join(out) + "\n").encode("utf-8"))
            self._f.flush()

    def close(self, status: str, ended_ms: Optional[int] = None) -> None:
        line = self._run_json(status, ended_ms if ended_ms is not None else int(time.time() * 1000))
        self._f.flush()
        if len(line) <= self._room:
            self._f.seek(0)
            self._f.write(line.ljust(self._room).encode("utf-8"))
            self._f.close()
            return
        # Longer than the room left for it (cannot happen with PAD, but never lose the file): rewrite.
        self._f.close()
        with open(self.path, "rb") as f:
            f.readline()
            rest = f.read()
        tmp = self.path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(line.encode("utf-8") + b"\n" + rest)
        os.replace(tmp, self.path)
