#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Low-communication training on Conflux: DiLoCo, Streaming DiLoCo and NoLoCo, on CPU, from Python.

Every replica is one process, started as torchrun starts it (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), training a
small causal transformer on characters of a text generated with a fixed seed (or --text FILE). See README.md.

  diloco     H inner AdamW steps per replica, then the pseudo-gradients (global - local parameters) are averaged
             with one all-reduce (--codec none, int8, or topk:F with error feedback) and an outer Nesterov SGD step
             (lr 0.7, momentum 0.9) moves the global parameters, which every replica then starts from.
  streaming  the parameters are split into --fragments fragments, synced on a staggered schedule (fragment f at
             inner steps f*H/K + multiples of H) with asynchronous all-reduces; each sync overlaps the next --tau inner
             steps before its outer step is applied and merged into the local parameters (--alpha of the local).
  noloco     no all-reduce: at each outer step every replica averages pseudo-gradients with one peer, paired by a
             permutation every rank derives from (--seed, outer step), through send/recv.
  sync       the baseline: fully synchronous data parallel, the gradients all-reduced (avg) at every inner step.

--churn K:J kills the last replica in outer step K (mid inner loop, SIGKILL) and starts a new one in outer step J,
which joins through the membership API (conflux.Member) and receives the current state through the shared-state
sync. Each outer step prints one line per replica; rank 0's last line is
  diloco: mode=M codec=C replicas=N outer_steps=S wire_bytes=B wall_s=W final_loss=L
