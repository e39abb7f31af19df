#!/usr/bin/env bash
# Prints the path of a Python venv with the real peers (MLflow, TensorBoard, tensorboardX) from
# scripts/peers-requirements.txt, creating it on first use. It is cached outside the checkout,
# keyed by the requirements, so a second call costs nothing. Progress goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/peers-requirements.txt"
key="$(sha256sum "$req" | cut -c1-12)"
venv="${GPUPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuplane}/peers-venv-$key"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  echo "== creating $venv (MLflow, TensorBoard; a few minutes the first time)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  touch "$venv/.complete"
fi
echo "$venv"
