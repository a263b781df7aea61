# SPDX-License-Identifier: Apache-2.0
"""torch.distributed on the "conflux" backend beside Gloo, in one run: all_reduce and all_to_all_single over a range
of sizes, and DDP training steps of a small MLP, at each rank count. Not a test: it measures.

    /usr/bin/python3 python/bench/torch_backend_bench.py --np 2 4 [--sizes 1K:256M] [--rounds 3] [--out FILE]
    sudo /usr/bin/python3 python/bench/torch_backend_bench.py --netbed 2x2 --sizes 1K:64M   # tests/netbed, as root

One job of ranks per rank count, started as torchrun starts them (env:// variables). Every rank holds both process
groups at once, the default one on "conflux" and a Gloo group over the same ranks (new_group(backend="gloo")), and
every measurement alternates between them, --rounds times, so both see the same moment of a shared machine; a
figure is the median over the rounds of rank 0's mean time per operation over a timed loop that starts after a
barrier and ends with one; the collectives' last columns are the median and 90th percentile of rank 0's calls timed
one by one, over every round (a mean hides whether all calls are slow or a few stall). The DDP rows train two copies of one model, each wrapped by DDP on one group, in
alternating blocks of steps; "conflux with use_shared_host_memory()" is a copy on the conflux group made while that
opt-in was on (model, buckets and gradients in blocks the host's ranks share); "DDP communicating nothing" is a copy
whose DDP has a communication hook that hands every bucket back at once (DDP's own work, no communication: the least
any backend's step can cost), and "without DDP" is the same step on one process's model with no communication (every
rank computing at once). With --netbed 2x2 the job runs on the
namespace bed of tests/netbed: 2 hosts of 2 ranks behind one switch, every port shaped to --rate.

The model's compute runs on whatever BLAS PyTorch loads. Debian's default is the reference BLAS, several times slower
than the OpenBLAS or MKL that other PyTorch builds bring, which makes the DDP step mostly compute. --blas-dir DIR puts
DIR first on the ranks' LD_LIBRARY_PATH (with Debian's libopenblas0-pthread installed:
/usr/lib/x86_64-linux-gnu/openblas-pthread) without changing the system's choice; the tables name the BLAS used.

Prints a markdown table per job (time per operation, and Gloo's time over Conflux's: above 1 means Conflux is faster)
and, with --out, writes the raw JSON too.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(HERE), "tests"), os.path.dirname(HERE)]

import launcher  # noqa: E402  (python/tests/launcher.py: ranks as torchrun starts them)

BACKENDS = ["gloo", "conflux"]
MLP = (256, 1024, 1024, 10)


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

def timed(fn, iters: int, warmup: int, group, cpu: Optional[list] = None, calls: Optional[list] = None) -> float:
    """Mean wall time per call; appends the process's CPU time per call (every thread) to `cpu` if given, and each
    call's own time to `calls` if given (a mean hides whether every call is slow or a few stall)."""
    import torch.distributed as dist
    for _ in range(warmup):
        fn()
    dist.barrier(group=group)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(iters):
        if calls is None:
            fn()
        else:
            t0 = time.perf_counter()
            fn()
            calls.append(time.perf_counter() - t0)
    cpu_end = time.process_time()
    dist.barrier(group=group)
    if cpu is not None:
        cpu.append((cpu_end - cpu_start) / iters)
    return (time.perf_counter() - start) / iters


