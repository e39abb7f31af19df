#!/usr/bin/env bash
# Prints the path of a Python venv with the real peers (MLflow, TensorBoard, tensorboardX) from
# scripts/peers-requirements.txt, created on first use and cached outside the checkout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/cached-venv.sh" peers "$here/peers-requirements.txt" "MLflow, TensorBoard; a few minutes the first time"
