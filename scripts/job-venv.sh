#!/usr/bin/env bash
# Prints the path of a cached Python venv that jobs run (scripts/cached-venv.sh NAME REQS WHAT),
# where the jobs' users can run it: as root, jobs run as job users (docs/security.md), who cannot
# enter /root, so the venv goes under /var/cache/gpuplane, made from the system's Python (a pyenv
# one under /root is out of their reach).
#
#   bash scripts/job-venv.sh <name> <requirements file> <what, for the progress line>
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "$(id -u)" = 0 ] && [ -z "${GPUPLANE_CACHE:-}" ]; then
  export GPUPLANE_CACHE=/var/cache/gpuplane
  if [ -x /usr/bin/python3 ]; then export GPUPLANE_VENV_PYTHON=/usr/bin/python3; fi
  umask 022
  mkdir -p -m 755 "$GPUPLANE_CACHE"
fi
exec bash "$here/cached-venv.sh" "$@"