def iterations(nbytes: int) -> tuple[int, int]:
    iters = int(max(3, min(200, (64 << 20) // max(nbytes, 1))))
    return iters, max(1, iters // 5)


def mlp_layers() -> list:
    import torch
    return [torch.nn.Linear(MLP[0], MLP[1]), torch.nn.ReLU(), torch.nn.Linear(MLP[1], MLP[2]), torch.nn.ReLU(),
            torch.nn.Linear(MLP[2], MLP[3])]


def free_hook(state, bucket):
    """A DDP communication hook that communicates nothing: the bucket's gradients come back as they are."""
    import torch
    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def rank_main(sizes: list[int], rounds: int, ddp_steps: int, ddp_batches: list[int], shared: bool) -> None:
    import torch
    import torch.distributed as dist
    import conflux.torch
    if shared:  # before any tensor the collectives or DDP use is made
        conflux.torch.use_shared_host_memory()
    if "NCCL_SOCKET_IFNAME" in os.environ:  # Gloo takes the interface Conflux is told to use (the bed's hosts)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ["NCCL_SOCKET_IFNAME"])
    dist.init_process_group("conflux", init_method="env://")
    groups = {"conflux": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rank, n = dist.get_rank(), dist.get_world_size()
    # "free": DDP on the conflux group with a communication hook that hands each bucket back at once, so DDP does all
    # its own work and communicates nothing (what any backend's DDP step costs at least); "local": no DDP at all.
    # "shared": DDP on the conflux group with its model, buckets and gradients made while
    # conflux.torch.use_shared_host_memory() was on (the one-line opt-in), so its all-reduces read peers in place.
    samples: dict = {b: {} for b in BACKENDS + ["shared", "free", "local"]}
    calls: dict = {b: {} for b in BACKENDS}  # every call's time, over all rounds

    def measure(key: str, make_fn, iters: int, warmup: int) -> None:
        for _ in range(rounds):
            for b in BACKENDS:
                samples[b].setdefault(key, []).append(
                    timed(make_fn(b), iters, warmup, groups[b], calls=calls[b].setdefault(key, [])))

    for nbytes in sizes:
        t = torch.ones(nbytes // 4)
        measure(f"all_reduce/{nbytes}", lambda b: lambda: dist.all_reduce(t, group=groups[b]), *iterations(nbytes))
        a2a_in = torch.ones((nbytes // 4) // n * n)
        a2a_out = torch.empty_like(a2a_in)
        measure(f"all_to_all_single/{nbytes}",
                lambda b: lambda: dist.all_to_all_single(a2a_out, a2a_in, group=groups[b]), *iterations(nbytes))
        del t, a2a_in, a2a_out
    for batch in ddp_batches:
        torch.manual_seed(0)
        base = torch.nn.Sequential(*mlp_layers())
        x, y = torch.randn(batch, MLP[0]), torch.randint(0, MLP[-1], (batch,))
        nets = {b: torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*mlp_layers()),
                                                             process_group=groups[b]) for b in BACKENDS}
        nets["free"] = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*mlp_layers()),
                                                                 process_group=groups["conflux"])
        nets["free"].register_comm_hook(None, free_hook)
        nets["local"] = base
        opts = {k: torch.optim.SGD(v.parameters(), lr=0.01) for k, v in nets.items()}

        def stepper(k: str):
            def step() -> None:
                opts[k].zero_grad()
                torch.nn.functional.cross_entropy(nets[k](x), y).backward()
                opts[k].step()
            return step

        was_on = conflux.torch.shared_host_memory_stats()["installed"]
        conflux.torch.use_shared_host_memory()  # the model, DDP's buckets and (first backward) the gradients
        nets["shared"] = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*mlp_layers()),
                                                                   process_group=groups["conflux"])
        opts["shared"] = torch.optim.SGD(nets["shared"].parameters(), lr=0.01)
        stepper("shared")()
        if not was_on:
            conflux.torch.use_shared_host_memory(False)

        for _ in range(rounds):
            for k in BACKENDS + ["shared", "free", "local"]:
                samples[k].setdefault(f"ddp/{batch}", []).append(
                    timed(stepper(k), ddp_steps, 2, groups[k if k in BACKENDS else "conflux"],
                          cpu=samples[k].setdefault(f"ddp_cpu/{batch}", [])))
    if rank == 0:
        params = sum(p.numel() for layer in mlp_layers() for p in layer.parameters())
        result = {b: {k: statistics.median(v) for k, v in s.items()} for b, s in samples.items()}
        per_call = {b: {k: [statistics.median(v), sorted(v)[int(0.9 * (len(v) - 1))]] for k, v in s.items()}
                    for b, s in calls.items()}
        with open("/proc/self/maps") as maps:
            blas = sorted({line.split()[-1] for line in maps if "blas" in line.rsplit("/", 1)[-1]})
        print("RESULT " + json.dumps({"median": result, "samples": samples, "per_call": per_call,
                                      "ddp_params": params, "blas": blas}),
              flush=True)
    dist.destroy_process_group()


# ---- the driver ----------------------------------------------------------------------------------------------------

def rank_argv(sizes: list[int], rounds: int, ddp_steps: int, batches: list[int], shared: bool) -> list[str]:
    return [launcher.PYTHON, os.path.abspath(__file__), "--rank-main", "--sizes-list", ",".join(map(str, sizes)),
            "--rounds", str(rounds), "--ddp-steps", str(ddp_steps), "--ddp-batch", *map(str, batches),
            *(["--shared-host-memory"] if shared else [])]


def parse_result(text: str) -> dict:
    line = next(l for l in text.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def blas_env(blas_dir: Optional[str]) -> dict:
    """The ranks' LD_LIBRARY_PATH with blas_dir first (--blas-dir), or nothing to add."""
    if not blas_dir:
        return {}
    return {"LD_LIBRARY_PATH": os.pathsep.join(p for p in [blas_dir, os.environ.get("LD_LIBRARY_PATH", "")] if p)}


def run_job(world: int, argv: list[str], extra_env: dict) -> dict:
    port, secret, procs = launcher.free_port(), os.urandom(16).hex(), []
    for rank in range(world):
        env = launcher.rank_env(rank, world, port, secret, {"GLOO_SOCKET_IFNAME": "lo"})
        env["OMP_NUM_THREADS"] = "1"  # as torchrun sets it for several ranks per host
        env.update(extra_env)
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=7200)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            raise SystemExit(f"{world} ranks: rank {rank} exited {p.returncode}:\n{out[-3000:]}")
    return parse_result(outs[0])


def run_netbed_job(rate: str, argv: list[str], extra_env: dict) -> dict:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "netbed"))
    import netbed
    outputs: dict = {}
    env = {"OMP_NUM_THREADS": "1", "CFX_SECRET": os.urandom(16).hex(),
           "PYTHONPATH": os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]), **extra_env}
    with netbed.Bed(netbed.switch(2, rate=rate), tag="tb") as bed:
        rc = bed.run_ranks(2, argv, env=env, timeout=7200, quiet=True, outputs=outputs, port=launcher.free_port())
    if rc != 0:
        raise SystemExit(f"the bed's job failed:\n{outputs.get(0, '')[-3000:]}")
    return parse_result(outputs[0])


