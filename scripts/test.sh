#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine, then runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-postgres
echo "== typecheck, lint, layer rules, migrations check"
# The five checks run side by side: each is one process on one core (tsc and the typed lint build
# their own program), so on 2 cores they take about half as long together as one after another.
# Each one's output is shown whole, in this order, and any that fails stops the run.
checks=("npx tsc --noEmit" "npx tsc --noEmit -p web" "npx eslint ." "npm run --silent lint:layers" "npx drizzle-kit check")
logs="$(mktemp -d)"
pids=()
for i in "${!checks[@]}"; do
  bash -c "${checks[$i]}" > "$logs/$i" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!checks[@]}"; do
  if wait "${pids[$i]}"; then
    [[ "${checks[$i]}" == *drizzle-kit* ]] || cat "$logs/$i"
  else
    echo "== failed: ${checks[$i]}"
    cat "$logs/$i"
    failed=1
  fi
done
rm -rf "$logs"
[[ $failed -eq 0 ]] || exit 1
echo "== tests"
report="$(mktemp)"
status=0
npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@" || status=$?
# One plain closing line that any CI reads: "N passed, N failed".
node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed` + (r.numPendingTests ? `, ${r.numPendingTests} skipped` : ""))' "$report" || true
rm -f "$report"
exit "$status"
