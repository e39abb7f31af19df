#!/usr/bin/env bash
# Prints the path of a Python venv with what examples/ddp/train.py needs (examples/ddp/
# requirements.txt: torch, several GB from the package index), created on first use and cached
# outside the checkout, where job users can run it. Not used by npm test.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/job-venv.sh" ddp "$here/../examples/ddp/requirements.txt" "torch for examples/ddp"
