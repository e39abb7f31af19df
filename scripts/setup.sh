#!/usr/bin/env bash
# Installs GPUPlane's dependencies: npm packages, the Temporal CLI (built once, cached outside
# the checkout) and, with --with-postgres, Debian's PostgreSQL server for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "== npm ci"
  npm ci --no-audit --no-fund
fi
if [ "${1:-}" = "--with-postgres" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "== installing PostgreSQL (Debian package)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
echo "== Temporal CLI: $(bash temporal/ensure-temporal.sh)"
