#!/usr/bin/env bash
# cached-venv.sh NAME REQUIREMENTS WHAT: prints the path of a Python venv with REQUIREMENTS
# installed, creating it on first use. It is cached outside the checkout, keyed by NAME and the
# requirements' hash, so a second call costs nothing. Progress (naming WHAT) goes to stderr.
set -euo pipefail
name="$1" req="$2" what="$3"
key="$(sha256sum "$req" | cut -c1-12)"
venv="${GPUPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuplane}/$name-venv-$key"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  echo "== creating $venv ($what)" >&2
  rm -rf "$venv"
  "${GPUPLANE_VENV_PYTHON:-python3}" -m venv "$venv"
  # A large install (torch) sets GPUPLANE_VENV_VERBOSE=1 so pip says what it is fetching: minutes
  # of silence read as a hang.
  quiet="--quiet"; [ "${GPUPLANE_VENV_VERBOSE:-}" = 1 ] && quiet="--progress-bar=off"
  started=$SECONDS
  "$venv/bin/pip" install $quiet --disable-pip-version-check -r "$req" >&2
  touch "$venv/.complete"
  echo "== $venv made in $((SECONDS - started)) s" >&2
fi
echo "$venv"
