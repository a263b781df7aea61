#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Init time against ranks on one host: Conflux (one root, and several roots through ncclCommInitRankScalable)
beside Open MPI, in one run (issue 40).

For each rank count it runs perf/compare/init_bench.cc: every rank starts, forms its communicator and does one
all-reduce of one float (the result is checked). Columns, maxima over the ranks, in seconds:
  init    main() to the communicator (Conflux: cfxCommInitFromEnv or ncclCommInitRankScalable; Open MPI: MPI_Init)
  first   main() to the first all-reduce's result
  job     the launcher's start to the last rank's first result (so process start-up is in it)
  wall    the launcher's start to its exit (teardown too)
A run counts once rank 0 has printed its line (every rank then had its first result); a non-zero exit after it
(a teardown failure) is shown beside the variant.
Conflux runs under <build>/perf/cfxrun, Open MPI under `mpirun --oversubscribe --mca pml ob1 --mca btl vader,self`.
Both programs are built into <first build>/compare/ (g++ against the build's libnccl, and mpicxx).

usage: /usr/bin/python3 perf/compare/scale_init.py [--ranks 8,16,32,64,128,256] [--build build [--build other]]
           [--roots 1,4] [--reps 3] [--timeout 600] [--cfx-env NAME=VALUE ...]
The median of --reps runs of each variant, the variants alternated within a repetition.
A benchmark, not a test: run one at a time on a quiet machine (it starts up to max(ranks) processes).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from scale_memory import build_label, job_envs

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SRC = os.path.join(HERE, "init_bench.cc")


def build(out_dir, builds):
    """(Conflux program per build, Open MPI program)."""
    os.makedirs(out_dir, exist_ok=True)
    mpi = os.path.join(out_dir, "init_bench_mpi")
    if not os.path.exists(mpi) or os.path.getmtime(mpi) < os.path.getmtime(SRC):
        subprocess.run(["mpicxx", "-O2", "-std=c++17", "-DOMPI_SKIP_MPICXX", "-DCFX_INIT_MPI", SRC, "-o", mpi],
                       check=True)
    cfx = []
    for i, b in enumerate(builds):
        out = os.path.join(out_dir, f"init_bench_cfx{i}")
        lib = os.path.join(os.path.abspath(b), "src")
        subprocess.run(["g++", "-O2", "-std=c++17", "-I", os.path.join(REPO, "include"), SRC, "-o", out,
                        "-L", lib, "-lnccl", "-Wl,-rpath," + lib], check=True)
        cfx.append(out)
    return cfx, mpi


def run(cmd, env, timeout):
    """(rc, {start, init, first, job}, wall seconds, output)."""
    env = dict(env, CFX_INIT_BENCH_T0=str(time.time_ns()))
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, start_new_session=True)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        rc, out = 124, out.decode(errors="replace") if isinstance(out, bytes) else out
    wall = time.monotonic() - start
    m = re.search(r"initbench ranks \d+ roots \d+ start ([\d.]+) init ([\d.]+) first ([\d.]+) job ([\d.]+)", out)
    figures = dict(zip(("start", "init", "first", "job"), map(float, m.groups()))) if m else None
    if rc != 0 or figures is None:
        print(f"scale_init: {' '.join(cmd[:6])}... exited {rc}:\n{out[-3000:]}", file=sys.stderr)
    return rc, figures, wall


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="8,16,32,64,128,256")
    p.add_argument("--build", action="append", help="Conflux build dir(s); default build")
    p.add_argument("--roots", default="1,4", help="Conflux variants: numbers of ids (1 = cfxCommInitFromEnv)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--cfx-env", action="append", default=[],
                   help="NAME=VALUE for the Conflux runs, e.g. CFX_HEARTBEAT_MISSES=40 where hundreds of ranks share "
                        "two cores and heartbeats arrive late")
    a = p.parse_args()
    builds = a.build or [os.path.join(REPO, "build")]
    cfx_progs, mpi_prog = build(os.path.join(builds[0], "compare"), builds)
    cfx_env, mpi_env = job_envs(kv.split("=", 1) for kv in a.cfx_env)
    print("| ranks | variant | init s | first s | job s | wall s | first / Open MPI's |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in a.ranks.split(",")):
        variants = []
        for b, prog in zip(builds, cfx_progs):
            label = build_label(b)
            perf = os.path.join(b, "perf")
            for k in (int(x) for x in a.roots.split(",")):
                if k > n:
                    continue
                variants.append((f"conflux {label}, {k} root{'s' if k > 1 else ''}", cfx_env, k,
                                 [os.path.join(perf, "cfxrun"), "-n", str(n), "--timeout", str(a.timeout), prog]
                                 + (["--roots", str(k)] if k > 1 else [])))
        variants.append(("open-mpi vader", mpi_env, 0,
                         ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), "--mca", "pml", "ob1",
                          "--mca", "btl", "vader,self", mpi_prog]))
        results = {v[0]: [] for v in variants}
        for _ in range(a.reps):
            for label, env, k, cmd in variants:
                id_dir = tempfile.mkdtemp(prefix="cfx_init_ids_") if k > 1 else None
                try:
                    rc, figures, wall = run(cmd + (["--id-dir", id_dir] if id_dir else []), env, a.timeout)
                finally:
                    if id_dir:
                        shutil.rmtree(id_dir, ignore_errors=True)
                if figures:  # rank 0 printed: every rank had its first result; rc may still tell of a teardown
                    results[label].append(dict(figures, wall=wall, rc=rc))
        med = {label: {key: statistics.median(r[key] for r in runs) for key in runs[0] if key != "rc"}
               for label, runs in results.items() if runs}
        bad_exit = {label: max(r["rc"] for r in runs) for label, runs in results.items() if runs}
        mpi_first = med.get("open-mpi vader", {}).get("first")
        for label, _, _, _ in variants:
            if label not in med:
                print(f"| {n} | {label} | failed | | | | |", flush=True)
                continue
            m = med[label]
            ratio = f"{m['first'] / mpi_first:.2f}" if mpi_first else "-"
            note = f" (exit {bad_exit[label]} after the result)" if bad_exit[label] else ""
            print(f"| {n} | {label}{note} | {m['init']:.3f} | {m['first']:.3f} | {m['job']:.3f} | {m['wall']:.2f} | "
                  f"{ratio} |", flush=True)


if __name__ == "__main__":
    main()
