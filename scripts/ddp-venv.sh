#!/usr/bin/env bash
# Prints the path of a Python venv with what examples/ddp/train.py needs (examples/ddp/
# requirements.txt: torch, several GB from the package index), created on first use and cached
# outside the checkout. Not used by npm test.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# As root, jobs run as job users (docs/security.md), who cannot enter /root: the venv goes where
# every user may run it, made from the system's Python (a pyenv one under /root is out of their reach).
if [ "$(id -u)" = 0 ] && [ -z "${GPUPLANE_CACHE:-}" ]; then
  export GPUPLANE_CACHE=/var/cache/gpuplane
  if [ -x /usr/bin/python3 ]; then export GPUPLANE_VENV_PYTHON=/usr/bin/python3; fi
  umask 022
  mkdir -p -m 755 "$GPUPLANE_CACHE"
fi
exec bash "$here/cached-venv.sh" ddp "$here/../examples/ddp/requirements.txt" "torch for examples/ddp"
