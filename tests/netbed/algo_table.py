#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Algorithm tables: every fixed algorithm beside the planner's own choice, per size, on one bed.

For one collective on one shape, each repetition runs the perf binary once per setting, interleaved (rep 1: every
setting, rep 2: ...): NCCL_ALGO=<coll>:<algorithm> for each fixed algorithm, and "auto" (no NCCL_ALGO: the
planner decides; its pick per size is read from rank 0's INFO/TUNING lines). Ranks get NCCL_TOPO_FILE describing
the bed, so the planner prices the links the bed has. The table shows median out-of-place time per size and
setting, the planner's pick, the forced run of the picked algorithm against the best fixed one (the choice's
cost), and auto's own time against the best and the worst fixed algorithm (the same algorithm measured in another
run, so it also shows the bed's noise). Each run is two
sweeps: sizes below 1 MiB with --small-iters iterations (each perf figure is their mean) and --small-reps
repetitions, the rest with --iters and --reps.

A fixed algorithm that does not apply at some size (Hier with one rank per host, BiRing on two ranks, Exchange
above one slice) runs the planner's default there instead; every run logs its picks, and such cells show "-" and
count neither as best nor as worst.

Shapes (--shape): host (one host, --ranks-per-host ranks, no network; Direct instead of Hier), 2x2 (2 hosts x 2 ranks on a 1 Gbit/s
switch), 2x4 (2 hosts x 4 ranks, 1 Gbit/s), ring4 (4 hosts x 1 rank, ring of 1 Gbit/s point-to-point links),
4x1_rtt50 (4 hosts x 1 rank on a 1 Gbit/s switch with 50 ms RTT through the delay relay), 3level (2 hosts x 2
devices x 2 ranks, three link speeds: shared memory within a device, 2 Gbit/s between the devices of a host, 1 Gbit/s
per device to the switch between hosts; each device is a namespace, and the ranks get a topology file declaring
the hosts and their devices (NUMA nodes). Besides Hier3 it runs both 2-level variants: Hier with hosts as its upper
level, and Hier with devices as "hosts" ("hier/devices": the bed's own one-host-per-namespace file). 2x2rails (2 hosts
x 2 ranks, each host with two NICs on two separate 1 Gbit/s switches, CFX_SOCKET_RAILS=2 so that every link
stripes over both NICs): the ring and Hier on both rails and on one ("ring/1rail", "hier/1rail").

Example (as root, from the repository root, after building perf binaries and cfx_delay_relay in build-rel):
  python3 tests/netbed/algo_table.py --build build-rel --shape 2x2 --coll all_reduce -b 1K -e 64M --reps 3
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbed  # noqa: E402

MiB = 1 << 20
SHAPES = {
    "host": lambda rph: (netbed.Spec(1, []), rph),
    "2x2": lambda rph: (netbed.switch(2, rate="1gbit"), 2),
    "2x4": lambda rph: (netbed.switch(2, rate="1gbit"), 4),
    "ring4": lambda rph: (netbed.ring(4, rate="1gbit"), 1),
    "4x1_rtt50": lambda rph: (_tuned(netbed.switch(4, rate="1gbit", delay_ms=25)), 1),
    "3level": lambda rph: (netbed.Spec(4, [netbed.Link([0, 1], "p2p", "2gbit"), netbed.Link([2, 3], "p2p", "2gbit"),
                                           netbed.Link([0, 1, 2, 3], "switch", "1gbit")]), 2),
    "2x2rails": lambda rph: (netbed.Spec(2, [netbed.Link([0, 1], "switch", "1gbit"),
                                            netbed.Link([0, 1], "switch", "1gbit")]), 2),
}
# Environment a shape's ranks run with, and what a setting's "/variant" suffix changes in it.
SHAPE_ENV = {"2x2rails": {"NCCL_SOCKET_IFNAME": "eth", "CFX_SOCKET_RAILS": "2"}}
VARIANT_ENV = {"1rail": {"CFX_SOCKET_RAILS": "1"}}


def three_level_xml() -> str:
    """The 3level bed as two hosts of two NUMA nodes (the devices) with two ranks each: each node has its own 1 Gbit/s
    NIC on the switch, and the nodes of a host are joined at 2 Gbit/s (the p2p veth between their namespaces)."""
    xml = ['<?xml version="1.0"?>', '<system version="1">']
    for h in range(2):
        xml.append(f'  <host id="{h}" name="h{h}"><numa id="0"/><numa id="1"/><nic name="dev0" speed="1000" numa="0"/>'
                   f'<nic name="dev1" speed="1000" numa="1"/></host>')
        xml.append(f'  <link a="h{h}:numa0" b="h{h}:numa1" class="smp" bw="0.25" lat="20"/>')
    xml += [f'  <rank id="{r}" host="{r // 4}" numa="{r % 4 // 2}"/>' for r in range(8)]
    return "\n".join(xml + ["</system>"]) + "\n"

# perf binary name -> (NCCL_ALGO collective name, fixed algorithms to compare)
COLLS = {
    "all_reduce": ("allreduce", ["exchange", "recdouble", "ring", "biring", "hier", "rabenseifner", "tree"]),
    "all_gather": ("allgather", ["ring", "biring", "hier"]),
    "reduce_scatter": ("reducescatter", ["ring", "biring", "hier"]),
}
# perf prints a time too wide for its column in exponent form (nccl-tests does the same): 2.3e+07 us.
ROW = re.compile(r"^\s+(\d+)\s+\d+\s+\S+\s+\S+\s+-?\d+\s+([\d.]+(?:e[+-]?\d+)?)\s")
PICK = re.compile(r"\w+ (\d+) B on \d+ ranks: (\w+)")


def parse_size(text: str) -> int:
    """perf's size syntax: a count of bytes with an optional K, M or G suffix (powers of 1024)."""
    m = re.fullmatch(r"(\d+)([KMG]?)", text.strip().upper())
    if not m:
        raise SystemExit(f"bad size {text!r}: expected e.g. 1024, 4K, 64M, 1G")
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def _tuned(spec: netbed.Spec) -> netbed.Spec:
    spec.tcp_buf_max = 32 * MiB
    return spec


def run(bed: netbed.Bed | None, rph: int, argv: list[str], env: dict[str, str], timeout: float,
        log: str | None, cfxrun: str) -> tuple[dict, dict]:
    outputs: dict[int, str] = {}
    if log:
        env = {**env, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING", "NCCL_DEBUG_FILE": log + ".%p"}
    if bed is None:  # one host: no namespaces, the local launcher
        p = subprocess.run([cfxrun, "-n", str(rph)] + argv, env={**os.environ, **env}, capture_output=True, text=True,
                           timeout=timeout)
        rc, outputs[0] = p.returncode, p.stdout + p.stderr
    else:
        rc = bed.run_ranks(rph, argv, env=env, timeout=timeout, quiet=True, outputs=outputs)
    if rc != 0:
        raise SystemExit(f"ranks failed ({env}):\n{outputs.get(0, '')[-3000:]}")
    times, picks = {}, {}
    for line in outputs[0].splitlines():
        m = ROW.match(line)
        if m:
            times[int(m.group(1))] = float(m.group(2))
    if log:
        # Every rank makes the same plans; any one rank's log says what the planner picked.
        d, base = os.path.split(log)
        for name in sorted(os.listdir(d)):
            if name.startswith(os.path.basename(base) + "."):
                with open(os.path.join(d, name)) as f:
                    for p in PICK.finditer(f.read()):
                        picks[int(p.group(1))] = p.group(2)
                os.unlink(os.path.join(d, name))
    return times, picks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default="build-rel")
    ap.add_argument("--shape", choices=sorted(SHAPES), required=True)
    ap.add_argument("--ranks-per-host", type=int, default=4, help="ranks of the 'host' shape")
    ap.add_argument("--coll", choices=sorted(COLLS), default="all_reduce")
    ap.add_argument("-b", default="1K")
    ap.add_argument("-e", default="64M")
    ap.add_argument("-f", default="4")
    ap.add_argument("--iters", default="2", help="perf -n for sizes of 1 MiB and up")
    ap.add_argument("--small-iters", default="200",
                    help="perf -n below 1 MiB: ops there take microseconds, and only a long run of them is steady (lower it on long-latency shapes)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of sizes of 1 MiB and up")
    ap.add_argument("--small-reps", type=int, default=11,
                    help="repetitions below 1 MiB: runs there take a fraction of a second, and a 2-core machine's "
                    "scheduler moves single runs by 2x")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--algos", help="comma list: compare only these of the shape's fixed algorithms")
    ap.add_argument("--sysctl", action="append", default=[],
                    help="KEY=VALUE set in every host's namespace (repeatable), e.g. net.ipv4.tcp_slow_start_after_idle=0")
    args = ap.parse_args()

    spec, rph = SHAPES[args.shape](args.ranks_per_host)
    coll_name, algos = COLLS[args.coll]
    if args.shape == "3level":
        algos = ["ring", "biring", "hier", "hier/devices", "hier3"]
    if args.shape == "2x2rails":
        algos = ["ring", "ring/1rail", "hier", "hier/1rail"]
    if args.shape == "host":
        # One host has no Hier; it has Direct (every block copied once, straight from its owner), which between
        # hosts would only add messages.
        algos = [a for a in algos if a != "hier"] + ["direct"]
    if args.algos:
        wanted = args.algos.split(",")
        unknown = [a for a in wanted if a not in algos]
        if unknown:
            raise SystemExit(f"--algos: {unknown} not among {algos}")
        algos = wanted
    spec.sysctls += args.sysctl
    settings = [f"{coll_name}:{a}" for a in algos] + ["auto"]
    perf = os.path.join(args.build, "perf", f"{args.coll}_perf")
    # Two sweeps per setting: below 1 MiB many iterations (an op there takes microseconds, and on this 2-core machine
    # two iterations measure the scheduler as much as the algorithm), from 1 MiB a few (an op takes milliseconds).
    sizes, factor = [], int(args.f)
    if factor < 2:
        raise SystemExit("-f must be 2 or more")
    size = parse_size(args.b)
    while size <= parse_size(args.e):
        sizes.append(size)
        size *= factor
    small = [z for z in sizes if z < MiB]
    large = [z for z in sizes if z >= MiB]
    sweeps = []  # (argv, repetitions)
    for part, iters, warmup, reps in ((small, args.small_iters, "3", args.small_reps),
                                      (large, args.iters, "1", args.reps)):
        if part:
            sweeps.append(([perf, "-b", str(part[0]), "-e", str(part[-1]), "-f", args.f, "-n", iters, "-w", warmup,
                            "-c", "1"], reps))
    samples: dict[str, dict[int, list[float]]] = {s: {} for s in settings}
    picks: dict[str, dict[int, str]] = {}
    relay = os.path.join(args.build, "tools", "cfx_delay_relay")
    cfxrun = os.path.join(args.build, "perf", "cfxrun")
    with contextlib.ExitStack() as stack:
        bed = stack.enter_context(netbed.Bed(spec, relay=relay)) if spec.hosts > 1 else None
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="cfxalgo"))
        topo_env = {}
        if args.shape == "3level":
            topo_env["NCCL_TOPO_FILE"] = os.path.join(tmp, "3level.xml")
            with open(topo_env["NCCL_TOPO_FILE"], "w") as f:
                f.write(three_level_xml())
        total_reps = max(reps for _, reps in sweeps)
        for rep in range(total_reps):
            for s in settings:
                # "hier/devices": Hier, planned on the bed's own file (a host per namespace).
                env = dict(SHAPE_ENV.get(args.shape, {}))
                if s != "auto":
                    env["NCCL_ALGO"] = s.split("/")[0]
                if not s.endswith("/devices"):
                    env.update(topo_env)
                env.update(VARIANT_ENV.get(s.partition("/")[2], {}))
                for argv, reps in sweeps:
                    if rep >= reps:
                        continue
                    times, p = run(bed, rph, argv, env, args.timeout, os.path.join(tmp, "tuning"), cfxrun)
                    picks.setdefault(s, {}).update(p)
                    for size, t in times.items():
                        samples[s].setdefault(size, []).append(t)
                    print(f"# rep {rep + 1}/{reps} {s}: {len(times)} sizes", file=sys.stderr, flush=True)

    print(f"\n{args.coll} on {args.shape} ({spec.hosts} hosts x {rph} ranks), out-of-place time in us, median of "
          f"interleaved repetitions: {args.small_reps} below 1 MiB ({args.small_iters} iterations each), {args.reps} "
          f"from 1 MiB ({args.iters} iterations each)\n")
    # "pick / best": the forced run of the algorithm the planner picked against the best forced one. The auto
    # column runs the same algorithm again, so auto against its own forced twin is this bed's noise between runs.
    print("| size | " + " | ".join(settings) + " | planner's pick | pick / best fixed | auto / best fixed | "
          "auto / worst fixed |")
    print("|---:|" + "---:|" * len(settings) + "---|---:|---:|---:|")
    worst_pick, worst_auto = 0.0, 0.0
    for size in sorted(samples["auto"]):
        med = {s: statistics.median(samples[s][size]) for s in settings if size in samples[s]}
        # A forced algorithm counts only where it ran (its run's log names it at this size).
        ran = {s for s in med
               if s == "auto" or picks.get(s, {}).get(size, "").lower() == s.split(":")[1].split("/")[0]}
        fixed = [med[s] for s in settings[:-1] if s in ran]
        if not fixed:
            continue
        best, worst = min(fixed), max(fixed)
        pick = picks.get("auto", {}).get(size, "?")
        twin = f"{coll_name}:{pick.lower()}"
        pick_time = med[twin] if twin in ran else med["auto"]
        worst_pick = max(worst_pick, pick_time / best)
        worst_auto = max(worst_auto, med["auto"] / best)
        cells = " | ".join(f"{med[s]:.0f}" if s in ran else "-" for s in settings)
        print(f"| {size} | {cells} | {pick} | {pick_time / best:.2f} | {med['auto'] / best:.2f} | "
              f"{med['auto'] / worst:.2f} |")
    print(f"\nlargest pick / best fixed: {worst_pick:.2f}; largest auto / best fixed: {worst_auto:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
