#!/usr/bin/env bash
# Prints the path of a Python venv with the full mlflow package and pytest
# (scripts/mlflow-tests-requirements.txt), in which test/mlflow-rest-tracking.test.ts runs MLflow's
# own REST tracking tests against GPUPlane; created on first use and cached outside the checkout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
GPUPLANE_VENV_VERBOSE=1 exec bash "$here/cached-venv.sh" mlflow-tests "$here/mlflow-tests-requirements.txt" \
  "mlflow and pytest for MLflow's own REST tracking tests; about 870 MB, minutes the first time"
