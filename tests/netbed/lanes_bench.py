#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Separate async all-reduces of one communicator overlapping on its host lanes (CFX_HOST_LANES), across hosts.

Builds a bed of --hosts hosts (one rank each, one switch at --rate with --rtt-ms round trip) and runs this file as the
ranks (`--rank`) through the Python package, alternately with CFX_HOST_LANES=1 and =--lanes (--rounds times each, so
both see the same machine load). Each rank, per codec (plain, int8) and size: issues --inflight async all-reduces on
different buffers (each async_op=True call has a host stream of its own), then waits for all of them; the time from
the first call to the last wait, median over --reps, after a warm-up batch (which makes the lanes). Every result is
checked against the exact sum (int8: within the codec's bound). Rank 0's medians become one table: the time with one
queue, with lanes, and their ratio (docs/notes/wan_training.md).

  /usr/bin/python3 tests/netbed/lanes_bench.py --hosts 4 --rate 100mbit --rtt-ms 50
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def rank_main(a: argparse.Namespace) -> int:
    import numpy as np
    import netbed
    _, comm = netbed.rank_communicator()
    n, me = comm.size, comm.rank
    lanes = os.environ.get("CFX_HOST_LANES", "?")
    for codec in (None, "int8"):
        for kib in a.kib:
            count = kib * 1024 // 4
            # Small integers: the plain sum is exact; int8 keeps them within its bound.
            base = (np.arange(count) % 13).astype(np.float32)
            exact = base * (n * (n + 1) / 2)
            bound = 0.0 if codec is None else (n + 1) * float(np.abs(exact).max()) / 127

            def batch() -> float:
                bufs = [base * (me + 1) for _ in range(a.inflight)]
                comm.barrier()
                t0 = time.perf_counter()
                if codec is None:
                    works = [comm.all_reduce(b, async_op=True) for b in bufs]
                else:
                    works = [comm.all_reduce(b, codec=codec, codec_mode="always", async_op=True) for b in bufs]
                for w in works:
                    w.wait()
                took = time.perf_counter() - t0
                for i, b in enumerate(bufs):
                    err = float(np.abs(b - exact).max())
                    if not err <= bound:
                        raise SystemExit(f"rank {me}: {codec or 'plain'} {kib} KiB op {i}: error {err:.3g} > {bound:.3g}")
                return took

            first = batch()  # warm-up: the very first one makes the lanes (and grows the connections' buffers)
            times = [batch() for _ in range(a.reps)]
            print(f"RESULT lanes={lanes} codec={codec or 'none'} kib={kib} median_s={statistics.median(times):.4f} "
                  f"min_s={min(times):.4f} max_s={max(times):.4f} first_s={first:.4f}", flush=True)
    comm.destroy()
    return 0


def bed_main(a: argparse.Namespace) -> int:
    import netbed
    spec = netbed.switch(a.hosts, rate=a.rate, delay_ms=a.rtt_ms / 2)
    spec.tcp_buf_max = 32 << 20
    argv = [a.python, os.path.abspath(__file__), "--rank", "--inflight", str(a.inflight), "--reps", str(a.reps),
            "--kib", *[str(k) for k in a.kib]]
    # (lanes, codec, kib) -> medians, one per round
    medians: dict[tuple[str, str, int], list[float]] = {}
    firsts: dict[tuple[str, str, int], list[float]] = {}  # the warm-up batches
    try:
        with netbed.Bed(spec, os.path.join(a.build, "tools", "cfx_delay_relay")) as bed:
            for rnd in range(a.rounds):
                for lanes in (1, a.lanes):
                    outputs: dict[int, str] = {}
                    rc = bed.run_ranks(1, argv, env={"CFX_HOST_LANES": str(lanes)}, timeout=a.timeout, quiet=True,
                                       outputs=outputs, port=29500 + rnd * 2 + (lanes != 1))
                    if rc != 0:
                        print(outputs.get(0, "")[-3000:])
                        print(f"lanes_bench: a rank failed (round {rnd}, CFX_HOST_LANES={lanes})")
                        return 1
                    for m in re.finditer(r"RESULT lanes=(\S+) codec=(\S+) kib=(\d+) median_s=([\d.]+).* first_s=([\d.]+)",
                                         outputs[0]):
                        medians.setdefault((m.group(1), m.group(2), int(m.group(3))), []).append(float(m.group(4)))
                        firsts.setdefault((m.group(1), m.group(2), int(m.group(3))), []).append(float(m.group(5)))
    except netbed.Skip as e:
        print(f"SKIP: {e}")
        return netbed.SKIP_RC
    print(f"{a.inflight} async all-reduces issued before waiting, {a.hosts} hosts x 1 rank, {a.rate or 'unshaped'}, "
          f"{a.rtt_ms:g} ms RTT; median of {a.reps} batches per launch, median over {a.rounds} launches each")
    print(f"| codec | buffer | CFX_HOST_LANES=1 (s) | CFX_HOST_LANES={a.lanes} (s) | ratio |")
    print("|---|---|---|---|---|")
    for codec in ("none", "int8"):
        for kib in a.kib:
            one = statistics.median(medians[("1", codec, kib)])
            many = statistics.median(medians[(str(a.lanes), codec, kib)])
            size = f"{kib // 1024} MiB" if kib >= 1024 else f"{kib} KiB"
            print(f"| {codec} | {size} | {one:.3f} | {many:.3f} | {one / many:.2f} |")
    # The first batch of a launch makes the lanes: its time beyond a later batch's is their cost (medians).
    key = ("none", a.kib[0])
    extra = {l: statistics.median(firsts[(l, *key)]) - statistics.median(medians[(l, *key)]) for l in ("1", str(a.lanes))}
    print(f"first batch beyond a later one (plain, {a.kib[0]} KiB): {extra['1']:.3f} s with one queue, "
          f"{extra[str(a.lanes)]:.3f} s with CFX_HOST_LANES={a.lanes} "
          f"({'automatic' if a.lanes == 0 else f'making {a.lanes - 1} lanes'})")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--build", default="build")
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with numpy")
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--rate", default="100mbit", help="tc rate of the switch ports")
    ap.add_argument("--rtt-ms", type=float, default=50.0)
    ap.add_argument("--lanes", type=int, default=4, help="the CFX_HOST_LANES compared with 1 (0: the automatic default)")
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--kib", type=int, nargs="+", default=[64, 1024, 4096])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    return rank_main(a) if a.rank else bed_main(a)


if __name__ == "__main__":
    sys.exit(main())
