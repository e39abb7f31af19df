#!/usr/bin/env python3
"""Writes the fixtures of `gpuctl import-run` with the real writers, into test/fixtures/import/.

    "$(bash scripts/peers-venv.sh)/bin/python" scripts/gen-import-fixtures.py

(any venv with mlflow 3, tensorboard and tensorboardX will do; the committed fixtures were
written with mlflow 3.17.2, tensorboard 2.21.0 and tensorboardX 2.6.5). It replaces what is there:

  mlruns/            MLflow file store: experiment "import-demo", runs "baseline" (FINISHED) and
                     "diverged" (FAILED); params, tags, a key with "/" (train/loss), NaN and Inf
  mlflow.db          MLflow SQLite store: experiment "sqlite-demo", runs "sq-finished" (FINISHED)
                     and "sq-killed" (KILLED), NaN and -Inf; vacuumed with 512-byte pages to stay small
  tensorboard/tbx-simple/   tensorboardX SummaryWriter.add_scalar: simple_value (float32)
  tensorboard/tb-native/    TensorBoard's own EventFileWriter + scalar_pb: tensor float_val
  tensorboard/tf2-style/    tensor_content bytes (float32 and float64), "scalars" metadata on
                            the first value of a tag only, as TF2's tf.summary.scalar writes
  run.jsonl          a GPUPlane JSONL run (docs/import-jsonl.md)

Values are fixed so the tests can name them; run ids and file names change on every generation.
"""

import json
import os
import shutil
import sqlite3
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.normpath(os.path.join(HERE, "..", "test", "fixtures", "import"))
T0 = 1_700_000_000_000  # epoch ms of step 0


def mlflow_runs(client, exp_id, runs):
    from mlflow.entities import Metric, Param, RunTag

    for name, status, params, tags, metrics in runs:
        run = client.create_run(exp_id, run_name=name, start_time=T0, tags=tags)
        rid = run.info.run_id
        client.log_batch(
            rid,
            params=[Param(k, v) for k, v in params.items()],
            metrics=[Metric(k, v, T0 + 1000 * s, s) for k, series in metrics.items() for s, v in series],
        )
        client.set_terminated(rid, status=status, end_time=T0 + 60_000)


def file_store():
    from mlflow.tracking import MlflowClient

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    root = os.path.join(OUT, "mlruns")
    client = MlflowClient(tracking_uri="file:" + root)
    exp_id = client.create_experiment("import-demo")
    mlflow_runs(
        client,
        exp_id,
        [
            (
                "baseline",
                "FINISHED",
                {"lr": "0.001", "batch_size": "32", "optimizer/name": "adam"},
                {"team": "vision", "note": "first try"},
                {"train/loss": [(0, 2.5), (1, 1.25), (2, float("nan")), (3, 0.625)], "accuracy": [(0, 0.5), (1, float("inf")), (2, 0.75)]},
            ),
            (
                "diverged",
                "FAILED",
                {"lr": "0.1", "batch_size": "32"},
                {"team": "vision"},
                {"train/loss": [(0, 2.5), (1, 1e30), (2, float("inf"))]},
            ),
        ],
    )
    # What a git checkout of mlruns/ holds: no empty folders, no trash, no artifacts.
    for dirpath, dirnames, _ in os.walk(root, topdown=False):
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if d in (".trash", "artifacts") or not os.listdir(full):
                shutil.rmtree(full)
    for extra in (".trash", "models"):
        shutil.rmtree(os.path.join(root, extra), ignore_errors=True)
    # Experiment 0 ("Default") is empty here; leave only ours.
    shutil.rmtree(os.path.join(root, "0"), ignore_errors=True)


def sqlite_store():
    from mlflow.tracking import MlflowClient

    path = os.path.join(OUT, "mlflow.db")
    client = MlflowClient(tracking_uri="sqlite:///" + path)
    exp_id = client.create_experiment("sqlite-demo")
    mlflow_runs(
        client,
        exp_id,
        [
            ("sq-finished", "FINISHED", {"lr": "0.01", "epochs": "3"}, {"owner": "ana"}, {"loss": [(0, 1.0), (1, 0.5), (2, float("nan"))], "val/acc": [(0, 0.25), (2, 0.875)]}),
            ("sq-killed", "KILLED", {"lr": "0.02"}, {}, {"loss": [(0, 1.5), (1, float("-inf"))]}),
        ],
    )
    del client
    db = sqlite3.connect(path)
    db.execute("PRAGMA page_size = 512")
    db.execute("VACUUM")
    db.close()


