# SPDX-License-Identifier: Apache-2.0
"""What every rank runs for test_torch_backend.py: torch.distributed with backend "conflux", started as torchrun
starts ranks (env://), each operation against results computed in closed form from every rank's inputs."""
from __future__ import annotations

import datetime
import os
import warnings

import torch
import torch.distributed as dist

import conflux.torch  # noqa: F401  (registers the backend)

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int8, torch.int32, torch.int64,
          torch.uint8]
OPS = {"sum": R.SUM, "min": R.MIN, "max": R.MAX, "product": R.PRODUCT, "avg": R.AVG}
COUNT = 1031


def setup():
    warnings.filterwarnings("ignore", message=".*will be deprecated.*")  # all_*_coalesced, which we test anyway
    dist.init_process_group("conflux", init_method="env://", timeout=datetime.timedelta(seconds=120))
    return dist.get_rank(), dist.get_world_size()


def teardown(ctx):
    dist.destroy_process_group()


def inputs(rank, count, dtype):
    """1 or 2, differing per rank (a product over 4 ranks fits int8)."""
    return (1 + (torch.arange(count) + rank) % 2).to(dtype)


def expected(op, n, count, dtype):
    stack = torch.stack([inputs(r, count, torch.float64) for r in range(n)])
    if op == "sum":
        out = stack.sum(0)
    elif op == "min":
        out = stack.min(0).values
    elif op == "max":
        out = stack.max(0).values
    elif op == "product":
        out = stack.prod(0)
    else:
        out = stack.sum(0) / n if dtype.is_floating_point else torch.div(stack.sum(0), n, rounding_mode="floor")
    return out.to(dtype)


def same(got, want, what):
    if got.dtype.is_floating_point:
        tol = 1e-2 if got.dtype in (torch.float16, torch.bfloat16) else 1e-6
        ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    assert ok, f"{what}: got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}"


def check_identity(ctx):
    rank, n = ctx
    assert dist.get_backend() == "conflux" and rank == int(os.environ["RANK"]) and n == int(os.environ["WORLD_SIZE"])
    assert isinstance(dist.distributed_c10d._get_default_group(), conflux.torch.ProcessGroupConflux)


def check_all_reduce(ctx):
    rank, n = ctx
    for dtype in DTYPES:
        for name, op in OPS.items():
            t = inputs(rank, COUNT, dtype)
            dist.all_reduce(t, op=op)
            same(t, expected(name, n, COUNT, dtype), f"all_reduce {dtype} {name}")
    flags = torch.tensor([rank == 0, False, True])
    dist.all_reduce(flags)  # bool: sum is "any"
    assert flags.tolist() == [True, False, True], flags


def check_all_reduce_coalesced(ctx):
    rank, n = ctx
    ts = [inputs(rank, 7, torch.int64), inputs(rank, 3, torch.int64).view(3, 1)]  # one dtype: torch insists
    dist.all_reduce_coalesced(ts, op=R.MAX)
    same(ts[0], expected("max", n, 7, torch.int64), "all_reduce_coalesced 0")
    same(ts[1].flatten(), expected("max", n, 3, torch.int64), "all_reduce_coalesced 1")


def check_broadcast_reduce(ctx):
    rank, n = ctx
    for root in range(n):
        for dtype in DTYPES:
            t = torch.full((5, 3), rank + 1, dtype=dtype)
            dist.broadcast(t, src=root)
            same(t, torch.full((5, 3), root + 1, dtype=dtype), f"broadcast {dtype} from {root}")
        for name in ("sum", "max", "product"):
            t = inputs(rank, COUNT, torch.float32)
            dist.reduce(t, dst=root, op=OPS[name])
            if rank == root:
                same(t, expected(name, n, COUNT, torch.float32), f"reduce {name} to {root}")