def table(title: str, sizes: list[int], result: dict) -> str:
    med = result["median"]
    blas = ", ".join(os.path.basename(b) for b in result.get("blas", [])) or "unknown"
    lines = [f"### {title} (BLAS: {blas})", "",
             "| op | size | Gloo | Conflux | Gloo / Conflux | per call, median / p90: Gloo | Conflux |",
             "|---|---|---|---|---|---|---|"]
    for op in ("all_reduce", "all_to_all_single"):
        for nbytes in sizes:
            key = f"{op}/{nbytes}"
            g, c = med["gloo"][key], med["conflux"][key]
            (gm, g90), (cm, c90) = (result["per_call"][b][key] for b in ("gloo", "conflux"))
            lines.append(f"| {op} | {human(nbytes)} | {g * 1e3:.3f} ms | {c * 1e3:.3f} ms | {g / c:.2f}x "
                         f"| {gm * 1e3:.3f} / {g90 * 1e3:.3f} ms | {cm * 1e3:.3f} / {c90 * 1e3:.3f} ms |")
    grads = f"{result['ddp_params'] * 4 / (1 << 20):.1f} MiB of gradients"
    for key in sorted((k for k in med["conflux"] if k.startswith("ddp/")), key=lambda k: int(k.split("/")[1])):
        batch = key.split("/")[1]
        g, c, free, local = med["gloo"][key], med["conflux"][key], med["free"][key], med["local"][key]
        sh = med["shared"][key]
        gc, cc, sc, fc, lc = (med[b][f"ddp_cpu/{batch}"] * 1e3 for b in ("gloo", "conflux", "shared", "free", "local"))
        lines.append(f"| DDP step, MLP {'-'.join(map(str, MLP))}, batch {batch} per rank | {grads} | {g * 1e3:.1f} ms "
                     f"| {c * 1e3:.1f} ms | {g / c:.2f}x |")
        lines.append(f"| (its CPU time per step, all threads of rank 0) | | {gc:.1f} ms | {cc:.1f} ms | |")
        lines.append(f"| (the same step, conflux with use_shared_host_memory(): wall, CPU) | batch {batch} | "
                     f"| {sh * 1e3:.1f} ms, {sc:.1f} ms | {g / sh:.2f}x |")
        lines.append(f"| (the same step, DDP communicating nothing: wall, CPU; Gloo / it) | batch {batch} "
                     f"| {free * 1e3:.1f} ms, {fc:.1f} ms | | {g / free:.2f}x |")
        lines.append(f"| (the same step without DDP: wall, CPU) | batch {batch} | {local * 1e3:.1f} ms, {lc:.1f} ms "
                     "| | |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--sizes", default="1K:256M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ddp-steps", type=int, default=10, help="steps per timed block")
    ap.add_argument("--ddp-batch", type=int, nargs="+", default=[8, 64], help="batch sizes per rank")
    ap.add_argument("--out", help="also write the raw results (JSON) here")
    ap.add_argument("--netbed", help="run on the namespace bed instead (2x2); needs root")
    ap.add_argument("--rate", default="1gbit", help="the bed's link rate (tc syntax)")
    ap.add_argument("--blas-dir", help="a folder with another libblas.so.3 for the ranks (see above)")
    ap.add_argument("--shared-host-memory", action="store_true",
                    help="every rank calls conflux.torch.use_shared_host_memory() first (both backends' tensors)")
    ap.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sizes-list", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_main:
        rank_main([int(s) for s in args.sizes_list.split(",")], args.rounds, args.ddp_steps, args.ddp_batch,
                  args.shared_host_memory)
        return
    sizes = size_range(args.sizes)
    argv = rank_argv(sizes, args.rounds, args.ddp_steps, args.ddp_batch, args.shared_host_memory)
    raw = {}
    if args.netbed:
        if args.netbed != "2x2":
            raise SystemExit("--netbed: only 2x2 (2 hosts x 2 ranks on one switch) is defined")
        raw["netbed"] = run_netbed_job(args.rate, argv, blas_env(args.blas_dir))
        print(table(f"2 hosts x 2 ranks, one switch at {args.rate}", sizes, raw["netbed"]) + "\n", flush=True)
    else:
        for world in args.np:
            raw[world] = run_job(world, argv, blas_env(args.blas_dir))
            print(table(f"{world} ranks on one host", sizes, raw[world]) + "\n", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
