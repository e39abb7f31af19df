"""The MLflow half of bench/metrics: the same metric workload, through MlflowClient.log_batch.

    python bench/mlflow-load.py --uri http://127.0.0.1:5000 --points 300000 [--batch 1000 --keys 10]
    python bench/mlflow-load.py --uri ... --history-points 1000000 --queries 50
    python bench/mlflow-load.py --seed-runs 10000 --sqlite mlflow.db --experiment-id 3 --artifact-root DIR

Run with the venv of scripts/peers-venv.sh. The first form logs `--points` points into one run,
`--keys` keys of `--batch / --keys` steps per log_batch call (the shape bench/metrics.ts sends
to GPUPlane), one call at a time, as a training script does, stopping early after
`--max-seconds`. The second logs one series of
`--history-points` points (one key, `--batch` steps a call) and times `get_metric_history` of it
`--queries` times. The third writes `--seed-runs` runs straight into the SQLite store of an
idle `mlflow server` (bench/metrics-mlflow-api.ts's search over them; the same runs it seeds into
GPUPlane through the API: see seedRun there). Progress goes to stderr every few seconds; the result is one JSON line on
stdout.
"""

import argparse
import json
import math
import os
import sys
import time

import mlflow
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

KEYS = [
    "train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/acc",
    "eval/loss", "eval/acc", "gpu/0/util", "gpu/0/mem", "system/cpu",
]


def key_names(n):
    return [KEYS[i] if i < len(KEYS) else f"extra/k{i}" for i in range(n)]


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def cpu_s():
    t = os.times()
    return t.user + t.system


def mark():
    """Tells bench/metrics.ts the measured part begins (it samples CPU time there)."""
    print("start", flush=True)


class Progress:
    def __init__(self, label, total):
        self.label, self.total, self.t0, self.last = label, total, time.perf_counter(), time.perf_counter()

    def tick(self, done):
        now = time.perf_counter()
        if now - self.last >= 5:
            self.last = now
            rate = done / (now - self.t0)
            print(f"  mlflow {self.label}: {done:,}/{self.total:,} points, {rate:,.0f} points/s", file=sys.stderr, flush=True)


def new_run(client, name):
    exp = client.create_experiment(f"bench-{name}-{int(time.time() * 1000)}")
    return client.create_run(exp, run_name=name).info.run_id


def ingest(client, points, batch, keys, max_seconds, then_history=0):
    """log_batch of `batch` metrics: `keys` keys × (batch / keys) steps, one call at a time,
    until `points` are sent or `max_seconds` have passed."""
    run_id = new_run(client, f"ingest-{keys}-keys")
    names = key_names(keys)
    steps_per_batch = batch // keys
    calls = math.ceil(points / batch)
    lat = []
    progress = Progress("ingest", calls * batch)
    ts = int(time.time() * 1000)
    mark()
    cpu0, t0 = cpu_s(), time.perf_counter()
    for c in range(calls):
        base = c * steps_per_batch
        # Built in the loop, like a training script that logs what it just computed.
        metrics = [
            Metric(k, 1.0 / (1 + base + s) + i, ts + base + s, base + s)
            for s in range(steps_per_batch)
            for i, k in enumerate(names)
        ]
        r0 = time.perf_counter()
        client.log_batch(run_id, metrics=metrics)
        lat.append(time.perf_counter() - r0)
        progress.tick((c + 1) * batch)
        if max_seconds and time.perf_counter() - t0 >= max_seconds:
            break
    seconds = time.perf_counter() - t0
    sent = len(lat) * batch
    half = len(lat) // 2
    out = {
        "run_id": run_id,
        "points": sent,
        "seconds": seconds,
        "points_per_s": sent / seconds,
        # Whether the rate held: the first and the second half of the calls.
        "halves_points_per_s": [half * batch / max(sum(lat[:half]), 1e-9), (len(lat) - half) * batch / max(sum(lat[half:]), 1e-9)],
        "calls": len(lat),
        "keys": keys,
        "stopped_by": "points" if len(lat) == calls else "max_seconds",
        "call_ms": {"p50": pct(lat, 50) * 1000, "p95": pct(lat, 95) * 1000, "max": max(lat) * 1000},
        "client_cpu_s": cpu_s() - cpu0,
    }
    if then_history:
        # All of one key's points: get_metric_history has no downsampling.
        lat_h = []
        for _ in range(then_history):
            q0 = time.perf_counter()
            n = len(client.get_metric_history(run_id, names[0]))
            lat_h.append((time.perf_counter() - q0) * 1000)
        out["history"] = {"series_points": n, "queries": then_history, "ms": {"p50": pct(lat_h, 50), "p95": pct(lat_h, 95)}}
    return out


