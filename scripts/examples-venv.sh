#!/usr/bin/env bash
# Prints the path of a Python venv with what the example scripts need (examples/requirements.txt:
# numpy), creating it on first use. It is cached outside the checkout, keyed by the requirements,
# so a second call costs nothing. Progress goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/../examples/requirements.txt"
key="$(sha256sum "$req" | cut -c1-12)"
venv="${GPUPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuplane}/examples-venv-$key"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  echo "== creating $venv (numpy for the examples)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  touch "$venv/.complete"
fi
echo "$venv"