def tensorboard_runs():
    import struct

    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.plugins.scalar import summary_v2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboardX import SummaryWriter

    values = [(0, 0.9), (1, 0.7), (2, float("nan")), (3, 0.123456789), (4, float("inf"))]
    wall = lambda step: T0 / 1000 + step  # noqa: E731

    # tensorboardX: simple_value, no metadata (its add_scalar has no new_style in 2.6.5).
    w = SummaryWriter(logdir=os.path.join(OUT, "tensorboard", "tbx-simple"))
    for step, v in values:
        w.add_scalar("loss", v, step, walltime=wall(step))
        w.add_scalar("eval/acc", 0.1 * step, step, walltime=wall(step))
    w.close()

    # TensorBoard's own writer with scalar_pb: a DT_FLOAT tensor in float_val, metadata every time.
    w = EventFileWriter(os.path.join(OUT, "tensorboard", "tb-native"))
    for step, v in values:
        w.add_event(event_pb2.Event(wall_time=wall(step), step=step, summary=summary_v2.scalar_pb("loss", v)))
    w.close()

    # What TF2's tf.summary.scalar writes (its C++ writer): the value as tensor_content bytes, and
    # the "scalars" metadata with the first value of each tag only. Built by hand, as TensorFlow
    # is too big to install for a fixture.
    w = EventFileWriter(os.path.join(OUT, "tensorboard", "tf2-style"))
    seen = set()
    for step, v in values:
        vals = []
        for tag, x, dtype, fmt in (("loss", v, types_pb2.DT_FLOAT, "<f"), ("lr", 1e-3 / (step + 1), types_pb2.DT_DOUBLE, "<d")):
            t = tensor_pb2.TensorProto(dtype=dtype, tensor_shape=tensor_shape_pb2.TensorShapeProto(), tensor_content=struct.pack(fmt, x))
            val = summary_pb2.Summary.Value(tag=tag, tensor=t)
            if tag not in seen:
                val.metadata.plugin_data.plugin_name = "scalars"
                val.metadata.data_class = summary_pb2.DATA_CLASS_SCALAR
                seen.add(tag)
            vals.append(val)
        w.add_event(event_pb2.Event(wall_time=wall(step), step=step, summary=summary_pb2.Summary(value=vals)))
    w.close()


def jsonl_run():
    lines = [
        {"type": "run", "id": "demo-0001", "project": "jsonl-demo", "experiment": "sweep", "name": "lr-3e-4", "status": "finished",
         "started_at": "2023-11-14T22:13:20Z", "ended_at": "2023-11-14T22:14:20Z",
         "params": {"lr": 0.0003, "layers": 4, "schedule": {"kind": "cosine", "warmup": 100}}, "tags": {"owner": "ana"}},
        {"type": "metric", "key": "loss", "step": 0, "value": 2.0, "ts": T0},
        {"type": "metric", "key": "loss", "step": 1, "value": "NaN", "ts": T0 + 1000},
        {"type": "metric", "key": "loss", "step": 2, "value": 0.5, "ts": T0 + 2000},
        {"type": "metric", "key": "grad/norm", "step": 1, "value": "Infinity"},
        {"type": "metric", "key": "grad/norm", "step": 2, "value": "-Infinity"},
        {"type": "event", "kind": "checkpoint.saved", "message": "saved step 2", "level": "info", "data": {"path": "ckpt/2.pt"}, "ts": T0 + 2000},
    ]
    with open(os.path.join(OUT, "run.jsonl"), "w") as f:
        for o in lines:
            f.write(json.dumps(o) + "\n")


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    file_store()
    sqlite_store()
    tensorboard_runs()
    jsonl_run()
    total = sum(os.path.getsize(os.path.join(p, f)) for p, _, fs in os.walk(OUT) for f in fs)
    print(f"wrote {OUT} ({total} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
