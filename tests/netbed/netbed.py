#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Multi-host test bed: network namespaces as hosts, joined by shaped links, with ranks run on them.

A bed is declared as data (`Spec`: a number of hosts and a list of `Link`s) and built by `Bed`, a context
manager that removes everything it made on exit, whether the body succeeded, raised, or was interrupted:

    spec = Spec(hosts=2, links=[Link(hosts=[0, 1], rate="1gbit", delay_ms=25)])   # 1 Gbit/s, 50 ms RTT
    with Bed(spec, relay=path_to_cfx_delay_relay) as bed:
        bed.run_ranks(ranks_per_host=1, argv=["build/perf/all_reduce_perf", "-c", "1"])

Shapes (helpers below build the common ones; issue 4's topologies are one line each):
    switch(n, rate, delay_ms)   every host on one link: a bridge, or the relay hub when there is delay
    pair(rate, rtt_ms)          two hosts, one point-to-point link
    ring(n, rate, delay_ms)     n hosts, one point-to-point link per neighbouring pair, routed hop by hop

How a link is built:
  * no delay, 2+ hosts, kind "switch": a bridge in its own namespace, one veth pair per member;
  * no delay, kind "p2p": one veth pair straight between the two hosts' namespaces;
  * delay: cfx_delay_relay owns one TUN per member (created inside the member's namespace) and forwards IP
    packets between them through a delay queue, routing by destination address. `delay_ms` is the one-way
    delay between any two members, so RTT = 2 x delay_ms.
  * rate: tbf on the egress of every device that carries the link (both veth ends, so both directions are
    shaped; on a relay link the host's TUN egress, which shapes each host's sending side).

tbf sizing (see tbf_params): burst = max(1 ms at the rate, 2 x MTU): big enough that tbf's timer granularity
does not cap the rate, small enough that a burst is ~1 ms of line time. limit (the queue) = rate x max(5 ms,
RTT/2), and at least 4 x 64 KiB: tbf enqueues a GSO frame (up to 64 KiB) whole, so a smaller queue drops whole
bursts (at 100 Mbit/s a 62.5 kB queue cost BBR 8 000-23 000 retransmits in 5 s, 256 KiB 0-26). CUBIC
backs off to 0.7 of its window on a loss, so a queue of about 0.43 BDP keeps the link busy through the
back-off (a queue of a few packets would starve a single flow on a long link), while no more than half an RTT
of queueing delay is added (5 ms on a local link at 1 Gbit/s; 21 ms at 100 Mbit/s, where the floor applies). (This machine's default congestion
control is BBR, which keeps its own queue short; the sizes are chosen for loss-based CUBIC, the harder case.)

Names: every namespace is `cfxnb<pid>-<role>`, so parallel runs never collide and `sweep()` can remove what a
crashed run left (only names with our prefix whose pid is gone). Each host runs with NCCL_HOSTID set to its
namespace name: namespaces share the kernel's hostname and boot id, from which Conflux would otherwise conclude
that every rank is on one host and use shared memory between "hosts".

Command line (see README.md): `netbed.py check`, `netbed.py sweep`, `netbed.py run --hosts 3 --ranks-per-host 2
[--rate 1gbit] [--rtt-ms 50] [--ring] -- BINARY ARGS...`, `netbed.py perf ...` (the ctest entry point).
"""
from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque

PREFIX = "cfxnb"
GSO_MAX = 65536  # largest frame a veth or an offloading TUN hands its qdisc
SKIP_RC = 77  # ctest's SKIP_RETURN_CODE for this label
_NAME_RE = re.compile(rf"^{PREFIX}(\d+)-")


class Skip(Exception):
    """The bed cannot be built on this machine (not root, no `ip netns`, no TUN, no tbf); the message says why."""


class BedError(Exception):
    """Building or running the bed failed."""


def exit_code(error: Skip | BedError, script: str, failed_rc: int = 1) -> int:
    """What a script that runs on the bed exits with when `error` ended its runs, once it has said why: SKIP_RC for
    a bed this machine cannot build (ctest's skip), failed_rc for a failure, named after `script`."""
    if isinstance(error, Skip):
        print(f"SKIP: {error}")
        return SKIP_RC
    print(f"{script}: {error}", file=sys.stderr)
    return failed_rc


@dataclasses.dataclass
class Link:
    hosts: list[int]
    kind: str = "switch"  # "switch" (any number of members) or "p2p" (exactly two)
    rate: str | None = None  # tc rate ("1gbit", "100mbit"); None = unshaped
    delay_ms: float = 0.0  # one-way delay between any two members
    mtu: int = 1500


@dataclasses.dataclass
class Spec:
    hosts: int
    links: list[Link]
    # Largest TCP buffer autotuning may grow to on every host (net.ipv4.tcp_{r,w}mem max, which are per
    # namespace); None keeps the kernel's. A long fat link needs about 2 x bandwidth x RTT, as a WAN host
    # would be tuned. (net.core.{r,w}mem_max, the cap on an explicit SO_SNDBUF, is not per namespace.)
    tcp_buf_max: int | None = None
    # Further per-namespace sysctls ("key=value") set on every host, for experiments such as
    # net.ipv4.tcp_slow_start_after_idle=0.
    sysctls: list[str] = dataclasses.field(default_factory=list)

    def validate(self) -> None:
        if self.hosts < 1:
            raise BedError("a bed needs at least one host")
        if not self.links and self.hosts > 1:
            raise BedError("hosts are not connected: give at least one link")
        for n, link in enumerate(self.links):
            if link.kind not in ("switch", "p2p"):
                raise BedError(f"link {n}: kind must be 'switch' or 'p2p', not {link.kind!r}")
            if len(set(link.hosts)) != len(link.hosts) or len(link.hosts) < 2:
                raise BedError(f"link {n}: needs two or more distinct hosts, got {link.hosts}")
            if link.kind == "p2p" and len(link.hosts) != 2:
                raise BedError(f"link {n}: a p2p link joins exactly two hosts, got {link.hosts}")
            if any(h < 0 or h >= self.hosts for h in link.hosts):
                raise BedError(f"link {n}: host index out of range 0..{self.hosts - 1}: {link.hosts}")
            if link.delay_ms < 0 or link.mtu < 576:
                raise BedError(f"link {n}: delay must be >= 0 and MTU >= 576")
            if link.rate is not None:
                parse_rate(link.rate)
        if len(self.links) > 200:
            raise BedError("at most 200 links (one /24 subnet each)")
        if _components(self) != 1:
            raise BedError("the links do not connect every host")

    def topology_xml(self, ranks_per_host: int) -> str:
        """The bed as Conflux's NCCL_TOPO_FILE: one host per namespace with one NIC per link it is on (speed = the
        link's tc rate, 10 Gbit/s when unshaped), point-to-point links declared as such (so the planner sees a
        ring of cables, not a switch), delays as link latency, and ranks placed as run_ranks places them."""
        unshaped_bps = 10_000_000_000
        nics: list[list[str]] = [[] for _ in range(self.hosts)]
        lines = []
        net_latency_us = None
        for k, link in enumerate(self.links):
            bps = parse_rate(link.rate) if link.rate else unshaped_bps
            ends = []
            for h in link.hosts:
                ends.append(f"h{h}:nic{len(nics[h])}")
                nics[h].append(f'<nic name="link{k}" speed="{bps // 1_000_000}"/>')
            if link.kind == "p2p":
                lines.append(f'  <link a="{ends[0]}" b="{ends[1]}" class="net" bw="{bps / 8e9:.6g}" '
                             f'lat="{link.delay_ms * 1000 + 20:.6g}"/>')
            elif link.delay_ms:
                # A switch's NIC links take the class latency (half on each side): one per bed, the largest.
                net_latency_us = max(net_latency_us or 0, link.delay_ms * 1000 + 20)
        xml = ['<?xml version="1.0"?>', "<!-- written by tests/netbed/netbed.py for one bed -->", '<system version="1">']
        if net_latency_us is not None:
            xml.append(f'  <linkclass name="net" lat="{net_latency_us:.6g}"/>')
        for h in range(self.hosts):
            xml.append(f'  <host id="{h}" name="h{h}"><numa id="0"/>{"".join(nics[h])}</host>')
        xml += lines
        for h in range(self.hosts):
            for l in range(ranks_per_host):
                xml.append(f'  <rank id="{h * ranks_per_host + l}" host="{h}"/>')
        xml.append("</system>")
        return "\n".join(xml) + "\n"


def switch(n: int, rate: str | None = None, delay_ms: float = 0.0) -> Spec:
    return Spec(n, [Link(list(range(n)), "switch", rate, delay_ms)] if n > 1 else [])


def pair(rate: str | None = None, rtt_ms: float = 0.0) -> Spec:
    return Spec(2, [Link([0, 1], "p2p", rate, rtt_ms / 2)])


def ring(n: int, rate: str | None = None, delay_ms: float = 0.0) -> Spec:
    if n < 3:
        raise BedError("a ring needs at least 3 hosts")
    return Spec(n, [Link([i, (i + 1) % n], "p2p", rate, delay_ms) for i in range(n)])


def parse_rate(text: str) -> int:
    """tc rate text to bits per second ("1gbit" -> 1e9); rejects what tc would read differently."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)", text.strip().lower())
    if not m:
        raise BedError(f"rate {text!r}: want a number and bit, kbit, mbit or gbit (e.g. 100mbit)")
    return int(float(m.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[m.group(2)])


def tbf_params(rate_bps: int, rtt_ms: float, mtu: int) -> tuple[int, int]:
    """(burst, limit) in bytes for tbf; the reasoning is in the module docstring."""
    bytes_per_s = rate_bps / 8
    burst = max(int(bytes_per_s * 0.001), 2 * mtu)
    limit = max(int(bytes_per_s * max(0.005, rtt_ms / 2000)), 4 * GSO_MAX, 2 * burst)
    return burst, limit


def _components(spec: Spec) -> int:
    parent = list(range(spec.hosts))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for link in spec.links:
        for h in link.hosts[1:]:
            parent[find(h)] = find(link.hosts[0])
    return len({find(h) for h in range(spec.hosts)})


def _sh(*args: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess:
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise BedError(f"`{' '.join(args)}` failed ({p.returncode}): {p.stderr.strip()}")
    if not quiet and os.environ.get("CFX_NETBED_VERBOSE", "0") != "0":
        print("+", " ".join(args), file=sys.stderr)
    return p


def _netns_list() -> list[str]:
    p = _sh("ip", "netns", "list", check=False, quiet=True)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_netns_pids(ns: str) -> None:
    p = _sh("ip", "netns", "pids", ns, check=False, quiet=True)
    for pid in p.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def sweep(verbose: bool = True) -> list[str]:
    """Removes namespaces with our prefix whose creating process is gone (crashed runs); returns their names."""
    removed = []
    for ns in _netns_list():
        m = _NAME_RE.match(ns)
        if not m or _pid_alive(int(m.group(1))):
            continue
        _kill_netns_pids(ns)
        if _sh("ip", "netns", "del", ns, check=False).returncode == 0:
            removed.append(ns)
    if removed and verbose:
        print(f"netbed: swept {len(removed)} stale namespace(s): {' '.join(removed)}", file=sys.stderr)
    return removed


def preflight(spec: Spec, relay: str | None) -> None:
    """Raises Skip with the reason when this machine cannot build `spec`."""
    if os.geteuid() != 0:
        raise Skip("needs root (network namespaces, veth, tc)")
    if not shutil.which("ip") or not shutil.which("tc"):
        raise Skip("needs `ip` and `tc` (Debian package iproute2)")
    probe = f"{PREFIX}{os.getpid()}-probe"
    p = _sh("ip", "netns", "add", probe, check=False)
    if p.returncode != 0:
        raise Skip(f"`ip netns add` does not work here: {p.stderr.strip()}")
    try:
        if any(l.rate for l in spec.links):
            v = _sh("ip", "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1", check=False)
            if v.returncode != 0:
                raise Skip(f"veth devices unavailable: {v.stderr.strip()}")
            t = _sh("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "p0", "root", "tbf", "rate", "1mbit",
                    "burst", "10kb", "limit", "100kb", check=False)
            if t.returncode != 0:
                raise Skip(f"tbf qdisc unavailable (sch_tbf): {t.stderr.strip()}")
        if len(spec.links) and any(l.kind == "switch" and not l.delay_ms for l in spec.links):
            b = _sh("ip", "-n", probe, "link", "add", "b0", "type", "bridge", check=False)
            if b.returncode != 0:
                raise Skip(f"bridge devices unavailable: {b.stderr.strip()}")
    finally:
        _sh("ip", "netns", "del", probe, check=False)
    if any(l.delay_ms for l in spec.links):
        try:
            os.close(os.open("/dev/net/tun", os.O_RDWR))
        except OSError as e:
            raise Skip(f"/dev/net/tun unusable ({e.strerror}); the delay relay needs it") from None
        if not relay or not os.access(relay, os.X_OK):
            raise Skip(f"delay relay binary not found ({relay}); build target cfx_delay_relay")


class Bed:
    """Builds `spec` on enter and tears it down on exit (also on SIGTERM/SIGINT, which become exceptions)."""

    def __init__(self, spec: Spec, relay: str | None = None, tag: str = ""):
        """`tag` (lower-case letters) tells apart several beds of one process; the pid in every name is what the
        sweeper reads, so it must not be followed by more digits."""
        spec.validate()
        if not re.fullmatch(r"[a-z]*", tag):
            raise BedError(f"bed tag {tag!r}: lower-case letters only")
        self.spec = spec
        self.relay = relay
        self.base = f"{PREFIX}{os.getpid()}{tag}"
        self.hosts = [f"{self.base}-h{i}" for i in range(spec.hosts)]
        self.namespaces: list[str] = []
        self.relays: list[subprocess.Popen] = []
        # addr[h][k]: host h's address on link k; dev[h][k]: its device name there.
        self.addr: list[dict[int, str]] = [{} for _ in range(spec.hosts)]
        self.dev: list[dict[int, str]] = [{} for _ in range(spec.hosts)]
        self._old_handlers = {}

    # --- lifecycle -------------------------------------------------------------------------------------------
    def __enter__(self) -> "Bed":
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)
        try:
            sweep()
            preflight(self.spec, self.relay)
            self._build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    @staticmethod
    def _on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    def teardown(self) -> None:
        # A second Ctrl-C or SIGTERM must not cut the cleanup short; the handlers are restored at the end.
        for sig in self._old_handlers:
            signal.signal(sig, signal.SIG_IGN)
        for r in self.relays:
            if r.poll() is None:
                r.terminate()
        for r in self.relays:
            try:
                r.wait(timeout=5)
            except subprocess.TimeoutExpired:
                r.kill()
                r.wait()
        self.relays.clear()
        for ns in reversed(self.namespaces):
            _kill_netns_pids(ns)
            _sh("ip", "netns", "del", ns, check=False)
        self.namespaces.clear()
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers.clear()

    # --- building ----------------------------------------------------------------------------------------------
    def _add_ns(self, name: str) -> None:
        _sh("ip", "netns", "add", name)
        self.namespaces.append(name)
        _sh("ip", "-n", name, "link", "set", "lo", "up")
        # IPv6 stays off: the relay routes IPv4 only, and router solicitations would only add noise to counters.
        for key in ("net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                    "net.ipv4.ip_forward=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"):
            _sh("ip", "netns", "exec", name, "sysctl", "-qw", key, check=False)

    def _build(self) -> None:
        for ns in self.hosts:
            self._add_ns(ns)
            if self.spec.tcp_buf_max:
                for key, low in (("net.ipv4.tcp_rmem", "4096 131072"), ("net.ipv4.tcp_wmem", "4096 16384")):
                    _sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"{key}={low} {self.spec.tcp_buf_max}")
            for setting in self.spec.sysctls:
                _sh("ip", "netns", "exec", ns, "sysctl", "-qw", setting)
        for k, link in enumerate(self.spec.links):
            net = ipaddress.ip_network(f"10.{100 + k // 256}.{k % 256}.0/24")
            for h in link.hosts:
                self.dev[h][k] = f"eth{len(self.dev[h])}"
                self.addr[h][k] = str(net.network_address + h + 1)
            if link.delay_ms:
                self._build_relay_link(k, link, net)
            elif link.kind == "p2p":
                self._build_p2p_link(k, link, net)
            else:
                self._build_bridge_link(k, link, net)
        self._add_routes()

    def _shape(self, ns: str, dev: str, link: Link) -> None:
        if not link.rate:
            return
        burst, limit = tbf_params(parse_rate(link.rate), 2 * link.delay_ms, link.mtu)
        _sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", link.rate,
            "burst", str(burst), "limit", str(limit))

    def _up(self, ns: str, dev: str, addr: str | None, net, link: Link) -> None:
        _sh("ip", "-n", ns, "link", "set", dev, "mtu", str(link.mtu), "up")
        if addr:
            _sh("ip", "-n", ns, "addr", "add", f"{addr}/{net.prefixlen}", "dev", dev)
        self._shape(ns, dev, link)

    def _build_p2p_link(self, k: int, link: Link, net) -> None:
        a, b = link.hosts
        # Both ends are created straight inside their namespaces, so the names only need to be unique there.
        _sh("ip", "link", "add", self.dev[a][k], "netns", self.hosts[a], "type", "veth", "peer", "name",
            self.dev[b][k], "netns", self.hosts[b])
        for h in (a, b):
            self._up(self.hosts[h], self.dev[h][k], self.addr[h][k], net, link)

    def _build_bridge_link(self, k: int, link: Link, net) -> None:
        sw = f"{self.base}-s{k}"
        self._add_ns(sw)
        _sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
        _sh("ip", "-n", sw, "link", "set", "br0", "up")
        for h in link.hosts:
            port = f"p{h}"
            _sh("ip", "-n", sw, "link", "add", port, "type", "veth", "peer", "name", self.dev[h][k], "netns",
                self.hosts[h])
            _sh("ip", "-n", sw, "link", "set", port, "master", "br0")
            self._up(sw, port, None, net, link)
            self._up(self.hosts[h], self.dev[h][k], self.addr[h][k], net, link)

    def _build_relay_link(self, k: int, link: Link, net) -> None:
        delay_us = int(round(link.delay_ms * 1000))
        args = [self.relay, "--mtu", str(link.mtu), "--ready-fd", "1"]
        for h in link.hosts:
            args += ["--port", f"{self.hosts[h]}:{self.dev[h][k]}:0:{delay_us}:{self.addr[h][k]}/32"]
        r = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=None, text=True)
        self.relays.append(r)
        ready = r.stdout.readline()
        if ready.strip() != "ready":
            raise BedError(f"delay relay for link {k} did not start (exit {r.wait()}); command: {' '.join(args)}")
        for h in link.hosts:
            self._up(self.hosts[h], self.dev[h][k], self.addr[h][k], net, link)

    def _add_routes(self) -> None:
        """Hosts that share no link reach each other hop by hop along a shortest path (ring shapes)."""
        n = self.spec.hosts
        nbrs = {h: [] for h in range(n)}  # h -> [(neighbour, link)]
        for k, link in enumerate(self.spec.links):
            for a in link.hosts:
                nbrs[a] += [(b, k) for b in link.hosts if b != a]
        for src in range(n):
            first_hop = {src: None}
            q = deque([src])
            while q:
                u = q.popleft()
                for v, k in sorted(nbrs[u]):
                    if v not in first_hop:
                        first_hop[v] = first_hop[u] or (v, k)
                        q.append(v)
            on_src = set(self.addr[src])
            for dst in range(n):
                if dst == src:
                    continue
                via, k = first_hop[dst]
                # Every address of dst on a link src is not on, including a direct neighbour's far side.
                for dk, addr in self.addr[dst].items():
                    if dk not in on_src:
                        _sh("ip", "-n", self.hosts[src], "route", "add", f"{addr}/32", "via", self.addr[via][k],
                            "dev", self.dev[src][k], "src", self.primary_addr(src))

    # --- using -------------------------------------------------------------------------------------------------
    def primary_addr(self, h: int) -> str:
        return self.addr[h][min(self.addr[h])]

    def primary_dev(self, h: int) -> str:
        return self.dev[h][min(self.dev[h])]

    def exec_argv(self, h: int, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
        """argv that runs `argv` on host h with `env` added (and the host's identity set)."""
        full = {"NCCL_HOSTID": self.hosts[h], "NCCL_SOCKET_IFNAME": self.primary_dev(h)}
        full.update(env or {})
        return ["ip", "netns", "exec", self.hosts[h], "env", *[f"{k}={v}" for k, v in full.items()], *argv]

    @staticmethod
    def _wait_ranks(procs, timeout: float, grace: float = 5.0, may_die: frozenset = frozenset()) -> dict:
        """Waits for every rank until `timeout`; once one fails (other than those in may_die), the others get `grace`
        seconds to report their own view (a peer's death, with its name) and are then killed. rank -> exit code,
        None (timed out) or "killed"."""
        deadline = time.monotonic() + timeout
        rcs: dict = {}
        try:
            while len(rcs) < len(procs) and time.monotonic() < deadline:
                for rank, p, _ in procs:
                    if rank not in rcs and p.poll() is not None:
                        rcs[rank] = p.returncode
                        if p.returncode != 0 and rank not in may_die:
                            deadline = min(deadline, time.monotonic() + grace)
                time.sleep(0.05)
        finally:
            for rank, p, _ in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                    rcs.setdefault(rank, None if not any(v for r, v in rcs.items() if r not in may_die)
                                   else "killed")
                rcs.setdefault(rank, p.returncode)
        return rcs

    def run_ranks(self, ranks_per_host: int, argv: list[str], env: dict[str, str] | None = None,
                  timeout: float = 120, port: int = 29500, quiet: bool = False,
                  outputs: dict[int, str] | None = None, topology: bool = True,
                  may_die: frozenset = frozenset()) -> int:
        """Runs argv as ranks_per_host ranks on every host (torchrun-style variables and a fresh CFX_SECRET);
        returns 0 when every rank exited 0. Rank 0's output is printed unless quiet; a failed rank's output is
        always printed with its rank. `outputs`, when given, receives every rank's output. With `topology`, ranks
        get NCCL_TOPO_FILE describing the bed (Spec.topology_xml), so Conflux plans for the links it really has; `env`
        can override. Ranks in `may_die` (a churn run kills one on purpose) may exit with any status."""
        world = self.spec.hosts * ranks_per_host
        procs = []
        with tempfile.TemporaryDirectory(prefix="cfxnb") as tmp:
            # One secret per job, as cfxrun gives its ranks: across hosts Conflux refuses to run without one.
            base_env: dict[str, object] = {"CFX_SECRET": job_secret()}
            if topology:
                topo_path = os.path.join(tmp, "topology.xml")
                with open(topo_path, "w") as f:
                    f.write(self.spec.topology_xml(ranks_per_host))
                base_env["NCCL_TOPO_FILE"] = topo_path
            for h in range(self.spec.hosts):
                for l in range(ranks_per_host):
                    rank = h * ranks_per_host + l
                    e = {"RANK": rank, "WORLD_SIZE": world, "LOCAL_RANK": l, "LOCAL_WORLD_SIZE": ranks_per_host,
                         "MASTER_ADDR": self.primary_addr(0), "MASTER_PORT": port, **base_env}
                    e.update(env or {})
                    out = open(os.path.join(tmp, f"rank{rank}.log"), "w+")
                    p = subprocess.Popen(self.exec_argv(h, argv, {k: str(v) for k, v in e.items()}), stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
                    procs.append((rank, p, out))
            rcs = self._wait_ranks(procs, timeout, may_die=may_die)
            # Ranks that failed on their own first: a rank killed because a peer died only echoes the cause.
            failed = sorted((r for r, _, _ in procs if rcs[r] != 0 and r not in may_die),
                            key=lambda r: (rcs[r] == "killed", r))
            for rank, _, out in procs:
                out.seek(0)
                text = out.read()
                if outputs is not None:
                    outputs[rank] = text
                if rank == 0 and not quiet or rank in failed[:2]:
                    status = rcs[rank]
                    why = {None: "timed out", "killed": "killed after another rank failed"}.get(status,
                                                                                                f"exit {status}")
                    print(f"--- rank {rank} ({self.hosts[rank // ranks_per_host]})"
                          f"{', ' + why if rank in failed else ''} ---\n{text}",
                          end="" if text.endswith("\n") else "\n")
                out.close()
        return 1 if failed else 0


def rank_communicator():
    """For a script the bed runs as its ranks: this checkout's conflux package, and a communicator made from the
    env:// variables run_ranks() gives each rank."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import conflux
    return conflux, conflux.Communicator.from_env()


def job_secret() -> str:
    """A fresh random CFX_SECRET for one job's ranks (they span hosts, so Conflux needs one)."""
    return os.urandom(32).hex()


def run_check(name: str, spec: Spec, body) -> int:
    """The frame of a check script: builds `spec`, calls body(bed), which returns what went wrong (a list of texts),
    and removes the bed, also on failure. Prints "<name>: ok" and returns 0, or prints each problem and returns 1;
    returns SKIP_RC, saying why, where the bed cannot be built here."""
    try:
        with Bed(spec) as bed:
            problems = body(bed)
    except Skip as e:
        print(f"SKIP: {e}")
        return SKIP_RC
    for p in problems:
        print(f"{name}: {p}", file=sys.stderr)
    print(f"{name}: {'FAILED' if problems else 'ok'}")
    return 1 if problems else 0


def _ours(pid: int) -> list[str]:
    return [ns for ns in _netns_list() if ns.startswith(f"{PREFIX}{pid}-")]


def _spawn_bed_and_wait(relay: str) -> subprocess.Popen:
    """Starts a child bed (relay link) whose ranks sleep, and returns once its namespaces exist."""
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "run", "--hosts", "2", "--rtt-ms", "2",
                              "--relay", relay, "--timeout", "60", "--", "sleep", "60"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # The ranks start after the last link is up, so a sleeping rank means the whole bed exists.
        if any(_sh("ip", "netns", "pids", ns, check=False, quiet=True).stdout.strip() for ns in _ours(child.pid)):
            return child
        time.sleep(0.1)
    child.kill()
    raise BedError("selftest: the child bed did not come up within 30 s")


_LISTEN = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 29400)); s.listen()
print("listening", flush=True)
for _ in range(5):
    s.accept()[0].close()
"""
_CONNECT = """
import socket, sys, time
for _ in range(5):
    t = time.monotonic(); c = socket.create_connection((sys.argv[1], 29400), timeout=30)
    print(f"{(time.monotonic() - t) * 1000:.3f}"); c.close()
"""


def _check_relay_delay(relay: str) -> list[str]:
    """A TCP handshake takes one round trip, so through a 40 ms RTT link it can never complete sooner: a lower
    bound, which a slow machine cannot break. Also checks that the relay forwards at all."""
    problems = []
    with Bed(pair(None, rtt_ms=40), relay) as bed:
        server = subprocess.Popen(bed.exec_argv(1, [sys.executable, "-c", _LISTEN]), stdout=subprocess.PIPE,
                                  text=True)
        try:
            server.stdout.readline()
            c = subprocess.run(bed.exec_argv(0, [sys.executable, "-c", _CONNECT, bed.primary_addr(1)]),
                               capture_output=True, text=True, timeout=60)
            times = [float(t) for t in c.stdout.split()]
            if c.returncode != 0 or len(times) != 5:
                problems.append(f"no TCP connection through the relay: {c.stderr.strip()[-300:]}")
            elif min(times) < 40:
                problems.append(f"TCP handshakes through a 40 ms RTT relay took {times} ms: the delay is missing")
        finally:
            server.kill()
            server.wait()
    return problems


def selftest(relay: str) -> int:
    """Checks that the bed leaves nothing behind: after a failing rank, after SIGTERM, and (with the sweeper)
    after SIGKILL of the process that built it."""
    preflight(switch(2, "1gbit", 1.0), relay)
    problems = []
    with Bed(switch(2), relay) as bed:
        made = list(bed.namespaces)
        if bed.run_ranks(1, ["sh", "-c", 'test "$RANK" = 0'], timeout=30, quiet=True) == 0:
            problems.append("a rank that exited 1 was reported as success")
    if any(ns in _netns_list() for ns in made):
        problems.append(f"namespaces left after a failing rank: {made}")
    problems += _check_relay_delay(relay)
    child = _spawn_bed_and_wait(relay)
    child.send_signal(signal.SIGTERM)
    child.wait(timeout=30)
    if _ours(child.pid):
        problems.append(f"namespaces left after SIGTERM: {_ours(child.pid)}")
    child = _spawn_bed_and_wait(relay)
    made = _ours(child.pid)
    child.kill()
    child.wait()
    # Another bed starting in parallel (ctest -j) may sweep them first, which is the same success.
    sweep(verbose=False)
    if not made or _ours(child.pid):
        problems.append(f"after SIGKILL and a sweep: had {made}, still there {_ours(child.pid)}")
    for p in problems:
        print(f"netbed selftest: {p}", file=sys.stderr)
    print(f"netbed selftest: {'FAILED' if problems else 'ok'}")
    return 1 if problems else 0


def _spec_from_args(a) -> Spec:
    if a.ring:
        return ring(a.hosts, a.rate, a.rtt_ms / 2)
    if a.hosts == 2 and a.p2p:
        return pair(a.rate, a.rtt_ms)
    return switch(a.hosts, a.rate, a.rtt_ms / 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("sweep", help="remove namespaces left by crashed runs (ours only)")
    st = sub.add_parser("selftest", help="check that the bed cleans up after failures, signals and crashes")
    st.add_argument("--relay", required=True, help="path of cfx_delay_relay")
    for name, hlp in (("check", "exit 0 if the bed can be built here, 77 with the reason if not"),
                      ("run", "run one command as ranks on the bed"),
                      ("perf", "run perf binaries with -c 1 on the bed (the ctest entry point)")):
        p = sub.add_parser(name, help=hlp)
        p.add_argument("--hosts", type=int, default=2)
        p.add_argument("--ranks-per-host", type=int, default=1)
        p.add_argument("--rate", default=None, help="tc rate of every link, e.g. 1gbit (default: unshaped)")
        p.add_argument("--rtt-ms", type=float, default=0.0, help="round-trip delay between hosts (relay)")
        p.add_argument("--p2p", action="store_true", help="2 hosts: point-to-point link instead of a switch")
        p.add_argument("--ring", action="store_true", help="point-to-point ring of --hosts hosts")
        p.add_argument("--relay", default=None, help="path of cfx_delay_relay")
        p.add_argument("--timeout", type=float, default=120, help="seconds per command")
        if name == "perf":
            p.add_argument("--perf-dir", required=True, help="folder holding the *_perf binaries")
            p.add_argument("--colls", default="all_reduce,all_gather,reduce_scatter,broadcast,alltoall,sendrecv")
        p.add_argument("argv", nargs=argparse.REMAINDER, help="-- BINARY ARGS... (perf: extra perf flags)")
    a = ap.parse_args()
    if a.cmd == "sweep":
        if os.geteuid() != 0:
            print("netbed: sweep needs root", file=sys.stderr)
            return 1
        sweep()
        return 0
    if a.cmd == "selftest":
        try:
            return selftest(a.relay)
        except Skip as e:
            print(f"SKIP: {e}")
            return SKIP_RC
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    try:
        spec = _spec_from_args(a)
        spec.validate()
        if a.cmd == "check":
            preflight(spec, a.relay)
            print("netbed: this machine can build the bed")
            return 0
        with Bed(spec, a.relay) as bed:
            if a.cmd == "run":
                if not argv:
                    raise BedError("run: give the command after --")
                return bed.run_ranks(a.ranks_per_host, argv, timeout=a.timeout)
            failures = []
            for coll in a.colls.split(","):
                binary = os.path.join(a.perf_dir, f"{coll}_perf")
                print(f"== {coll}: {a.hosts} hosts x {a.ranks_per_host} ranks, link {a.rate or 'unshaped'}"
                      f"{f', RTT {a.rtt_ms:g} ms' if a.rtt_ms else ''}{', ring' if a.ring else ''}", flush=True)
                if bed.run_ranks(a.ranks_per_host, [binary, "-c", "1", *argv], timeout=a.timeout) != 0:
                    failures.append(coll)
            if failures:
                print(f"netbed: FAILED: {', '.join(failures)}", file=sys.stderr)
                return 1
            return 0
    except Skip as e:
        print(f"SKIP: {e}")
        return SKIP_RC
    except BedError as e:
        print(f"netbed: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"netbed: interrupted ({e or 'SIGINT'}); the bed was removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
