#!/usr/bin/env python3
"""PyTorch DistributedDataParallel on CPU (gloo) across the nodes of a multi-node job.

    gpuctl submit --nodes 2 --gpus-per-node 1 --watch ckpts -- "$(bash scripts/ddp-venv.sh)/bin/torchrun" examples/ddp/train.py

torchrun needs no flags: GPUPlane gives every member PET_NNODES, PET_NODE_RANK,
PET_NPROC_PER_NODE, PET_MASTER_ADDR and PET_MASTER_PORT, which torchrun reads, and torchrun sets
RANK, WORLD_SIZE and LOCAL_RANK for each worker it starts. Each worker fits a tiny regression on
its own shard of synthetic data; DDP averages the gradients, so every replica stays the same.

Checks, each a non-zero exit when it fails: an all_reduce of (rank + 1) sums to
W(W+1)/2 on every rank, and after training every rank holds the same parameters. Metrics go
through the SDK with plain gpuplane.log() calls on every rank: only global rank 0's reach the run,
the SDK mutes the others (docs/sdk.md, Multi-node jobs). Rank 0 saves a checkpoint every --every
steps into --out (write to a .tmp, then rename), the folder that --watch registers from. Needs
torch (examples/ddp/requirements.txt; scripts/ddp-venv.sh makes a venv with it; examples/ddp/README.md).
"""

import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import gpuplane
except ImportError:  # run from a checkout without the SDK installed: use the repository's copy
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))
    import gpuplane

FEATURES = 8


def shard(rank: int, n: int) -> tuple:
    """This rank's synthetic data: y = x·w* + noise, the same w* everywhere, different x per rank."""
    w_star = torch.arange(1, FEATURES + 1, dtype=torch.float32) / FEATURES
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(n, FEATURES, generator=g)
    y = x @ w_star + 0.01 * torch.randn(n, generator=g)
    return x, y.unsqueeze(1)


def save(model: nn.Module, out: str, step: int) -> str:
    path = os.path.join(out, f"step-{step}.pt")
    torch.save({"step": step, "model": model.state_dict()}, path + ".tmp")
    os.replace(path + ".tmp", path)
    return path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--every", type=int, default=10, help="save a checkpoint every N steps (rank 0)")
    p.add_argument("--out", default="ckpts", help="checkpoint folder (give the same to --watch)")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # env://: torchrun set MASTER_ADDR/PORT, RANK, WORLD_SIZE
    rank, world = dist.get_rank(), dist.get_world_size()
    node = os.environ.get("GPUPLANE_NODE_RANK", "-")
    print(f"rank {rank}/{world} node_rank {node} local_rank {os.environ.get('LOCAL_RANK')} host {socket.gethostname()} pid {os.getpid()}", flush=True)

    # The collective check before any training: every rank must see the same sum.
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    want = world * (world + 1) / 2
    print(f"rank {rank}: all_reduce(rank+1) = {t.item():g} (want {want:g})", flush=True)
    if t.item() != want:
        return 1

    # Under a job every rank calls init(); only global rank 0's run sends (run.muted elsewhere).
    run = gpuplane.init(params={"lr": args.lr, "batch": args.batch, "world_size": world}) if os.environ.get("GPUPLANE_RUN_ID") else None

    torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    model = DDP(nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    x, y = shard(rank, args.batch * args.steps)
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
    started = time.time()
    for step in range(args.steps):
        xb, yb = x[step * args.batch : (step + 1) * args.batch], y[step * args.batch : (step + 1) * args.batch]
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(xb), yb)
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        mean /= world
        if run is not None:
            gpuplane.log({"train/loss": mean.item(), "train/rank_loss": loss.item()}, step=step)
        if rank == 0 and (step % 5 == 0 or step == args.steps - 1):
            print(f"step {step:3d} loss {mean.item():.4f}", flush=True)
        if rank == 0 and ((step + 1) % args.every == 0 or step == args.steps - 1):
            print(f"saved {save(model.module, args.out, step + 1)}", flush=True)

    # Every replica must hold the same weights: compare a checksum across ranks.
    checksum = torch.cat([q.detach().flatten() for q in model.module.parameters()]).sum()
    sums = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(sums, checksum.reshape(1))
    same = all(torch.allclose(s, sums[0]) for s in sums)
    print(f"rank {rank}: done {args.steps} steps in {time.time() - started:.2f}s, params checksum {checksum.item():.6f}, replicas identical: {same}", flush=True)
    if run is not None:
        gpuplane.finish()
    dist.barrier()
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
