#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine, then runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-postgres
echo "== typecheck, lint, migrations check"
npx tsc --noEmit
npx eslint .
npx drizzle-kit check >/dev/null
echo "== tests"
npx vitest run "$@"
