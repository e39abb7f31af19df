"""Where the SDK finds the API and its token: the way gpuctl does (runtime/credentials.ts).

The address: the `api_url` argument, else GPUPLANE_API_URL, else the address `gpuctl login`
saved (<home>/api-url), else http://GPUPLANE_API_HOST:GPUPLANE_API_PORT (127.0.0.1:8787 by
default: where `gpuctl up` listens). The token: the `token` argument, else GPUPLANE_TOKEN, else
`gpuctl login`'s (<home>/token), else `gpuctl up`'s admin token (<home>/admin-token). The home is
GPUPLANE_HOME, else ~/.gpuplane. Under a job (GPUPLANE_RUN_ID set) the home is not read: the
agent hands the job its address and its run token, and a job must not pick up another token.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple, Optional

from ._http import clean_token

_USER_TOKEN_RE = re.compile(r"^gpt_[A-Za-z0-9_-]{43}$")


class Found(NamedTuple):
    api_url: str
    api_url_from: str  # "api_url=", "GPUPLANE_API_URL", the api-url file's path, "default"
    token: Optional[str]
    token_from: Optional[str]  # "token=", "GPUPLANE_TOKEN", a file's path; None without a token


def home() -> str:
    return os.environ.get("GPUPLANE_HOME") or os.path.join(os.path.expanduser("~"), ".gpuplane")


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def read_token_file(path: str) -> Optional[str]:
    t = _read(path)
    return t if t is not None and _USER_TOKEN_RE.match(t) else None


def read_url_file(path: str) -> Optional[str]:
    u = _read(path)
    return u if u is not None and re.match(r"^https?://\S+$", u) else None


def default_api_url() -> str:
    """Where `gpuctl up` listens, from the same variables it reads."""
    host = os.environ.get("GPUPLANE_API_HOST") or "127.0.0.1"
    if host in ("0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"  # listening on every address: connect to this machine's
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    port = (os.environ.get("GPUPLANE_API_PORT") or "8787").strip()
    return f"http://{host}:{port}"


def find(api_url: Optional[str], token: Optional[str], under_job: bool) -> Found:
    h = home()
    if api_url:
        url, url_from = api_url, "api_url="
    elif os.environ.get("GPUPLANE_API_URL"):
        url, url_from = os.environ["GPUPLANE_API_URL"], "GPUPLANE_API_URL"
    else:
        saved = None if under_job else read_url_file(os.path.join(h, "api-url"))
        url, url_from = (saved, os.path.join(h, "api-url")) if saved else (default_api_url(), "default")
    secret = clean_token(token)
    if secret is not None:
        return Found(url, url_from, secret, "token=")
    secret = clean_token(os.environ.get("GPUPLANE_TOKEN"))
    if secret is not None:
        return Found(url, url_from, secret, "GPUPLANE_TOKEN")
    if not under_job:
        for name in ("token", "admin-token"):
            path = os.path.join(h, name)
            t = read_token_file(path)
            if t is not None:
                return Found(url, url_from, t, path)
    return Found(url, url_from, None, None)
