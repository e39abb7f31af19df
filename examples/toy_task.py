"""The toy task the example training and evaluation scripts share (numpy).

A regression problem generated from fixed seeds: inputs x (raw_dim numbers), a frozen random
projection P to 64 features, and targets y = features(x) @ w_true + noise. The training set is
small (48 samples for 64 weights), so gradient descent overfits it: the training loss keeps
falling while the loss on held-out data falls, then rises. That is exactly the case where the
checkpoint with the best training loss is not the best model, and an evaluation must decide.

A checkpoint is one .npy array: [step, raw_dim, P (raw_dim x 64, row-major), w (64)].
"""

import io

import numpy as np

FEATURES = 64
TRAIN_SAMPLES = 48
HELDOUT_SAMPLES = 2000
NOISE = 0.5


def projection(raw_dim: int) -> np.ndarray:
    return np.random.default_rng(7).normal(0, 1, (raw_dim, FEATURES)) / np.sqrt(raw_dim)


def true_weights() -> np.ndarray:
    return np.random.default_rng(0).normal(0, 1, FEATURES) / np.sqrt(FEATURES)


def dataset(raw_dim: int, p: np.ndarray, samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features and targets: seed 1 is the training set, seed 1234 the held-out set."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (samples, raw_dim))
    f = np.tanh(x @ p) * 2
    return f, f @ true_weights() + rng.normal(0, NOISE, samples)


def train_set(raw_dim: int, p: np.ndarray):
    return dataset(raw_dim, p, TRAIN_SAMPLES, 1)


def heldout_set(raw_dim: int, p: np.ndarray):
    return dataset(raw_dim, p, HELDOUT_SAMPLES, 1234)


def mse(f: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    return float(np.mean((f @ w - y) ** 2))


def checkpoint_bytes(step: int, p: np.ndarray, w: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.concatenate([[step, p.shape[0]], p.ravel(), w]))
    return buf.getvalue()


def load_checkpoint(data: bytes) -> tuple[int, np.ndarray, np.ndarray]:
    a = np.load(io.BytesIO(data))
    step, raw_dim = int(a[0]), int(a[1])
    p = a[2 : 2 + raw_dim * FEATURES].reshape(raw_dim, FEATURES)
    return step, p, a[2 + raw_dim * FEATURES :]
