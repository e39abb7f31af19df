#!/usr/bin/env bash
# Prints the folder of a real Temporal server build: `temporal-server`, its SQL schema tool
# `temporal-sql-tool`, and the PostgreSQL schemas (`schema/postgresql/v12/{temporal,visibility}`)
# of the same version. Built once with `go install` (CGO_ENABLED=0; about 5 minutes the first
# time) into a per-user cache outside the checkout; later calls cost nothing. Progress goes to
# stderr. The version's go.mod has no replace directive, so a plain `go install` works.
set -euo pipefail
VERSION="${GPUPLANE_TEMPORAL_SERVER_VERSION:-v1.27.2}"
CACHE="${GPUPLANE_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuplane/tools}/temporal-server-$VERSION"
if [ ! -f "$CACHE/.complete" ]; then
  command -v go >/dev/null 2>&1 || { echo "ensure-temporal-server: no Go toolchain to build the Temporal server" >&2; exit 1; }
  echo "ensure-temporal-server: building the Temporal server $VERSION and its SQL tool with go install (first time only, about 5 minutes)..." >&2
  mkdir -p "$CACHE"
  tmp="$(mktemp -d "$CACHE/.build.XXXXXX")"
  CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install "go.temporal.io/server/cmd/server@$VERSION" "go.temporal.io/server/cmd/tools/sql@$VERSION" >&2
  # The schemas come from the module's source, which the build just downloaded.
  src="$(GOFLAGS=-mod=mod go mod download -json "go.temporal.io/server@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -d "$src/schema/postgresql/v12" ] || { echo "ensure-temporal-server: no PostgreSQL schema under $src" >&2; exit 1; }
  mkdir -p "$tmp/schema/postgresql"
  cp -r "$src/schema/postgresql/v12" "$tmp/schema/postgresql/"
  chmod -R u+w "$tmp/schema"
  mv "$tmp/server" "$CACHE/temporal-server"
  mv "$tmp/sql" "$CACHE/temporal-sql-tool"
  rm -rf "$CACHE/schema"
  mv "$tmp/schema" "$CACHE/schema"
  rm -rf "$tmp"
  touch "$CACHE/.complete"
  echo "ensure-temporal-server: built into $CACHE" >&2
fi
echo "$CACHE"
