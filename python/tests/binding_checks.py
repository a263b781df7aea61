# SPDX-License-Identifier: Apache-2.0
"""What every rank runs for test_binding.py: each check calls the binding on every rank and compares with numpy
references computed in closed form from every rank's inputs (launched by launcher.py)."""
from __future__ import annotations

import numpy as np

import conflux

DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]
OPS = ["sum", "prod", "max", "min", "avg"]
COUNT = 1031  # prime: ragged against any slice size


def setup():
    return conflux.Communicator.from_env()


def teardown(comm):
    comm.destroy()


def inputs(rank, count, dtype):
    """Rank r's input: 1 or 2 (products of up to 4 ranks fit int8), in a pattern that differs per rank."""
    return (1 + (np.arange(count) + rank) % 2).astype(dtype)


def reference(op, stack):
    dtype = stack.dtype
    wide = stack.astype(np.float64 if dtype.kind == "f" else np.int64)
    if op == "sum":
        out = wide.sum(0)
    elif op == "prod":
        out = wide.prod(0)
    elif op == "max":
        out = wide.max(0)
    elif op == "min":
        out = wide.min(0)
    else:
        out = wide.sum(0) / len(stack) if dtype.kind == "f" else wide.sum(0) // len(stack)
    return out.astype(dtype)


def assert_close(got, want, what):
    if got.dtype.kind == "f":
        tol = 1e-2 if got.dtype == np.float16 else 1e-6
        ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    else:
        ok = np.array_equal(got, want)
    assert ok, f"{what}: got {got[:8]}... want {want[:8]}..."


def all_inputs(comm, count, dtype):
    return np.stack([inputs(r, count, dtype) for r in range(comm.size)])


def check_identity(comm):
    import os
    assert comm.rank == int(os.environ["RANK"]) and comm.size == int(os.environ["WORLD_SIZE"]), repr(comm)
    assert conflux.version() > 0 and conflux.nccl_version() >= 22800
    assert comm.async_error() == 0
    assert comm.failures() == []


def check_all_reduce(comm):
    for dtype in DTYPES:
        for op in OPS:
            want = reference(op, all_inputs(comm, COUNT, dtype))
            x = inputs(comm.rank, COUNT, dtype)
            assert comm.all_reduce(x, op=op) is x  # in place
            assert_close(x, want, f"all_reduce {np.dtype(dtype).name} {op} in place")
            recv = np.zeros(COUNT, dtype)
            comm.all_reduce(inputs(comm.rank, COUNT, dtype), recv, op=conflux.ReduceOp[op.upper()])
            assert_close(recv, want, f"all_reduce {np.dtype(dtype).name} {op} out of place")


def check_broadcast(comm):
    for root in range(comm.size):
        x = np.arange(COUNT, dtype=np.float32) + (1000 * comm.rank)
        comm.broadcast(x, root=root)
        assert_close(x, np.arange(COUNT, dtype=np.float32) + 1000 * root, f"broadcast root {root}")
        out = np.zeros(7, np.int64)
        comm.broadcast(np.full(7, comm.rank, np.int64), root=root, recv=out)
        assert_close(out, np.full(7, root, np.int64), f"broadcast root {root} out of place")


def check_reduce(comm):
    for root in range(comm.size):
        for op in ("sum", "max", "avg"):
            x = inputs(comm.rank, COUNT, np.float64)
            comm.reduce(x, root=root, op=op)
            if comm.rank == root:
                assert_close(x, reference(op, all_inputs(comm, COUNT, np.float64)), f"reduce {op} to {root}")


def check_all_gather(comm):
    x = np.arange(5, dtype=np.int32) + 10 * comm.rank
    out = comm.all_gather(x)
    assert_close(out, np.concatenate([np.arange(5, dtype=np.int32) + 10 * r for r in range(comm.size)]), "all_gather")
    shaped = np.zeros((comm.size, 5), np.int32)
    comm.all_gather(x, shaped)
    assert_close(shaped.ravel(), out, "all_gather into a 2-D output")


def check_reduce_scatter(comm):
    for op in OPS:
        send = inputs(comm.rank, 3 * comm.size, np.int32) * (np.arange(3 * comm.size, dtype=np.int32) % 3 + 1)
        stack = np.stack([inputs(r, 3 * comm.size, np.int32) * (np.arange(3 * comm.size, dtype=np.int32) % 3 + 1)
                          for r in range(comm.size)])
        got = comm.reduce_scatter(send, op=op)
        assert_close(got, reference(op, stack)[3 * comm.rank:3 * comm.rank + 3], f"reduce_scatter {op}")