"""
from __future__ import annotations

import argparse
import math
import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta

import numpy as np
import torch
from torch import nn

try:
    import conflux
except ImportError:  # not installed: the package of this checkout (python/), which finds the checkout's build
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import conflux


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["diloco", "streaming", "noloco", "sync"], default="diloco",
                   help="sync: the baseline, fully synchronous data parallel (the gradients all-reduced every step)")
    p.add_argument("--codec", default="none", help="none, int8 or topk:FRACTION (error feedback), as cfxCodecParse")
    p.add_argument("--codec-mode", choices=["always", "auto"], default="always",
                   help="auto compresses only across links the planner prices slow (between hosts)")
    p.add_argument("--outer-steps", type=int, default=10)
    p.add_argument("--inner-steps", type=int, default=20, help="H")
    p.add_argument("--fragments", type=int, default=4, help="streaming: K fragments")
    p.add_argument("--tau", type=int, default=2, help="streaming: inner steps a fragment's sync overlaps")
    p.add_argument("--alpha", type=float, default=0.5, help="streaming: weight of the local fragment when merging")
    p.add_argument("--outer-lr", type=float, default=0.7)
    p.add_argument("--outer-momentum", type=float, default=0.9)
    p.add_argument("--lr", type=float, default=3e-3, help="inner AdamW learning rate")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--text", default=None, help="a text file; default: one generated with --seed")
    p.add_argument("--churn", default=None, metavar="K:J", help="kill the last replica in outer step K, start a "
                   "new one in outer step J")
    p.add_argument("--check-agree", action="store_true",
                   help="diloco: after each outer step, compare every replica's parameter hash (agree=1)")
    p.add_argument("--joiner", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.churn:
        k, j = (int(v) for v in args.churn.split(":"))
        if not 0 <= k < j < args.outer_steps:
            p.error("--churn K:J needs 0 <= K < J < --outer-steps")
        args.kill_step, args.join_step = k, j
        if args.mode not in ("diloco", "noloco"):
            p.error("--churn runs with --mode diloco or noloco")
    if args.mode == "streaming" and (args.inner_steps % args.fragments or args.tau >= args.inner_steps // args.fragments):
        p.error("streaming: --inner-steps must be a multiple of --fragments, and --tau below their ratio")
    return args


# ---- data and model ---------------------------------------------------------------------------------------------

WORDS = ("the a one every some river stone light wind small old bright quiet tall green field house road bird tree "
         "runs falls sings waits turns grows stands moves over under near into across beside through and but so then "
         "while when because morning evening winter summer north south far deep").split()


def load_text(args: argparse.Namespace) -> str:
    if args.text:
        with open(args.text, encoding="utf-8", errors="replace") as f:
            return f.read()
    rng = random.Random(args.seed)
    sentences = []
    for _ in range(4000):
        n = rng.randint(4, 10)
        sentences.append(" ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + ".")
    return " ".join(sentences)


class CharLM(nn.Module):
    def __init__(self, vocab: int, args: argparse.Namespace):
        super().__init__()
        self.tok = nn.Embedding(vocab, args.dim)
        self.pos = nn.Parameter(torch.zeros(args.seq, args.dim))
        layer = nn.TransformerEncoderLayer(args.dim, args.heads, 4 * args.dim, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, args.layers)
        self.head = nn.Linear(args.dim, vocab)
        self.register_buffer("mask", torch.triu(torch.full((args.seq, args.seq), float("-inf")), 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        return self.head(self.blocks(self.tok(x) + self.pos[:t], mask=self.mask[:t, :t]))


class Batches:
    """Replica r's batches: windows of the text drawn by a generator seeded with (seed, r, outer step)."""

    def __init__(self, text: str, args: argparse.Namespace):
        chars = sorted(set(text))
        self.vocab = len(chars)
        index = {c: i for i, c in enumerate(chars)}
        self.data = torch.tensor([index[c] for c in text], dtype=torch.long)
        self.args = args

    def draw(self, replica: int, outer: int, inner: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(self.args.seed * 1_000_003 + replica * 10_007 + outer * 101 + inner)
        starts = torch.randint(0, len(self.data) - self.args.seq - 1, (self.args.batch,), generator=g)
        x = torch.stack([self.data[s:s + self.args.seq] for s in starts])
        y = torch.stack([self.data[s + 1:s + self.args.seq + 1] for s in starts])
        return x, y


def flat_params(model: nn.Module) -> torch.Tensor:
    return nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def load_params(model: nn.Module, vec: torch.Tensor) -> None:
    """Copies vec into the parameters (torch's vector_to_parameters would make them views of vec instead)."""
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(vec[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


def nesterov(theta: torch.Tensor, momentum: torch.Tensor, grad: torch.Tensor, args: argparse.Namespace) -> None:
    """torch.optim.SGD(nesterov=True)'s update, on flat tensors whose state the shared-state sync can carry."""
    momentum.mul_(args.outer_momentum).add_(grad)
    theta.sub_(args.outer_lr * (grad + args.outer_momentum * momentum))


# ---- a replica ----------------------------------------------------------------------------------------------------

class Replica:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        torch.manual_seed(args.seed)  # every replica starts from the same parameters
        self.batches = Batches(load_text(args), args)
        self.model = CharLM(self.batches.vocab, args)
        self.inner = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
        self.theta = flat_params(self.model)             # the global parameters
        self.momentum = torch.zeros_like(self.theta)     # the outer optimizer's state
        self.step = torch.zeros(1, dtype=torch.int64)    # outer steps done
        self.delta = torch.zeros_like(self.theta)        # the pseudo-gradient; one buffer, for error feedback
        self.member = self.master = self.store = None
        self.joiners: list[subprocess.Popen] = []
        self.comm: conflux.Communicator | None = None
        self.joins_expected = self.joins_admitted = 0
        self.comm = self.connect()
        self.fresh = True      # connect() was this process's first epoch boundary
        self.wire = 0          # bytes this replica sent in the current outer step
        self.comm_s = 0.0      # seconds communication took (its own time, overlapped or not)
        self.waited_s = 0.0    # seconds the inner loop stood still for communication

    # -- communicators

    def connect(self) -> conflux.Communicator:
        if not self.args.churn:
            return conflux.Communicator.from_env()
        # Membership: rank 0 runs the master and hands its id out through a torch TCPStore at MASTER_ADDR:PORT.
        addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        first = os.environ.get("RANK") == "0" and not self.args.joiner
        self.store = torch.distributed.TCPStore(addr, port, None, first, timedelta(seconds=60),
                                                wait_for_workers=False)
        if first:
            self.master = conflux.Master()
            self.store.set("diloco/master", bytes(self.master.id))
        elif not self.args.joiner:
            # The master admits joiners in the order they came. The master's host goes in alone first, so that it
            # is rank 0 of every epoch (survivors keep their order) and the churn never kills the master with it.
            self.store.get("diloco/first-in")
        self.member = conflux.Member(conflux.UniqueId(self.store.get("diloco/master")))
        # A master admits whoever is waiting at a boundary: the first members update until all of them are in.
        target = 1 if self.args.joiner else int(os.environ["WORLD_SIZE"])
        self.update_once()
        if first:
            self.store.set("diloco/first-in", b"1")
        while self.comm.size < target:
            time.sleep(0.05)  # each update is a boundary of its own: do not spin the master while peers start
            self.update_once()
        # Joins announced so far (a joiner counts itself): members keep updating at a boundary until they are in.
        self.joins_expected = self.joins_admitted = self.joins_announced()
        return self.comm

    def joins_announced(self) -> int:
        return int(self.store.add("diloco/joins", 0))

    def update_once(self) -> None:
        """cfxMemberUpdate; a changed epoch syncs the state (every member of the new epoch does the same)."""
        self.comm, info = self.member.update()
        self.joins_admitted += info.joined
        if info.changed:
            conflux_log(self, f"epoch {info.epoch}: {info.size} replicas ({info.joined} joined, {info.left} left)")
            self.sync_state(self.comm)

    def boundary(self, outer: int) -> None:
        """Membership only: the epoch boundary before an outer step. A join announced at an earlier boundary is
        waited for here (bounded), so that every member makes the same number of updates."""
        if self.member is None or self.fresh:
            self.fresh = False
            return
        spawn = self.args.churn and outer == self.args.join_step and self.master is not None
        if spawn:  # announced before this boundary, so every member reads it after the boundary
            self.store.add("diloco/joins", 1)
        deadline = time.monotonic() + 120
        self.update_once()
        while self.joins_admitted < self.joins_expected and time.monotonic() < deadline:
            time.sleep(0.05)
            self.update_once()
        self.joins_expected = self.joins_announced()
        if spawn:
            argv = [a for a in sys.argv[1:] if a != "--joiner"] + ["--joiner"]
            env = dict(os.environ, RANK="joiner")
            self.joiners.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv], env=env))
            conflux_log(self, f"started a new replica in outer step {outer} (churn); it joins at the next boundary")

    def sync_state(self, comm: conflux.Communicator) -> None:
        info = comm.shared_state_sync([self.theta, self.momentum, self.step])
        if info.replaced:  # a joiner (or a straggler): it now holds the majority's state
            load_params(self.model, self.theta)
            conflux_log(self, f"received the state from replica {info.source_rank} ({info.bytes_received} bytes), "
                              f"at outer step {int(self.step)}")

    # -- the inner loop

    def inner_step(self, outer: int, inner: int) -> float:
        x, y = self.batches.draw(self.comm.rank, outer, inner)
        loss = nn.functional.cross_entropy(self.model(x).reshape(-1, self.batches.vocab), y.reshape(-1))
        self.inner.zero_grad()
        loss.backward()
        if self.args.mode == "sync":
            self.sync_gradients()
        self.inner.step()
        return float(loss)

    def sync_gradients(self) -> None:
        grads = [p.grad for p in self.model.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads])
        t0 = time.perf_counter()
        self.all_reduce(flat)
        dt = time.perf_counter() - t0
        self.comm_s += dt
        self.waited_s += dt
        self.count_wire(flat.numel() * 4)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def all_reduce(self, send: torch.Tensor, async_op: bool = False):
        codec = None if self.args.codec == "none" else self.args.codec
        work = self.comm.all_reduce(send, op="avg", codec=codec, codec_mode=self.args.codec_mode,
                                    codec_feedback=codec is not None and codec.startswith("topk"), async_op=async_op)
        return work

    def count_wire(self, nbytes: int) -> None:
        if self.args.codec != "none" and self.comm.size > 1:
            self.wire += self.comm.compress_stats().wire_bytes
        else:  # plain: what a ring all-reduce sends, 2 (n - 1) / n of the buffer
            self.wire += 2 * (self.comm.size - 1) * nbytes // max(self.comm.size, 1)

    # -- the three modes

    def outer_diloco(self) -> None:
        local = flat_params(self.model)
        torch.sub(self.theta, local, out=self.delta)
        t0 = time.perf_counter()
        self.all_reduce(self.delta)
        dt = time.perf_counter() - t0
        self.comm_s += dt
        self.waited_s += dt
        self.count_wire(self.delta.numel() * 4)
        nesterov(self.theta, self.momentum, self.delta, self.args)
        load_params(self.model, self.theta)

    def outer_noloco(self, outer: int) -> None:
        n, me = self.comm.size, self.comm.rank
        order = list(range(n))
        random.Random(self.args.seed * 7919 + outer).shuffle(order)  # every rank derives the same pairs
        pos = order.index(me)
        peer = order[pos ^ 1] if (pos ^ 1) < n else None
        local = flat_params(self.model)
        torch.sub(self.theta, local, out=self.delta)
        if peer is not None:
            theirs = torch.empty_like(self.delta)
            t0 = time.perf_counter()
            with conflux.group():
                self.comm.send(self.delta, peer)
                self.comm.recv(theirs, peer)
            dt = time.perf_counter() - t0
            self.comm_s += dt
            self.waited_s += dt
            self.wire += self.delta.numel() * 4
            # Fixed summation order, so both replicas of the pair compute the same bits.
            lo, hi = (self.delta, theirs) if me < peer else (theirs, self.delta)
            nesterov(self.theta, self.momentum, (lo + hi) / 2, self.args)
        else:
            nesterov(self.theta, self.momentum, self.delta, self.args)
        load_params(self.model, self.theta)

    def run_streaming(self, outer: int, losses: list[float]) -> None:
        """One outer step of Streaming DiLoCo: H inner steps, fragment f's sync starting at inner step f*H/K."""
        a, k = self.args, self.args.fragments
        bounds = np.linspace(0, self.theta.numel(), k + 1).astype(int)
        spacing = a.inner_steps // k
        pending: list[tuple[int, int, object, torch.Tensor, float]] = []  # (merge at, fragment, work, delta, t0)
        for inner in range(a.inner_steps):
            for entry in [p for p in pending if p[0] == inner]:
                self.merge(entry, bounds)
                pending.remove(entry)
            if inner % spacing == 0:
                f = inner // spacing
                lo, hi = bounds[f], bounds[f + 1]
                delta = (self.theta[lo:hi] - flat_params(self.model)[lo:hi]).contiguous()
                pending.append((inner + a.tau, f, self.all_reduce(delta, async_op=True), delta, time.perf_counter()))
            losses.append(self.inner_step(outer, inner))
        for entry in pending:
            self.merge(entry, bounds)

    def merge(self, entry, bounds) -> None:
        _, f, work, delta, t0 = entry
        w0 = time.perf_counter()
        work.wait()
        now = time.perf_counter()
        self.waited_s += now - w0
        self.comm_s += now - t0
        self.count_wire(delta.numel() * 4)
        lo, hi = bounds[f], bounds[f + 1]
        nesterov(self.theta[lo:hi], self.momentum[lo:hi], delta, self.args)
        local = flat_params(self.model)
        local[lo:hi] = self.args.alpha * local[lo:hi] + (1 - self.args.alpha) * self.theta[lo:hi]
        load_params(self.model, local)

    # -- the run

    def agree(self) -> bool:
        h = conflux.state_hash([self.theta, self.momentum])
        mine = np.array([h & (2**64 - 1), h >> 64], dtype=np.uint64)
        every = self.comm.all_gather(mine).reshape(-1, 2)
        # Streaming DiLoCo merges the global fragments into local parameters that moved on: only the global agree.
        local_ok = self.args.mode == "streaming" or bool(torch.equal(flat_params(self.model), self.theta))
        flags = self.comm.all_gather(np.array([local_ok], np.uint8))
        return bool((every == every[0]).all() and flags.all())

    def churn(self, outer: int, inner: int) -> None:
        a = self.args
        if not a.churn or inner != a.inner_steps // 2:
            return
        if outer == a.kill_step and self.comm.rank == self.comm.size - 1 and self.master is None:
            conflux_log(self, f"killed in outer step {outer} (churn)")
            os.kill(os.getpid(), signal.SIGKILL)

    def run(self) -> int:
        a = self.args
        if self.comm.rank == 0 and not a.joiner:
            say(f"diloco: {self.theta.numel()} parameters, vocabulary {self.batches.vocab}")
        start = time.perf_counter()
        total_wire, loss = 0, float("nan")
        while int(self.step) < a.outer_steps:
            outer = int(self.step)
            self.boundary(outer)
            self.wire, self.comm_s, self.waited_s = 0, 0.0, 0.0
            t0 = time.perf_counter()
            losses: list[float] = []
            if a.mode == "streaming":
                self.run_streaming(outer, losses)
            else:
                for inner in range(a.inner_steps):
                    self.churn(outer, inner)
                    losses.append(self.inner_step(outer, inner))
                if a.mode != "sync":
                    self.sync_with_retry(outer)
                else:
                    self.theta = flat_params(self.model)
            loss = sum(losses) / len(losses)
            self.step += 1
            total_wire += self.wire
            agree = f" agree={int(self.agree())}" if a.check_agree else ""
            say(f"replica {self.comm.rank}/{self.comm.size} outer {outer}: loss={loss:.4f} wire_bytes={self.wire} "
                  f"comm_s={self.comm_s:.3f} waited_s={self.waited_s:.3f} step_s={time.perf_counter() - t0:.3f}"
                  f"{agree}")
        wall = time.perf_counter() - start
        if self.comm.rank == 0:
            say(f"diloco: mode={a.mode} codec={a.codec} replicas={self.comm.size} outer_steps={a.outer_steps} "
                  f"wire_bytes={total_wire} wall_s={wall:.2f} final_loss={loss:.4f}")
        return self.finish()

    def sync_with_retry(self, outer: int) -> None:
        """A peer that dies mid-sync fails the collective on every member (all or nothing): the survivors go to a
        new epoch without it and redo the sync from the same bytes."""
        for attempt in range(3):
            try:
                if self.args.mode == "noloco":
                    self.outer_noloco(outer)
                else:
                    self.outer_diloco()
                return
            except conflux.RemoteError as e:
                if self.member is None or attempt == 2:
                    raise
                conflux_log(self, f"outer step {outer}: {e.warn or e}; re-forming the group")
                self.update_once()

    def finish(self) -> int:
        status = 0
        for p in self.joiners:
            status = status or p.wait(timeout=600)
        if self.member is not None:
            self.member.leave()
        else:
            self.comm.destroy()
        if self.master is not None:
            self.master.stop()
        return status


def say(line: str) -> None:
    """One write per line: a joiner shares its parent's output, and print()'s separate newline could split lines."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def conflux_log(replica: Replica, text: str) -> None:
    rank = replica.comm.rank if getattr(replica, "comm", None) is not None else "?"
    say(f"replica {rank}: {text}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)  # replicas share the host's cores; one BLAS thread each
    return Replica(args).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
