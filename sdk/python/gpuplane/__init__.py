"""GPUPlane's Python SDK: log metrics and events of a training run (stdlib only).

    import gpuplane
    run = gpuplane.init("vision", "resnet", name="lr-3e-4", params={"lr": 3e-4})
    for step in range(1000):
        gpuplane.log({"loss": loss}, step=step)
    gpuplane.event("checkpoint.saved", "epoch 3", {"path": "/ckpt/3"})
    gpuplane.finish()

Under a GPUPlane job (GPUPLANE_RUN_ID set) init() attaches to the job's run; otherwise it
registers a new run. Every request carries `Authorization: Bearer <token>`: the `token` argument,
else GPUPLANE_TOKEN (set by the agent for a job; run by hand, a member token of the run's
project). See docs/sdk.md for the buffering bound, retries and environment variables.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Mapping, Optional

from ._config import DEFAULT_API_URL, Settings
from ._http import ApiError, Unreachable, clean_token
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
) -> Run:
    """Starts (or, under a job, attaches to) a run and makes it the module's current one.

    Under a job (env GPUPLANE_RUN_ID) `project` and `experiment` are the job's and are ignored
    here; `params` (and `name`, `tags`) are merged into the job's run. Otherwise the run is
    registered with source "sdk"; `project` is required. The API address is `api_url`, else
    GPUPLANE_API_URL, else http://127.0.0.1:8787. The API token is `token`, else GPUPLANE_TOKEN
    (under a job the agent sets it to the run's token; else use a member token of the project).
    A previous current run is finished first.

    Raises ApiError when the API refuses the run: a 4xx such as an invalid project, 401 (no or
    unknown token) or 403 (a token without write access to the project). A 401/403 later on
    stops the run's sending with one GpuplaneWarning; log() goes on without raising.
    """
    global run
    if run is not None:
        run.finish()
        run = None
    settings = Settings.from_env()
    url = api_url or os.environ.get("GPUPLANE_API_URL") or DEFAULT_API_URL
    secret = clean_token(token if token is not None else os.environ.get("GPUPLANE_TOKEN"))
    run_id = os.environ.get("GPUPLANE_RUN_ID") or None
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
        r = Run(url, attached_id=run_id, create=None, patch=patch or None, params=merged, settings=settings, token=secret)
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
        r = Run(url, attached_id=None, create=body, patch=None, params=merged, settings=settings, token=secret)
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
