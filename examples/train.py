#!/usr/bin/env python3
"""A stand-in training loop that reports through the GPUPlane SDK (no GPU or framework needed).

    gpuctl submit --project demo --experiment sgd --param lr=0.05 --param steps=500 \
        --env PYTHONPATH=$PWD/sdk/python -- python3 examples/train.py

Under a job it attaches to the job's run (params come from the job); run by hand it registers
a run of its own:  PYTHONPATH=sdk/python python3 examples/train.py --project demo
Flags: --steps N, --lr X, --fail-at STEP (exit 1 there), --nan-at STEP (the loss turns NaN).
"""

import argparse
import json
import math
import os
import random
import sys
import time

import gpuplane


def main() -> int:
    job_params = json.loads(os.environ.get("GPUPLANE_PARAMS") or "{}")
    p = argparse.ArgumentParser()
    p.add_argument("--project", default="demo")
    p.add_argument("--experiment", default="examples")
    p.add_argument("--steps", type=int, default=int(job_params.get("steps", 300)))
    p.add_argument("--lr", type=float, default=float(job_params.get("lr", 0.05)))
    p.add_argument("--fail-at", type=int, default=int(job_params.get("fail_at", -1)))
    p.add_argument("--nan-at", type=int, default=int(job_params.get("nan_at", -1)))
    p.add_argument("--sleep", type=float, default=float(job_params.get("sleep", 0.0)))
    a = p.parse_args()

    run = gpuplane.init(a.project, a.experiment, name=f"lr={a.lr}", params={"lr": a.lr, "steps": a.steps})
    rng = random.Random(0)
    loss = 2.5
    for step in range(a.steps):
        loss = loss * (1 - a.lr * 0.1) + rng.uniform(-0.01, 0.01)
        value = float("nan") if 0 <= a.nan_at <= step else loss
        if abs(loss) > 1e6:
            # Too high a learning rate: the loss diverges, as a real one would. Log it and stop.
            run.log({"train/loss": float("inf")}, step=step)
            print(f"loss diverged at step {step} (lr {a.lr}): lower --lr", file=sys.stderr, flush=True)
            run.finish("failed")
            return 1
        run.log({"train/loss": value, "train/acc": 1 - math.exp(-step * a.lr * 0.05), "lr": a.lr}, step=step)
        if step % 100 == 0:
            print(f"step {step} loss {value:.4f}", flush=True)
        if step == a.fail_at:
            print("simulated failure", file=sys.stderr, flush=True)
            return 1
        if a.sleep:
            time.sleep(a.sleep)
    run.event("train.done", f"finished {a.steps} steps", {"final_loss": loss})
    run.finish()
    print(f"done: loss {loss:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
