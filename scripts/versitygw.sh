#!/usr/bin/env bash
# Prints the path of a versitygw binary (github.com/versity/versitygw, Apache-2.0): the real S3
# server that the tests and `gpuctl up --storage s3` run on a folder (its POSIX backend). A pinned
# version built with `go install` into the same per-user cache outside the checkout as the
# Temporal CLI (temporal/ensure-temporal.sh), so a fresh clone and CI reuse it; the first build
# takes a few minutes, with go's output on stderr.
set -euo pipefail
VERSION="${GPUPLANE_VERSITYGW_VERSION:-v1.8.0}"
CACHE="${GPUPLANE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuplane/tools}/versitygw-$VERSION"
BIN="$CACHE/versitygw"
if [ ! -x "$BIN" ]; then
  command -v go >/dev/null 2>&1 || { echo "versitygw: no Go toolchain to build versitygw $VERSION" >&2; exit 1; }
  echo "versitygw: building versitygw $VERSION with go install (first time only, a few minutes)..." >&2
  mkdir -p "$CACHE"
  tmp="$(mktemp -d "$CACHE/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # v1.8.0's go.mod has no replace directives, so a plain `go install` of it works.
  CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2
  mv "$tmp/versitygw" "$BIN"
  echo "versitygw: built $BIN" >&2
fi
echo "$BIN"
