#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The 3-level algorithms across namespaces: the 3level bed of algo_table.py (2 hosts x 2 devices x 2 ranks; each
device a namespace, 2 Gbit/s between the devices of a host, 1 Gbit/s per device between hosts) with its topology
file, and all_reduce, all_gather and reduce_scatter perf binaries forced onto Hier3 (NCCL_ALGO) with -c 1, so every
result is checked; the sizes reach several pipelined segments. Each run's INFO/TUNING log must show Hier3 chosen
(a forced algorithm that does not apply would silently run another).

  python3 tests/netbed/levels.py --perf-dir build-rel/perf

Exits 0 when every binary passes, 1 otherwise, 77 where the bed cannot be built (not root, no tbf, ...).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import algo_table  # noqa: E402
import netbed  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--perf-dir", required=True)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    spec, rph = algo_table.SHAPES["3level"](0)

    def check(bed: netbed.Bed) -> list[str]:
        problems = []
        with tempfile.TemporaryDirectory(prefix="cfxlevels") as tmp:
            topo = os.path.join(tmp, "3level.xml")
            with open(topo, "w") as f:
                f.write(algo_table.three_level_xml())
            for coll, algo in (("all_reduce", "allreduce"), ("all_gather", "allgather"),
                               ("reduce_scatter", "reducescatter")):
                log = os.path.join(tmp, f"{coll}.log")
                env = {"NCCL_TOPO_FILE": topo, "NCCL_ALGO": f"{algo}:hier3", "NCCL_DEBUG": "INFO",
                       "NCCL_DEBUG_SUBSYS": "TUNING", "NCCL_DEBUG_FILE": log + ".%p"}
                argv = [os.path.join(a.perf_dir, f"{coll}_perf"), "-b", "1M", "-e", "8M", "-f", "8", "-n", "1", "-w", "0",
                        "-c", "1"]
                rc = bed.run_ranks(rph, argv, env=env, timeout=a.timeout, quiet=True)
                text = ""
                for name in os.listdir(tmp):
                    if name.startswith(f"{coll}.log."):
                        with open(os.path.join(tmp, name)) as f:
                            text += f.read()
                picks = text.count(": Hier3, slice")
                print(f"{coll}: rc {rc}, {picks} ops logged as Hier3")
                if rc != 0:
                    problems.append(f"{coll}: the ranks failed")
                elif picks == 0:
                    problems.append(f"{coll}: no op ran Hier3")
        return problems

    return netbed.run_check("levels", spec, check)


if __name__ == "__main__":
    sys.exit(main())
