#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compressed all-reduces across hosts: striped over every TCP stream of a link, and several in flight at once.

Builds a bed of --hosts hosts (one rank each, behind one switch at --rate) and runs this file as the ranks
(`--rank`), through the Python package, with the TCP links striped over --streams sockets
(NCCL_SOCKET_NTHREADS=1, NCCL_NSOCKS_PERTHREAD=streams). Each rank
  1. runs one int8 all-reduce of --mib MiB (codec_mode always) and checks it against the exact sum within the
     codec's bound, then reads the kernel's per-socket counters (`ss -tin`, bytes_acked of every TCP socket of its
     namespace that connects to a peer) while the communicator still holds its sockets;
  2. starts --inflight async int8 all-reduces on different buffers, then a CPU loop, then waits for all of them,
     and checks every result.
Rank 0 prints each data socket's bytes and the check asserts that the --streams sockets of every link each carried
at least a quarter of their even share of the link's bytes (the striping of tcp_stripe.h cuts every slot of at least
2 x 32 KiB into one contiguous stripe per stream). Results are asserted, never timings; the times (the async ops'
overlap with the CPU loop, and with one another) are printed for the notes.

  /usr/bin/python3 tests/netbed/compressed_stripes.py --hosts 2 --streams 4
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def rank_main(a: argparse.Namespace) -> int:
    import numpy as np
    import netbed
    conflux, comm = netbed.rank_communicator()
    n, me = comm.size, comm.rank
    count = a.mib * (1 << 20) // 4
    rng = np.random.default_rng(1234 + me)
    x = rng.standard_normal(count).astype(np.float32)
    # Every rank can rebuild every rank's input, so the exact sum is known locally.
    exact = sum(np.random.default_rng(1234 + r).standard_normal(count).astype(np.float32).astype(np.float64)
                for r in range(n))
    scale = float(np.abs(exact).max())

    def check(name: str, got) -> None:
        err = float(np.abs(got - exact).max())
        # int8 quantised once: each of n inputs is off by at most half a step of its block's 255 levels.
        if not err <= n * scale / 127:
            raise SystemExit(f"rank {me}: {name}: max error {err:.3g} beyond the int8 bound")

    t0 = time.perf_counter()
    out = comm.all_reduce(x.copy(), codec="int8", codec_mode="always")
    one = time.perf_counter() - t0
    check("blocking int8 all-reduce", out)
    wire = comm.compress_stats().wire_bytes
    ss = subprocess.run(["ss", "-tin", "state", "established"], capture_output=True, text=True).stdout
    peers = [a for a in os.environ.get("CFX_STRIPE_PEERS", "").split(",") if a]
    per_socket = []
    lines = ss.splitlines()
    for i, line in enumerate(lines):
        f = line.split()
        if len(f) >= 4 and any(f[3].startswith(p + ":") or f[2].startswith(p + ":") for p in peers):
            info = lines[i + 1] if i + 1 < len(lines) else ""
            m = re.search(r"bytes_acked:(\d+)", info)
            per_socket.append((f[2], f[3], int(m.group(1)) if m else 0))
    for local, remote, acked in per_socket:
        print(f"socket {local} -> {remote}: bytes_acked {acked}")
    print(f"wire_bytes {wire} blocking_s {one:.3f}")

    # Several async compressed all-reduces in flight, then compute, then the waits.
    bufs = [x.copy() for _ in range(a.inflight)]
    t0 = time.perf_counter()
    works = [comm.all_reduce(b, codec="int8", codec_mode="always", async_op=True) for b in bufs]
    t_enqueued = time.perf_counter() - t0
    done_before = 0
    acc = 0.0
    c0 = time.perf_counter()
    while time.perf_counter() - c0 < a.compute_s:  # the "inner loop": CPU work while the ops run
        acc += float(np.dot(x[:4096], x[:4096]))
        done_before = sum(w.done() for w in works)
    for i, w in enumerate(works):
        check(f"async int8 all-reduce {i}", w.wait())
    total = time.perf_counter() - t0
    print(f"inflight {a.inflight} enqueue_s {t_enqueued:.3f} compute_s {a.compute_s:.3f} total_s {total:.3f} "
          f"done_during_compute {done_before} one_blocking_s {one:.3f}")
    # The same ops in one asynchronous group: they start together and progress side by side on the wire.
    bufs = [x.copy() for _ in range(a.inflight)]
    t0 = time.perf_counter()
    with conflux.group(async_op=True) as handle:
        for b in bufs:
            comm.all_reduce(b, codec="int8", codec_mode="always")
    c0 = time.perf_counter()
    while time.perf_counter() - c0 < a.compute_s:
        acc += float(np.dot(x[:4096], x[:4096]))
    grouped_done = handle.done()
    handle.wait()
    for i, b in enumerate(bufs):
        check(f"grouped async int8 all-reduce {i}", b)
    total = time.perf_counter() - t0
    print(f"group {a.inflight} compute_s {a.compute_s:.3f} total_s {total:.3f} done_after_compute {int(grouped_done)}")
    # Side by side in one run: the ops one after another, blocking, against the group without compute.
    t0 = time.perf_counter()
    for b in bufs:
        comm.all_reduce(b, codec="int8", codec_mode="always")
    serial = time.perf_counter() - t0
    bufs = [x.copy() for _ in range(a.inflight)]
    t0 = time.perf_counter()
    with conflux.group():
        for b in bufs:
            comm.all_reduce(b, codec="int8", codec_mode="always")
    grouped = time.perf_counter() - t0
    for i, b in enumerate(bufs):
        check(f"grouped int8 all-reduce {i}", b)
    print(f"serial_s {serial:.3f} grouped_s {grouped:.3f}")
    comm.destroy()
    return 0


