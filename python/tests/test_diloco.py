# SPDX-License-Identifier: Apache-2.0
"""examples/diloco/train.py in its short form: a tiny model, 2 replicas, a few outer steps of each mode, the
replicas bit-identical after every outer step where the mode makes them so, and the churn path (a replica killed,
a new one joining through the membership API and receiving the state)."""
from __future__ import annotations

import os
import re

import pytest

import launcher

pytest.importorskip("torch")

TRAIN = os.path.join(os.path.dirname(os.path.dirname(launcher.HERE)), "examples", "diloco", "train.py")
TINY = ["--inner-steps", "4", "--dim", "32", "--layers", "1", "--heads", "2", "--batch", "8", "--seq", "16",
        "--check-agree"]
LAST = re.compile(r"^diloco: mode=(\w+) codec=(\S+) replicas=(\d+) outer_steps=(\d+) wire_bytes=(\d+) "
                  r"wall_s=([\d.]+) final_loss=([\d.]+)$")


def run(args: list[str], world: int = 2) -> list[tuple[int, str]]:
    return launcher.run_ranks(world, [launcher.PYTHON, TRAIN, *TINY, *args])


def steps(text: str) -> dict:
    """(replica rank, outer step) -> the fields of its per-outer-step line."""
    found = {}
    for m in re.finditer(r"replica (\d+)/(\d+) outer (\d+): (.*)", text):
        found[(int(m.group(1)), int(m.group(3)))] = dict(kv.split("=") for kv in m.group(4).split())
    return found


def report(out) -> str:
    return "\n".join(f"--- rank {r} (exit {rc}) ---\n{text[-3000:]}" for r, (rc, text) in enumerate(out))


@pytest.mark.parametrize("mode,codec", [("diloco", "int8"), ("diloco", "topk:0.05"), ("streaming", "int8"),
                                        ("noloco", "none"), ("sync", "none")])
def test_modes(mode, codec):
    extra = ["--fragments", "2", "--tau", "1"] if mode == "streaming" else []
    out = run(["--mode", mode, "--codec", codec, "--outer-steps", "2", *extra])
    assert all(rc == 0 for rc, _ in out), report(out)
    last = LAST.match(out[0][1].strip().splitlines()[-1])  # rank 0's last line
    assert last and last.groups()[:4] == (mode, codec, "2", "2"), report(out)
    assert float(last.group(7)) > 0 and int(last.group(5)) > 0, report(out)
    for rank, (_, text) in enumerate(out):
        lines = steps(text)
        for outer in (0, 1):
            fields = lines.get((rank, outer))
            assert fields, f"no line for replica {rank}, outer step {outer}\n" + report(out)
            assert {"loss", "wire_bytes", "comm_s", "waited_s"} <= fields.keys(), fields
            # DiLoCo and sync: every replica bit-identical; streaming: the global parameters; NoLoCo at 2: the pair.
            assert fields["agree"] == "1", f"replica {rank} outer {outer} disagrees\n" + report(out)
    params = int(re.search(r"diloco: (\d+) parameters", out[0][1]).group(1))
    sent = int(steps(out[0][1])[(0, 0)]["wire_bytes"])
    if mode == "noloco":  # the whole fp32 pseudo-gradient to the one peer
        assert sent == 4 * params, (sent, params)
    elif mode == "sync":  # the plain ring all-reduce of the gradients, 4 bytes per parameter at 2 ranks, every step
        assert sent == 4 * 4 * params, (sent, params)
    else:  # compressed: int8 about a quarter of the plain ring's 4 bytes per parameter at 2 ranks, top-k far less
        assert sent * 3 < 4 * params, (sent, params)


def test_churn_kill_and_join():
    out = run(["--mode", "diloco", "--outer-steps", "4", "--churn", "1:2"])
    (rc0, text0), (rc1, text1) = out
    assert rc0 == 0 and rc1 == -9, report(out)
    assert "killed in outer step 1" in text1, report(out)
    assert "started a new replica in outer step 2" in text0, report(out)
    # The joiner's lines come through rank 0's output (it is rank 0's child): it got the state and trained.
    assert re.search(r"replica 1: received the state from replica 0 \(\d+ bytes\), at outer step 3", text0), report(out)
    lines = steps(text0)
    assert lines[(0, 1)]["agree"] == "1" and (1, 1) not in lines, report(out)  # alone after the kill
    assert lines[(0, 3)]["agree"] == "1" and lines[(1, 3)]["agree"] == "1", report(out)  # rejoined, identical
    last = [m for m in map(LAST.match, text0.splitlines()) if m]  # the joiner's lines may come after it
    assert len(last) == 1 and last[0].group(3) == "2" and last[0].group(4) == "4", report(out)
