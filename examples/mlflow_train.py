#!/usr/bin/env python3
"""A training script written for MLflow, with nothing of GPUPlane in it (docs/mlflow.md).

By hand, against GPUPlane's MLflow endpoints:

    MLFLOW_TRACKING_URI=http://127.0.0.1:8787/mlflow MLFLOW_TRACKING_TOKEN=<token> \
        python3 examples/mlflow_train.py --experiment demo/mlflow

It logs params, a loss per step and a final accuracy, as any MLflow script does.
"""

import argparse
import math
import os
import random
import time

import mlflow


def main() -> None:
    p = argparse.ArgumentParser()
    # Under a GPUPlane job MLFLOW_EXPERIMENT_NAME names the job's experiment (its run is MLFLOW_RUN_ID).
    p.add_argument("--experiment", default=os.environ.get("MLFLOW_EXPERIMENT_NAME", "demo/mlflow"))
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--sleep", type=float, default=0.0, help="seconds per step (a long run, for the tests)")
    a = p.parse_args()

    mlflow.set_experiment(a.experiment)
    with mlflow.start_run():
        mlflow.log_params({"lr": a.lr, "steps": a.steps})
        rng = random.Random(0)
        loss = 2.5
        for step in range(a.steps):
            loss = loss * (1 - a.lr * 0.1) + rng.uniform(-0.01, 0.01)
            mlflow.log_metric("train/loss", loss, step=step)
            time.sleep(a.sleep)
        mlflow.log_metric("eval/acc", 1 - math.exp(-a.steps * a.lr / 10), step=a.steps)


if __name__ == "__main__":
    main()
