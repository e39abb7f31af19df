#!/usr/bin/env python3
"""A sweep trial on a scripted objective: the loss is a known function of lr and step, so a sweep's
answer can be checked (the best lr is 1e-2). Reports `train/loss` through the GPUPlane SDK.

    gpuctl sweep create examples/sweep-asha.yaml

It takes lr from GPUPLANE_PARAMS (the trial's point) and trains to GPUPLANE_MAX_STEPS (an asha
sweep's max_steps; else --steps), logging every --log-every steps and sleeping --sleep seconds a
step. On SIGTERM (the sweep stopping it at a rung) it finishes its run and exits at once.
"""

import argparse
import json
import math
import os
import signal
import sys
import time

import gpuplane

BEST_LR = 1e-2


def loss(lr: float, step: int) -> float:
    """A floor set by how far lr is from 1e-2 (in decades), plus a term that falls with the steps."""
    return 0.5 * (math.log10(lr) - math.log10(BEST_LR)) ** 2 + 1 / (1 + 10 * lr) / math.sqrt(step)


def main() -> int:
    params = json.loads(os.environ.get("GPUPLANE_PARAMS") or "{}")
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=int(os.environ.get("GPUPLANE_MAX_STEPS") or params.get("steps", 90)))
    p.add_argument("--lr", type=float, default=float(params.get("lr", 0.01)))
    p.add_argument("--log-every", type=int, default=int(params.get("log_every", 1)))
    p.add_argument("--sleep", type=float, default=float(params.get("sleep", 0.02)))
    a = p.parse_args()

    run = gpuplane.init("demo", "sweep", params={"lr": a.lr})

    def stop(_sig, _frame):
        run.finish("cancelled")
        print("stopped by SIGTERM", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    for step in range(1, a.steps + 1):
        if a.sleep:
            time.sleep(a.sleep)
        if step % a.log_every == 0 or step == a.steps:
            run.log({"train/loss": loss(a.lr, step)}, step=step)
    run.finish()
    print(f"done: lr {a.lr} loss {loss(a.lr, a.steps):.4f} at step {a.steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
