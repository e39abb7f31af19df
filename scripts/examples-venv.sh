#!/usr/bin/env bash
# Prints the path of a Python venv with what the example scripts need (examples/requirements.txt:
# numpy), created on first use and cached outside the checkout, where job users can run it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/job-venv.sh" examples "$here/../examples/requirements.txt" "numpy for the examples"