def check_all_gather(ctx):
    rank, n = ctx
    for dtype in DTYPES:
        outs = [torch.zeros(2, 3, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, torch.full((2, 3), rank, dtype=dtype))
        for i, o in enumerate(outs):
            same(o, torch.full((2, 3), i, dtype=dtype), f"all_gather {dtype} block {i}")
        flat = torch.zeros(n * 4, dtype=dtype)
        dist.all_gather_into_tensor(flat, torch.full((4,), rank, dtype=dtype))
        same(flat, torch.arange(n).repeat_interleave(4).to(dtype), f"all_gather_into_tensor {dtype}")
    lists = [[torch.zeros(2), torch.zeros(3, dtype=torch.float32)] for _ in range(n)]
    dist.all_gather_coalesced(lists, [torch.full((2,), rank + 0.5), torch.full((3,), -rank * 1.0)])
    for i in range(n):
        same(lists[i][0], torch.full((2,), i + 0.5), f"all_gather_coalesced {i}.0")
        same(lists[i][1], torch.full((3,), -i * 1.0), f"all_gather_coalesced {i}.1")
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank, "name": "r" * (rank + 1)})
    assert objs == [{"rank": i, "name": "r" * (i + 1)} for i in range(n)], objs
    box = [{"from": rank}] if rank == 0 else [None]
    dist.broadcast_object_list(box, src=0)
    assert box == [{"from": 0}], box


def check_reduce_scatter(ctx):
    rank, n = ctx
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        for name, op in OPS.items():
            full = inputs(rank, 3 * n, dtype)
            want = expected(name, n, 3 * n, dtype)[3 * rank:3 * rank + 3]
            out = torch.zeros(3, dtype=dtype)
            dist.reduce_scatter_tensor(out, full, op=op)
            same(out, want, f"reduce_scatter_tensor {dtype} {name}")
            out = torch.zeros(3, dtype=dtype)
            dist.reduce_scatter(out, list(full.chunk(n)), op=op)
            same(out, want, f"reduce_scatter {dtype} {name}")


def check_all_to_all(ctx):
    rank, n = ctx
    # equal blocks
    inp = torch.tensor([100 * rank + j for j in range(n) for _ in range(2)], dtype=torch.int64)
    out = torch.zeros(2 * n, dtype=torch.int64)
    dist.all_to_all_single(out, inp)
    same(out, torch.tensor([100 * i + rank for i in range(n) for _ in range(2)]), "all_to_all_single equal")
    # uneven: rank i sends (i + j + 1) rows of width 3 to rank j
    send_rows = [rank + j + 1 for j in range(n)]
    recv_rows = [i + rank + 1 for i in range(n)]
    inp = torch.cat([torch.full((send_rows[j], 3), float(10 * rank + j)) for j in range(n)])
    out = torch.zeros(sum(recv_rows), 3)
    dist.all_to_all_single(out, inp, output_split_sizes=recv_rows, input_split_sizes=send_rows)
    want = torch.cat([torch.full((recv_rows[i], 3), float(10 * i + rank)) for i in range(n)])
    same(out, want, "all_to_all_single uneven")
    # lists of uneven tensors
    ins = [torch.full((rank + j + 1,), float(10 * rank + j), dtype=torch.float64) for j in range(n)]
    outs = [torch.zeros(i + rank + 1, dtype=torch.float64) for i in range(n)]
    dist.all_to_all(outs, ins)
    for i in range(n):
        same(outs[i], torch.full((i + rank + 1,), float(10 * i + rank), dtype=torch.float64), f"all_to_all from {i}")


def check_gather_scatter(ctx):
    rank, n = ctx
    for root in range(n):
        outs = [torch.zeros(3, dtype=torch.int32) for _ in range(n)] if rank == root else None
        dist.gather(torch.full((3,), rank, dtype=torch.int32), gather_list=outs, dst=root)
        if rank == root:
            for i, o in enumerate(outs):
                same(o, torch.full((3,), i, dtype=torch.int32), f"gather to {root} from {i}")
        ins = [torch.full((2, 2), float(10 * root + i)) for i in range(n)] if rank == root else None
        out = torch.zeros(2, 2)
        dist.scatter(out, scatter_list=ins, src=root)
        same(out, torch.full((2, 2), float(10 * root + rank)), f"scatter from {root}")


def check_send_recv(ctx):
    rank, n = ctx
    if n == 1:
        return
    if rank == 0:
        for peer in range(1, n):
            dist.send(torch.full((COUNT,), float(peer), dtype=torch.float64), dst=peer)
        for peer in range(1, n):
            back = torch.zeros(4, dtype=torch.int64)
            dist.recv(back, src=peer)
            same(back, torch.full((4,), 7 * peer, dtype=torch.int64), f"recv from {peer}")
    else:
        got = torch.zeros(COUNT, dtype=torch.float64)
        dist.recv(got, src=0)
        same(got, torch.full((COUNT,), float(rank), dtype=torch.float64), "recv from 0")
        w = dist.isend(torch.full((4,), 7 * rank, dtype=torch.int64), dst=0)
        w.wait()
    try:
        dist.recv(torch.zeros(1))
        raise AssertionError("recv from any source must be refused")
    except RuntimeError as e:
        assert "any source is not supported" in str(e), e


