#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Stalls: collectives timed one call at a time across hosts, so that a rare long call shows instead of hiding in
a mean.

Builds a bed of --hosts hosts with --ranks-per-host ranks (one switch at --rate) and runs this file as the ranks
(`--rank`) through the Python package. Each rank calls --op (all_to_all or all_reduce) on a buffer of each --kib
size --calls times after a warm-up, timing each call, and checks the last result. Rank 0 reports the median call,
the 99th percentile, the longest, and the calls that took over --factor times the median ("stalls"). With several
--lib, each library (a libnccl.so.2, loaded through CFX_LIBRARY) runs in turn, --rounds times, in one bed, so all
see the same machine; the table gives each one's stalls over all its rounds (docs/notes/tcp_transport.md).

  /usr/bin/python3 tests/netbed/stall_bench.py --kib 128 256 512
  /usr/bin/python3 tests/netbed/stall_bench.py --kib 256 --lib before/libnccl.so.2 build/src/libnccl.so.2 --rounds 3
  /usr/bin/python3 tests/netbed/stall_bench.py --op all_reduce --kib 1024 --rate "" --rtt-ms 50   # unshaped, 50 ms RTT
  /usr/bin/python3 tests/netbed/stall_bench.py --kib 1024 --async-op --lib before/libnccl.so.2 build/src/libnccl.so.2
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
    for kib in a.kib:
        count = kib * 1024 // 4
        send = np.full(count, me + 1, dtype=np.float32)
        recv = np.empty(count, dtype=np.float32)
        fn = comm.all_to_all if a.op == "all_to_all" else comm.all_reduce
        # async_op: each call on a host stream of its own, as the torch backend issues them (over the host lanes
        # where the communicator has them: CFX_HOST_LANES, automatic by default).
        call = (lambda: fn(send, recv, async_op=True).wait()) if a.async_op else (lambda: fn(send, recv))
        for _ in range(a.warmup):
            call()
        times = []
        for _ in range(a.calls):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        # all_to_all: block j of rank i holds i + 1; all_reduce: the sum over the ranks.
        want = (np.repeat(np.arange(1, n + 1), count // n) if a.op == "all_to_all"
                else np.full(count, n * (n + 1) / 2))
        if not np.array_equal(recv[:len(want)], want.astype(np.float32)):
            raise SystemExit(f"rank {me}: {a.op} of {kib} KiB: wrong result")
        ms = sorted(t * 1e3 for t in times)
        med = statistics.median(ms)
        stalls = [t for t in ms if t > a.factor * med]
        print(f"RESULT kib={kib} median_ms={med:.3f} p99_ms={ms[int(0.99 * (len(ms) - 1))]:.3f} max_ms={ms[-1]:.3f} "
              f"stalls={len(stalls)} stall_ms={sum(stalls):.1f}", flush=True)
    comm.destroy()
    return 0


def bed_main(a: argparse.Namespace) -> int:
    import netbed
    spec = netbed.switch(a.hosts, rate=a.rate or None, delay_ms=a.rtt_ms / 2)
    argv = [a.python, os.path.abspath(__file__), "--rank", "--op", a.op, "--calls", str(a.calls), "--warmup",
            str(a.warmup), "--factor", str(a.factor), "--kib", *[str(k) for k in a.kib]]
    if a.async_op:
        argv.append("--async-op")
    libs = a.lib or [None]
    rows: dict[tuple[int, int], list[dict]] = {}  # (lib index, kib) -> one record per round
    try:
        with netbed.Bed(spec, os.path.join(a.build, "tools", "cfx_delay_relay")) as bed:
            for rnd in range(a.rounds):
                for li, lib in enumerate(libs):
                    env = {"CFX_LIBRARY": os.path.abspath(lib)} if lib else {}
                    outputs: dict[int, str] = {}
                    rc = bed.run_ranks(a.ranks_per_host, argv, env=env, timeout=a.timeout, quiet=True,
                                       outputs=outputs, port=29500 + rnd * len(libs) + li)
                    if rc != 0:
                        print(outputs.get(0, "")[-3000:])
                        print(f"stall_bench: a rank failed (round {rnd}, library {lib or 'default'})")
                        return 1
                    for m in re.finditer(r"RESULT kib=(\d+) (.*)", outputs[0]):
                        fields = {k: float(v) for k, v in (kv.split("=") for kv in m.group(2).split())}
                        rows.setdefault((li, int(m.group(1))), []).append(fields)
    except netbed.Skip as e:
        print(f"SKIP: {e}")
        return netbed.SKIP_RC
    print(f"{a.op}{' (async_op, on host streams)' if a.async_op else ''}, {a.hosts} hosts x {a.ranks_per_host} "
          f"ranks, {a.rate or 'unshaped'}, {a.rtt_ms:g} ms RTT; "
          f"{a.calls} calls per size and round, {a.rounds} round(s); a stall is a call over {a.factor:g}x the median "
          f"(rank 0)")
    print("| library | buffer | median | p99 | longest | stalls | time in stalls |")
    print("|---|---|---|---|---|---|---|")
    for (li, kib), recs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        name = libs[li] or "default"
        print(f"| {name} | {kib} KiB | {statistics.median(r['median_ms'] for r in recs):.2f} ms "
              f"| {max(r['p99_ms'] for r in recs):.2f} ms | {max(r['max_ms'] for r in recs):.1f} ms "
              f"| {sum(int(r['stalls']) for r in recs)} / {a.calls * len(recs)} "
              f"| {sum(r['stall_ms'] for r in recs):.0f} ms |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--build", default="build")
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with numpy")
    ap.add_argument("--op", choices=["all_to_all", "all_reduce"], default="all_to_all")
    ap.add_argument("--async-op", action="store_true",
                    help="issue each call with async_op=True and wait, on a host stream as the torch backend's "
                         "are (over the host lanes where there are some: set CFX_HOST_LANES=4 to have them here)")
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--ranks-per-host", type=int, default=2)
    ap.add_argument("--rate", default="1gbit", help="tc rate of the switch ports (\"\": unshaped)")
    ap.add_argument("--rtt-ms", type=float, default=0.0, help="round trip between hosts (the delay relay)")
    ap.add_argument("--kib", type=int, nargs="+", default=[128, 256, 512])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--lib", nargs="+", help="libraries to compare (CFX_LIBRARY), each in turn")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    return rank_main(a) if a.rank else bed_main(a)


if __name__ == "__main__":
    sys.exit(main())
