#!/usr/bin/env bash
# Prints the path of the pinned uv (scripts/uv-venv.sh) for the agents that `npm start` runs to
# build jobs' Python environments with (GPUPLANE_UV; docs/environments.md). An agent that runs as
# root builds as nobody, who cannot reach root's home where the venv is cached: root gets a copy
# in /usr/local/lib/gpuplane (root's own, 0755: nobody else can replace what root then runs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$(bash "$here/uv-venv.sh")"
if [ "$(id -u)" != 0 ]; then
  echo "$venv/bin/uv"
  exit 0
fi
dir=/usr/local/lib/gpuplane
install -d -o root -g root -m 0755 "$dir"
install -o root -g root -m 0755 "$venv/bin/uv" "$dir/uv"
echo "$dir/uv"
