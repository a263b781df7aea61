#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compressed all-reduce on the namespace bed: every codec's time against --codec none, side by side in one run.

For each shape (hosts behind one switch, one rank per host, every port shaped to the rate, optional RTT) and each
codec, all_reduce_perf runs one size with -c 1 (results checked within the codec's bound), interleaved codec by
codec within each repetition so a load change on the shared machine hits all alike. The table gives the median
out-of-place time, its ratio to --codec none, the wire bytes one rank sent (the '# codec' line), and the link use:
those bytes over the time, against the line rate, which is what "the compressed bytes move at line rate" means for
quantise-once, whose two phases each send (n - 1) / n of the encoded buffer from every host at once.

Example (root, from the repository root, after building cfx_perf and cfx_delay_relay in build):
  python3 tests/netbed/compress_bench.py --shapes 2x100mbit,4x100mbit --codecs none,int8,topk:0.01 --reps 2
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbed  # noqa: E402

MiB = 1 << 20


def shape(name: str) -> tuple[netbed.Spec, float]:
    """'4x100mbit' or '4x100mbit_rtt50': hosts, rate, RTT; returns the spec and the line rate in bit/s."""
    hosts, rest = name.split("x", 1)
    rate, _, rtt = rest.partition("_rtt")
    # RTT between two hosts is twice the one-way delay of the (delayed) switch.
    spec = netbed.switch(int(hosts), rate=rate, delay_ms=float(rtt) / 2 if rtt else 0.0)
    if rtt:
        spec.tcp_buf_max = 32 * MiB
    bps = float(rate.replace("gbit", "e9").replace("mbit", "e6"))
    return spec, bps


def run(bed: netbed.Bed, perf: str, codec: str, size: int, iters: int, timeout: float) -> dict:
    argv = [perf, "-b", str(size), "-e", str(size), "-n", str(iters), "-w", "1", "-c", "1"]
    if codec != "none":
        argv += ["--codec", codec]
    outputs: dict[int, str] = {}
    rc = bed.run_ranks(1, argv, timeout=timeout, quiet=True, outputs=outputs)
    if rc != 0:
        raise netbed.BedError(f"all_reduce_perf --codec {codec} failed:\n{outputs.get(0, '')[-3000:]}")
    out = {"codec": codec}
    for line in outputs[0].splitlines():
        f = line.split()
        if f and not line.startswith("#") and len(f) >= 9 and f[0] == str(size):
            if f[8] != "0":
                raise netbed.BedError(f"--codec {codec}: {f[8]} elements outside the codec's bound")
            out["time_us"] = float(f[5])
        if line.startswith("# codec ") and "time_us" in out and "wire" not in out:
            out["wire"] = int(f[4])
            out["rel_l2"] = float(f[6])
    if "time_us" not in out:
        raise netbed.BedError(f"no result row in:\n{outputs[0]}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--shapes", default="2x100mbit,4x100mbit")
    ap.add_argument("--codecs", default="none,bf16,int8,mxint8,mxfp8,int4,topk:0.01")
    ap.add_argument("--size", type=int, default=64 * MiB)
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()
    perf = os.path.join(a.build, "perf", "all_reduce_perf")
    relay = os.path.join(a.build, "tools", "cfx_delay_relay")
    codecs = a.codecs.split(",")
    print("| shape | codec | time (ms) | / none | wire bytes per rank | link use | rel_l2 |")
    print("|---|---|---|---|---|---|---|")
    try:
        for name in a.shapes.split(","):
            spec, bps = shape(name)
            samples: dict[str, list[dict]] = {c: [] for c in codecs}
            with netbed.Bed(spec, relay) as bed:
                for rep in range(a.reps):
                    for c in codecs:
                        s = run(bed, perf, c, a.size, a.iters, a.timeout)
                        samples[c].append(s)
                        print(f"# {name} rep {rep} {c}: {s['time_us'] / 1e3:.1f} ms", file=sys.stderr, flush=True)
            base = statistics.median(s["time_us"] for s in samples[codecs[0]])
            hosts = spec.hosts
            for c in codecs:
                t = statistics.median(s["time_us"] for s in samples[c])
                wire = samples[c][0].get("wire")
                if wire is None:  # plain ring: 2 (n - 1) / n of the buffer from every rank
                    wire = int(2 * (hosts - 1) / hosts * a.size)
                use = wire * 8 / (t * 1e-6) / bps
                rel = samples[c][0].get("rel_l2")
                print(f"| {name} | {c} | {t / 1e3:.1f} | {t / base:.3f} | {wire} | {use:.2f} | "
                      f"{'' if rel is None else f'{rel:.2e}'} |", flush=True)
    except (netbed.Skip, netbed.BedError) as e:
        return netbed.exit_code(e, "compress_bench")
    print(f"\nall_reduce_perf -b {a.size} -e {a.size} -n {a.iters} -w 1 -c 1 --codec C, one rank per host; medians of "
          f"{a.reps} interleaved repetitions; link use = wire bytes per rank / time / line rate.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
