#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Conflux beside Open MPI and Gloo: one collective, the same sizes, float32 sum, the same rank count.

Runs every library variant's whole size sweep in turn (A B C ... A B C ...) for --reps repetitions, takes per size
the median over repetitions of each run's mean op time (nccl-tests' out-of-place `time`), and writes into --out:

  summary.md      machine, commands, the comparison table and the per-variant table
  samples.csv     one row per (repetition, variant, size): the raw numbers every table is computed from
  samples.json    the same samples plus metadata (machine, versions, command lines, failed runs)
  busbw.png       busbw vs size (log-x), one line per variant
  time.png        time vs size (log-log), one line per variant

Variants: conflux (build/perf/<coll>_perf under cfxrun), mpi-vader, mpi-ucx, mpi-tcp (mpi_bench.cc under mpirun),
gloo-<algorithm> (gloo_bench.cc, TCP on 127.0.0.1). "Open MPI" is the better of vader and UCX per size; TCP is
shown but not counted. "Gloo" is its best algorithm per size. A variant whose check found wrong elements at a
size is shown as "wrong" there and never counted. See perf/compare/README.md.

Namespace mode (--netns HOSTS, root only): the race runs across HOSTS network namespaces of the test bed
(tests/netbed/netbed.py) joined by one link (--link-rate, --link-rtt-ms, --link-p2p), --np / HOSTS ranks per
host, so every library crosses the same shaped links: conflux (one process per rank inside its namespace,
torchrun-style variables), mpi-tcp (mpirun inside the first host's namespace, its daemons started on every host
by netns_agent.sh as the rsh launch agent; counted as Open MPI here, since shared memory and UCX do not cross
hosts) and gloo-<algorithm> (each rank in its namespace, GLOO_SOCKET_IFNAME set to the host's device). The bed
is built once for the whole race and removed at the end, also on failure.
"""

import contextlib

import argparse
import dataclasses
import csv
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

COLLS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "exscan")
GLOO_ALGOS = {
    "all_reduce": ("ring", "ring_chunked", "halving_doubling", "bcube"),
    "all_gather": ("ring", "default"),
    "reduce_scatter": ("halving_doubling",),
    "broadcast": ("one_to_all", "default"),
    "alltoall": ("default",),
    "exscan": (),  # Gloo has no scan
}
# Our perf binary and its extra flags per collective: the exclusive sum scan is scan_perf --exclusive 1, as MPI_Exscan.
PERF_OF = {"exscan": ("scan", ["--exclusive", "1"])}


def perf_cmd(a, coll):
    """The Conflux perf binary for `coll` and the flags that make it run that collective."""
    name, extra = PERF_OF.get(coll, (coll, []))
    return os.path.join(a.build, "perf", f"{name}_perf"), extra
# Gloo's UnboundBuffer collectives ("default": gloo::allgather, gloo::broadcast, gloo::alltoall) take 0.1-0.35 s per
# op from 1 MiB on in Debian's Gloo (2022 snapshot; 0.005-0.05 GB/s) and cannot finish a sweep to 256 MiB within
# any sane timeout, so they run up to this size only.
GLOO_DEFAULT_MAX_BYTES = 256 << 10


def gloo_sizes(algo, sizes):
    return [s for s in sizes if s <= GLOO_DEFAULT_MAX_BYTES] if algo == "default" else sizes


MPI_TRANSPORTS = {  # label -> mpirun MCA flags
    "vader": ["--mca", "pml", "ob1", "--mca", "btl", "vader,self"],
    "ucx": ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any", "--mca", "pml_ucx_devices", "any"],
    "tcp": ["--mca", "btl", "tcp,self", "--mca", "pml", "ob1", "--mca", "btl_tcp_if_include", "lo"],
}
FAMILY_OF = {"conflux": "Conflux", "mpi-vader": "Open MPI", "mpi-ucx": "Open MPI", "mpi-tcp": "Open MPI TCP"}


def family(variant):
    return FAMILY_OF.get(variant, "Gloo")


def bus_factor(coll, n):
    return 2.0 * (n - 1) / n if coll == "all_reduce" else 1.0 if coll == "broadcast" else (n - 1) / n


def parse_size(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)B?", text.strip(), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()])


def size_list(lo, hi, factor):
    """The sizes nccl-tests visits for -b lo -e hi -f factor."""
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= factor
    return sizes


def human(nbytes):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{unit}"
    return str(nbytes)


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# ---------------------------------------------------------------------------------------------------------- build

def build_benches(bench_dir):
    """Compiles mpi_bench and gloo_bench into bench_dir when missing or older than their sources."""
    os.makedirs(bench_dir, exist_ok=True)
    common = os.path.join(HERE, "bench_common.h")
    jobs = {
        "mpi_bench": ["mpicxx", "-O2", "-std=c++17", "-DOMPI_SKIP_MPICXX", os.path.join(HERE, "mpi_bench.cc")],
        "gloo_bench": ["g++", "-O2", "-std=c++17", os.path.join(HERE, "gloo_bench.cc"), "-lgloo", "-lpthread"],
    }
    paths = {}
    for name, cmd in jobs.items():
        out = os.path.join(bench_dir, name)
        src = cmd[-1] if name == "mpi_bench" else cmd[-3]
        newest = max(os.path.getmtime(src), os.path.getmtime(common), os.path.getmtime(__file__))
        if not os.path.exists(out) or os.path.getmtime(out) < newest:
            print(f"compare: building {out}", flush=True)
            r = subprocess.run(cmd + ["-o", out], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"compare: building {name} failed ({' '.join(cmd)}):\n{r.stderr}\n"
                         "Install the peers with `make compare-deps`.")
        paths[name] = out
    return paths


# ----------------------------------------------------------------------------------------------------------- runs

def run_group(cmds, envs, timeout):
    """Starts one process per command (each in its own session); returns (rc, rank-0 stdout, stderr)."""
    procs, errs = [], []
    for i, (cmd, env) in enumerate(zip(cmds, envs)):
        err = tempfile.TemporaryFile(mode="w+")
        errs.append(err)
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE if i == 0 else subprocess.DEVNULL,
                                      stderr=err, text=True, start_new_session=True))
    rc = 0
    try:
        out, _ = procs[0].communicate(timeout=timeout)
        for p in procs:
            rc = rc or p.wait(timeout=timeout)
        rc = rc or procs[0].returncode
    except subprocess.TimeoutExpired:
        rc, out = 124, ""
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()
    stderr = ""
    for e in errs:
        e.seek(0)
        stderr += e.read()
        e.close()
    return rc, out or "", stderr


def repo_relative(text):
    """Paths inside this checkout written relative to it, so committed results name no machine's folders."""
    return text.replace(REPO + os.sep, "")


class Variant:
    def __init__(self, name, cmds, envs, parse, command_text):
        self.name, self.cmds, self.envs, self.parse, self.command_text = name, cmds, envs, parse, command_text


def parse_bench(out, sizes):
    """CFXCMP lines of mpi_bench/gloo_bench -> {nominal: (bytes, time_us, wrong)}."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("CFXCMP "):
            f = dict(kv.split("=", 1) for kv in line.split()[1:])
            rows[int(f["nominal"])] = (int(f["bytes"]), float(f["time_us"]), int(f["wrong"]))
    return rows


def parse_nccl_tests(out, sizes):
    """Rows of an nccl-tests table, out-of-place columns, matched to the nominal sizes in order."""
    rows = [l.split() for l in out.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    rows = [r for r in rows if len(r) >= 9 and r[0].isdigit()]
    result = {}
    for nominal, r in zip(sizes, rows):
        wrong = int(float(r[8])) if r[8] != "N/A" else 0
        result[nominal] = (int(r[0]), float(r[5]), wrong)
    return result


def netns_bed(a):
    """The namespace test bed for --netns (a context manager); see tests/netbed/netbed.py."""
    sys.path.insert(0, os.path.join(REPO, "tests", "netbed"))
    import netbed
    if a.np % a.netns:
        sys.exit(f"compare: --np {a.np} is not a multiple of --netns {a.netns}")
    if a.link_p2p and a.netns != 2:
        sys.exit("compare: --link-p2p joins exactly 2 hosts")
    spec = (netbed.pair(a.link_rate, a.link_rtt_ms) if a.link_p2p
            else netbed.switch(a.netns, a.link_rate, a.link_rtt_ms / 2))
    # Several NICs per host: the same link again, each on a network of its own.
    spec.links = [dataclasses.replace(link) for _ in range(a.link_count) for link in spec.links]
    if a.link_rtt_ms:
        spec.tcp_buf_max = 32 << 20  # a long fat link needs large TCP windows; see netbed.Spec
    relay = a.relay or os.path.join(a.build, "tools", "cfx_delay_relay")
    return netbed.Bed(spec, relay)


def all_devs(bed, h):
    """Host h's devices in link order: its NICs when --link-count gives it several (every host has the same names,
    one per link, so Open MPI's btl_tcp_if_include names them once for all hosts)."""
    return [bed.dev[h][k] for k in sorted(bed.dev[h])]


def make_netns_variants(a, sizes, benches, bed, work):
    """Variants whose ranks run on the bed's hosts: rank r on host r // (np / hosts), like the hostfile's slots."""
    per_host = a.np // a.netns
    host_of = [r // per_host for r in range(a.np)]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "NCCL_", "GLOO_"))}
    bench_args = ["--coll", a.coll, "--sizes", ",".join(str(s) for s in sizes), "--iters", str(a.iters),
                  "--warmup", str(a.warmup), "--check", "1"]
    in_ns = [["ip", "netns", "exec", bed.hosts[h]] for h in host_of]
    rank_env = [dict(base, RANK=str(r), WORLD_SIZE=str(a.np), LOCAL_RANK=str(r % per_host),
                     LOCAL_WORLD_SIZE=str(per_host)) for r in range(a.np)]
    where = f"r = 0..{a.np - 1} on host r / {per_host}"
    variants = []

    perf, extra = perf_cmd(a, a.coll)
    cmd = [perf, "-b", str(sizes[0]), "-e", str(sizes[-1]), "-f", str(a.factor), "-n", str(a.iters), "-w",
           str(a.warmup), "-c", "1", "-d", "float", "-o", "sum"] + extra
    # With several links every rank's NICs are rails (the bootstrap still takes the first match, the primary).
    rails = {} if a.link_count == 1 else {"CFX_SOCKET_RAILS": str(a.link_count)}
    secret = os.urandom(32).hex()  # across hosts Conflux refuses to run without one (cfxrun's job, on one host)
    envs = [dict(e, MASTER_ADDR=bed.primary_addr(0), MASTER_PORT="29500", NCCL_HOSTID=bed.hosts[h], CFX_PERF_ROTATE="0",
                 CFX_SECRET=secret,
                 NCCL_SOCKET_IFNAME=bed.primary_dev(h) if a.link_count == 1 else ",".join(all_devs(bed, h)), **rails)
            for e, h in zip(rank_env, host_of)]
    text = (f"ip netns exec <host> env RANK=r WORLD_SIZE={a.np} MASTER_ADDR={bed.primary_addr(0)} MASTER_PORT=<port> "
            f"NCCL_SOCKET_IFNAME=<dev{'s' if rails else ''}> NCCL_HOSTID=<host> CFX_SECRET=<random> CFX_PERF_ROTATE=0 "
            + "".join(f"{k}={v} " for k, v in rails.items()) + " ".join(cmd) + f"  ({where})")
    variants.append(Variant("conflux", [ns + cmd for ns in in_ns], envs, parse_nccl_tests, text))

    # --bind-to none: every orted believes it has the machine's cores to itself and would bind its first rank to
    # core 0, so ranks of different "hosts" would share one core and each op would wait for a time slice.
    hostfile = os.path.join(work, "hostfile")
    with open(hostfile, "w") as f:
        f.writelines(f"{ns} slots={per_host}\n" for ns in bed.hosts)
    dev = bed.primary_dev(0)
    mpi_env = dict(base, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = (["ip", "netns", "exec", bed.hosts[0], "mpirun", "-np", str(a.np), "--hostfile", hostfile,
            "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
            "--mca", "plm_rsh_agent", os.path.join(HERE, "netns_agent.sh"),
            "--mca", "oob_tcp_if_include", dev, "--mca", "btl", "tcp,self", "--mca", "pml", "ob1",
            "--mca", "btl_tcp_if_include", ",".join(all_devs(bed, 0)), benches["mpi_bench"]] + bench_args
           + ["--algo", "tcp"])
    if a.np > (os.cpu_count() or 1):
        # Each orted sees only its own host's ranks, so none notices that all of them share this machine's cores
        # and Open MPI would busy-poll as on an idle node; on one node it yields once oversubscribed. Say so.
        cmd[cmd.index("--bind-to"):cmd.index("--bind-to")] = ["--mca", "mpi_yield_when_idle", "1"]
    variants.append(Variant("mpi-tcp", [cmd], [mpi_env], parse_bench, " ".join(cmd)))
    if per_host > 1:
        # Open MPI at its best on this layout: TCP between hosts, shared memory (vader) between a host's ranks,
        # which it tells apart by the host names netns_agent.sh gives each namespace.
        hybrid = list(cmd)
        hybrid[hybrid.index("tcp,self")] = "tcp,vader,self"
        variants.append(Variant("mpi-tcp-vader", [hybrid], [mpi_env], parse_bench, " ".join(hybrid)))

    for algo in GLOO_ALGOS[a.coll]:
        gloo_args = list(bench_args)
        gloo_args[gloo_args.index("--sizes") + 1] = ",".join(str(x) for x in gloo_sizes(algo, sizes))
        cmd = [benches["gloo_bench"]] + gloo_args + ["--algo", algo]
        envs = [dict(e, GLOO_SOCKET_IFNAME=bed.primary_dev(h)) for e, h in zip(rank_env, host_of)]
        text = (f"ip netns exec <host> env RANK=r WORLD_SIZE={a.np} GLOO_STORE=<tmpdir> GLOO_SOCKET_IFNAME=<dev> "
                + " ".join(cmd) + f"  ({where})")
        variants.append(Variant(f"gloo-{algo}", [ns + cmd for ns in in_ns], envs, parse_bench, text))

    if a.only:
        keep = set(a.only.split(","))
        variants = [v for v in variants if v.name in keep or family(v.name) in keep]
    return variants


def make_variants(a, sizes, benches):
    env = dict(os.environ)
    env.setdefault("NCCL_SOCKET_IFNAME", "lo")
    mpi_env = dict(env, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_oob_tcp_if_include="lo")
    size_arg = ",".join(str(s) for s in sizes)
    bench_args = ["--coll", a.coll, "--sizes", size_arg, "--iters", str(a.iters), "--warmup", str(a.warmup),
                  "--check", "1"]
    lo, hi = sizes[0], sizes[-1]
    variants = []

    cfxrun = os.path.join(a.build, "perf", "cfxrun")
    perf, extra = perf_cmd(a, a.coll)
    cmd = [cfxrun, "-n", str(a.np), "--timeout", str(a.timeout), perf, "-b", str(lo), "-e", str(hi),
           "-f", str(a.factor), "-n", str(a.iters), "-w", str(a.warmup), "-c", "1", "-d", "float", "-o", "sum"] + extra
    # The peers' benchmarks reuse one buffer per size; nccl-tests (and our perf tools) would walk through the
    # largest size's buffers and time every smaller op on memory out of the caches.
    variants.append(Variant("conflux", [cmd], [dict(env, CFX_PERF_ROTATE="0")], parse_nccl_tests,
                            "CFX_PERF_ROTATE=0 " + " ".join(cmd)))

    mpirun = ["mpirun", "-np", str(a.np), "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    for label, mca in MPI_TRANSPORTS.items():
        cmd = mpirun + mca + [benches["mpi_bench"]] + bench_args + ["--algo", label]
        variants.append(Variant(f"mpi-{label}", [cmd], [mpi_env], parse_bench, " ".join(cmd)))

    for algo in GLOO_ALGOS[a.coll]:
        gloo_args = list(bench_args)
        gloo_args[gloo_args.index("--sizes") + 1] = ",".join(str(x) for x in gloo_sizes(algo, sizes))
        cmd = [benches["gloo_bench"]] + gloo_args + ["--algo", algo]
        # A fresh FileStore directory per run is filled in by run_variant (GLOO_STORE).
        envs = [dict(env, RANK=str(r), WORLD_SIZE=str(a.np)) for r in range(a.np)]
        text = f"RANK=r WORLD_SIZE={a.np} GLOO_STORE=<tmpdir> " + " ".join(cmd) + f"  (r = 0..{a.np - 1})"
        variants.append(Variant(f"gloo-{algo}", [cmd] * a.np, envs, parse_bench, text))

    if a.only:
        keep = set(a.only.split(","))
        variants = [v for v in variants if v.name in keep or family(v.name) in keep]
    return variants


_next_port = [29500]


def run_variant(v, sizes, timeout, store_root):
    envs = v.envs
    store = None
    if any("MASTER_PORT" in e for e in envs):
        # A fresh rendezvous port per run: the last run's root socket may still be in TIME_WAIT.
        _next_port[0] = 29500 + (_next_port[0] - 29500 + 1) % 1000
        envs = [dict(e, MASTER_PORT=str(_next_port[0])) for e in envs]
    if v.name.startswith("gloo-"):
        store = tempfile.mkdtemp(prefix="gloo_store_", dir=store_root)
        envs = [dict(e, GLOO_STORE=store) for e in envs]
    rc, out, err = run_group(v.cmds, envs, timeout)
    if store:
        shutil.rmtree(store, ignore_errors=True)
    return rc, out, err, v.parse(out, sizes)


# ----------------------------------------------------------------------------------------------------- statistics

def summarize(samples, variants, sizes, coll, n):
    """-> {variant: {nominal: dict(bytes, time_us, busbw, reps, wrong)}} from the medians over repetitions."""
    table = {}
    for v in variants:
        table[v] = {}
        for s in sizes:
            mine = [x for x in samples if x["variant"] == v and x["nominal"] == s]
            if not mine:
                continue
            wrong = max(x["wrong"] for x in mine)
            t = statistics.median(x["time_us"] for x in mine)
            nbytes = mine[0]["bytes"]
            busbw = nbytes / 1e9 / (t * 1e-6) * bus_factor(coll, n) if t > 0 else 0.0
            table[v][s] = dict(bytes=nbytes, time_us=t, busbw=busbw, reps=len(mine), wrong=wrong,
                               spread=(min(x["time_us"] for x in mine), max(x["time_us"] for x in mine)))
    return table


def best_of(table, variants, s):
    """(variant, entry) with the lowest median time at size s among variants with correct results, or None."""
    ok = [(v, table[v][s]) for v in variants if s in table.get(v, {}) and table[v][s]["wrong"] == 0]
    return min(ok, key=lambda ve: ve[1]["time_us"]) if ok else None


def fmt_t(us):
    return f"{us:.2f}" if us < 100 else f"{us:.1f}" if us < 10000 else f"{us:.0f}"


# ---------------------------------------------------------------------------------------------------------- output

def machine_info():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(l.split()[1] for l in f if l.startswith("MemTotal")))
            mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return {
        "host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "memory": mem,
        "kernel": platform.release(), "os": sh(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
        "open_mpi": sh(["mpirun", "--version"]).splitlines()[0] if sh(["mpirun", "--version"]) else "",
        "ucx": sh(["dpkg-query", "-W", "-f", "${Version}", "libucx0"]),
        "gloo": sh(["dpkg-query", "-W", "-f", "${Version}", "libgloo-dev"]),
        "conflux_commit": sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"]),
        # perf/results is left out: a sweep of several races rewrites it as it goes, which says nothing of the build.
        "conflux_dirty": bool(sh(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no", "--", ".",
                                  ":(exclude)perf/results"])),
    }


def write_markdown(path, a, sizes, table, variants, meta):
    n, coll = a.np, a.coll
    mpi = [v for v in variants if family(v) == "Open MPI"]
    gloo = [v for v in variants if family(v) == "Gloo"]
    L = []
    L.append(f"# {coll}: Conflux vs Open MPI vs Gloo, {n} ranks, float32 sum, host memory\n")
    if meta.get("netns"):
        L.append(f"- Hosts: {meta['netns']}\n")
    m = meta["machine"]
    L.append(f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory']}, {m['os']}, Linux {m['kernel']} "
             f"(shared, so timings are noisy)")
    L.append(f"- Libraries: Conflux {m['conflux_commit']}{' (uncommitted changes)' if m['conflux_dirty'] else ''}, "
             f"{m['open_mpi']} (UCX {m['ucx']}), Gloo {m['gloo']}")
    L.append(f"- Method: {a.reps} repetitions, variants interleaved per repetition; per run {a.warmup} warm-up and "
             f"{a.iters} timed ops per size; time = mean op time of a run (nccl-tests' out-of-place `time`, averaged "
             f"over ranks), median over repetitions. busbw = bytes / time x {bus_factor(coll, n):.3g} (GB = 1e9).")
    peers_mpi = ("the better of mpi-tcp and mpi-tcp-vader (TCP crosses hosts; vader, with several ranks per host, "
                 "joins a host's ranks)" if meta.get("netns")
                 else "better of vader and UCX per size")
    L.append(f"- Open MPI = {peers_mpi}; Gloo = best of {', '.join(g[5:] for g in gloo)}; "
             f"best peer = better of the two. Ratio > 1 means Conflux is faster.")
    L.append(f"- Started {meta['started']}, took {meta['elapsed_s']:.0f} s; load average before/after: "
             f"{meta['load_before']} / {meta['load_after']}")
    L.append(f"- Reproduce: `{meta['reproduce']}`\n")

    L.append("| size | Conflux µs | Open MPI µs | Gloo µs | Conflux busbw | Open MPI busbw | Gloo busbw "
             "| busbw ratio Conflux/best peer |")
    L.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in sizes:
        c = table.get("conflux", {}).get(s)
        bm, bg = best_of(table, mpi, s), best_of(table, gloo, s)
        peers = [x for x in (bm, bg) if x]
        bp = min(peers, key=lambda ve: ve[1]["time_us"]) if peers else None

        def cell_t(ve):
            return f"{fmt_t(ve[1]['time_us'])} ({ve[0].split('-', 1)[1]})" if ve else "—"

        def cell_b(ve):
            return f"{ve[1]['busbw']:.2f}" if ve else "—"

        if c is None:
            ct, cb = "—", "—"
        elif c["wrong"]:
            ct, cb = f"wrong ({c['wrong']})", "—"
        else:
            ct, cb = fmt_t(c["time_us"]), f"{c['busbw']:.2f}"
        ratio = f"**{bp[1]['time_us'] / c['time_us']:.2f}×**" if c and not c["wrong"] and bp else "—"
        L.append(f"| {human(s)} | {ct} | {cell_t(bm)} | {cell_t(bg)} | {cb} | {cell_b(bm)} | {cell_b(bg)} | {ratio} |")

    L.append("\nAll variants, median time in µs (busbw GB/s); min–max over repetitions in the CSV/JSON:\n")
    L.append("| size | " + " | ".join(variants) + " |")
    L.append("|---:|" + "---:|" * len(variants))
    for s in sizes:
        cells = []
        for v in variants:
            e = table.get(v, {}).get(s)
            cells.append("—" if e is None else f"wrong ({e['wrong']})" if e["wrong"]
                         else f"{fmt_t(e['time_us'])} ({e['busbw']:.2f})")
        L.append(f"| {human(s)} | " + " | ".join(cells) + " |")

    if meta["failures"]:
        L.append("\nFailed runs (their missing sizes show as —):\n")
        for f in meta["failures"]:
            L.append(f"- {f['variant']} rep {f['rep']}: exit {f['rc']}: {f['stderr_tail'][-300:]!r}")
    L.append("\nCommands (one repetition):\n")
    for v, text in meta["commands"].items():
        L.append(f"- {v}: `{text}`")
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")
    return "\n".join(L)


STYLE = {"conflux": dict(color="black", lw=2.6, marker="o"),
         "mpi-vader": dict(color="tab:blue", marker="s"), "mpi-ucx": dict(color="tab:cyan", marker="^"),
         "mpi-tcp": dict(color="tab:gray", marker="v", ls=":"),
         "mpi-tcp-vader": dict(color="tab:purple", marker="v", ls=":")}
GLOO_COLORS = ["tab:red", "tab:orange", "tab:green", "tab:purple"]


def write_plots(out, a, sizes, table, variants):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare: matplotlib not found (Debian: python3-matplotlib, run with /usr/bin/python3); "
              "no PNG written", file=sys.stderr)
        return False
    g = 0
    styles = {}
    for v in variants:
        if v in STYLE:
            styles[v] = STYLE[v]
        else:
            styles[v] = dict(color=GLOO_COLORS[g % len(GLOO_COLORS)], marker="x", ls="--")
            g += 1
    for key, ylabel, fname, logy in (("busbw", "bus bandwidth (GB/s, GB = 1e9)", "busbw.png", False),
                                     ("time_us", "time per op (µs)", "time.png", True)):
        fig, ax = plt.subplots(figsize=(10, 6), dpi=110)
        for v in variants:
            pts = [(s, table[v][s][key]) for s in sizes if s in table.get(v, {}) and not table[v][s]["wrong"]]
            if pts:
                label = {"conflux": "Conflux", "mpi-vader": "Open MPI vader", "mpi-ucx": "Open MPI UCX",
                         "mpi-tcp": "Open MPI TCP",
                         "mpi-tcp-vader": "Open MPI TCP+vader"}.get(v, "Gloo " + v[5:].replace("_", "-"))
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **styles[v])
        ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ax.set_xticks(sizes)
        ax.set_xticklabels([human(s) for s in sizes], rotation=45 if len(sizes) > 10 else 0)
        ax.set_xlabel("message size (nccl-tests size column)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{a.coll}, {a.np} ranks, float32 sum, host memory (median of {a.reps} interleaved runs)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left" if key == "busbw" else "lower right", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(out, fname))
        plt.close(fig)
    return True


# ------------------------------------------------------------------------------------------------------------ main

def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--coll", default="all_reduce", choices=COLLS)
    p.add_argument("--np", type=int, default=2, help="ranks (processes)")
    p.add_argument("--sizes", default="1K:64M", help="MIN:MAX[:FACTOR], K/M/G = 2^10/2^20/2^30 (factor 4)")
    p.add_argument("--reps", type=int, default=3, help="interleaved repetitions (>= 3 for a median)")
    p.add_argument("--iters", type=int, default=20, help="timed ops per size and run (nccl-tests -n)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up ops (nccl-tests -w)")
    p.add_argument("--build", default=os.path.join(REPO, "build"), help="Conflux build dir (with perf/cfxrun)")
    p.add_argument("--bench-dir", default=None, help="where mpi_bench/gloo_bench are built (BUILD/compare)")
    p.add_argument("--out", default=None, help="output folder (perf/results/<coll>_np<N>)")
    p.add_argument("--raw-dir", default=None, help="per-run logs (perf/results/raw/<coll>_np<N>)")
    p.add_argument("--only", default="", help="comma list of variants or families to run (e.g. conflux,mpi-vader)")
    p.add_argument("--timeout", type=int, default=600, help="seconds per run")
    p.add_argument("--netns", type=int, default=0, help="namespace mode: this many hosts (tests/netbed), root only")
    p.add_argument("--link-rate", default=None, help="namespace mode: tc rate of the link (e.g. 1gbit)")
    p.add_argument("--link-rtt-ms", type=float, default=0.0, help="namespace mode: RTT through the delay relay")
    p.add_argument("--link-p2p", action="store_true", help="namespace mode, 2 hosts: point-to-point, no bridge")
    p.add_argument("--link-count", type=int, default=1,
                   help="namespace mode: that many such links, each a network of its own (NICs per host); Conflux "
                        "runs with CFX_SOCKET_RAILS set to it, Open MPI's TCP BTL includes every NIC, Gloo the first")
    p.add_argument("--relay", default=None, help="cfx_delay_relay (default BUILD/tools/cfx_delay_relay)")
    a = p.parse_args()

    parts = a.sizes.split(":")
    if len(parts) not in (2, 3):
        p.error("--sizes is MIN:MAX[:FACTOR]")
    lo, hi = parse_size(parts[0]), parse_size(parts[1])
    a.factor = int(parts[2]) if len(parts) == 3 else 4
    sizes = size_list(lo, hi, a.factor)
    if not sizes or a.factor < 2 or a.np < 2:
        p.error("need MIN <= MAX, FACTOR >= 2 and --np >= 2")
    tag = f"{a.coll}_np{a.np}"
    if a.netns:
        if a.netns < 2:
            p.error("--netns needs at least 2 hosts")
        FAMILY_OF["mpi-tcp"] = "Open MPI"  # the only Open MPI transport that crosses hosts here
        FAMILY_OF["mpi-tcp-vader"] = "Open MPI"  # the same, with shared memory within a host
        if a.link_count < 1 or a.link_count > 4:
            p.error("--link-count takes 1 to 4 links (a rank listens on at most 4 rails)")
        tag += f"_netns{a.netns}" + (f"_{a.link_rate}" if a.link_rate else "") + (
            f"_rtt{a.link_rtt_ms:g}ms" if a.link_rtt_ms else "") + (f"_x{a.link_count}" if a.link_count > 1 else "")
    a.build = os.path.abspath(a.build)
    out = os.path.abspath(a.out or os.path.join(REPO, "perf", "results", tag))
    raw = os.path.abspath(a.raw_dir or os.path.join(REPO, "perf", "results", "raw", tag))
    os.makedirs(out, exist_ok=True)
    os.makedirs(raw, exist_ok=True)
    for tool in ("cfxrun", os.path.basename(perf_cmd(a, a.coll)[0])):
        if not os.access(os.path.join(a.build, "perf", tool), os.X_OK):
            sys.exit(f"compare: {a.build}/perf/{tool} not found; build it with "
                     f"`cmake --build {a.build} --target cfx_perf` (or run `make compare`)")
    benches = build_benches(a.bench_dir or os.path.join(a.build, "compare"))

    store_root = tempfile.mkdtemp(prefix="cfx_compare_")
    stack = contextlib.ExitStack()
    netns_text = ""
    if a.netns:
        try:
            bed = stack.enter_context(netns_bed(a))
        except Exception as e:  # netbed.Skip or BedError: say why and stop
            shutil.rmtree(store_root, ignore_errors=True)
            sys.exit(f"compare: cannot build the namespace bed: {e}")
        variants = make_netns_variants(a, sizes, benches, bed, store_root)
        links = "point-to-point link" if a.link_p2p else "switch"
        netns_text = (f"{a.netns} network namespaces ({a.np // a.netns} ranks each) on "
                      + (f"{a.link_count} {links}es" if links == "switch" and a.link_count > 1
                         else f"{a.link_count} {links}s" if a.link_count > 1 else f"one {links}")
                      + (" (one NIC each per host)" if a.link_count > 1 else "") + ", "
                      f"{a.link_rate or 'unshaped'}{f', RTT {a.link_rtt_ms:g} ms' if a.link_rtt_ms else ''} "
                      f"(tests/netbed); Open MPI = mpi-tcp, or mpi-tcp-vader where faster")
    else:
        variants = make_variants(a, sizes, benches)
    names = [v.name for v in variants]
    started = datetime.datetime.now().astimezone()
    load_before = f"{os.getloadavg()[0]:.2f}"
    samples, runs, failures = [], [], []
    print(f"compare: {a.coll}, {a.np} ranks, sizes {human(lo)}..{human(hi)} x{a.factor} ({len(sizes)}), "
          f"{a.reps} reps of: {' '.join(names)}", flush=True)
    try:
        for rep in range(a.reps):
            for v in variants:
                t0 = datetime.datetime.now()
                rc, stdout, stderr, rows = run_variant(v, sizes, a.timeout, store_root)
                secs = (datetime.datetime.now() - t0).total_seconds()
                with open(os.path.join(raw, f"{v.name}_rep{rep}.log"), "w") as f:
                    f.write(f"$ {v.command_text}\n# exit {rc}, {secs:.1f} s\n{stdout}\n# stderr\n{stderr}")
                runs.append(dict(variant=v.name, rep=rep, rc=rc, seconds=round(secs, 2)))
                if rc != 0 or len(rows) < len(sizes):
                    failures.append(dict(variant=v.name, rep=rep, rc=rc, sizes_done=len(rows),
                                         stderr_tail=stderr.strip()[-2000:]))
                for s in sizes:
                    if s in rows:
                        nbytes, t, wrong = rows[s]
                        samples.append(dict(rep=rep, variant=v.name, family=family(v.name), coll=a.coll,
                                            ranks=a.np, nominal=s, bytes=nbytes, time_us=t,
                                            busbw=nbytes / 1e9 / (t * 1e-6) * bus_factor(a.coll, a.np) if t else 0,
                                            wrong=wrong))
                print(f"  rep {rep} {v.name:<22} exit {rc:<3} {len(rows)}/{len(sizes)} sizes  {secs:6.1f} s",
                      flush=True)
    finally:
        stack.close()
        shutil.rmtree(store_root, ignore_errors=True)

    elapsed = (datetime.datetime.now().astimezone() - started).total_seconds()
    table = summarize(samples, names, sizes, a.coll, a.np)
    reproduce = (f"make compare COLL={a.coll} NP={a.np} SIZES={human(lo)}:{human(hi)}"
                 + (f":{a.factor}" if a.factor != 4 else "") + (f" REPS={a.reps}" if a.reps != 3 else ""))
    if a.netns:
        reproduce = (f"python3 perf/compare/compare.py --coll {a.coll} --np {a.np} --sizes {a.sizes} --reps {a.reps} "
                     f"--netns {a.netns}" + (f" --link-rate {a.link_rate}" if a.link_rate else "")
                     + (f" --link-rtt-ms {a.link_rtt_ms:g}" if a.link_rtt_ms else "")
                     + (" --link-p2p" if a.link_p2p else "")
                     + (f" --link-count {a.link_count}" if a.link_count > 1 else ""))
    meta = dict(collective=a.coll, ranks=a.np, datatype="float32", op="sum", sizes=sizes, reps=a.reps,
                iters=a.iters, warmup=a.warmup, started=started.isoformat(timespec="seconds"), elapsed_s=elapsed,
                load_before=load_before, load_after=f"{os.getloadavg()[0]:.2f}", machine=machine_info(),
                commands={v.name: repo_relative(v.command_text) for v in variants}, runs=runs, failures=failures,
                reproduce=reproduce, netns=netns_text, time_definition="mean op time of one run (nccl-tests out-of-place time, "
                "averaged over ranks); medians over repetitions")

    with open(os.path.join(out, "samples.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["rep", "variant", "family", "coll", "ranks", "nominal", "bytes",
                                          "time_us", "busbw", "wrong"])
        w.writeheader()
        w.writerows(samples)
    summary = {v: {str(s): e for s, e in d.items()} for v, d in table.items()}
    with open(os.path.join(out, "samples.json"), "w") as f:
        json.dump(dict(meta=meta, samples=samples, medians=summary), f, indent=1)
    md = write_markdown(os.path.join(out, "summary.md"), a, sizes, table, names, meta)
    plotted = write_plots(out, a, sizes, table, names)
    print()
    print(md)
    print(f"compare: wrote {out}/summary.md samples.csv samples.json" + (" busbw.png time.png" if plotted else ""))
    bad = [x for x in samples if x["variant"] == "conflux" and x["wrong"]]
    conflux_missing = any(f["variant"] == "conflux" for f in failures)
    return 1 if bad or conflux_missing else 0


if __name__ == "__main__":
    sys.exit(main())