def bed_main(a: argparse.Namespace) -> int:
    import netbed
    spec = netbed.switch(a.hosts, rate=a.rate)
    env = {"NCCL_SOCKET_NTHREADS": "1", "NCCL_NSOCKS_PERTHREAD": str(a.streams)}
    argv = [a.python, os.path.abspath(__file__), "--rank", "--mib", str(a.mib), "--inflight", str(a.inflight),
            "--compute-s", str(a.compute_s)]
    outputs: dict[int, str] = {}
    try:
        with netbed.Bed(spec, os.path.join(a.build, "tools", "cfx_delay_relay")) as bed:
            env["CFX_STRIPE_PEERS"] = ",".join(bed.primary_addr(h) for h in range(a.hosts))
            rc = bed.run_ranks(1, argv, env=env, timeout=a.timeout, quiet=True, outputs=outputs)
    except netbed.Skip as e:
        print(f"SKIP: {e}")
        return netbed.SKIP_RC
    print(outputs.get(0, ""), end="")
    if rc != 0:
        print("compressed_stripes: a rank failed")
        return 1
    problems = []
    for rank, text in sorted(outputs.items()):
        acked = [int(v) for v in re.findall(r"bytes_acked (\d+)", text)]
        wire = int(re.search(r"wire_bytes (\d+)", text).group(1))
        data = sorted(acked, reverse=True)
        # Each link (peer) carries its share of the wire bytes over `streams` sockets; the rest are the bootstrap's
        # and the heartbeats' (a few KiB). Every stream of the busiest links must carry a real part of the bytes.
        links = a.hosts - 1
        share = wire / links / a.streams
        carrying = [b for b in data if b >= share / 4]
        if len(carrying) < a.streams:
            problems.append(f"rank {rank}: {len(carrying)} sockets carried >= {share / 4:.0f} bytes, expected at "
                            f"least {a.streams} (per socket: {data})")
    for p in problems:
        print(p)
    print("compressed_stripes: " + ("ok" if not problems else "FAILED"))
    return 1 if problems else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--build", default="build")
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with numpy")
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--rate", default=None, help="tc rate of the switch ports (default unshaped)")
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--inflight", type=int, default=3)
    ap.add_argument("--compute-s", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    return rank_main(a) if a.rank else bed_main(a)


if __name__ == "__main__":
    sys.exit(main())
