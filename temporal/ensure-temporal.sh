#!/usr/bin/env bash
# Prints the path of a Temporal CLI binary: `temporal` from PATH if there is one, else a
# pinned version built with `go install` into a per-user cache outside the checkout, so a
# fresh clone (and CI on the same machine) reuses it instead of compiling again.
set -euo pipefail
VERSION="${GPUPLANE_TEMPORAL_CLI_VERSION:-v1.5.1}"
if [ -z "${GPUPLANE_TEMPORAL_BUILD:-}" ] && command -v temporal >/dev/null 2>&1; then
  command -v temporal
  exit 0
fi
CACHE="${GPUPLANE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuplane/tools}/temporal-$VERSION"
BIN="$CACHE/temporal"
if [ ! -x "$BIN" ]; then
  command -v go >/dev/null 2>&1 || { echo "ensure-temporal: no 'temporal' on PATH and no Go toolchain to build it" >&2; exit 1; }
  echo "ensure-temporal: building Temporal CLI $VERSION with go install (first time only, a few minutes)..." >&2
  mkdir -p "$CACHE"
  tmp="$(mktemp -d "$CACHE/.build.XXXXXX")"
  # v1.5.1's go.mod has no replace directives, so a plain `go install` of it works.
  CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install "github.com/temporalio/cli/cmd/temporal@$VERSION" >&2
  mv "$tmp/temporal" "$BIN"
  rmdir "$tmp"
  echo "ensure-temporal: built $BIN" >&2
fi
echo "$BIN"
