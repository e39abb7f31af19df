#!/usr/bin/env bash
# Prints the path of a Python venv with the pinned uv (scripts/uv-requirements.txt) that agents
# build jobs' Python environments with (docs/environments.md), created on first use and cached
# outside the checkout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/cached-venv.sh" uv "$here/uv-requirements.txt" "uv for Python environments; seconds the first time"