def check_all_to_all(comm):
    n = comm.size
    send = np.array([100 * comm.rank + j for j in range(n) for _ in range(4)], np.int64)
    got = comm.all_to_all(send)
    assert_close(got, np.array([100 * i + comm.rank for i in range(n) for _ in range(4)], np.int64), "all_to_all")


def check_all_to_all_v(comm):
    n, me = comm.size, comm.rank
    # rank i sends rank j (i + 2j) % 3 elements of value 100 i + j: some blocks empty, none equal to the next
    count = lambda i, j: (i + 2 * j) % 3  # noqa: E731
    send = np.concatenate([np.full(count(me, j), 100 * me + j, np.int32) for j in range(n)] + [np.zeros(2, np.int32)])
    recv_counts = [count(i, me) for i in range(n)]
    want = np.concatenate([np.full(count(i, me), 100 * i + me, np.int32) for i in range(n)])
    recv = np.full(sum(recv_counts) + 1, -1, np.int32)  # one spare element the call must leave alone
    assert comm.all_to_all_v(send, [count(me, j) for j in range(n)], recv, recv_counts) is recv
    assert_close(recv[:-1], want, "all_to_all_v")
    assert recv[-1] == -1, "all_to_all_v wrote past its blocks"
    recv[:] = -1
    w = comm.all_to_all_v(send, [count(me, j) for j in range(n)], recv, recv_counts, async_op=True)
    assert_close(w.wait()[:-1], want, "async all_to_all_v")
    try:
        comm.all_to_all_v(send, [1] * (n + 1), recv, recv_counts)
    except conflux.InvalidArgument as e:
        assert "send_counts" in str(e), e
    else:
        raise AssertionError("all_to_all_v took n + 1 counts")


def check_scan(comm):
    stack = all_inputs(comm, COUNT, np.float64)
    for op in ("sum", "prod", "max", "min"):
        x = inputs(comm.rank, COUNT, np.float64)
        assert comm.scan(x, op=op) is x
        assert_close(x, reference(op, stack[:comm.rank + 1]), f"scan {op}")
    ex = comm.exscan(inputs(comm.rank, COUNT, np.int32), np.zeros(COUNT, np.int32))
    want = reference("sum", all_inputs(comm, COUNT, np.int32)[:comm.rank]) if comm.rank else np.zeros(COUNT, np.int32)
    assert_close(ex, want, "exscan sum")
    w = comm.scan(inputs(comm.rank, COUNT, np.float32), async_op=True)
    assert_close(w.wait(), reference("sum", all_inputs(comm, COUNT, np.float32)[:comm.rank + 1]), "async scan")
    try:
        comm.scan(np.ones(4, np.float32), op="avg")
    except conflux.InvalidArgument as e:
        assert "cfxScan" in str(e), e
    else:
        raise AssertionError("scan took avg")


def check_gather_scatter(comm):
    n = comm.size
    for root in range(n):
        got = comm.gather(np.full(3, comm.rank, np.float32), root=root)
        if comm.rank == root:
            assert_close(got, np.repeat(np.arange(n, dtype=np.float32), 3), f"gather to {root}")
        else:
            assert got is None
        send = np.arange(2 * n, dtype=np.float32) + root if comm.rank == root else None
        recv = np.zeros(2, np.float32)
        comm.scatter(send, recv, root=root)
        assert_close(recv, np.arange(2 * comm.rank, 2 * comm.rank + 2, dtype=np.float32) + root, f"scatter {root}")


def check_send_recv(comm):
    n, r = comm.size, comm.rank
    got = np.zeros(COUNT, np.float32)
    with conflux.group():  # a ring: every rank sends and receives at once
        comm.send(np.full(COUNT, r, np.float32), peer=(r + 1) % n)
        comm.recv(got, peer=(r - 1) % n)
    assert_close(got, np.full(COUNT, (r - 1) % n, np.float32), "ring send/recv in a group")
    if n > 1:  # a lone blocking pair, rank 0 to rank 1
        if r == 0:
            comm.send(np.arange(9, dtype=np.int8), peer=1)
        elif r == 1:
            assert_close(comm.recv(np.zeros(9, np.int8), peer=0), np.arange(9, dtype=np.int8), "blocking recv")