def check_async_in_flight(ctx):
    rank, n = ctx
    ts = [inputs(rank, COUNT + k, torch.float32) for k in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    flat = torch.zeros(n * 5, dtype=torch.int64)
    gw = dist.all_gather_into_tensor(flat, torch.full((5,), rank, dtype=torch.int64), async_op=True)
    b = torch.full((9,), rank, dtype=torch.int32)
    bw = dist.broadcast(b, src=n - 1, async_op=True)
    fut = works[0].get_future()
    for k, (t, w) in enumerate(zip(ts, works)):
        w.wait()
        assert w.is_completed() and w.is_success()
        same(t, expected("sum", n, COUNT + k, torch.float32), f"async all_reduce {k}")
    same(fut.wait()[0], expected("sum", n, COUNT, torch.float32), "future of an all_reduce")
    gw.wait()
    bw.wait()
    same(flat, torch.arange(n).repeat_interleave(5), "async all_gather_into_tensor")
    same(b, torch.full((9,), n - 1, dtype=torch.int32), "async broadcast")
    dist.barrier()


def check_subgroups(ctx):
    rank, n = ctx
    evens = [r for r in range(n) if r % 2 == 0]
    odds = [r for r in range(n) if r % 2 == 1]
    g_even = dist.new_group(evens)
    g_odd = dist.new_group(odds) if odds else None
    g_all = dist.new_group(list(range(n)))
    mine, members = (g_even, evens) if rank % 2 == 0 else (g_odd, odds)
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    assert t.item() == float(sum(members)), (t, members)
    assert dist.get_rank(mine) == members.index(rank) and dist.get_world_size(mine) == len(members)
    out = torch.zeros(len(members), dtype=torch.int64)
    dist.all_gather_into_tensor(out, torch.tensor([rank]), group=mine)
    assert out.tolist() == members, out
    dist.broadcast(t, src=members[-1], group=mine)
    assert t.item() == float(sum(members))
    other = g_odd if rank % 2 == 0 else g_even
    assert other is None or other == dist.GroupMember.NON_GROUP_MEMBER
    u = torch.ones(3)
    dist.all_reduce(u, group=g_all)
    same(u, torch.full((3,), float(n)), "all_reduce on a group of every rank")
    dist.barrier()


def check_errors_carry_warn(ctx):
    rank, n = ctx
    try:
        dist.reduce(torch.ones(4), dst=n + 5)
        raise AssertionError("a reduce to a rank out of range must fail")
    except RuntimeError as e:
        assert "ncclInvalidArgument" in str(e) and "root" in str(e).lower(), e
    # (A tensor on another device never reaches the backend on this CPU-only PyTorch: torch's dispatcher refuses it.)
    for bad, words in ((torch.zeros(4, 4).t(), "not contiguous"), (torch.zeros(4, dtype=torch.int16), "dtype")):
        try:
            dist.all_reduce(bad)
            raise AssertionError(f"not refused: {words}")
        except RuntimeError as e:
            assert words in str(e), e
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=R.BAND)
        raise AssertionError("BAND must be refused")
    except RuntimeError as e:
        assert "not supported" in str(e), e


def check_timeout(ctx):
    """An operation that runs past its group's timeout fails with a named error instead of waiting."""
    rank, n = ctx
    if n == 1:
        return
    short = dist.new_group(list(range(n)), pg_options=conflux.torch.Options(timeout=datetime.timedelta(seconds=2)))
    if rank == 0:  # the peers never join this all-reduce
        try:
            dist.all_reduce(torch.ones(8), group=short)
            raise AssertionError("an all-reduce nobody else joined returned")
        except RuntimeError as e:
            assert "ran past its timeout" in str(e), e
    dist.barrier()


