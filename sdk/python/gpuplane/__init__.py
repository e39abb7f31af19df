"""GPUPlane's Python SDK: log metrics and events of a training run (stdlib only).

    import gpuplane
    run = gpuplane.init("vision", "resnet", name="lr-3e-4", params={"lr": 3e-4})
    for step in range(1000):
        gpuplane.log({"loss": loss}, step=step)
    gpuplane.event("checkpoint.saved", "epoch 3", {"path": "/ckpt/3"})
    gpuplane.finish()

Under a GPUPlane job (GPUPLANE_RUN_ID set) init() attaches to the job's run; otherwise it
registers a new run. The API and its token are found as gpuctl finds them: the `api_url` / `token`
arguments, else GPUPLANE_API_URL / GPUPLANE_TOKEN (what the agent sets for a job), else what
`gpuctl login` saved in the home (<home>/api-url, <home>/token), else the admin token `gpuctl up`
keeps there (<home>/admin-token) and the address it listens on. When the API stays away past the
retry window, what it did not take is written to <home>/offline-runs/*.jsonl for `gpuctl
import-run`; GPUPLANE_MODE=offline (or mode="offline") writes only that file. In a job of several
processes (multi-node, torchrun) only global rank 0 sends: see init()'s `all_ranks`. See docs/sdk.md.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Mapping, Optional

from ._config import Settings
from ._creds import find as _find_api
from ._http import ApiError, AuthContext, Unreachable
from ._rank import muted as _muted
from ._run import GpuplaneWarning, Run, __version__, system_tags

__all__ = ["init", "log", "event", "finish", "run", "Run", "GpuplaneWarning", "ApiError", "Unreachable", "__version__"]

run: Optional[Run] = None
"""The run the module-level functions use: the last one init() made."""


def init(
    project: Optional[str] = None,
    experiment: Optional[str] = None,
    name: Optional[str] = None,
    params: Optional[Mapping[str, Any]] = None,
    *,
    tags: Optional[Mapping[str, str]] = None,
    api_url: Optional[str] = None,
    token: Optional[str] = None,
    mode: Optional[str] = None,
    all_ranks: Optional[bool] = None,
) -> Run:
    """Starts (or, under a job, attaches to) a run and makes it the module's current one.

    Under a job (env GPUPLANE_RUN_ID) `project` and `experiment` are the job's and are ignored
    here; `params` (and `name`, `tags`) are merged into the job's run. Otherwise the run is
    registered with source "sdk"; `project` is required. The API address is `api_url`, else
    GPUPLANE_API_URL, else the one `gpuctl login` saved (<home>/api-url), else
    http://127.0.0.1:8787 (GPUPLANE_API_HOST / GPUPLANE_API_PORT, as `gpuctl up`). The token is
    `token`, else GPUPLANE_TOKEN, else <home>/token (`gpuctl login`), else <home>/admin-token
    (`gpuctl up`); the home is GPUPLANE_HOME, else ~/.gpuplane, and is not read under a job.
    `mode` ("online" or "offline", default GPUPLANE_MODE, else online): offline sends nothing
    and writes the run to a local JSONL file for `gpuctl import-run`.
    A previous current run is finished first.

    Under a job of several processes (a multi-node job's members, torchrun's workers) they all
    share the job's run, and only global rank 0 sends: in a process whose rank is above 0 (RANK,
    which torchrun sets, else GPUPLANE_NODE_RANK) the run is muted (`run.muted`): log(), event()
    and finish() return at once and nothing is sent. `all_ranks=True` (default
    GPUPLANE_LOG_ALL_RANKS=1) makes every rank send to the run; give each rank its own keys then.

    Raises ApiError when the API refuses the run: a 4xx such as an invalid project, 401 (no or
    unknown token) or 403 (a token without write access to the project). A 401/403 later on
    stops the run's sending with one GpuplaneWarning; log() goes on without raising.
    """
    global run
    if run is not None:
        run.finish()
        run = None
    settings = Settings.from_env()
    run_id = os.environ.get("GPUPLANE_RUN_ID") or None
    muted = _muted(os.environ, all_ranks)
    mode = (mode or os.environ.get("GPUPLANE_MODE") or "online").strip().lower()
    found = _find_api(api_url, token, under_job=run_id is not None)
    url, secret = found.api_url, found.token
    auth = AuthContext(token_from=found.token_from, project=None if run_id else project, attached=run_id is not None)
    # The address for gpuctl's upload command: left out where gpuctl finds the same one by default.
    upload_url = None if found.api_url_from == "default" else re.sub(r"/api/v1$", "", url.strip().rstrip("/"))
    line: Dict[str, Any] = {"project": project, "experiment": experiment, "name": name}
    line = {k: v for k, v in line.items() if v}
    if run_id:
        line.pop("project", None)
        line.pop("experiment", None)
    line["params"] = dict(params or {})
    line["tags"] = {str(k): str(v) for k, v in (tags or {}).items()}
    line["system_tags"] = system_tags()
    extra = dict(token=secret, auth=auth, mode=mode, run_line=line, upload_api_url=upload_url, resume_from=os.environ.get("GPUPLANE_RESUME_FROM") or None)
    merged: Dict[str, Any] = {}
    if run_id:
        try:
            job_params = json.loads(os.environ.get("GPUPLANE_PARAMS") or "{}")
        except ValueError:
            job_params = {}
        if isinstance(job_params, dict):
            merged.update(job_params)
    if params:
        merged.update(params)
    if run_id:
        patch: Dict[str, Any] = {}
        if params:
            patch["params"] = dict(params)
        if tags:
            patch["tags"] = {str(k): str(v) for k, v in tags.items()}
        if name is not None:
            patch["name"] = name
        r = Run(url, attached_id=run_id, create=None, patch=patch or None, params=merged, settings=settings, muted=muted, **extra)
    else:
        if not project:
            raise ValueError("gpuplane.init: project is required outside a GPUPlane job")
        body: Dict[str, Any] = {"project": project, "source": "sdk", "system_tags": system_tags()}
        if experiment is not None:
            body["experiment"] = experiment
        if name is not None:
            body["name"] = name
        if params:
            body["params"] = dict(params)
        if tags:
            body["tags"] = {str(k): str(v) for k, v in tags.items()}
        r = Run(url, attached_id=None, create=body, patch=None, params=merged, settings=settings, **extra)
    if not muted:
        r._start(settings.init_timeout_s)
    run = r
    return r


def _current() -> Run:
    if run is None:
        raise RuntimeError("call gpuplane.init() first")
    return run


def log(data: Mapping[str, Any], step: Optional[int] = None) -> None:
    """Buffers {key: value} for the current run; `step` defaults to one more than the last."""
    r = run
    if r is None:
        _current()
    r.log(data, step)  # type: ignore[union-attr]


def event(kind: str, message: str, data: Optional[Mapping[str, Any]] = None, level: str = "info") -> None:
    """Records an event on the current run."""
    _current().event(kind, message, data, level)


def finish(status: str = "finished", timeout: Optional[float] = None) -> None:
    """Flushes and ends the current run (under a job: only flushes). A no-op without one."""
    global run
    r = run
    if r is None:
        return
    run = None
    r.finish(status, timeout)
