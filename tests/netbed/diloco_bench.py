#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples/diloco/train.py on the namespace bed: every synchronisation mode on one model, one data set, one sample
count, over a slow wide-area link, and the table issue 34 asks for.

One bed (--hosts hosts behind one switch, every port shaped to --rate, --rtt-ms between any two hosts through the
delay relay), one replica per host. Each row runs train.py with the same model, data, seed, outer and inner step
counts (so every row sees the same samples) and differs only in its mode and codec:
  sync               fully synchronous data parallel, an all-reduce of the gradients at every inner step;
  diloco none/int8/topk:F   one all-reduce of the pseudo-gradients per outer step, with that codec;
  streaming int8     Streaming DiLoCo, --fragments fragments each synced asynchronously over --tau inner steps;
  noloco             one send/recv with a seeded peer per outer step;
  churn              diloco int8 again with --churn K:J (one replica killed, a new one joining; the joiner runs on
                     host 0, which the master runs on, so it shares memory with rank 0 and the link with it).
Columns: wire bytes per replica (rank 0's total, as train.py counts it), wall time (rank 0), the fraction of wall
time the inner loop waited on the network (the largest over the replicas of the sum of their waited_s, over rank 0's
wall time), the final loss, and the ratios to sync. The bytes and losses do not depend on the machine's load; the
times do, so the load average is printed beside them.

Example (root, from the repository root, after `make build`; torch is Debian's, in /usr/bin/python3):
  /usr/bin/python3 tests/netbed/diloco_bench.py --build build
(the defaults are docs/notes/wan_training.md's figures: 32 outer steps of H = 32, 2 fragments with tau 14,
churn 10:20, every row).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netbed  # noqa: E402

TRAIN = os.path.join(HERE, "..", "..", "examples", "diloco", "train.py")
LAST = re.compile(r"^diloco: mode=(\w+) codec=(\S+) replicas=(\d+) outer_steps=(\d+) wire_bytes=(\d+) "
                  r"wall_s=([\d.]+) final_loss=([\d.]+)$", re.M)
STEP = re.compile(r"replica (\d+)/\d+ outer (\d+): .*?waited_s=([\d.]+)")


def row_args(row: str, a: argparse.Namespace) -> list[str]:
    """'sync', 'diloco:CODEC', 'streaming:CODEC', 'noloco', 'churn' -> train.py's mode arguments."""
    mode, _, codec = row.partition(":")
    if mode == "churn":
        return ["--mode", "diloco", "--codec", codec or "int8", "--churn", a.churn]
    if mode == "streaming":
        return ["--mode", "streaming", "--codec", codec or "int8", "--fragments", str(a.fragments),
                "--tau", str(a.tau)]
    if mode in ("sync", "noloco"):
        return ["--mode", mode]
    if mode == "diloco":
        return ["--mode", "diloco", "--codec", codec or "none"]
    raise SystemExit(f"diloco_bench: unknown row {row!r}")


def run_row(bed: netbed.Bed, row: str, a: argparse.Namespace, common: list[str]) -> dict:
    argv = [a.python, os.path.abspath(TRAIN), *common, *row_args(row, a)]
    outputs: dict[int, str] = {}
    t0 = time.monotonic()
    # A churn run kills the last replica on purpose.
    may_die = frozenset({a.hosts - 1}) if row.startswith("churn") else frozenset()
    rc = bed.run_ranks(1, argv, timeout=a.timeout, quiet=True, outputs=outputs, may_die=may_die)
    elapsed = time.monotonic() - t0
    if a.log:
        os.makedirs(a.log, exist_ok=True)
        for rank, text in outputs.items():
            with open(os.path.join(a.log, f"{row.replace(':', '_')}.rank{rank}.log"), "w") as f:
                f.write(text)
    text0 = outputs.get(0, "")
    m = LAST.search(text0)
    if rc != 0 or not m:
        raise netbed.BedError(f"row {row} failed (exit {rc}):\n{text0[-3000:]}")
    waited: dict[int, float] = {}
    for text in outputs.values():  # a joiner shares rank 0's output; the last line per (replica, step) counts
        per_step: dict[tuple[int, int], float] = {}
        for s in STEP.finditer(text):
            per_step[(int(s.group(1)), int(s.group(2)))] = float(s.group(3))
        for (replica, _), w in per_step.items():
            waited[replica] = waited.get(replica, 0.0) + w
    wall = float(m.group(6))
    return {"row": row, "wire": int(m.group(5)), "wall": wall, "loss": float(m.group(7)),
            "waited": max(waited.values(), default=0.0) / wall, "elapsed": elapsed,
            "load": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default="build")
    ap.add_argument("--python", default="/usr/bin/python3", help="a Python with torch (Debian's python3-torch)")
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--rate", default="100mbit")
    ap.add_argument("--rtt-ms", type=float, default=50.0)
    ap.add_argument("--rows", default="sync,diloco:none,diloco:int8,diloco:topk:0.05,streaming:int8,noloco,churn")
    ap.add_argument("--outer-steps", type=int, default=32)
    ap.add_argument("--inner-steps", type=int, default=32, help="H; the int8 byte ratio to sync is about 3.94 H")
    ap.add_argument("--fragments", type=int, default=2)
    ap.add_argument("--tau", type=int, default=14)
    ap.add_argument("--churn", default="10:20", metavar="K:J")
    ap.add_argument("--model", default="--dim 32 --layers 1 --heads 2 --batch 8 --seq 16",
                    help="train.py's model and batch arguments, the same for every row")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--log", default=None, metavar="DIR", help="write every row's rank outputs to DIR")
    a = ap.parse_args()
    relay = os.path.join(a.build, "tools", "cfx_delay_relay")
    common = ["--outer-steps", str(a.outer_steps), "--inner-steps", str(a.inner_steps), *a.model.split()]
    spec = netbed.switch(a.hosts, rate=a.rate, delay_ms=a.rtt_ms / 2)
    spec.tcp_buf_max = 32 << 20
    results: list[dict] = []
    try:
        with netbed.Bed(spec, relay) as bed:
            for row in a.rows.split(","):
                r = run_row(bed, row, a, common)
                results.append(r)
                print(f"# {row}: wire {r['wire']} wall {r['wall']:.1f} s waited {r['waited']:.3f} loss {r['loss']:.4f}"
                      f" (load {r['load']:.0f})", file=sys.stderr, flush=True)
    except (netbed.Skip, netbed.BedError) as e:
        return netbed.exit_code(e, "diloco_bench")
    base = next((r for r in results if r["row"] == "sync"), None)
    nochurn = next((r for r in results if r["row"] == "diloco:int8"), None)
    print(f"| row | wire bytes per replica | sync / this | wall (s) | inner loop waited | final loss | loss against "
          f"{'sync' if base else '-'} | load average |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        ratio = f"{base['wire'] / r['wire']:.1f}x" if base and r["wire"] else ""
        ref = nochurn if r["row"] == "churn" and nochurn else base
        against = f"{(r['loss'] / ref['loss'] - 1) * 100:+.1f} %" if ref else ""
        if r["row"] == "churn" and nochurn:
            against += " (against diloco:int8)"
        print(f"| {r['row']} | {r['wire']:,} | {ratio} | {r['wall']:.1f} | {r['waited'] * 100:.1f} % | "
              f"{r['loss']:.4f} | {against} | {r['load']:.0f} |", flush=True)
    print(f"\n{a.hosts} hosts x 1 replica, {a.rate}, {a.rtt_ms:g} ms RTT; train.py {' '.join(common)}; "
          f"streaming --fragments {a.fragments} --tau {a.tau}; churn --churn {a.churn}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
