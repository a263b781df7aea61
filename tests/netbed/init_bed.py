#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Init time across hosts (issue 40): H namespace hosts on one switch, R ranks on each, beside the same number of
ranks on one host, in one run.

Every rank runs perf/compare/init_bench.cc: it starts, forms its communicator (cfxCommInitFromEnv with one root, or
ncclCommInitRankScalable with --roots K ids made by each group's first rank and passed through files) and does one
all-reduce of one float, checked. Rank 0 prints the maxima over the ranks, in seconds: init (main() to the
communicator), first (main() to the first all-reduce's result) and job (the launch to the last rank's first result,
process start-up included). Repetitions alternate the variants.

Example (as root, from the repository root, after `make build`):
  /usr/bin/python3 tests/netbed/init_bed.py --build build --hosts 16 --ranks-per-host 16 --roots 1,16 --reps 2
Prints a Markdown table. A benchmark, not a test: figures go to docs/notes/scale.md.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "perf", "compare"))
import netbed  # noqa: E402
from scale_init import build  # noqa: E402

FIGURES = re.compile(r"initbench ranks \d+ roots \d+ start ([\d.]+) init ([\d.]+) first ([\d.]+) job ([\d.]+)")


def parse(output: str) -> dict | None:
    m = FIGURES.search(output)
    return dict(zip(("start", "init", "first", "job"), map(float, m.groups()))) if m else None


@contextlib.contextmanager
def id_args(roots: int):
    """init_bench's arguments for `roots` ids, with a fresh folder for them that is removed afterwards."""
    if roots <= 1:
        yield []
        return
    folder = tempfile.mkdtemp(prefix="cfx_init_ids_")
    try:
        yield ["--roots", str(roots), "--id-dir", folder]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def on_bed(bed: netbed.Bed, prog: str, ranks_per_host: int, roots: int, env: dict, timeout: float) -> dict | None:
    with id_args(roots) as extra:
        outputs: dict[int, str] = {}
        e = dict(env, CFX_INIT_BENCH_T0=str(time.time_ns()))
        rc = bed.run_ranks(ranks_per_host, [prog] + extra, env=e, timeout=timeout, quiet=True, outputs=outputs)
        figures = parse(outputs.get(0, ""))
        if figures is None:
            print(f"init_bed: {roots} root(s) on the bed: exit {rc}, no result line", file=sys.stderr)
        return figures


def one_host(cfxrun: str, prog: str, n: int, roots: int, env: dict, timeout: float) -> dict | None:
    with id_args(roots) as extra:
        cmd = [cfxrun, "-n", str(n), "--timeout", str(int(timeout)), prog] + extra
        e = dict(os.environ, **env, CFX_INIT_BENCH_T0=str(time.time_ns()))
        p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout + 30, start_new_session=True)
        figures = parse(p.stdout)
        if figures is None:
            print(f"init_bed: {roots} root(s) on one host: exit {p.returncode}:\n{p.stdout[-2000:]}", file=sys.stderr)
        return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default="build", help="build folder (perf/cfxrun and src/libnccl inside)")
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--ranks-per-host", type=int, default=16)
    ap.add_argument("--roots", default="1,16", help="comma list: numbers of ids (1 = cfxCommInitFromEnv)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run")
    ap.add_argument("--env", action="append", default=["CFX_HEARTBEAT_MISSES=40"],
                    help="NAME=VALUE for every rank (default CFX_HEARTBEAT_MISSES=40: hundreds of ranks share two "
                         "cores and heartbeats arrive late)")
    a = ap.parse_args()
    n = a.hosts * a.ranks_per_host
    progs, _ = build(os.path.join(a.build, "compare"), [a.build])
    prog = os.path.abspath(progs[0])
    cfxrun = os.path.abspath(os.path.join(a.build, "perf", "cfxrun"))
    env = dict(kv.split("=", 1) for kv in a.env)
    roots = [int(x) for x in a.roots.split(",") if int(x) <= n]
    results: dict[tuple[str, int], list[dict]] = {}
    try:
        with netbed.Bed(netbed.switch(a.hosts)) as bed:
            for rep in range(a.reps):
                for k in roots:
                    for where in ("bed", "one host"):
                        f = (on_bed(bed, prog, a.ranks_per_host, k, env, a.timeout) if where == "bed" else
                             one_host(cfxrun, prog, n, k, env, a.timeout))
                        if f:
                            results.setdefault((where, k), []).append(f)
                        print(f"# rep {rep} {where} {k} root(s): {f}", file=sys.stderr, flush=True)
    except (netbed.Skip, netbed.BedError) as e:
        return netbed.exit_code(e, "init_bed")
    print(f"{n} ranks: {a.hosts} hosts x {a.ranks_per_host} ranks on the bed, and all {n} on one host; medians of "
          f"{a.reps} repetition(s), maxima over the ranks")
    print("| where | roots | init s | first s | job s | runs |")
    print("|---|---:|---:|---:|---:|---:|")
    for k in roots:
        for where in ("bed", "one host"):
            runs = results.get((where, k), [])
            if not runs:
                print(f"| {where} | {k} | failed | | | 0/{a.reps} |")
                continue
            init = statistics.median(r["init"] for r in runs)
            first = statistics.median(r["first"] for r in runs)
            job = statistics.median(r["job"] for r in runs)
            print(f"| {where} | {k} | {init:.2f} | {first:.2f} | {job:.2f} | {len(runs)}/{a.reps} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
