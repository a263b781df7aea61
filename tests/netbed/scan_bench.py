#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""All-Scan races on the namespace bed and on one host, and the alpha-beta model that extrapolates them.

For each shape, every variant runs in turn within each repetition (so a load change on the shared machine hits
all alike), each with -c 1 (results checked), and the table gives medians:
  scan          scan_perf --exclusive 1 -o affine (ZeCO's combine) on --size bytes per rank, the planner's pick;
  scan:ALGO     the same, forced with NCCL_ALGO=scan:ALGO (chain, recdouble, blelloch, hier);
  allgather     the all-gather-then-scan baseline (LASP-2's pattern): all_gather_perf on the same bytes per rank,
                timed without its local scan, so the baseline's figure is a lower bound;
  mpi-exscan    Open MPI's MPI_Exscan with MPI_SUM on the same bytes (mpi_bench, built by perf/compare).
`--sweep` instead times the exclusive sum scan from 1 KiB to 64 MiB, the planner's pick against every forced
algorithm, and reports the pick's time over the best one's. `--model` fits alpha (per message) and beta (per byte)
from sendrecv_perf on the bed and prints the model's times at 64 and 256 ranks.

Shapes: '4x1gbit' (4 hosts, one rank each, 1 Gbit/s switch), '2x4x1gbit' (2 hosts, 4 ranks each), '1x8' (one
host, 8 ranks, no bed).

Example (root, from the repository root, after `cmake --build build --target cfx_perf cfx_delay_relay`):
  python3 tests/netbed/scan_bench.py --shapes 4x1gbit,1x8,2x4x1gbit --reps 3
"""
from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "perf", "compare"))
import netbed  # noqa: E402

MiB = 1 << 20
ALGOS = ("chain", "recdouble", "blelloch", "hier")


class Shape:
    def __init__(self, name: str):
        parts = name.split("x")
        self.name = name
        self.hosts = int(parts[0])
        self.per_host = int(parts[1]) if len(parts) == 3 or self.hosts == 1 else 1
        self.rate = parts[-1] if self.hosts > 1 else None
        self.ranks = self.hosts * self.per_host

    def bed(self, relay: str):
        if self.hosts == 1:
            return None
        return netbed.Bed(netbed.switch(self.hosts, rate=self.rate), relay)


def rows(text: str) -> list[list[str]]:
    # cfxrun prefixes every line with "[rank R] " when NCCL_DEBUG is set.
    lines = [re.sub(r"^\[rank \d+\] ", "", l) for l in text.splitlines()]
    return [l.split() for l in lines if l.strip() and not l.lstrip().startswith("#") and
            len(l.split()) >= 9 and l.split()[0].isdigit()]


def run_perf(a, shape: Shape, bed, binary: str, args: list[str], env: dict[str, str]) -> list[list[str]]:
    argv = [os.path.join(a.build, "perf", binary)] + args + ["-c", "1", "-w", "1", "-n", str(a.iters)]
    if bed is None:
        cmd = [os.path.join(a.build, "perf", "cfxrun"), "-n", str(shape.ranks)] + argv
        p = subprocess.run(cmd, env=dict(os.environ, CFX_PERF_ROTATE="0", **env), capture_output=True, text=True,
                           timeout=a.timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    else:
        outputs: dict[int, str] = {}
        rc = bed.run_ranks(shape.per_host, argv, env=dict(env, CFX_PERF_ROTATE="0"), timeout=a.timeout, quiet=True,
                           outputs=outputs)
        out = outputs.get(0, "")
    got = rows(out)
    if rc != 0 or not got:
        raise netbed.BedError(f"{binary} {' '.join(args)} {env} failed:\n{out[-3000:]}")
    for r in got:
        if r[8] != "0":
            raise netbed.BedError(f"{binary} {' '.join(args)} {env}: {r[8]} wrong elements")
    return got


def run_mpi(a, shape: Shape, bed, nbytes: int) -> float:
    """MPI_Exscan (sum) median time in us for nbytes per rank, over TCP between hosts, vader within one."""
    bench = os.path.join(a.build, "compare", "mpi_bench")
    if not os.access(bench, os.X_OK):
        raise netbed.BedError(f"{bench} missing: run perf/compare/compare.py once (make compare-deps) to build it")
    args = [bench, "--coll", "exscan", "--sizes", str(nbytes), "--iters", str(a.iters), "--warmup", "1", "--check", "1"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if bed is None:
        cmd = ["mpirun", "-np", str(shape.ranks), "--oversubscribe", "--allow-run-as-root", "--mca", "pml", "ob1",
               "--mca", "btl", "vader,self"] + args + ["--algo", "vader"]
    else:
        hostfile = os.path.join(a.work, "hostfile")
        with open(hostfile, "w") as f:
            f.writelines(f"{ns} slots={shape.per_host}\n" for ns in bed.hosts)
        dev = bed.primary_dev(0)
        btl = "tcp,vader,self" if shape.per_host > 1 else "tcp,self"
        cmd = ["ip", "netns", "exec", bed.hosts[0], "mpirun", "-np", str(shape.ranks), "--hostfile", hostfile,
               "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "--mca", "plm_rsh_agent",
               os.path.join(HERE, "..", "..", "perf", "compare", "netns_agent.sh"), "--mca", "oob_tcp_if_include",
               dev, "--mca", "btl", btl, "--mca", "pml", "ob1", "--mca", "btl_tcp_if_include", dev] + args + [
               "--algo", "tcp"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    for line in p.stdout.splitlines():
        if line.startswith("CFXCMP "):
            f = dict(kv.split("=", 1) for kv in line.split()[1:])
            if f["wrong"] != "0":
                raise netbed.BedError(f"mpi_bench exscan: {f['wrong']} wrong elements")
            return float(f["time_us"])
    raise netbed.BedError(f"mpi_bench exscan failed:\n{(p.stdout + p.stderr)[-3000:]}")


def affine_args(nbytes: int, rows_: int, cols: int) -> list[str]:
    return ["-b", str(nbytes), "-e", str(nbytes), "--exclusive", "1", "-o", "affine", "--rows", str(rows_), "--cols",
            str(cols)]


def race(a, shape: Shape, bed) -> None:
    group = (a.rows + a.rows * a.cols) * 4
    nbytes = a.size // group * group  # scan_perf runs whole groups
    samples: dict[str, list[float]] = {}
    variants = ["scan"] + [f"scan:{x}" for x in ALGOS if x != "hier" or shape.hosts > 1] + ["allgather", "mpi-exscan"]
    for rep in range(a.reps):
        for v in variants:
            if v.startswith("scan"):
                env = {"NCCL_ALGO": v} if ":" in v else {}
                got = run_perf(a, shape, bed, "scan_perf", affine_args(nbytes, a.rows, a.cols), env)
                t = float(got[0][5])
            elif v == "allgather":
                got = run_perf(a, shape, bed, "all_gather_perf", ["-b", str(nbytes * shape.ranks), "-e",
                                                                  str(nbytes * shape.ranks)], {})
                t = float(got[0][5])
            else:
                t = run_mpi(a, shape, bed, nbytes)
            samples.setdefault(v, []).append(t)
            print(f"# {shape.name} rep {rep} {v}: {t:.1f} us", file=sys.stderr, flush=True)
    med = {v: statistics.median(s) for v, s in samples.items()}
    best_forced = min((med[v], v) for v in med if v.startswith("scan:"))
    print(f"\n### {shape.name}: exclusive affine scan of {nbytes} B per rank ({a.rows}x{a.cols} states + decays)\n")
    print("| variant | median µs | vs scan (planner) |")
    print("|---|---:|---:|")
    for v in variants:
        print(f"| {v} | {med[v]:.1f} | {med[v] / med['scan']:.2f}× |")
    print(f"\nplanner's pick {med['scan']:.1f} µs; best forced {best_forced[1]} {best_forced[0]:.1f} µs "
          f"(pick / best = {med['scan'] / best_forced[0]:.2f}); all-gather baseline / scan = "
          f"{med['allgather'] / med['scan']:.2f}×; MPI_Exscan / scan = {med['mpi-exscan'] / med['scan']:.2f}×")


def sweep(a, shape: Shape, bed) -> None:
    args = ["-b", a.min, "-e", a.max, "-f", "4", "--exclusive", "1"] + a.perf_args.split()
    algos = [x for x in ALGOS if x != "hier" or shape.hosts > 1]
    samples: dict[str, dict[int, list[float]]] = {}
    for rep in range(a.reps):
        for v in ["planner"] + algos:
            env = {} if v == "planner" else {"NCCL_ALGO": f"scan:{v}"}
            for r in run_perf(a, shape, bed, "scan_perf", args, env):
                samples.setdefault(v, {}).setdefault(int(r[0]), []).append(float(r[5]))
            print(f"# {shape.name} rep {rep} sweep {v} done", file=sys.stderr, flush=True)
    picks = planner_picks(a, shape, bed, args)
    print(f"\n### {shape.name}: exclusive sum scan, planner against every forced algorithm (median µs)\n")
    print("| size | pick | planner | " + " | ".join(algos) + " | best | planner / best |")
    print("|---:|---|---:|" + "---:|" * len(algos) + "---|---:|")
    worst = 0.0
    same = 0
    for size in sorted(samples["planner"]):
        med = {v: statistics.median(samples[v][size]) for v in samples}
        best = min(algos, key=lambda x: med[x])
        worst = max(worst, med["planner"] / med[best])
        pick = picks.get(size, "?")
        same += pick.lower() == best.lower()
        print(f"| {size} | {pick} | {med['planner']:.1f} | " + " | ".join(f"{med[x]:.1f}" for x in algos) +
              f" | {best} | {med['planner'] / med[best]:.2f} |")
    print(f"\nworst planner / best over the sweep: {worst:.2f}; the pick is the fastest forced algorithm at {same} of "
          f"{len(samples['planner'])} sizes")


def planner_picks(a, shape: Shape, bed, args: list[str]) -> dict[int, str]:
    """The planner's algorithm per size, from rank 0's TUNING lines (the same on every rank: the plan is agreed)."""
    with tempfile.TemporaryDirectory(prefix="cfxscan") as tmp:
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING", "NCCL_DEBUG_FILE": os.path.join(tmp, "log.%p")}
        saved, a.iters = a.iters, 1
        try:
            run_perf(a, shape, bed, "scan_perf", args, env)
        finally:
            a.iters = saved
        picks: dict[int, str] = {}
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name), errors="replace") as f:
                for m in re.finditer(r"Scan (\d+) B on \d+ ranks: (\w+)", f.read()):
                    picks.setdefault(int(m.group(1)), m.group(2))
        return picks


def model(a, shape: Shape, bed) -> None:
    """alpha, beta from sendrecv_perf between two hosts; gamma (combine s/B) from the forced chain's large size."""
    small = run_perf(a, shape, bed, "sendrecv_perf", ["-b", "8", "-e", "8"], {})
    big = run_perf(a, shape, bed, "sendrecv_perf", ["-b", "16M", "-e", "16M"], {})
    alpha = float(small[0][5]) * 1e-6
    beta = (float(big[0][5]) * 1e-6 - alpha) / (16 * MiB)
    group = (a.rows + a.rows * a.cols) * 4
    m = a.size // group * group
    chain = run_perf(a, shape, bed, "scan_perf", affine_args(m, a.rows, a.cols), {"NCCL_ALGO": "scan:chain"})
    t_chain = float(chain[0][5]) * 1e-6
    piece = 256 * 1024.0  # two slices of the default FIFO slot (planner_scan.cc chainUs)
    pieces = math.ceil(m / piece)
    hops = shape.ranks - 1 + pieces - 1
    gamma = max(0.0, (t_chain / hops - alpha) / piece - beta)
    print(f"\n### alpha-beta model from {shape.name}\n")
    print(f"alpha = {alpha * 1e6:.1f} µs, beta = {beta * 1e9:.3f} ns/B ({1 / beta / 1e9 * 8:.2f} Gbit/s), combine "
          f"gamma = {gamma * 1e9:.3f} ns/B (fitted to the forced chain's {t_chain * 1e6:.0f} µs at {m} B)\n")

    def chain_t(p: int) -> float:
        return (p - 1 + pieces - 1) * (alpha + piece * (beta + gamma))

    def doubling_t(p: int) -> float:
        return math.ceil(math.log2(p)) * (alpha + m * beta + 2 * m * gamma)

    def blelloch_t(p: int) -> float:
        return 2 * math.ceil(math.log2(p)) * (alpha + m * (beta + gamma))

    def allgather_t(p: int) -> float:  # ring all-gather, then the local scan over p states
        return (p - 1) * (alpha + m * beta) + (p - 1) * m * gamma

    def mpi_t(p: int) -> float:  # a linear chain without pipelining (Open MPI's basic exscan)
        return (p - 1) * (alpha + m * (beta + gamma))

    print("| ranks | chain | recursive doubling | Blelloch | best of ours | all-gather + scan | linear exscan |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for p in (4, 8, 64, 256):
        ours = min(chain_t(p), doubling_t(p), blelloch_t(p))
        print(f"| {p} | {chain_t(p) * 1e3:.1f} ms | {doubling_t(p) * 1e3:.1f} ms | {blelloch_t(p) * 1e3:.1f} ms | "
              f"{ours * 1e3:.1f} ms | {allgather_t(p) * 1e3:.1f} ms ({allgather_t(p) / ours:.1f}×) | "
              f"{mpi_t(p) * 1e3:.1f} ms ({mpi_t(p) / ours:.1f}×) |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--shapes", default="4x1gbit,1x8,2x4x1gbit")
    ap.add_argument("--size", type=int, default=4 * MiB, help="bytes per rank of the affine scan")
    ap.add_argument("--rows", type=int, default=128)
    ap.add_argument("--cols", type=int, default=128)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--sweep", action="store_true", help="the planner against every forced algorithm, 1K-64M")
    ap.add_argument("--min", default="1K", help="the sweep's smallest size")
    ap.add_argument("--max", default="64M", help="the sweep's largest size")
    ap.add_argument("--perf-args", default="", help="more scan_perf flags for the sweep, e.g. '-z 1': a barrier "
                    "after every op, so each op's latency is timed rather than back-to-back ops' throughput")
    ap.add_argument("--model", action="store_true", help="fit alpha/beta on the first shape and extrapolate")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    relay = os.path.join(a.build, "tools", "cfx_delay_relay")
    import tempfile
    with tempfile.TemporaryDirectory(prefix="cfx_scan_bench_") as work:
        a.work = work
        try:
            for name in a.shapes.split(","):
                shape = Shape(name)
                bed = shape.bed(relay)
                if bed is None:
                    body = model if a.model else sweep if a.sweep else race
                    body(a, shape, None)
                    continue
                with bed:
                    (model if a.model else sweep if a.sweep else race)(a, shape, bed)
        except (netbed.Skip, netbed.BedError) as e:
            return netbed.exit_code(e, "scan_bench")
    return 0


if __name__ == "__main__":
    sys.exit(main())
