#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cost of frame protection (CFX_WIRE_PROTECTION): all_reduce busbw with off, integrity and encryption, side by side.

Two ranks, one per host, on a point-to-point link of the namespace bed (tests/netbed), or two ranks on one host
talking tcp over loopback (NCCL_SHM_DISABLE=1: the path protection would take between ranks of one host).
Repetitions are interleaved (rep 1: off, integrity, encryption on every link; rep 2: ...) so a load change on the
shared machine hits the levels alike; the table shows the medians of --reps and each level's busbw over off's.
--variants adds settings to a level (integrity:CFX_TCP_INLINE=0 runs integrity with the proxy thread doing all I/O).

Links (--links, comma list): host (loopback, no bed), veth (unshaped point-to-point veth), 10gbit, 1gbit (tbf on
both veth ends). With two ranks busbw = algbw = S / time. What protection costs per byte of CPU, without the noise
of a shared machine, is perf/bench/frame_cipher_bench.cc's to say.

Example (as root, from the repository root, after building cfx_perf in build):
  python3 tests/netbed/protection_bench.py --build build --links host,veth,10gbit,1gbit --reps 5
Prints the Markdown table (and the raw samples with --json FILE). A benchmark, not a test: figures go to
docs/notes/security.md.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import netbed  # noqa: E402

MiB = 1 << 20
LEVELS = ("off", "integrity", "encryption")


def parse_variant(text: str) -> tuple[str, dict]:
    """'LEVEL[:VAR=VALUE[:VAR=VALUE...]]' -> (level, extra environment), e.g. 'integrity:CFX_TCP_INLINE=0'."""
    level, *settings = text.split(":")
    if level not in LEVELS or any("=" not in kv for kv in settings):
        raise netbed.BedError(f"bad variant {text!r}: LEVEL[:VAR=VALUE...] with LEVEL one of {', '.join(LEVELS)}")
    return level, dict(kv.split("=", 1) for kv in settings)
LINKS = {
    "veth": (lambda: netbed.pair(None), 64 * MiB),
    "10gbit": (lambda: netbed.pair("10gbit"), 64 * MiB),
    "1gbit": (lambda: netbed.pair("1gbit"), 32 * MiB),
}


WARMUP = 2


TIME = "/usr/bin/time"  # GNU time: each rank's CPU seconds (user + system), all its threads


def perf_argv(build: str, size: int, iters: int, check: str, cpu_file: str) -> list[str]:
    # Appended to one file (one write per rank): two ranks writing to one pipe may splice their lines.
    timed = [TIME, "-a", "-o", cpu_file, "-f", "CFX_RANK_CPU %U %S"] if os.access(TIME, os.X_OK) else []
    return timed + [os.path.join(build, "perf", "all_reduce_perf"), "-b", str(size), "-e", str(size), "-n", str(iters),
                    "-w", str(WARMUP), "-c", check]


def parse(output: str, size: int) -> dict:
    """busbw from the result row's time column (two ranks: busbw = algbw)."""
    for line in output.splitlines():
        f = line.split()
        if f and not line.startswith("#") and len(f) >= 9 and f[0] == str(size):
            if f[8] not in ("0", "N/A"):
                raise netbed.BedError(f"all_reduce_perf found {f[8]} wrong elements")
            return {"busbw_bps": size * 8 / (float(f[5]) * 1e-6), "time_us": float(f[5])}
    raise netbed.BedError(f"no result row for size {size} in:\n{output}")


def cpu_path() -> str:
    """A fresh file for one run's CPU lines (the bed's namespaces share this file system)."""
    fd, path = tempfile.mkstemp(prefix="cfx-protection-cpu-")
    os.close(fd)
    return path


def rank_cpu(cpu_file: str, ranks: int = 2) -> float | None:
    """CPU seconds of the ranks together (GNU time's line per rank in cpu_file, which goes), or None without it."""
    try:
        with open(cpu_file) as f:
            text = f.read()
        os.unlink(cpu_file)
    except OSError:
        return None
    pairs = re.findall(r"CFX_RANK_CPU ([0-9.]+) ([0-9.]+)", text)
    total, found = sum(float(u) + float(k) for u, k in pairs), len(pairs)
    return total if found == ranks else None


