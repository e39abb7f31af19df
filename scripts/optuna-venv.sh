#!/usr/bin/env bash
# Prints the path of a Python venv with Optuna (scripts/optuna-requirements.txt), bench/sweep's
# peer, created on first use and cached outside the checkout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/cached-venv.sh" optuna "$here/optuna-requirements.txt" "Optuna for bench/sweep; a minute the first time"
