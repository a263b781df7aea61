# SPDX-License-Identifier: Apache-2.0
"""DDP on the "conflux" backend (test_torch_backend.py): a few steps of a small MLP, each rank on its share of the
batch, must leave the parameters a single process reaches on the whole batch (within fp32 rounding)."""
from __future__ import annotations

import copy
import datetime

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import conflux.torch

STEPS = 5


def setup():
    dist.init_process_group("conflux", init_method="env://", timeout=datetime.timedelta(seconds=120))
    return dist.get_rank(), dist.get_world_size()


def teardown(ctx):
    dist.destroy_process_group()


def mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 4))


def check_ddp_matches_single_process(ctx):
    ddp_matches_single_process(ctx)


def check_ddp_on_shared_host_memory(ctx):
    """The same with the model, DDP's buckets and the gradients in memory the ranks share, which Conflux reads in
    place (conflux.torch.use_shared_host_memory)."""
    conflux.torch.use_shared_host_memory(min_bytes=4096)
    try:
        ddp_matches_single_process(ctx)
        assert conflux.torch.shared_host_memory_stats()["blocks_made"] > 0
    finally:
        conflux.torch.use_shared_host_memory(False)


def ddp_matches_single_process(ctx):
    rank, n = ctx
    model = mlp(seed=100 + rank)  # ranks start apart: DDP must broadcast rank 0's parameters
    reference = mlp(seed=100)
    ddp = DDP(model, bucket_cap_mb=0.01)  # several buckets, so several all-reduces overlap the backward pass
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(7)
    for _ in range(STEPS):
        x, y = torch.randn(8 * n, 16, generator=data), torch.randn(8 * n, 4, generator=data)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x.chunk(n)[rank]), y.chunk(n)[rank]).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), f"{name}: max diff {(p - q).abs().max().item()}"
    # and every rank holds the same bits
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    lo, hi = flat.clone(), flat.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    assert torch.equal(lo, hi), "ranks ended with different parameters"
