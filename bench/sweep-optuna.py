#!/usr/bin/env python3
"""bench/sweep's peer: Optuna's SuccessiveHalvingPruner on examples/sweep_objective.py's objective,
in-process, the same budget as the GPUPlane sweep (trials, rungs). Prints one JSON line per seed:
the best final value found, its lr, and the trial-steps used (each trial's last step reported).

    python bench/sweep-optuna.py --seeds 1,2,3,4,5 --trials 27 --min-steps 10 --max-steps 90 --rf 3 [--sampler random|tpe|points --points FILE] [--jobs 4 --step-sleep 0.05]
"""

import argparse
import json
import math
import threading
import time

import optuna

BEST_LR = 1e-2


def loss(lr: float, step: int) -> float:
    return 0.5 * (math.log10(lr) - math.log10(BEST_LR)) ** 2 + 1 / (1 + 10 * lr) / math.sqrt(step)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", default="1,2,3,4,5")
    p.add_argument("--trials", type=int, default=27)
    p.add_argument("--min-steps", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=90)
    p.add_argument("--rf", type=int, default=3)
    p.add_argument("--sampler", choices=["random", "tpe", "points"], default="random")
    p.add_argument("--jobs", type=int, default=1, help="trials at once (Optuna's n_jobs: threads)")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds a step takes, so that --jobs trials overlap as a sweep's do")
    p.add_argument("--points", help="points: a JSON file of {seed: [lr, ...]}, tried in that order (the GPUPlane sweep's own)")
    a = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for seed in [int(s) for s in a.seeds.split(",")]:
        used = {"steps": 0}
        lock = threading.Lock()

        def objective(trial: optuna.Trial) -> float:
            lr = trial.suggest_float("lr", 1e-4, 1.0, log=True)
            for step in range(1, a.max_steps + 1):
                if a.step_sleep:
                    time.sleep(a.step_sleep)
                trial.report(loss(lr, step), step)
                if trial.should_prune():
                    with lock:
                        used["steps"] += step
                    raise optuna.TrialPruned()
            with lock:
                used["steps"] += a.max_steps
            return loss(lr, a.max_steps)

        sampler = optuna.samplers.TPESampler(seed=seed) if a.sampler == "tpe" else optuna.samplers.RandomSampler(seed=seed)
        pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=a.min_steps, reduction_factor=a.rf)
        study = optuna.create_study(direction="minimize", sampler=sampler, pruner=pruner)
        if a.sampler == "points":
            with open(a.points) as f:
                for lr in json.load(f)[str(seed)]:
                    study.enqueue_trial({"lr": lr})
        study.optimize(objective, n_trials=a.trials, n_jobs=a.jobs)
        lrs = [t.params["lr"] for t in study.trials]
        print(json.dumps({"seed": seed, "best_value": study.best_value, "best_lr": study.best_params["lr"], "steps": used["steps"], "pruned": sum(1 for t in study.trials if t.state == optuna.trial.TrialState.PRUNED), "best_possible": min(loss(x, a.max_steps) for x in lrs)}), flush=True)


if __name__ == "__main__":
    main()
