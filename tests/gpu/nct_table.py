#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The summary table of run_on_gpu.sh's figures: out-of-place time per path at chosen sizes, from nccl-tests logs.

    nct_table.py [--sizes 8,64K,16M,1G] [--ratio-to LABEL] LABEL=LOG [LABEL=LOG ...]

Each LOG is the output of one nccl-tests run (a *_perf binary); its table rows are "size count type redop root
time algbw busbw #wrong time algbw busbw #wrong", the first three figures out of place. The output is a Markdown
table with one row per LABEL and one column per size: the out-of-place time in microseconds, "-" where the run has
no row of that size (it did not reach it, or the size is outside its range), and "FAIL" where that row reported
wrong values. With --ratio-to, a second line per row gives its times over that row's (e.g. ours over NVIDIA's).
Exit status: 0, or 2 on bad arguments (a missing log is a row of "-", not an error: the run may have been skipped).
"""
import argparse
import sys

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    """8, 64K, 16M, 1G (powers of 1024), as nccl-tests' -b and -e take them."""
    text = text.strip().upper().rstrip("B")
    unit = text[-1] if text and text[-1] in UNITS else ""
    number = text[: len(text) - len(unit)]
    if not number.isdigit():
        raise ValueError(f"bad size {text!r}")
    return int(number) * UNITS[unit]


def size_name(n):
    for unit in ("G", "M", "K"):
        if n >= UNITS[unit] and n % UNITS[unit] == 0:
            return f"{n // UNITS[unit]} {unit}iB"
    return f"{n} B"


def wrong_count(field):
    """nccl-tests' #wrong column: a count, or N/A without -c."""
    try:
        return int(float(field))
    except ValueError:
        return None


def rows_of(path):
    """{size: (oop time in us, wrong count or None)} from one nccl-tests log; {} when it cannot be read."""
    rows = {}
    try:
        with open(path, errors="replace") as log:
            for line in log:
                # cfxrun tags every rank's lines "[rank R] " where NCCL_DEBUG is set: rank 0 prints the table.
                if line.startswith("[rank "):
                    tag, _, line = line.partition("] ")
                    if tag != "[rank 0":
                        continue
                fields = line.split()
                # A table row starts with the size and count; nccl-tests' comments and our logs do not.
                if len(fields) < 9 or not fields[0].isdigit() or not fields[1].isdigit():
                    continue
                try:
                    time_us = float(fields[5])
                except ValueError:
                    continue
                rows[int(fields[0])] = (time_us, wrong_count(fields[8]))
    except OSError:
        return {}
    return rows


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,64K,16M,1G")
    parser.add_argument("--ratio-to", help="the label whose times the others are divided by, per size")
    parser.add_argument("runs", nargs="+", metavar="LABEL=LOG")
    args = parser.parse_args(argv)
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    except ValueError as e:
        parser.error(str(e))
    runs = []
    for run in args.runs:
        label, sep, path = run.partition("=")
        if not sep or not label or not path:
            parser.error(f"expected LABEL=LOG, got {run!r}")
        runs.append((label, rows_of(path)))
    if args.ratio_to is not None and args.ratio_to not in {label for label, _ in runs}:
        parser.error(f"--ratio-to {args.ratio_to}: no such label")
    base = dict(runs).get(args.ratio_to, {})
    print("| out-of-place time (us) | " + " | ".join(size_name(s) for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for label, rows in runs:
        cells = []
        for s in sizes:
            if s not in rows:
                cells.append("-")
            elif rows[s][1]:
                cells.append("FAIL")
            else:
                cells.append(f"{rows[s][0]:.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |")
        if args.ratio_to is not None and label != args.ratio_to:
            ratios = []
            for s in sizes:
                ok = s in rows and s in base and not rows[s][1] and not base[s][1] and base[s][0] > 0
                ratios.append(f"{rows[s][0] / base[s][0]:.2f}x" if ok else "-")
            print(f"| {label} / {args.ratio_to} | " + " | ".join(ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
