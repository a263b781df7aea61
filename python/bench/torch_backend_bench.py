# SPDX-License-Identifier: Apache-2.0
"""torch.distributed on the "conflux" backend beside Gloo, in one run: all_reduce and all_to_all_single over a range
of sizes, and a DDP training step of a small MLP, at each rank count. Not a test: it measures.

    /usr/bin/python3 python/bench/torch_backend_bench.py --np 2 4 [--sizes 1K:256M] [--reps 3] [--out FILE]
    sudo /usr/bin/python3 python/bench/torch_backend_bench.py --netbed 2x2 --sizes 1K:64M   # tests/netbed, as root

Each (rank count, backend) is one job of ranks started as torchrun starts them (env:// variables); the backends take
turns, REPS times, and every figure is the median over the turns. With --netbed 2x2 the job runs on the namespace
bed of tests/netbed instead: 2 hosts of 2 ranks behind one switch, every port shaped to --rate (1gbit). A figure is rank 0's mean time per operation over
a timed loop that starts after a barrier and ends with one. Prints a markdown table per rank count (time per op,
and Gloo's time over Conflux's: above 1 means Conflux is faster) and, with --out, writes the raw JSON too.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), "tests"), os.path.dirname(HERE)]

import launcher  # noqa: E402  (python/tests/launcher.py: ranks as torchrun starts them)

BACKENDS = ["gloo", "conflux"]


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def size_range(spec: str) -> list[int]:
    lo, hi = (parse_size(s) for s in spec.split(":"))
    sizes = []
    while lo <= hi:
        sizes.append(lo)
        lo *= 4
    return sizes


def human(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


# ---- one rank ------------------------------------------------------------------------------------------------------

def timed(fn, iters: int, warmup: int) -> float:
    import torch.distributed as dist
    for _ in range(warmup):
        fn()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    dist.barrier()
    return (time.perf_counter() - start) / iters


def iterations(nbytes: int) -> tuple[int, int]:
    iters = int(max(3, min(200, (64 << 20) // max(nbytes, 1))))
    return iters, max(1, iters // 5)


MLP = (256, 1024, 1024, 10)


def mlp_layers() -> list:
    import torch
    return [torch.nn.Linear(MLP[0], MLP[1]), torch.nn.ReLU(), torch.nn.Linear(MLP[1], MLP[2]), torch.nn.ReLU(),
            torch.nn.Linear(MLP[2], MLP[3])]


def rank_main(backend: str, sizes: list[int], ddp_steps: int, ddp_batches: list[int]) -> None:
    import torch
    import torch.distributed as dist
    if backend == "conflux":
        import conflux.torch  # noqa: F401
    if "NCCL_SOCKET_IFNAME" in os.environ:  # Gloo takes the interface Conflux is told to use (the bed's hosts)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ["NCCL_SOCKET_IFNAME"])
    dist.init_process_group(backend, init_method="env://")
    rank, n = dist.get_rank(), dist.get_world_size()
    result = {"all_reduce": {}, "all_to_all_single": {}}
    for nbytes in sizes:
        t = torch.ones(nbytes // 4)
        result["all_reduce"][nbytes] = timed(lambda: dist.all_reduce(t), *iterations(nbytes))
        a2a_in = torch.ones((nbytes // 4) // n * n)
        a2a_out = torch.empty_like(a2a_in)
        result["all_to_all_single"][nbytes] = timed(lambda: dist.all_to_all_single(a2a_out, a2a_in),
                                                    *iterations(nbytes))
        del t, a2a_in, a2a_out
    result["ddp_step"], result["local_step"] = {}, {}
    for batch in ddp_batches:
        torch.manual_seed(0)
        model = torch.nn.Sequential(*mlp_layers())
        x, y = torch.randn(batch, MLP[0]), torch.randint(0, MLP[-1], (batch,))
        for name, net in (("ddp_step", torch.nn.parallel.DistributedDataParallel(model)), ("local_step", model)):
            opt = torch.optim.SGD(net.parameters(), lr=0.01)

            def step() -> None:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(net(x), y).backward()
                opt.step()

            # local_step: the same step without DDP, so without communication (every rank still runs at once)
            result[name][str(batch)] = timed(step, ddp_steps, 5)
    result["ddp_params"] = sum(p.numel() for layer in mlp_layers() for p in layer.parameters())
    if rank == 0:
        print("RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()


# ---- the driver ----------------------------------------------------------------------------------------------------

def run_job(backend: str, world: int, sizes: list[int], ddp_steps: int, batches: list[int], extra_env: dict) -> dict:
    port, procs = launcher.free_port(), []
    secret = os.urandom(16).hex()
    for rank in range(world):
        env = launcher.rank_env(rank, world, port, secret, extra_env)
        env["OMP_NUM_THREADS"] = "1"  # as torchrun sets it for several ranks per host
        procs.append(subprocess.Popen(rank_argv(backend, sizes, ddp_steps, batches), env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=3600)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            raise SystemExit(f"{backend} at {world} ranks: rank {rank} exited {p.returncode}:\n{out[-3000:]}")
    line = next(l for l in outs[0].splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def rank_argv(backend: str, sizes: list[int], ddp_steps: int, batches: list[int]) -> list[str]:
    return [launcher.PYTHON, os.path.abspath(__file__), "--rank-main", backend, "--sizes-list",
            ",".join(map(str, sizes)), "--ddp-steps", str(ddp_steps), "--ddp-batch", *map(str, batches)]


def run_netbed_job(bed, backend: str, sizes: list[int], ddp_steps: int, batches: list[int]) -> dict:
    outputs: dict = {}
    env = {"OMP_NUM_THREADS": "1", "CFX_SECRET": os.urandom(16).hex(),
           "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")])}
    rc = bed.run_ranks(2, rank_argv(backend, sizes, ddp_steps, batches), env=env, timeout=3600, quiet=True,
                       outputs=outputs, port=launcher.free_port())
    if rc != 0:
        raise SystemExit(f"{backend} on the bed failed:\n{outputs.get(0, '')[-3000:]}")
    line = next(l for l in outputs[0].splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def median_of(runs: list[dict], *path) -> float:
    values = []
    for r in runs:
        for key in path:
            r = r[key]
        values.append(r)
    return statistics.median(values)


def table(title: str, sizes: list[int], runs: dict) -> str:
    lines = [f"### {title}", "", "| op | size | Gloo | Conflux | Gloo / Conflux |", "|---|---|---|---|---|"]

    def row(op: str, label: str, path: tuple) -> None:
        g, c = median_of(runs["gloo"], *path), median_of(runs["conflux"], *path)
        lines.append(f"| {op} | {label} | {g * 1e3:.3f} ms | {c * 1e3:.3f} ms | {g / c:.2f}x |")

    for op in ("all_reduce", "all_to_all_single"):
        for nbytes in sizes:
            row(op, human(nbytes), (op, str(nbytes)))
    params = runs["conflux"][0]["ddp_params"]
    shape = "-".join(map(str, MLP))
    for batch in runs["conflux"][0]["ddp_step"]:
        row(f"DDP step, MLP {shape}, batch {batch} per rank", f"{params * 4 / (1 << 20):.1f} MiB of gradients",
            ("ddp_step", batch))
        local = median_of(runs["gloo"] + runs["conflux"], "local_step", batch)
        lines.append(f"| (the same step without DDP) | batch {batch} | {local * 1e3:.3f} ms | | |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--sizes", default="1K:256M")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ddp-steps", type=int, default=30)
    ap.add_argument("--ddp-batch", type=int, nargs="+", default=[8, 64], help="batch sizes per rank")
    ap.add_argument("--out", help="also write the raw results (JSON) here")
    ap.add_argument("--netbed", help="run on the namespace bed instead (2x2); needs root")
    ap.add_argument("--rate", default="1gbit", help="the bed's link rate (tc syntax)")
    ap.add_argument("--rank-main", help=argparse.SUPPRESS)
    ap.add_argument("--sizes-list", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_main:
        rank_main(args.rank_main, [int(s) for s in args.sizes_list.split(",")], args.ddp_steps, args.ddp_batch)
        return
    sizes = size_range(args.sizes)
    raw = {}
    if args.netbed:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "netbed"))
        import netbed
        if args.netbed != "2x2":
            raise SystemExit("--netbed: only 2x2 (2 hosts x 2 ranks on one switch) is defined")
        runs = {b: [] for b in BACKENDS}
        with netbed.Bed(netbed.switch(2, rate=args.rate), tag="tb") as bed:
            for rep in range(args.reps):
                for backend in BACKENDS:
                    runs[backend].append(run_netbed_job(bed, backend, sizes, args.ddp_steps, args.ddp_batch))
                    print(f"# bed, turn {rep + 1}/{args.reps}: {backend} done", file=sys.stderr, flush=True)
        raw["netbed"] = runs
        print(table(f"2 hosts x 2 ranks, one switch at {args.rate}", sizes, runs) + "\n", flush=True)
        args.np = []
    for world in args.np:
        runs = {b: [] for b in BACKENDS}
        for rep in range(args.reps):
            for backend in BACKENDS:
                runs[backend].append(run_job(backend, world, sizes, args.ddp_steps, args.ddp_batch,
                                             {"GLOO_SOCKET_IFNAME": "lo"}))
                print(f"# {world} ranks, turn {rep + 1}/{args.reps}: {backend} done", file=sys.stderr, flush=True)
        raw[world] = runs
        print(table(f"{world} ranks on one host", sizes, runs) + "\n", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
