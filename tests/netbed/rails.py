#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Network rails on the bed: two hosts, each with two NICs on two separate networks.

Two ranks per host: with CFX_SOCKET_RAILS=2 (and NCCL_SOCKET_IFNAME=eth, which matches both NICs), local rank l
listens on NIC l first, so the hierarchical all-reduce's two cross-host rings (one per local index) each cross a
NIC of their own. One rank per host: the rank listens on both NICs and its link to the other host gets a stream
per rail, so the ring all-reduce's stripes cross both. With one rail all traffic stays on the first NIC.

The check reads each namespace's interface counters around a run of all_reduce_perf -c 1 (1-16 MiB) and asserts
where the bytes went: with rails, both NICs of both hosts carry at least a quarter of what the busier one carries;
with one rail, the second NIC carries less than 1 % of the first. Results are checked by the perf binary (-c 1) in
every run.

  python3 tests/netbed/rails.py --perf-dir build-rel/perf

Exits 0 when every run passes, 1 with the reason otherwise, 77 where the bed cannot be built (not root, ...).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbed  # noqa: E402


def tx_bytes(bed: netbed.Bed, host: int) -> list[int]:
    """Bytes sent so far by host's NICs, in link order."""
    out = []
    for k in sorted(bed.dev[host]):
        p = netbed._sh("ip", "netns", "exec", bed.hosts[host], "cat",
                       f"/sys/class/net/{bed.dev[host][k]}/statistics/tx_bytes", quiet=True)
        out.append(int(p.stdout.strip()))
    return out


def run(bed: netbed.Bed, perf_dir: str, ranks_per_host: int, rails: int,
        timeout: float) -> tuple[int, list[list[int]]]:
    before = [tx_bytes(bed, h) for h in range(2)]
    env = {"NCCL_SOCKET_IFNAME": "eth", "CFX_SOCKET_RAILS": str(rails),
           "NCCL_ALGO": "allreduce:hier" if ranks_per_host > 1 else "allreduce:ring",
           "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "NET"}
    argv = [os.path.join(perf_dir, "all_reduce_perf"), "-b", "1M", "-e", "16M", "-f", "4", "-n", "2", "-w", "1", "-c", "1"]
    rc = bed.run_ranks(ranks_per_host, argv, env=env, timeout=timeout, quiet=True)
    after = [tx_bytes(bed, h) for h in range(2)]
    return rc, [[a - b for a, b in zip(after[h], before[h])] for h in range(2)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--perf-dir", required=True)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    spec = netbed.Spec(2, [netbed.Link([0, 1], "switch"), netbed.Link([0, 1], "switch")])

    def check(bed: netbed.Bed) -> list[str]:
        problems = []
        for ranks_per_host in (2, 1):
            for rails in (2, 1):
                what = f"{ranks_per_host} rank{'s' if ranks_per_host > 1 else ''} per host, rails={rails}"
                rc, sent = run(bed, a.perf_dir, ranks_per_host, rails, a.timeout)
                print(f"{what}: bytes sent per NIC: host 0 {sent[0]}, host 1 {sent[1]}")
                if rc != 0:
                    problems.append(f"{what}: the ranks failed")
                    continue
                for h in range(2):
                    busiest = max(sent[h])
                    if rails == 2 and min(sent[h]) < busiest / 4:
                        problems.append(f"{what}: host {h}'s NICs sent {sent[h]} bytes: one rail idles")
                    if rails == 1 and sent[h][1] > busiest / 100:
                        problems.append(f"{what}: host {h}'s second NIC sent {sent[h][1]} of {busiest} bytes")
        return problems

    return netbed.run_check("rails", spec, check)


if __name__ == "__main__":
    sys.exit(main())
