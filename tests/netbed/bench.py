#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Link tables: raw TCP (iperf3 --bidir) beside Conflux's all_reduce busbw on the same namespace link.

For each chosen link between two hosts (one rank each) and each stream count P, one repetition runs
  * iperf3 --bidir -P P for --seconds: per-direction throughput (what the receivers got), and
  * all_reduce_perf at one large size with NCCL_SOCKET_NTHREADS=1 NCCL_NSOCKS_PERTHREAD=P (the socket-striping
    knobs; --socket-env changes them), out-of-place busbw.
Repetitions are interleaved (rep 1: every P's iperf3 and Conflux run, rep 2: ...) so a load change on the
shared machine hits both alike; the table shows medians over --reps.

With two ranks, all_reduce moves S/2 bytes each way in its reduce-scatter and again in its all-gather, both
directions at once, so busbw = algbw = S / time is directly comparable with one direction of iperf3 --bidir:
the ratio busbw / iperf3 per-direction (the mean of the two directions) says how much of what raw TCP gets
out of the link Conflux gets (1.0 = all of it).

Links (--links, comma list): veth (unshaped point-to-point veth), relay (unshaped, through cfx_delay_relay at
0.1 ms RTT: the relay's own ceiling), 1gbit, 100mbit (tbf on both veth ends), 1gbit_rtt50 (tbf on the TUNs and
50 ms RTT through the relay; hosts' TCP buffers may grow to 32 MiB, see netbed.Spec.tcp_buf_max), 1gbit_rtt50_4m
(the same with TCP buffers capped at 4 MiB, where one stream cannot fill the path).

Example (as root, from the repository root, after building cfx_perf and cfx_delay_relay in build-rel):
  python3 tests/netbed/bench.py --build build-rel --links veth,1gbit,100mbit,1gbit_rtt50 --streams 1 --reps 3
Prints the Markdown table (and the raw samples with --json FILE).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netbed  # noqa: E402

MiB = 1 << 20
# name -> (spec, all_reduce size): one op takes 0.1 s (veth) to 1.3 s (100 Mbit/s), long next to connection
# warm-up and TCP slow start, yet a 3-repetition table of every link finishes in minutes on 2 cores.
LINKS = {
    "veth": (lambda: netbed.pair(None), 64 * MiB),
    "relay": (lambda: netbed.pair(None, 0.1), 64 * MiB),
    "1gbit": (lambda: netbed.pair("1gbit"), 64 * MiB),
    "100mbit": (lambda: netbed.pair("100mbit"), 16 * MiB),
    "1gbit_rtt50": (lambda: _tuned(netbed.pair("1gbit", 50)), 16 * MiB),
    # The same path with TCP buffers capped at 4 MiB (Debian's send default; a new namespace copies the host's
    # caps, so the cap is set), where one stream's window cannot cover the 6.25 MB bandwidth-delay product: what
    # striping is for.
    "1gbit_rtt50_4m": (lambda: _tuned(netbed.pair("1gbit", 50), 4 * MiB), 64 * MiB),
}


def _tuned(spec: netbed.Spec, buf_max: int = 32 * MiB) -> netbed.Spec:
    spec.tcp_buf_max = buf_max
    return spec


def iperf(bed: netbed.Bed, streams: int, seconds: float, port: int = 5201) -> dict:
    server = subprocess.Popen(bed.exec_argv(1, ["iperf3", "-s", "-1", "-p", str(port)]), stdout=subprocess.DEVNULL,
                              stderr=subprocess.STDOUT)
    try:
        cmd = ["iperf3", "-c", bed.primary_addr(1), "-p", str(port), "--bidir", "-P", str(streams), "-t",
               str(seconds), "-J"]
        for _ in range(50):  # the server needs a moment to listen; iperf3 says so in its JSON "error"
            c = subprocess.run(bed.exec_argv(0, cmd), capture_output=True, text=True, timeout=seconds + 60)
            try:
                result = json.loads(c.stdout)
            except json.JSONDecodeError:
                result = {"error": c.stdout + c.stderr}
            if c.returncode == 0 and "error" not in result:
                break
            time.sleep(0.1)
        else:
            raise netbed.BedError(f"iperf3 failed ({c.returncode}): {result.get('error')}")
        end = result["end"]
        rtts = [s["sender"].get("mean_rtt", 0) for s in end["streams"] if s["sender"].get("sender")]
        return {"fwd_bps": end["sum_received"]["bits_per_second"],
                "rev_bps": end["sum_received_bidir_reverse"]["bits_per_second"],
                "retransmits": end["sum_sent"].get("retransmits", 0),
                "rtt_ms": statistics.mean(rtts) / 1000 if rtts else None}
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def conflux(bed: netbed.Bed, perf_dir: str, streams: int, size: int, iters: int, socket_env: str,
            timeout: float) -> dict:
    env = dict(kv.split("=", 1) for kv in socket_env.format(P=streams).split())
    outputs: dict[int, str] = {}
    argv = [os.path.join(perf_dir, "all_reduce_perf"), "-b", str(size), "-e", str(size), "-n", str(iters), "-w", "2",
            "-c", "1"]
    rc = bed.run_ranks(1, argv, env=env, timeout=timeout, quiet=True, outputs=outputs)
    if rc != 0:
        raise netbed.BedError(f"all_reduce_perf failed on the bed (see the rank output above)")
    for line in outputs[0].splitlines():
        f = line.split()
        if f and not line.startswith("#") and len(f) >= 9 and f[0] == str(size):
            if f[8] != "0":
                raise netbed.BedError(f"all_reduce_perf found {f[8]} wrong elements")
            # From the time column: the printed busbw has two decimals of GB/s, too coarse at 100 Mbit/s. With two
            # ranks busbw = algbw x 2(n-1)/n = algbw.
            return {"busbw_bps": size * 8 / (float(f[5]) * 1e-6), "time_us": float(f[5])}
    raise netbed.BedError(f"no result row for size {size} in:\n{outputs[0]}")


def fmt(bps: float) -> str:
    return f"{bps / 1e9:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", default="build", help="build folder (perf/ and tools/cfx_delay_relay inside)")
    ap.add_argument("--links", default="veth,1gbit,100mbit,1gbit_rtt50", help=f"from {','.join(LINKS)}")
    ap.add_argument("--streams", default="1", help="comma list of P (TCP streams / Conflux sockets per peer)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10, help="iperf3 duration")
    ap.add_argument("--iters", type=int, default=5, help="timed all_reduce ops per run")
    ap.add_argument("--size", default=None, help="all_reduce bytes for every link (default: per link)")
    ap.add_argument("--socket-env", default="NCCL_SOCKET_NTHREADS=1 NCCL_NSOCKS_PERTHREAD={P}",
                    help="environment that gives Conflux P sockets per peer; {P} is replaced")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per Conflux run")
    ap.add_argument("--json", default=None, help="write every sample here")
    a = ap.parse_args()

    perf_dir = os.path.join(a.build, "perf")
    relay = os.path.join(a.build, "tools", "cfx_delay_relay")
    streams = [int(p) for p in a.streams.split(",")]
    samples = []
    rows = []
    try:
        for name in a.links.split(","):
            if name not in LINKS:
                raise netbed.BedError(f"unknown link {name!r}; choose from {', '.join(LINKS)}")
            make_spec, size = LINKS[name]
            size = int(a.size) if a.size else size
            with netbed.Bed(make_spec(), relay) as bed:
                for rep in range(a.reps):
                    for p in streams:
                        i = iperf(bed, p, a.seconds)
                        c = conflux(bed, perf_dir, p, size, a.iters, a.socket_env, a.timeout)
                        s = {"link": name, "P": p, "rep": rep, "size": size, **i, **c}
                        samples.append(s)
                        print(f"# {name} P={p} rep {rep}: iperf3 {fmt(i['fwd_bps'])} / {fmt(i['rev_bps'])} Gbit/s"
                              f" (retr {i['retransmits']}, rtt {i['rtt_ms']} ms), Conflux busbw "
                              f"{fmt(c['busbw_bps'])} Gbit/s", file=sys.stderr, flush=True)
            for p in streams:
                ss = [s for s in samples if s["link"] == name and s["P"] == p]
                med = {k: statistics.median(s[k] for s in ss) for k in ("fwd_bps", "rev_bps", "busbw_bps")}
                per_dir = (med["fwd_bps"] + med["rev_bps"]) / 2
                rows.append((name, p, size, med, per_dir, len(ss)))
    except (netbed.Skip, netbed.BedError) as e:
        return netbed.exit_code(e, "bench")
    except KeyboardInterrupt as e:
        print(f"bench: interrupted ({e or 'SIGINT'}); the bed was removed", file=sys.stderr)
        return 130
    finally:
        if a.json:
            with open(a.json, "w") as f:
                json.dump(samples, f, indent=1)

    print("| link | P | iperf3 --bidir → (Gbit/s) | iperf3 --bidir ← (Gbit/s) | Conflux all_reduce busbw (Gbit/s) "
          "| size | Conflux / iperf3 per direction |")
    print("|---|---|---|---|---|---|---|")
    for name, p, size, med, per_dir, n in rows:
        print(f"| {name} | {p} | {fmt(med['fwd_bps'])} | {fmt(med['rev_bps'])} | {fmt(med['busbw_bps'])} "
              f"| {size // MiB} MiB | {med['busbw_bps'] / per_dir:.2f} |")
    print(f"\nMedians of {rows[0][5] if rows else 0} interleaved repetitions; iperf3 {a.seconds:g} s per run; "
          f"all_reduce_perf -n {a.iters} -w 2, out-of-place busbw; Conflux sockets: {a.socket_env}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
