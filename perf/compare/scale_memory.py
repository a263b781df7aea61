#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Shared memory against ranks on one host: Conflux (one or more builds) beside Open MPI, in one run (issue 40).

For each rank count it starts a job of all-to-alls (every pair of ranks talks, so every pair's memory is in use),
samples every process of the job while it runs and reports the largest values seen:
  shm MiB   distinct shared file mappings (MAP_SHARED files such as /dev/shm segments, deleted or not), each
            counted once however many processes map it: what the job asks of /dev/shm
  Pss MiB   the sum of the processes' proportional set sizes: the job's memory in all, shared pages split
Conflux runs `<build>/perf/alltoall_perf` under `<build>/perf/cfxrun`; Open MPI runs perf/compare/mpi_bench.cc (built
with mpicxx into <first build>/compare/) under `mpirun --oversubscribe --mca pml ob1 --mca btl vader,self`.

usage: /usr/bin/python3 perf/compare/scale_memory.py [--ranks 8,16,32,64] [--build build [--build other]]
           [--bytes 65536] [--iters 500] [--timeout 600]
A benchmark, not a test: run one at a time on a quiet machine (it starts up to max(ranks) processes).
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def job_pids(root):
    """root and all its descendants, from /proc/<pid>/task/*/children."""
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        seen.append(pid)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return seen


def sample(pids):
    """(shared-file-mapping bytes, counted once per file; sum of Pss bytes) over pids."""
    files = {}
    pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    parts = line.split(None, 5)
                    if len(parts) < 6 or parts[1][3] != "s" or parts[4] == "0":
                        continue
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    key = (parts[3], parts[4])  # device, inode
                    files[key] = max(files.get(key, 0), hi - lo)
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1]) * 1024
        except OSError:
            pass  # the process ended between listing and reading
    return sum(files.values()), pss


def measure(cmd, env, timeout):
    """Runs cmd, sampling its process tree every 20 ms; returns (rc, max shm bytes, max Pss bytes, seconds)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    best_shm = best_pss = 0
    while proc.poll() is None and time.monotonic() - start < timeout:
        shm, pss = sample(job_pids(proc.pid))
        best_shm, best_pss = max(best_shm, shm), max(best_pss, pss)
        time.sleep(0.02)
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
    out = proc.communicate()[0]
    if proc.returncode != 0:
        print(f"scale_memory: {' '.join(cmd[:4])}... exited {proc.returncode}:\n{out[-2000:]}", file=sys.stderr)
    return proc.returncode, best_shm, best_pss, time.monotonic() - start


def job_envs(cfx_extra=()):
    """The environments of a Conflux job and of an Open MPI job on loopback, without the caller's OMPI_, NCCL_ and
    CFX_ settings; `cfx_extra` adds (NAME, VALUE) pairs to the Conflux one."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "NCCL_", "CFX_"))}
    cfx_env = dict(base, NCCL_SOCKET_IFNAME="lo", **dict(cfx_extra))
    mpi_env = dict(base, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_oob_tcp_if_include="lo")
    return cfx_env, mpi_env


def build_label(build_dir):
    """A build dir's last two path components, to tell builds apart in a table."""
    return "/".join(os.path.normpath(os.path.abspath(build_dir)).split(os.sep)[-2:])


def build_mpi_bench(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "mpi_bench")
    src = os.path.join(HERE, "mpi_bench.cc")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        subprocess.run(["mpicxx", "-O2", "-std=c++17", "-DOMPI_SKIP_MPICXX", src, "-o", out], check=True)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", default="8,16,32,64")
    p.add_argument("--build", action="append", help="Conflux build dir(s); default build")
    p.add_argument("--bytes", type=int, default=65536, help="all-to-all bytes per rank")
    p.add_argument("--iters", type=int, default=500)
    p.add_argument("--timeout", type=int, default=600)
    a = p.parse_args()
    builds = a.build or [os.path.join(REPO, "build")]
    mpi_bench = build_mpi_bench(os.path.join(builds[0], "compare"))
    cfx_env, mpi_env = job_envs()
    print("| ranks | variant | shm MiB | Pss MiB | seconds | rc |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in (int(x) for x in a.ranks.split(",")):
        runs = []
        for b in builds:
            perf = os.path.join(b, "perf")
            label = build_label(b)
            runs.append((f"conflux {label}", cfx_env,
                         [os.path.join(perf, "cfxrun"), "-n", str(n), "--timeout", str(a.timeout),
                          os.path.join(perf, "alltoall_perf"), "-b", str(a.bytes), "-e", str(a.bytes),
                          "-n", str(a.iters), "-w", "5", "-c", "1"]))
        runs.append(("open-mpi vader", mpi_env,
                     ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n), "--mca", "pml", "ob1",
                      "--mca", "btl", "vader,self", mpi_bench, "--coll", "alltoall", "--sizes", str(a.bytes),
                      "--iters", str(a.iters), "--warmup", "5", "--check", "1"]))
        for label, env, cmd in runs:
            rc, shm, pss, secs = measure(cmd, env, a.timeout)
            print(f"| {n} | {label} | {shm / 2**20:,.0f} | {pss / 2**20:,.0f} | {secs:.1f} | {rc} |", flush=True)


if __name__ == "__main__":
    main()
