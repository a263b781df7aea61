# SPDX-License-Identifier: Apache-2.0
"""torch.distributed with backend "nccl" against exact expected values, and a timed DDP step.

Launched with `python3 -m torch.distributed.run --standalone --nproc_per_node N tests/gpu/torch_collectives.py`,
with our libnccl.so.2 in LD_PRELOAD (or not, for NVIDIA's). Every rank uses GPU 0 unless --spread, so N ranks share one
GPU, which NVIDIA's NCCL refuses ("Duplicate GPU detected"). Each check compares against values computed in closed
form; the DDP step must leave identical parameters on every rank, equal to a single-process reference. Rank 0 prints
one JSON line ("RESULT {...}") for the runner, and the process exits non-zero on any mismatch, naming the check.
"""
import argparse
import faulthandler
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def loaded_nccl():
    """The libnccl files mapped into this process (torch.cuda.nccl.version() is compile-time only)."""
    with open("/proc/self/maps") as maps:
        return sorted({line.split()[-1] for line in maps if "libnccl" in line})


def graph_job(rank, world, dev, check, failures):
    """Collectives captured into a CUDA graph with torch.cuda.graph (CUDA's global capture mode, as torch uses it)
    between kernels that read and write the same tensors, then replayed with new inputs: each replay must run the
    collectives again, in stream order with the kernels around them."""
    x = torch.zeros(4099, device=dev)
    y = torch.zeros(1031, dtype=torch.int64, device=dev)
    g_in = torch.zeros(257, device=dev)
    g_out = torch.zeros(world * 257, device=dev)
    # Warm up on a side stream, as torch's documentation asks before a capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            dist.all_reduce(x)
            dist.all_reduce(y, op=dist.ReduceOp.MAX)
            dist.all_gather_into_tensor(g_out, g_in)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x.mul_(2)
        dist.all_reduce(x)
        x.add_(1)
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        dist.all_gather_into_tensor(g_out, g_in * 3)
    ok = True
    start = time.perf_counter()
    replays = 10
    for it in range(replays):
        x.fill_(rank + 1 + it)
        y.copy_((torch.arange(1031, device=dev) % 50) + rank + it)
        g_in.copy_(torch.arange(257, dtype=torch.float32, device=dev) + 1000 * rank + it)
        graph.replay()
        torch.cuda.synchronize()
        want_x = 2 * (world * (world + 1) // 2 + world * it) + 1
        want_y = (torch.arange(1031, device=dev) % 50) + (world - 1) + it
        want_g = torch.cat([(torch.arange(257, dtype=torch.float32, device=dev) + 1000 * r + it) * 3
                            for r in range(world)])
        ok = ok and bool((x == want_x).all()) and bool(torch.equal(y, want_y)) and bool(torch.equal(g_out, want_g))
    replay_ms = (time.perf_counter() - start) * 1000.0 / replays
    check(f"collectives captured in a CUDA graph, {replays} replays", ok)
    verdict = torch.tensor([len(failures)], dtype=torch.int64, device=dev)
    dist.all_reduce(verdict)
    if rank == 0:
        print("RESULT " + json.dumps({"world": world, "graph": True, "libnccl": loaded_nccl(),
                                      "failed_checks_all_ranks": int(verdict.item()), "rank0_failures": failures,
                                      "replay_ms": round(replay_ms, 3), "replays": replays}), flush=True)
    dist.destroy_process_group()
    sys.exit(1 if failures or int(verdict.item()) else 0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--spread", action="store_true", help="rank r uses GPU r %% device_count")
    parser.add_argument("--steps", type=int, default=20, help="timed DDP steps")
    parser.add_argument("--backend", default="nccl")
    parser.add_argument("--graph", action="store_true",
                        help="only the CUDA graph check: collectives captured with torch.cuda.graph, then replayed")
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    cuda = args.backend == "nccl"
    if cuda:
        dev = torch.device("cuda", rank % torch.cuda.device_count() if args.spread else 0)
        torch.cuda.set_device(dev)
        dist.init_process_group(args.backend, device_id=dev)
    else:
        dev = torch.device("cpu")
        dist.init_process_group(args.backend)

    failures = []
    # A hang must say where: every check is announced, and a rank stuck for 90 s (CFX_TORCH_HANG_DUMP_S) dumps
    # every thread's stack.
    faulthandler.dump_traceback_later(float(os.environ.get("CFX_TORCH_HANG_DUMP_S", "90")), exit=False)

    def check(name, ok):
        print(f"rank {rank}: {'ok  ' if ok else 'FAIL'} {name}", flush=True)
        if not ok:
            failures.append(name)

    tri = world * (world + 1) // 2  # sum over ranks of (rank + 1)

    if args.graph:
        graph_job(rank, world, dev, check, failures)
        return

    # all_reduce: sum and max, fp32 / bf16 / int64, sizes that do not divide by the rank count.
    # --backend gloo (a CPU check of this script's own logic) lacks bf16, reduce_scatter and all_gather_into_tensor.
    gloo = args.backend == "gloo"
    for dtype in (torch.float32, torch.int64) if gloo else (torch.float32, torch.bfloat16, torch.int64):
        x = torch.full((1023,), rank + 1, dtype=dtype, device=dev)
        dist.all_reduce(x)
        check(f"all_reduce sum {dtype}", bool((x == tri).all()))
        # Values below 256 are exact in bf16, so the expected maximum is exact too.
        base = torch.arange(517, device=dev) % 200
        y = (base + rank).to(dtype)
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        check(f"all_reduce max {dtype}", bool((y == (base + (world - 1)).to(dtype)).all()))

    # all_gather_into_tensor and reduce_scatter_tensor.
    chunk = 257
    mine = torch.arange(chunk, dtype=torch.float32, device=dev) + 1000 * rank
    gathered = torch.empty(world * chunk, dtype=torch.float32, device=dev)
    if gloo:
        dist.all_gather(list(gathered.chunk(world)), mine)
    else:
        dist.all_gather_into_tensor(gathered, mine)
    want = torch.cat([torch.arange(chunk, dtype=torch.float32, device=dev) + 1000 * r for r in range(world)])
    check("all_gather_into_tensor", bool(torch.equal(gathered, want)))

    if not gloo:
        full = torch.arange(world * chunk, dtype=torch.float32, device=dev) * (rank + 1)
        part = torch.empty(chunk, dtype=torch.float32, device=dev)
        dist.reduce_scatter_tensor(part, full)
        want = torch.arange(rank * chunk, (rank + 1) * chunk, dtype=torch.float32, device=dev) * tri
        check("reduce_scatter_tensor", bool(torch.equal(part, want)))

    # broadcast from the last rank.
    b = torch.full((333,), float(rank), device=dev)
    dist.broadcast(b, src=world - 1)
    check("broadcast", bool((b == world - 1).all()))

    # all_to_all_single, equal and uneven splits.
    inp = torch.arange(world * 4, dtype=torch.int64, device=dev) + 100 * rank
    out = torch.empty_like(inp)
    dist.all_to_all_single(out, inp)
    want = torch.cat([torch.arange(rank * 4, rank * 4 + 4, dtype=torch.int64, device=dev) + 100 * r for r in range(world)])
    check("all_to_all_single equal", bool(torch.equal(out, want)))
    # rank r sends (p + 1) elements to peer p, all of value 10 * r + p.
    send_splits = [p + 1 for p in range(world)]
    recv_splits = [rank + 1] * world
    inp = torch.cat([torch.full((p + 1,), 10 * rank + p, dtype=torch.int64, device=dev) for p in range(world)])
    out = torch.empty(sum(recv_splits), dtype=torch.int64, device=dev)
    dist.all_to_all_single(out, inp, recv_splits, send_splits)
    want = torch.cat([torch.full((rank + 1,), 10 * r + rank, dtype=torch.int64, device=dev) for r in range(world)])
    check("all_to_all_single uneven", bool(torch.equal(out, want)))

    # send/recv around a ring with batch_isend_irecv.
    if world > 1:
        to, frm = (rank + 1) % world, (rank - 1) % world
        s = torch.full((64,), float(rank), device=dev)
        r = torch.empty(64, device=dev)
        for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, s, to), dist.P2POp(dist.irecv, r, frm)]):
            req.wait()
        check("batch_isend_irecv ring", bool((r == frm).all()))

    dist.barrier()
    check("barrier", True)

    # A subgroup of the even ranks.
    evens = list(range(0, world, 2))
    group = dist.new_group(evens)
    if rank in evens:
        g = torch.ones(100, device=dev)
        dist.all_reduce(g, group=group)
        check("new_group all_reduce", bool((g == len(evens)).all()))

    # DDP: same model and same data on every rank, so the averaged gradient equals the local one and every rank must
    # end with the parameters of a single-process step.
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    reference = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    reference.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if cuda else None)
    data = torch.randn(64, 256, generator=torch.Generator().manual_seed(7)).to(dev)
    target = torch.randint(0, 10, (64,), generator=torch.Generator().manual_seed(8)).to(dev)
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    opt.zero_grad()
    loss_fn(ddp(data), target).backward()
    opt.step()
    ref_opt.zero_grad()
    loss_fn(reference(data), target).backward()
    ref_opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref_flat = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    # Averaging identical fp32 gradients over ranks can round: equal to the reference within a few ulps.
    check("ddp step matches single-process reference", bool(torch.allclose(flat, ref_flat, rtol=1e-5, atol=1e-6)))
    every = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(every, flat)
    check("ddp parameters identical on all ranks", all(torch.equal(every[0], e) for e in every))

    # Timed DDP steps (after the checked one, so buckets and communicators exist).
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(args.steps):
        opt.zero_grad()
        loss_fn(ddp(data), target).backward()
        opt.step()
    if cuda:
        torch.cuda.synchronize()
    step_ms = (time.perf_counter() - start) * 1000.0 / max(1, args.steps)

    # A 64 MiB fp32 all-reduce of a plain tensor (the caching allocator's memory, no window), checked and timed:
    # issue 35's target for 2 ranks on one GPU is 2.5 ms by default.
    big = torch.full((16 << 20,), float(rank + 1), device=dev)
    for _ in range(2):
        dist.all_reduce(big)
    if cuda:
        torch.cuda.synchronize()
    timed = 10 if cuda else 2
    start = time.perf_counter()
    for _ in range(timed):
        dist.all_reduce(big)
    if cuda:
        torch.cuda.synchronize()
    big_ms = (time.perf_counter() - start) * 1000.0 / timed
    # Every element went through 2 + timed sums of world contributions: (sum of ranks + 1) * world^(2 + timed - 1).
    want = float(world * (world + 1) // 2) * float(world) ** (1 + timed)
    check("64 MiB all_reduce (sum, repeated)", bool(torch.all(big == want).item()))

    verdict = torch.tensor([len(failures)], dtype=torch.int64, device=dev)
    dist.all_reduce(verdict)
    if rank == 0:
        print("RESULT " + json.dumps({"world": world, "backend": args.backend, "libnccl": loaded_nccl(),
                                      "failed_checks_all_ranks": int(verdict.item()), "rank0_failures": failures,
                                      "ddp_step_ms": round(step_ms, 3), "steps": args.steps,
                                      "allreduce_64MiB_ms": round(big_ms, 3)}), flush=True)
    elif failures:
        print(f"rank {rank} failed: {failures}", flush=True)
    dist.destroy_process_group()
    sys.exit(1 if failures or int(verdict.item()) else 0)


if __name__ == "__main__":
    main()
