#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Two Conflux builds side by side in one run: the same *_perf benchmark on each, alternated round by round, so
load that comes and goes on a shared machine falls on both alike. Prints, per rank count and size, the median
out-of-place time of each build over the rounds, the ratio B/A (above 1: B is slower), and in how many rounds B was
the slower one: a sign test, since a difference that is noise leaves B slower in about half the rounds (with 31
rounds, 21 or more, or 10 or fewer, happen by chance about 7 % of the time). Which build runs first alternates
round by round.

usage: /usr/bin/python3 perf/compare/ab_race.py --a BUILD_A --b BUILD_B [--ranks 2,4] [--coll all_reduce]
           [--rounds 5] [-- extra perf flags, default -b 1K -e 4M -f 16 -n 50 -w 10]
"""
import argparse
import os
import statistics
import subprocess
import sys


def run(build, coll, n, flags):
    perf = os.path.join(build, "perf")
    cmd = [os.path.join(perf, "cfxrun"), "-n", str(n), "--timeout", "600", os.path.join(perf, f"{coll}_perf")] + flags
    env = dict(os.environ, NCCL_SOCKET_IFNAME="lo")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"ab_race: {' '.join(cmd)} exited {out.returncode}:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    times = {}
    for line in out.stdout.splitlines():
        cols = line.split()
        if len(cols) >= 9 and not line.startswith("#") and cols[0].isdigit():
            times[int(cols[0])] = float(cols[5])  # out-of-place time (us)
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="build dir A (the baseline)")
    p.add_argument("--b", required=True, help="build dir B")
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--coll", default="all_reduce")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("flags", nargs="*")
    a = p.parse_args()
    flags = a.flags or ["-b", "1K", "-e", "4M", "-f", "16", "-n", "50", "-w", "10", "-c", "0"]
    print(f"A = {a.a}, B = {a.b}, {a.coll}_perf {' '.join(flags)}, {a.rounds} rounds alternated, median us")
    print("| ranks | bytes | A us | B us | B/A | B slower in |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in a.ranks.split(",")):
        samples = {"a": {}, "b": {}}
        for r in range(a.rounds):
            order = (("a", a.a), ("b", a.b)) if r % 2 == 0 else (("b", a.b), ("a", a.a))
            for key, build in order:
                for size, t in run(build, a.coll, n, flags).items():
                    samples[key].setdefault(size, []).append(t)
        for size in sorted(samples["a"]):
            sa, sb = samples["a"][size], samples["b"][size]
            ta, tb = statistics.median(sa), statistics.median(sb)
            slower = sum(1 for x, y in zip(sa, sb) if y > x)
            print(f"| {n} | {size} | {ta:.2f} | {tb:.2f} | {tb / ta:.2f} | {slower}/{len(sa)} |", flush=True)


if __name__ == "__main__":
    main()
