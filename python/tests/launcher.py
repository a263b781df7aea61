# SPDX-License-Identifier: Apache-2.0
"""Starts N ranks as processes the way torchrun would (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
each running checks from a module of this folder, and collects what every rank reported.

A rank runs `python3 launcher.py MODULE CHECK...`: it calls MODULE.setup() once (which returns the context, for
example a communicator), then each CHECK(context) in order, and prints one line per check:
    CHECK <name> ok
    CHECK <name> FAIL <one-line reason>
A check that raises stops the rank (its peers would otherwise wait for a collective it never makes); the peers then
fail theirs within the library's deadlines, and the launcher reports every rank's lines and its exit status.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
import random
import secrets
import socket
import subprocess
import sys
import time
import traceback
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.environ.get("CFX_TEST_PYTHON", "/usr/bin/python3")


def _ports_outside_ephemeral_range() -> Optional[tuple[int, int]]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # the kernel's default
    if low - 1 >= 11000:
        return max(10000, low - 20000), low - 1
    if 65535 - high >= 1000:
        return high + 1, 65535
    return None


def free_port() -> int:
    """A loopback port free now, for rank 0 to bind moments later (MASTER_PORT).

    Drawn outside the kernel's ephemeral range: a port that bind(0) handed out and this closed again goes to the
    next bind(0) or connect() anywhere on the machine, and under make test's parallel suites one run in a few hundred
    lost it before rank 0 bound it. Outside the range only an explicit bind takes a port."""
    span = _ports_outside_ephemeral_range()
    for _ in range(200 if span else 0):
        port = random.randint(*span)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))  # no SO_REUSEADDR: a port in TIME_WAIT is refused too
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int, secret: str, extra: Optional[dict] = None) -> dict:
    env = dict(os.environ)
    package_root = os.path.dirname(HERE)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, package_root, env.get("PYTHONPATH", "")) if p)
    env.update({
        "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "CFX_SECRET": secret,
        "NCCL_SOCKET_IFNAME": "lo",
    })
    # Fail fast rather than hang, as the C tests do (tests/CMakeLists.txt); a test may set tighter values.
    env.setdefault("CFX_TIMEOUT_MS", "60000")
    env.setdefault("CFX_BOOTSTRAP_TIMEOUT_MS", "60000")
    env.update(extra or {})
    return env


@dataclasses.dataclass
class RankResult:
    rank: int
    returncode: int
    checks: dict  # name -> "ok" or the failure text
    output: str


def run_ranks(world: int, argv: list[str], timeout: float = 240, extra_env: Optional[dict] = None,
              rank_env_extra: Optional[dict] = None) -> list[tuple[int, str]]:
    """Starts `argv` as `world` ranks; returns each rank's (exit status, output). Never hangs past `timeout`."""
    port, secret = free_port(), secrets.token_hex(16)
    procs = []
    for rank in range(world):
        env = rank_env(rank, world, port, secret, extra_env)
        env.update((rank_env_extra or {}).get(rank, {}))
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + timeout
    results = []
    for rank, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += f"\nlauncher: rank {rank} still running after {timeout} s; killed every rank"
        results.append((p.returncode, out))
    return results


def launch(world: int, module: str, checks: list[str], timeout: float = 240,
           extra_env: Optional[dict] = None, rank_env_extra: Optional[dict] = None) -> list[RankResult]:
    """Runs `checks` of `module` on `world` ranks; returns each rank's results. Never hangs past `timeout`."""
    outputs = run_ranks(world, [PYTHON, os.path.join(HERE, "launcher.py"), module, *checks], timeout, extra_env,
                        rank_env_extra)
    results = []
    for rank, (returncode, out) in enumerate(outputs):
        lines = {}
        for line in out.splitlines():
            if line.startswith("CHECK "):
                _, name, verdict = (line.split(" ", 2) + [""])[:3]
                lines[name] = verdict
        results.append(RankResult(rank, returncode, lines, out))
    return results


def summary(results: list[RankResult]) -> str:
    return "\n".join(f"--- rank {r.rank} (exit {r.returncode}) ---\n{r.output[-4000:]}" for r in results)


def _run_rank(module_name: str, check_names: list[str]) -> int:
    module = importlib.import_module(module_name)
    context = module.setup()
    status = 0
    for name in check_names:
        start = time.monotonic()
        try:
            getattr(module, name)(context)
        except AssertionError as e:
            # A wrong value on this rank only: the peers made the same calls, so the next check stays in step.
            print(f"CHECK {name} FAIL {json.dumps(str(e))[:2000]}", flush=True)
            status = 1
            continue
        except BaseException:
            print(f"CHECK {name} FAIL {json.dumps(traceback.format_exc())[:4000]}", flush=True)
            return 1
        print(f"CHECK {name} ok", flush=True)
        print(f"TIME {name} {time.monotonic() - start:.3f}", flush=True)
    teardown = getattr(module, "teardown", None)
    if teardown is not None:
        teardown(context)
    return status


if __name__ == "__main__":
    sys.exit(_run_rank(sys.argv[1], sys.argv[2:]))