def history(client, points, batch, queries):
    run_id = new_run(client, "history")
    key = "query/loss"
    calls = math.ceil(points / batch)
    progress = Progress("history series", calls * batch)
    ts = int(time.time() * 1000)
    mark()
    t0 = time.perf_counter()
    for c in range(calls):
        base = c * batch
        client.log_batch(run_id, metrics=[Metric(key, 1.0 / (1 + base + s), ts + base + s, base + s) for s in range(batch)])
        progress.tick((c + 1) * batch)
    ingest_s = time.perf_counter() - t0
    lat = []
    n = 0
    for _ in range(queries):
        q0 = time.perf_counter()
        n = len(client.get_metric_history(run_id, key))
        lat.append((time.perf_counter() - q0) * 1000)
    return {
        "series_points": calls * batch,
        "ingest_seconds": ingest_s,
        "returned": n,
        "queries": queries,
        "ms": {"p50": pct(lat, 50), "p95": pct(lat, 95), "first": lat[0]},
    }


LRS = ["0.1", "0.05", "0.03", "0.02", "0.01", "0.005", "0.003", "0.002", "0.001", "0.0005"]


def seed_runs(path, experiment_id, n, artifact_root):
    """Run i as seedRun(i) in bench/metrics-mlflow-api.ts makes it, as the store writes a run:
    the runs row, its params and tags, and its metric in metrics and latest_metrics."""
    import sqlite3
    import uuid

    ts0 = int(time.time() * 1000) - n * 1000
    runs, params, tags, metrics = [], [], [], []
    for i in range(n):
        rid = uuid.uuid4().hex
        t = ts0 + i * 1000
        runs.append((rid, f"sweep-{i}", "UNKNOWN", "", "", "bench", "RUNNING", t, None, "", "active", f"{artifact_root}/{experiment_id}/{rid}/artifacts", int(experiment_id)))
        params += [("lr", LRS[i % len(LRS)], rid), ("batch_size", str(32 << (i % 4)), rid), ("optimizer", "adamw" if i % 3 else "sgd", rid)]
        tags += [("mlflow.runName", f"sweep-{i}", rid), ("team", "vision" if i % 2 else "nlp", rid)]
        metrics.append(("val/loss", 1 / (1 + (i % 97)), t, rid, 100))
    db = sqlite3.connect(path, timeout=60)
    with db:
        db.executemany("insert into runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, status, start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id) values (?,?,?,?,?,?,?,?,?,?,?,?,?)", runs)
        db.executemany("insert into params (key, value, run_uuid) values (?,?,?)", params)
        db.executemany("insert into tags (key, value, run_uuid) values (?,?,?)", tags)
        db.executemany("insert into metrics (key, value, timestamp, run_uuid, step, is_nan) values (?,?,?,?,?,0)", metrics)
        db.executemany("insert into latest_metrics (key, value, timestamp, run_uuid, step, is_nan) values (?,?,?,?,?,0)", metrics)
    db.close()
    return {"seeded": n}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri")
    ap.add_argument("--points", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--max-seconds", type=float, default=0)
    ap.add_argument("--then-history", type=int, default=0, help="time get_metric_history of the first key this many times after ingest")
    ap.add_argument("--history-points", type=int, default=0)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed-runs", type=int, default=0)
    ap.add_argument("--sqlite")
    ap.add_argument("--experiment-id")
    ap.add_argument("--artifact-root")
    a = ap.parse_args()
    if a.seed_runs:
        print(json.dumps(seed_runs(a.sqlite, a.experiment_id, a.seed_runs, a.artifact_root)), flush=True)
        return
    if not a.uri:
        ap.error("--uri is needed (or --seed-runs)")
    if a.batch > 1000:
        ap.error("MLflow's log_batch takes at most 1,000 metrics")
    if a.batch % a.keys:
        ap.error("--batch must be a multiple of --keys")
    client = MlflowClient(tracking_uri=a.uri)
    out = {"mlflow_version": mlflow.__version__}
    if a.points > 0:
        out["ingest"] = ingest(client, a.points, a.batch, a.keys, a.max_seconds, a.then_history)
    if a.history_points > 0:
        out["history"] = history(client, a.history_points, a.batch, a.queries)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