def one_host(build: str, variant: str, size: int, iters: int, check: str, timeout: float) -> dict:
    """Two ranks on this host over tcp (shared memory off), under cfxrun."""
    cpu_file = cpu_path()
    argv = [os.path.join(build, "perf", "cfxrun"), "-n", "2", "--timeout", str(int(timeout)),
            *perf_argv(build, size, iters, check, cpu_file)]
    level, extra = parse_variant(variant)
    env = {**os.environ, "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo", "CFX_WIRE_PROTECTION": level, **extra}
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout + 30)
    if p.returncode != 0:
        raise netbed.BedError(f"all_reduce_perf failed on one host:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return {**parse(p.stdout, size), "cpu_s": rank_cpu(cpu_file)}


def on_bed(bed: netbed.Bed, build: str, variant: str, size: int, iters: int, check: str, timeout: float) -> dict:
    outputs: dict[int, str] = {}
    level, extra = parse_variant(variant)
    env = {"CFX_WIRE_PROTECTION": level, "NCCL_SOCKET_NTHREADS": "1", "NCCL_NSOCKS_PERTHREAD": "1", **extra}
    cpu_file = cpu_path()
    if bed.run_ranks(1, perf_argv(build, size, iters, check, cpu_file), env=env, timeout=timeout, quiet=True,
                     outputs=outputs) != 0:
        raise netbed.BedError("all_reduce_perf failed on the bed (see the rank output above)")
    return {**parse(outputs[0], size), "cpu_s": rank_cpu(cpu_file)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default="build", help="build folder (perf/ inside)")
    ap.add_argument("--links", default="host,veth,10gbit,1gbit", help=f"from host,{','.join(LINKS)}")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--iters", type=int, default=5, help="timed all_reduce ops per run")
    ap.add_argument("--size", default=None, help="all_reduce bytes for every link (default: per link)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run")
    ap.add_argument("--json", default=None, help="write every sample here")
    ap.add_argument("--variants", default=",".join(LEVELS),
                    help="comma list of LEVEL[:VAR=VALUE...] (e.g. integrity:CFX_TCP_INLINE=0); ratios are to the "
                         "first")
    ap.add_argument("--check", choices=("0", "1"), default="1",
                    help="all_reduce_perf -c: 0 leaves out the result checks, whose CPU time would swamp the CPU "
                         "column")
    a = ap.parse_args()
    variants = a.variants.split(",")

    samples = []
    try:
        for variant in variants:
            parse_variant(variant)  # a typo fails here, not after the first link's runs
        for name in a.links.split(","):
            if name != "host" and name not in LINKS:
                raise netbed.BedError(f"unknown link {name!r}; choose from host, {', '.join(LINKS)}")
            size = int(a.size) if a.size else (64 * MiB if name == "host" else LINKS[name][1])
            bed = None if name == "host" else netbed.Bed(LINKS[name][0]())
            try:
                if bed is not None:
                    bed.__enter__()
                for rep in range(a.reps):
                    for variant in variants:
                        if bed is None:
                            c = one_host(a.build, variant, size, a.iters, a.check, a.timeout)
                        else:
                            c = on_bed(bed, a.build, variant, size, a.iters, a.check, a.timeout)
                        samples.append({"link": name, "variant": variant, "rep": rep, "size": size, **c})
                        print(f"# {name} {variant} rep {rep}: busbw {bench.fmt(c['busbw_bps'])} Gbit/s",
                              file=sys.stderr, flush=True)
            finally:
                if bed is not None:
                    bed.__exit__(None, None, None)
    except (netbed.Skip, netbed.BedError) as e:
        return netbed.exit_code(e, "protection_bench")
    finally:
        if a.json:
            with open(a.json, "w") as f:
                json.dump(samples, f, indent=1)

    base = variants[0]
    print(f"| link | size | variant | busbw (Gbit/s) | / {base} | CPU s per run |")
    print("|---|---|---|---|---|---|")
    for name in a.links.split(","):
        by_rep = {v: {s["rep"]: s for s in samples if s["link"] == name and s["variant"] == v} for v in variants}
        size = next(s["size"] for s in samples if s["link"] == name)
        for v in variants:
            runs = list(by_rep[v].values())
            # Each repetition's own ratio (its runs follow each other), then the median: a load change between
            # repetitions moves numerator and denominator alike.
            ratio = statistics.median(by_rep[v][r]["busbw_bps"] / by_rep[base][r]["busbw_bps"] for r in by_rep[v])
            cpus = [r["cpu_s"] for r in runs if r["cpu_s"] is not None]
            cpu = f"{statistics.median(cpus):.2f}" if cpus else "-"
            shown = f"{size // MiB} MiB" if size >= MiB else f"{size // 1024} KiB"
            print(f"| {name} | {shown} | {v} | {bench.fmt(statistics.median(r['busbw_bps'] for r in runs))} "
                  f"| {ratio:.2f} | {cpu} |")
    print(f"\nBusbw: medians of {a.reps} interleaved repetitions; ratios: the median of each repetition's own ratio; "
          f"all_reduce_perf -n {a.iters} -w {WARMUP}, out-of-place busbw, 2 ranks, one socket per peer. CPU: both "
          f"ranks' user + system seconds for the whole run (start-up, {WARMUP} warm-up and {a.iters} timed ops, "
          f"in and out of place), medians.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
