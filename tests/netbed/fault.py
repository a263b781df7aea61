#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Network faults on the bed: one host is stopped, killed or cut off while every rank runs all-reduces.

Each trial starts one rank per host (cfx_fault_rank: back-to-back checked all-reduces of 1 MiB), waits until every
rank has finished three, and then does one thing to the last host's rank:
  stop  SIGSTOP: the process hangs with its sockets open (the kernel keeps ACKing; only heartbeats can tell)
  kill  SIGKILL: the kernel closes its sockets
  cut   its host's link goes down (`ip link set ... down` in its namespace): nothing arrives, nothing is refused
Every survivor must then end its all-reduce with an error that names that rank (the harness checks the text), and
the figure of a trial is the time from the fault to the slowest survivor's error, on the clock the namespaces
share (CLOCK_MONOTONIC). A survivor still running --bound seconds after the fault is a stall.

  python3 tests/netbed/fault.py --build build-rel [--hosts 3] [--rate 1gbit] [--rtt-ms 50] [--faults stop,kill,cut]
                                [--trials 5] [--bound 60] [--env CFX_HEARTBEAT_MS=250 ...]

Prints a Markdown table (median and worst per fault) and exits 0 when every trial ended with named errors on every
survivor within --bound: timings are reported, never asserted (the issue's targets are for the reader to compare:
4 s on a LAN, 11 s with 50 ms of delay). Needs root and the bed's tools; exits 77 with the reason otherwise.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbed  # noqa: E402

_ERROR_RE = re.compile(r"^error (\d+) (.*)$", re.M)


def _read(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


def trial(bed: netbed.Bed, rank_binary: str, fault: str, port: int, bound: float, env: dict[str, str]) -> dict:
    """One trial; returns {"ms": slowest survivor's detection in ms or None, "problem": text or None}."""
    n = bed.spec.hosts
    victim = n - 1
    procs = []
    env = {"CFX_SECRET": netbed.job_secret(), **env}
    with tempfile.TemporaryDirectory(prefix="cfxnbf") as tmp:
        logs = [os.path.join(tmp, f"rank{r}.log") for r in range(n)]
        try:
            for r in range(n):
                e = {"RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                     "MASTER_ADDR": bed.primary_addr(0), "MASTER_PORT": str(port), **env}
                with open(logs[r], "w") as out:
                    procs.append(subprocess.Popen(bed.exec_argv(r, [rank_binary, "--seconds", str(bound + 60)], e),
                                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
            deadline = time.monotonic() + 60
            while not all("ready" in _read(p) for p in logs):
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    return {"ms": None, "problem": "ranks did not start: " +
                            " | ".join(_read(p).strip()[-300:] for p in logs)}
                time.sleep(0.02)
            t0 = time.monotonic_ns()
            if fault == "stop":
                os.killpg(procs[victim].pid, signal.SIGSTOP)
            elif fault == "kill":
                os.killpg(procs[victim].pid, signal.SIGKILL)
            else:
                netbed._sh("ip", "-n", bed.hosts[victim], "link", "set", bed.primary_dev(victim), "down")
            survivors = range(victim)
            end = time.monotonic() + bound
            while any(procs[r].poll() is None for r in survivors) and time.monotonic() < end:
                time.sleep(0.02)
            worst = 0.0
            for r in survivors:
                text = _read(logs[r])
                m = _ERROR_RE.search(text)
                if procs[r].poll() is None:
                    return {"ms": None, "problem": f"rank {r} still running {bound:g} s after the fault (a stall)"}
                if m is None:
                    return {"ms": None, "problem": f"rank {r} exited {procs[r].returncode} without an error line: "
                                                   f"{text.strip()[-300:]}"}
                if f"rank {victim}" not in m.group(2):
                    return {"ms": None, "problem": f"rank {r}'s error does not name rank {victim}: {m.group(2)}"}
                worst = max(worst, (int(m.group(1)) - t0) / 1e6)
            return {"ms": worst, "problem": None}
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            if fault == "cut":
                netbed._sh("ip", "-n", bed.hosts[victim], "link", "set", bed.primary_dev(victim), "up")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--build", default="build-rel", help="build folder holding cfx_fault_rank and cfx_delay_relay")
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--rate", default=None, help="tc rate of the switch, e.g. 1gbit (default: unshaped)")
    ap.add_argument("--rtt-ms", type=float, default=0.0, help="round-trip delay between hosts (through the relay)")
    ap.add_argument("--faults", default="stop,kill,cut")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--bound", type=float, default=60.0, help="seconds after the fault that count as a stall")
    ap.add_argument("--env", nargs="*", default=[], help="KEY=VALUE for every rank")
    ap.add_argument("--rank-binary", default=None, help="cfx_fault_rank (default: in --build)")
    ap.add_argument("--relay", default=None, help="cfx_delay_relay (default: in --build)")
    a = ap.parse_args()
    rank_binary = os.path.abspath(a.rank_binary or os.path.join(a.build, "tests", "fault", "cfx_fault_rank"))
    relay = os.path.abspath(a.relay or os.path.join(a.build, "tools", "cfx_delay_relay"))
    env = dict(kv.split("=", 1) for kv in a.env)
    spec = netbed.switch(a.hosts, a.rate, a.rtt_ms / 2)
    link = f"{a.rate or 'unshaped'}{f', RTT {a.rtt_ms:g} ms' if a.rtt_ms else ''}"
    rows, problems = [], []
    try:
        with netbed.Bed(spec, relay if a.rtt_ms else None) as bed:
            results = {f: [] for f in a.faults.split(",")}
            port = 29600
            for t in range(a.trials):  # interleaved: trial t of every fault, then trial t + 1
                for fault in results:
                    port += 1
                    r = trial(bed, rank_binary, fault, port, a.bound, env)
                    results[fault].append(r)
                    shown = f"{r['ms']:.0f} ms" if r["ms"] is not None else r["problem"]
                    print(f"{fault} trial {t + 1}: {shown}", flush=True)
                    if r["problem"]:
                        problems.append(f"{fault} trial {t + 1}: {r['problem']}")
            for fault, rs in results.items():
                ms = [r["ms"] for r in rs if r["ms"] is not None]
                rows.append((fault, len(ms), len(rs), statistics.median(ms) if ms else None, max(ms) if ms else None))
    except (netbed.Skip, netbed.BedError) as e:
        return netbed.exit_code(e, "fault", failed_rc=2)
    print(f"\n{a.hosts} hosts x 1 rank, link {link}, victim rank {a.hosts - 1}, env {' '.join(a.env) or 'defaults'}\n")
    print("| fault | named errors on every survivor | median to the slowest survivor's error | worst |")
    print("|---|---|---|---|")
    for fault, ok, total, med, worst in rows:
        fmt = (lambda v: f"{v:.0f} ms" if v is not None else "-")
        print(f"| {fault} | {ok}/{total} | {fmt(med)} | {fmt(worst)} |")
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