def check_async(comm):
    n, r = comm.size, comm.rank
    xs = [inputs(r, COUNT + k, np.float32) for k in range(4)]
    works = [comm.all_reduce(x, async_op=True) for x in xs]
    gathered = comm.all_gather(np.full(2, r, np.int64), async_op=True)
    for k, (x, w) in enumerate(zip(xs, works)):
        assert w.wait() is x
        assert w.done()
        assert_close(x, reference("sum", all_inputs(comm, COUNT + k, np.float32)), f"async all_reduce {k}")
    assert_close(gathered.wait(), np.repeat(np.arange(n, dtype=np.int64), 2), "async all_gather")
    got = np.zeros(5, np.int32)
    with conflux.group(async_op=True) as g:
        comm.send(np.full(5, r, np.int32), peer=(r + 1) % n)
        comm.recv(got, peer=(r - 1) % n)
    g.wait()
    assert g.done()
    assert_close(got, np.full(5, (r - 1) % n, np.int32), "async group")
    for call in (lambda: comm.broadcast(np.zeros(3), async_op=True), lambda: comm.barrier(async_op=True),
                 lambda: comm.reduce_scatter(np.ones(2 * n), async_op=True),
                 lambda: comm.all_to_all(np.ones(2 * n), async_op=True),
                 lambda: comm.gather(np.ones(2), async_op=True), lambda: comm.reduce(np.ones(2), async_op=True)):
        w = call()
        w.wait()


def check_two_async_all_reduces(comm):
    """Two async all-reduces issued before either is waited for, a plain one and an int8 one with the library's error
    feedback: they run side by side on the communicator's host lanes (CFX_HOST_LANES). Waited for in reverse order."""
    n, r = comm.size, comm.rank
    plain = inputs(r, COUNT, np.float32)
    grad = np.linspace(-1, 1, 2 * COUNT + 1, dtype=np.float32) * (r + 1)
    first = comm.all_reduce(plain, async_op=True)
    second = comm.all_reduce(grad, np.empty_like(grad), codec="int8", codec_mode="always", codec_feedback=True,
                             async_op=True)
    got = second.wait()
    want = np.linspace(-1, 1, 2 * COUNT + 1, dtype=np.float64) * (n * (n + 1) / 2)
    # int8: each contribution within half a step of its block's absmax / 127, the result's too
    assert np.abs(got - want).max() <= (n * (n + 1) / 2 + n) / 127, np.abs(got - want).max()
    assert first.wait() is plain
    assert_close(plain, reference("sum", all_inputs(comm, COUNT, np.float32)), "first async all_reduce")


def check_split(comm):
    sub = comm.split(comm.rank % 2, key=-comm.rank)  # reversed order inside each half
    members = [r for r in range(comm.size) if r % 2 == comm.rank % 2]
    assert sub.size == len(members) and sub.rank == len(members) - 1 - members.index(comm.rank), repr(sub)
    x = np.array([comm.rank], np.int64)
    sub.all_reduce(x)
    assert int(x[0]) == sum(members)
    sub.destroy()
    none = comm.split(None if comm.rank == 0 else 1)
    assert (none is None) == (comm.rank == 0)
    if none is not None:
        none.abort()


def check_unique_id(comm):
    uid = np.frombuffer(bytes(conflux.UniqueId.generate()), np.uint8).copy()
    comm.broadcast(uid, root=0)
    with conflux.Communicator.from_unique_id(conflux.UniqueId(uid.tobytes()), comm.rank, comm.size) as other:
        x = np.ones(3, np.float64)
        other.all_reduce(x)
        assert_close(x, np.full(3, comm.size, np.float64), "all_reduce on a communicator from a unique id")
    comm.barrier()


def check_state(comm):
    state = [np.arange(64, dtype=np.float32) * (2 if comm.rank == 0 and comm.size > 2 else 1),
             np.full(3, 7, np.int64)]
    info = comm.shared_state_sync(state)
    majority = [np.arange(64, dtype=np.float32), np.full(3, 7, np.int64)]
    assert_close(state[0], majority[0], "state after sync")
    assert info.hash == conflux.state_hash(majority) == conflux.state_hash(state)
    assert info.replaced == (comm.rank == 0 and comm.size > 2), info
    assert info.n_outdated == (1 if comm.size > 2 else 0), info


