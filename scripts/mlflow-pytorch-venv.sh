#!/usr/bin/env bash
# Prints the path of a Python venv with torch, Lightning and mlflow-skinny
# (scripts/mlflow-pytorch-requirements.txt) for test/mlflow-pytorch.test.ts, created on first use
# and cached outside the checkout (scripts/job-venv.sh). torch is a 5 GB install from PyPI, minutes
# the first time, so pip's lines (what it collects, downloads, installs) go to stderr as progress
# instead of the usual quiet install; a cached venv prints nothing but its path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
GPUPLANE_VENV_VERBOSE=1 exec bash "$here/job-venv.sh" mlflow-pytorch "$here/mlflow-pytorch-requirements.txt" \
  "torch, lightning and mlflow-skinny for test/mlflow-pytorch; about 5 GB, several minutes the first time"
