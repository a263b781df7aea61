#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""MoE dispatch + combine, side by side: moe_perf --mode fused, moe_perf --mode unfused, and (one host) Open MPI's
MPI_Alltoallv with the same pack and unpack (mpi_moe_bench), over the shapes of docs/notes/moe.md.

Every repetition runs every shape with every variant in turn (A B C A B C ...), so a burst of load from the other
users of the machine hits all variants alike; each number in the table is the median over repetitions of a run's
mean dispatch + combine time (moe_perf's out-of-place '#  moe' line), and each run records the 1-minute load average
before it. With --netns HOSTS (root) the ranks run on HOSTS namespaces of tests/netbed joined by a switch at
--link-rate, --np / HOSTS per host, and Open MPI is left out (its target is the one-host one).

  /usr/bin/python3 perf/compare/moe_compare.py --build build --np 4 --reps 3
  /usr/bin/python3 perf/compare/moe_compare.py --build build --np 4 --netns 2 --link-rate 1gbit --reps 2

Writes summary.md and samples.json into --out (default perf/results/moe_np<N>[_netns<H>_<rate>]).
"""

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (run_group, netns_bed, repo_relative)

# The shapes: tokens per rank, hidden (bf16), topk, experts, routing.
DEFAULT_SHAPES = [(t, h, k, e, r) for t in (2048, 8192) for h in (2048, 4096) for (k, e) in ((2, 8), (8, 32))
                  for r in ("uniform", "zipf:1.2")]
MOE_LINE = re.compile(r"#\s+moe (out-of-place|mpi-unfused)\s+dispatch\s+([\d.]+) us.*combine\s+([\d.]+) us")


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        t, h, k, e, r = item.split(":", 4)
        shapes.append((int(t), int(h), int(k), int(e), r))
    return shapes


def shape_name(s):
    t, h, k, e, r = s
    return f"T={t} H={h} top-{k}/{e} {r}"


def variants(a, shape, bed=None):
    """[(name, cmds, envs, text)] for one shape."""
    t, h, k, e, r = shape
    moe = os.path.join(a.build, "perf", "moe_perf")
    flags = ["--tokens", str(t), "--hidden", str(h), "--topk", str(k), "--experts", str(e), "--routing", r,
             "--dtype", "bf16", "-c", "0", "-n", str(a.iters), "-w", str(a.warmup)]
    out = []
    if bed is None:
        env = dict(os.environ, NCCL_SOCKET_IFNAME="lo", CFX_PERF_ROTATE="0")
        cfxrun = [os.path.join(a.build, "perf", "cfxrun"), "-n", str(a.np), "--timeout", str(a.timeout)]
        for mode in ("fused", "unfused"):
            cmd = cfxrun + [moe] + flags + ["--mode", mode]
            out.append((mode, [cmd], [env], "CFX_PERF_ROTATE=0 " + " ".join(cmd)))
        mpi = os.path.join(a.build, "perf", "mpi_moe_bench")
        cmd = (["mpirun", "-np", str(a.np), "--oversubscribe", "--mca", "pml", "ob1", "--mca", "btl", "vader,self"]
               + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
               + [mpi, "--tokens", str(t), "--hidden", str(h), "--topk", str(k), "--experts", str(e), "--routing", r,
                  "--dtype", "bf16", "--iters", str(a.iters), "--warmup", str(a.warmup), "--check", "0"])
        mpi_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       OMPI_MCA_oob_tcp_if_include="lo")
        out.append(("mpi", [cmd], [mpi_env], " ".join(cmd)))
        return out
    per_host = a.np // a.netns
    base = {k2: v for k2, v in os.environ.items() if not k2.startswith(("OMPI_", "NCCL_", "GLOO_"))}
    for mode in ("fused", "unfused"):
        cmds, envs = [], []
        secret = os.urandom(16).hex()  # the ranks span hosts: Conflux refuses to run them without a secret
        for rank in range(a.np):
            host = rank // per_host
            cmds.append(["ip", "netns", "exec", bed.hosts[host]] + [moe] + flags + ["--mode", mode])
            envs.append(dict(base, RANK=str(rank), WORLD_SIZE=str(a.np), LOCAL_RANK=str(rank % per_host),
                             LOCAL_WORLD_SIZE=str(per_host), MASTER_ADDR=bed.primary_addr(0), MASTER_PORT="0",
                             NCCL_HOSTID=bed.hosts[host], NCCL_SOCKET_IFNAME=bed.primary_dev(host),
                             CFX_SECRET=secret, CFX_PERF_ROTATE="0"))
        text = (f"ip netns exec <host> env RANK=r WORLD_SIZE={a.np} MASTER_ADDR={bed.primary_addr(0)} "
                f"MASTER_PORT=<port> NCCL_HOSTID=<host> NCCL_SOCKET_IFNAME=<dev> CFX_SECRET=<random> "
                f"CFX_PERF_ROTATE=0 {moe} "
                + " ".join(flags) + f" --mode {mode}  (rank r on host r / {per_host})")
        out.append((mode, cmds, envs, text))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--np", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--timeout", type=int, default=900, help="seconds per run")
    p.add_argument("--shapes", type=parse_shapes, default=DEFAULT_SHAPES, help="T:H:K:E:ROUTING,...")
    p.add_argument("--netns", type=int, default=0)
    p.add_argument("--link-rate", default="1gbit")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    tag = f"moe_np{a.np}" + (f"_netns{a.netns}_{a.link_rate}" if a.netns else "")
    a.out = a.out or os.path.join(compare.REPO, "perf", "results", tag)
    os.makedirs(a.out, exist_ok=True)
    samples = []
    commands = {}

    def race(bed=None):
        port = 29700
        for rep in range(a.reps):
            for shape in a.shapes:
                for name, cmds, envs, text in variants(a, shape, bed):
                    commands.setdefault(name, text)
                    if bed is not None:
                        port += 1
                        envs = [dict(e, MASTER_PORT=str(port)) for e in envs]
                    load = os.getloadavg()[0]
                    start = time.time()
                    rc, out, err = compare.run_group(cmds, envs, a.timeout)
                    m = MOE_LINE.search(out)
                    sample = {"rep": rep, "shape": list(shape), "variant": name, "rc": rc, "load1": load,
                              "wall_s": round(time.time() - start, 1)}
                    if rc == 0 and m:
                        sample.update(dispatch_us=float(m.group(2)), combine_us=float(m.group(3)))
                    else:
                        sample["error"] = (err or out)[-400:]
                    samples.append(sample)
                    print(json.dumps(sample), flush=True)

    if a.netns:
        a.relay = None
        a.link_p2p = False
        a.link_rtt_ms = 0.0
        a.link_count = 1
        with compare.netns_bed(a) as bed:
            race(bed)
    else:
        race()
    write_summary(a, samples, commands)


def write_summary(a, samples, commands):
    names = ["fused", "unfused"] + ([] if a.netns else ["mpi"])
    lines = [f"# MoE dispatch + combine, {a.np} ranks" + (f", {a.netns} hosts at {a.link_rate}" if a.netns else
                                                           ", one host"),
             "", f"Machine: {platform.node()}, {os.cpu_count()} CPUs; {a.reps} repetitions, "
             f"{a.iters} timed iterations each (median of the runs' means).", "",
             "| shape | " + " | ".join(f"{n} dispatch / combine / total (ms)" for n in names)
             + " | fused vs unfused | " + ("fused vs MPI | " if not a.netns else "") + "load (1 min) |",
             "|---|" + "---|" * (len(names) + (1 if a.netns else 2) + 1)]
    for shape in a.shapes:
        row, totals, loads = [shape_name(shape)], {}, []
        for n in names:
            got = [s for s in samples if s["variant"] == n and tuple(s["shape"]) == tuple(shape) and "dispatch_us" in s]
            loads += [s["load1"] for s in samples if tuple(s["shape"]) == tuple(shape)]
            if not got:
                row.append("failed")
                continue
            d = statistics.median(s["dispatch_us"] for s in got) / 1e3
            c = statistics.median(s["combine_us"] for s in got) / 1e3
            tot = statistics.median(s["dispatch_us"] + s["combine_us"] for s in got) / 1e3
            totals[n] = tot
            row.append(f"{d:.1f} / {c:.1f} / {tot:.1f}")
        ratio = lambda other: f"{totals[other] / totals['fused']:.2f}x" if other in totals and "fused" in totals else "-"
        row.append(ratio("unfused"))
        if not a.netns:
            row.append(ratio("mpi"))
        row.append(f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-")
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Commands:", ""] + [f"- {n}: `{compare.repo_relative(t)}`" for n, t in commands.items()]
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "samples.json"), "w") as f:
        json.dump({"args": {k: v for k, v in vars(a).items() if k != "shapes"}, "shapes": a.shapes,
                   "samples": samples, "commands": commands}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