def check_membership(comm):
    master = conflux.Master() if comm.rank == 0 else None
    uid = np.frombuffer(bytes(master.id), np.uint8).copy() if master else np.zeros(128, np.uint8)
    comm.broadcast(uid, root=0)
    with conflux.Member(conflux.UniqueId(uid.tobytes())) as member:
        # Members that asked early may form smaller epochs first; each boundary admits those waiting.
        mcomm, info = member.update()
        while info.size < comm.size:
            mcomm, info = member.update()
        assert info.size == comm.size and mcomm.size == comm.size and mcomm.rank == info.rank, info
        x = np.full(4, mcomm.rank + 1, np.int32)
        mcomm.all_reduce(x)
        assert_close(x, np.full(4, comm.size * (comm.size + 1) // 2, np.int32), "all_reduce on a member")
        try:
            mcomm.destroy()
            raise AssertionError("destroying a member's communicator must be refused")
        except conflux.InvalidUsage:
            pass
        mcomm2, info2 = member.update()
        assert not info2.changed and info2.epoch == info.epoch, info2
    comm.barrier()
    if master:
        assert master.epoch()[0] >= 1
        master.stop()


def check_errors_carry_warn(comm):
    try:
        comm.broadcast(np.zeros(4), root=comm.size)
        raise AssertionError("a root out of range must fail")
    except conflux.InvalidArgument as e:
        assert e.result == 4 and e.result_name == "ncclInvalidArgument", e
        assert e.warn and "root" in e.warn.lower(), e.warn
        assert e.warn in str(e)


def check_bad_input(comm):
    def refused(fn, cls, words):
        try:
            fn()
        except cls as e:
            assert words in str(e), f"{cls.__name__} without {words!r}: {e}"
            return
        raise AssertionError(f"not refused; expected {cls.__name__} ({words})")

    x = np.zeros((4, 4), np.float32)
    refused(lambda: comm.all_reduce(x[:, 1]), conflux.InvalidArgument, "not C-contiguous")
    refused(lambda: comm.all_reduce(np.zeros(4, np.complex64)), conflux.InvalidArgument, "not supported")
    refused(lambda: comm.all_reduce([1.0, 2.0]), conflux.InvalidArgument, "not a buffer")
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    refused(lambda: comm.all_reduce(ro), conflux.InvalidArgument, "read-only")
    refused(lambda: comm.all_reduce(np.zeros(4), np.zeros(5)), conflux.InvalidArgument, "elements")
    refused(lambda: comm.all_reduce(np.zeros(4), np.zeros(4, np.float32)), conflux.InvalidArgument, "dtype")
    refused(lambda: comm.all_reduce(np.zeros(4, bool)), conflux.InvalidArgument, "bool")
    refused(lambda: comm.all_reduce(np.zeros(4), op="xor"), conflux.InvalidArgument, "unknown reduction")
    if comm.size > 1:
        refused(lambda: comm.reduce_scatter(np.zeros(comm.size + 1)), conflux.InvalidArgument, "multiple")
    big_endian = np.zeros(4, ">f4")
    refused(lambda: comm.all_reduce(big_endian), conflux.InvalidArgument, "native byte order")
    with conflux.group():
        refused(lambda: comm.all_reduce(np.zeros(2), async_op=True), conflux.InvalidUsage, "group")
    flags = np.ones(6, bool)  # bool moves as bytes
    comm.broadcast(flags, root=0)
    # An array an async op holds cannot be resized under it: the handle holds a reference, which resize() checks.
    held = np.ones(1 << 12, np.float32)
    work = comm.all_reduce(held, async_op=True)
    refused(lambda: held.resize(8), ValueError, "reference")
    work.wait()


def check_torch_tensors(comm):
    import torch
    n, r = comm.size, comm.rank
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.uint8):
        t = torch.full((3, 5), r + 1, dtype=dtype)
        comm.all_reduce(t)
        assert torch.equal(t, torch.full((3, 5), n * (n + 1) // 2, dtype=dtype)), (dtype, t)
    g = comm.all_gather(torch.tensor([r], dtype=torch.int32))
    assert isinstance(g, torch.Tensor) and g.tolist() == list(range(n)), g
    w = comm.all_reduce(torch.ones(1 << 16), async_op=True)
    assert torch.equal(w.wait(), torch.full((1 << 16,), float(n)))
    errors = []
    for bad, words in ((torch.zeros(4, 4).t(), "not contiguous"), (torch.zeros(4, device="meta"), "host-only"),
                       (torch.zeros(4, dtype=torch.complex64), "not supported"),
                       (torch.zeros(4).to_sparse(), "strided")):
        try:
            comm.all_reduce(bad)
            errors.append(f"{words}: not refused")
        except conflux.InvalidArgument as e:
            if words not in str(e):
                errors.append(f"{words}: {e}")
    assert not errors, errors
    # A tensor resized or written while its async op runs is illegal; the handle reports it at wait(). (Resized
    # here once the op is over but before wait(), so that the test itself touches no freed memory.)
    t = torch.ones(1 << 16)
    w = comm.all_reduce(t, async_op=True)
    while not w.done():
        pass
    t.resize_(1 << 20)
    try:
        w.wait()
        raise AssertionError("a tensor resized during its async op went unnoticed")
    except conflux.InvalidUsage as e:
        assert "resized" in str(e), e
    t = torch.ones(64)
    w = comm.all_reduce(t, async_op=True)
    while not w.done():
        pass
    t.add_(1)
    try:
        w.wait()
        raise AssertionError("a tensor written during its async op went unnoticed")
    except conflux.InvalidUsage as e:
        assert "written" in str(e), e


def check_codec(comm):
    n, r = comm.size, comm.rank
    x = np.linspace(-3, 3, 4099, dtype=np.float32) * (r + 1)
    comm.all_reduce(x, codec="bf16", codec_mode="always")
    want = np.linspace(-3, 3, 4099, dtype=np.float32) * (n * (n + 1) / 2)
    assert np.allclose(x, want, rtol=2 ** -6, atol=1e-2), np.abs(x - want).max()
    stats = comm.compress_stats()
    assert stats.codec.startswith("bf16") and (n == 1 or (stats.compressed and stats.wire_bytes < stats.buffer_bytes)), stats
    comm.set_codec("int8", mode="always")  # the communicator's default: plain calls carry it
    y = np.ones(4096, np.float32)
    comm.all_reduce(y)
    assert np.allclose(y, n, rtol=1e-2), y[:4]
    assert comm.compress_stats().codec.startswith("int8")
    comm.set_codec(None)
    try:
        comm.all_reduce(np.ones(4, np.int32), codec="int8")
        raise AssertionError("an int32 all-reduce with a codec must be refused")
    except conflux.InvalidArgument as e:
        assert e.warn, e
    try:
        comm.all_reduce(np.ones(4, np.float32), codec="nonesuch")
        raise AssertionError("an unknown codec must be refused")
    except conflux.InvalidArgument as e:
        assert "nonesuch" in e.warn, e


def check_codec_feedback(comm):
    """Error feedback: what top-k dropped is sent by the next call, so two calls' sum comes closer to twice the
    exact sum than without it."""
    n, r = comm.size, comm.rank
    block = np.array([4, 3, 2, 1], np.float32)
    exact = 2 * np.tile(block, 1024) * (n * (n + 1) / 2)
    errs = {}
    for feedback in (False, True):
        x = np.tile(block, 1024) * (r + 1)
        total = np.zeros_like(x)
        for _ in range(2):
            total += comm.all_reduce(x, np.empty_like(x), codec="topk:0.5:block=4:values=fp32", codec_mode="always",
                                     codec_feedback=feedback)
        errs[feedback] = float(np.linalg.norm(total - exact))
    if n > 1:
        assert errs[True] < errs[False], errs


def check_codec_async(comm):
    """Compressed all-reduces in flight together (Streaming DiLoCo's fragments), each on its own host stream."""
    n, r = comm.size, comm.rank
    xs = [np.linspace(-1, 1, 3000 + 512 * k, dtype=np.float32) * (r + 1 + k) for k in range(3)]
    works = [comm.all_reduce(x, op="avg", codec="int8", codec_mode="always", async_op=True) for x in xs]
    for k, (x, w) in enumerate(zip(xs, works)):
        assert w.wait() is x
        want = np.linspace(-1, 1, 3000 + 512 * k, dtype=np.float32) * ((n + 1) / 2 + k)
        # int8: each contribution within half a step of its block's absmax / 127, the result's too
        assert np.abs(x - want).max() <= (n + 1) * (n + k) / 127, (k, np.abs(x - want).max())
