#!/usr/bin/env python3
"""The evaluation of a checkpoint of examples/train_ckpt.py: run as an EVALUATE job.

    gpuctl eval ckpt-... -- python3 examples/eval_ckpt.py

GPUPlane sets GPUPLANE_CHECKPOINT_PATH (the checkpoint: a file or a directory) and
GPUPLANE_CHECKPOINT_ID. A checkpoint of train_ckpt.py (a .npy array, or a directory holding
model.npy) is scored on toy_task.py's held-out set, which training never sees: eval/loss is the
mean squared error there, eval/accuracy the share of predictions within 0.5 of the target.
Any other file stands in for a model (tests write one by hand): the first number written in it
is its eval/loss, and eval/accuracy is 1 / (1 + loss); one with no number scores from its
sha256. Needs numpy for .npy checkpoints only. The script prints a few log lines, then its
result as its LAST stdout line:

    {"metrics": {"eval/loss": 0.25, "eval/accuracy": 0.8}}

Flags: --progress (also print running estimates as earlier metrics lines: the last line wins),
--malformed (print a cut-off metrics line instead), --missing (print no metrics line),
--fail (exit 1 after the log lines), --sleep S (before the result).
"""

import argparse
import hashlib
import json
import os
import re
import sys
import time

NPY_MAGIC = b"\x93NUMPY"
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def checkpoint_bytes(path: str) -> bytes:
    if os.path.isdir(path):
        files = sorted(
            os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if not f.startswith(".")
        )
        return b"".join(open(f, "rb").read() for f in files)
    with open(path, "rb") as f:
        return f.read()


def model_file(path: str) -> str | None:
    """The .npy model of a train_ckpt.py checkpoint, or None for any other checkpoint."""
    f = os.path.join(path, "model.npy") if os.path.isdir(path) else path
    if not os.path.isfile(f):
        return None
    with open(f, "rb") as fh:
        return f if fh.read(len(NPY_MAGIC)) == NPY_MAGIC else None


def evaluate_model(f: str) -> tuple[float, float]:
    """Held-out loss and accuracy of a train_ckpt.py checkpoint."""
    import numpy as np

    import toy_task

    with open(f, "rb") as fh:
        _, proj, w = toy_task.load_checkpoint(fh.read())
    x, y = toy_task.heldout_set(proj.shape[0], proj)
    err = x @ w - y
    return round(float(np.mean(err**2)), 6), round(float(np.mean(np.abs(err) < 0.5)), 6)


def score(data: bytes) -> float:
    m = NUMBER.search(data)
    if m:
        return abs(float(m.group(0)))
    return int(hashlib.sha256(data).hexdigest()[:8], 16) / 0xFFFFFFFF


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--progress", action="store_true")
    p.add_argument("--malformed", action="store_true")
    p.add_argument("--missing", action="store_true")
    p.add_argument("--fail", action="store_true")
    p.add_argument("--sleep", type=float, default=0.0)
    a = p.parse_args()

    path = os.environ.get("GPUPLANE_CHECKPOINT_PATH")
    ckpt_id = os.environ.get("GPUPLANE_CHECKPOINT_ID", "")
    if not path:
        print("GPUPLANE_CHECKPOINT_PATH is not set: run me as an evaluation", file=sys.stderr)
        return 2
    print(f"evaluating checkpoint {ckpt_id} at {path}", flush=True)
    model = model_file(path)
    if model:
        loss, accuracy = evaluate_model(model)
        print(f"scored {model} on the held-out set", flush=True)
    else:
        data = checkpoint_bytes(path)
        print(f"read {len(data)} bytes", flush=True)
        loss = round(score(data), 6)
        accuracy = round(1.0 / (1.0 + loss), 6)
    if a.progress:
        for frac in (0.25, 0.5):
            print(json.dumps({"metrics": {"eval/loss": round(loss / frac, 6)}, "partial": frac}), flush=True)
    print(f"eval/loss={loss} eval/accuracy={accuracy}", flush=True)
    if a.fail:
        print("evaluation failed on purpose (--fail)", file=sys.stderr)
        return 1
    time.sleep(a.sleep)
    if a.missing:
        return 0
    if a.malformed:
        print('{"metrics": {"eval/loss": ' + str(loss) + ', "eval/accuracy": ', flush=True)
        return 0
    print(json.dumps({"metrics": {"eval/loss": loss, "eval/accuracy": accuracy}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
