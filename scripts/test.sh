#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine, then runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-postgres
echo "== typecheck, lint, layer rules, migrations check"
npx tsc --noEmit
npx tsc --noEmit -p web
npx eslint .
npm run --silent lint:layers
npx drizzle-kit check >/dev/null
echo "== tests"
report="$(mktemp)"
status=0
npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@" || status=$?
# One plain closing line that any CI reads: "N passed, N failed".
node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed` + (r.numPendingTests ? `, ${r.numPendingTests} skipped` : ""))' "$report" || true
rm -f "$report"
exit "$status"
