#!/usr/bin/env python3
"""A small training loop (numpy) that saves checkpoints slowly, for the agent's checkpoint watcher.

    gpuctl submit --project demo --watch ckpts --env PYTHONPATH=$PWD/sdk/python \
        -- python3 examples/train_ckpt.py --out ckpts

It fits the toy regression of toy_task.py by gradient descent (learning rate --lr), and
overfits it: train/loss keeps falling while the held-out loss that examples/eval_ckpt.py
measures falls, then rises (with the defaults, lowest near step 30 of 60). Needs numpy
(examples/requirements.txt; `bash scripts/examples-venv.sh` makes a venv with it).

Every --every steps it saves a checkpoint (toy_task's .npy layout) named after the step, in turn:
- `step_<N>.pt`, written in place in chunks with sleeps between them;
- `ckpt-<N>.pt`, written to `ckpt-<N>.pt.tmp` in chunks, then renamed;
- `checkpoint-<N>/`, a directory whose files are written one after the other.
The pauses between writes (--chunk-sleep) must stay below the watcher's debounce. Metrics are
reported through the SDK (`train/loss`, `train/acc`) at every step.

It resumes: when the job's attempt has a checkpoint to resume from (`run.resume_from`, from
GPUPLANE_RESUME_FROM: the latest checkpoint of an earlier attempt after a LOST re-queue or a
retry, else the job's `resume_from`), it loads its weights and goes on from the step after it.
On SIGTERM (a cancel; later, preemption) it finishes the step, saves a checkpoint of it
(written to a temp name, then renamed) and exits 0: only an exit 0 vouches for the last
writes, so the agent's final scan registers it and a retry resumes from it.
"""

import argparse
import json
import os
import signal
import sys
import time

import numpy as np

import gpuplane
import toy_task


def write_slowly(path, data, chunks, pause):
    size = max(1, len(data) // chunks)
    with open(path, "wb") as f:
        for i in range(0, len(data), size):
            f.write(data[i : i + size])
            f.flush()
            os.fsync(f.fileno())
            time.sleep(pause)


def save(out, step, kind, data, chunks, pause):
    if kind == 0:
        write_slowly(os.path.join(out, f"step_{step}.pt"), data, chunks, pause)
    elif kind == 1:
        final = os.path.join(out, f"ckpt-{step}.pt")
        write_slowly(final + ".tmp", data, chunks, pause)
        os.rename(final + ".tmp", final)
    else:
        d = os.path.join(out, f"checkpoint-{step}")
        os.makedirs(d, exist_ok=True)
        write_slowly(os.path.join(d, "model.npy"), data, chunks, pause)
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump({"step": step}, f)


def load(path):
    """The step, projection and weights of a checkpoint this script saved (any of its three layouts)."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.npy")
    with open(path, "rb") as f:
        return toy_task.load_checkpoint(f.read())


class Stop:
    """Set by SIGTERM: the loop saves where it is and ends, instead of dying mid-step."""

    def __init__(self):
        self.asked = False
        signal.signal(signal.SIGTERM, self.ask)

    def ask(self, _sig, _frame):
        self.asked = True


def main() -> int:
    job_params = json.loads(os.environ.get("GPUPLANE_PARAMS") or "{}")
    p = argparse.ArgumentParser()
    p.add_argument("--project", default="demo")
    p.add_argument("--experiment", default="checkpoints")
    p.add_argument("--out", default=job_params.get("out", "ckpts"))
    p.add_argument("--steps", type=int, default=int(job_params.get("steps", 60)))
    p.add_argument("--every", type=int, default=int(job_params.get("every", 20)))
    # The model's size in numbers: the frozen projection (dim/64 x 64) plus 64 weights.
    p.add_argument("--dim", type=int, default=int(job_params.get("dim", 4096)))
    p.add_argument("--lr", type=float, default=float(job_params.get("lr", 0.02)))
    p.add_argument("--chunks", type=int, default=int(job_params.get("chunks", 4)))
    p.add_argument("--chunk-sleep", type=float, default=float(job_params.get("chunk_sleep", 0.2)))
    p.add_argument("--step-sleep", type=float, default=float(job_params.get("step_sleep", 0.01)))
    a = p.parse_args()

    stop = Stop()
    os.makedirs(a.out, exist_ok=True)
    run = gpuplane.init(a.project, a.experiment, params={"steps": a.steps, "every": a.every, "lr": a.lr})
    raw_dim = max(1, a.dim // toy_task.FEATURES)
    proj = toy_task.projection(raw_dim)
    w = np.zeros(toy_task.FEATURES)
    start = 0
    if run.resume_from:
        start, proj, w = load(run.resume_from)
        raw_dim = proj.shape[0]
        print(f"resumed from {run.resume_from} at step {start}", flush=True)
    f, y = toy_task.train_set(raw_dim, proj)
    loss = toy_task.mse(f, y, w)
    saved = 0
    for step in range(start + 1, a.steps + 1):
        err = f @ w - y
        w -= a.lr * f.T @ err / len(y)
        err = f @ w - y
        loss = float(np.mean(err**2))
        run.log({"train/loss": loss, "train/acc": float(np.mean(np.abs(err) < 0.5))}, step=step)
        time.sleep(a.step_sleep)
        if step % a.every == 0:
            save(a.out, step, saved % 3, toy_task.checkpoint_bytes(step, proj, w), a.chunks, a.chunk_sleep)
            print(f"saved step {step}", flush=True)
            saved += 1
        if stop.asked:
            if step % a.every != 0:
                save(a.out, step, 1, toy_task.checkpoint_bytes(step, proj, w), 1, 0)
                saved += 1
            print(f"SIGTERM: saved step {step}, stopping", flush=True)
            break
    run.finish()
    print(f"done: loss {loss:.4f}, {saved} checkpoints", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