def check_codec(ctx):
    """A group whose Options name a codec carries it (cfxCommSetCodec): results within the codec's error, fewer
    bytes on the wire; a codec the library does not know fails on every rank with its reason."""
    rank, n = ctx
    opts = conflux.torch.Options(codec="bf16", codec_mode="always")
    g = dist.new_group(list(range(n)), pg_options=opts)
    x = torch.linspace(-3, 3, 4099) * (rank + 1)
    dist.all_reduce(x, group=g)
    want = torch.linspace(-3, 3, 4099) * (n * (n + 1) / 2)
    assert torch.allclose(x, want, rtol=2 ** -6, atol=1e-2), (x - want).abs().max()
    stats = g._compress_stats()
    if n > 1:
        assert stats["compressed"] and stats["codec"].startswith("bf16") and stats["wire_bytes"] < stats["buffer_bytes"], stats
    ints = torch.full((5,), rank, dtype=torch.int64)
    dist.all_reduce(ints, group=g)  # a dtype the codec cannot carry runs plain, exactly
    assert ints.tolist() == [n * (n - 1) // 2] * 5, ints
    for bad, words in ((conflux.torch.Options(codec="nonesuch"), "nonesuch"),
                       (conflux.torch.Options(codec="int8", codec_mode="sometimes"), "codec_mode")):
        try:
            dist.new_group(list(range(n)), pg_options=bad)
            raise AssertionError(f"{words}: accepted")
        except RuntimeError as e:
            assert words in str(e), e
    dist.barrier()


def check_shared_host_memory(ctx):
    """use_shared_host_memory(): tensors from blocks the ranks of a host map, which Conflux reads in place, give the
    same results in place and out of place at odd counts around the threshold; freed blocks are reused; turning it
    off puts PyTorch's allocator back."""
    rank, n = ctx
    conflux.torch.use_shared_host_memory(min_bytes=4096)
    try:
        for count in (1023, 1024, 4097, 65537, (1 << 20) + 3):  # 4 KiB-4 B .. 4 MiB + 12 B of float32
            for dtype in (torch.float32, torch.int64):
                for name in ("sum", "max"):
                    t = inputs(rank, count, dtype)
                    dist.all_reduce(t, op=OPS[name])
                    same(t, expected(name, n, count, dtype), f"shared all_reduce {dtype} {name} {count}")
            flat = torch.zeros(n * count)
            dist.all_gather_into_tensor(flat, torch.full((count,), float(rank)))
            same(flat, torch.arange(n).repeat_interleave(count).float(), f"shared all_gather {count}")
            out = torch.zeros(count)
            dist.reduce_scatter_tensor(out, inputs(rank, n * count, torch.float32))
            same(out, expected("sum", n, n * count, torch.float32)[rank * count:(rank + 1) * count],
                 f"shared reduce_scatter {count}")
            b = torch.full((count,), float(rank))
            dist.broadcast(b, src=n - 1)
            same(b, torch.full((count,), float(n - 1)), f"shared broadcast {count}")
        stats = conflux.torch.shared_host_memory_stats()
        assert stats["installed"] and stats["min_bytes"] == 4096, stats
        assert stats["blocks_made"] > 0 and stats["reuses"] > 0 and stats["fallbacks"] == 0, stats
        small = torch.zeros(16)  # under the threshold: PyTorch's own allocator
        assert small.sum().item() == 0
        inherited = torch.ones(1 << 20)
        made = conflux.torch.shared_host_memory_stats()["blocks_made"]
        pid = os.fork()  # a DataLoader worker: allocates from PyTorch's allocator, leaves the parent's blocks alone
        if pid == 0:
            ok = False
            try:
                fresh = torch.full((1 << 20,), 2.0)
                ok = fresh.sum().item() == 2 << 20 and inherited.sum().item() == 1 << 20
                del inherited, fresh
                ok = ok and conflux.torch.shared_host_memory_stats()["blocks_made"] == made
            finally:
                os._exit(0 if ok else 1)
        assert os.waitpid(pid, 0)[1] == 0, "the forked child's allocations went wrong"
        assert inherited.sum().item() == 1 << 20
    finally:
        conflux.torch.use_shared_host_memory(False)
    assert not conflux.torch.shared_host_memory_stats()["installed"]
    for bad in (0, -4096):
        try:
            conflux.torch.use_shared_host_memory(min_bytes=bad)
            raise AssertionError(f"min_bytes={bad} must be refused")
        except ValueError as e:
            assert "positive" in str(e), e
    dist.barrier()
