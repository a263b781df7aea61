# SPDX-License-Identifier: Apache-2.0
"""Communicators, unique ids, groups and every collective and point-to-point call, on host memory."""
from __future__ import annotations

import contextlib
import ctypes
import enum
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Optional, Sequence, Union, overload

import numpy as np

from . import _buffers, _lib, errors
from ._buffers import Buffer, as_buffer
from ._work import HostStream, Work


class ReduceOp(enum.IntEnum):
    """ncclRedOp_t. AVG divides the sum by the rank count (floats pre-scale each input, integers divide the sum)."""
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


OpLike = Union[ReduceOp, str, int]


def _reduce_op(op: OpLike) -> int:
    if isinstance(op, str):
        try:
            return int(ReduceOp[op.upper()])
        except KeyError:
            raise errors.bad_argument(f"unknown reduction {op!r}; use one of sum, prod, max, min, avg") from None
    if int(op) not in ReduceOp._value2member_map_:
        raise errors.bad_argument(f"unknown reduction {op!r}; use one of sum, prod, max, min, avg")
    return int(op)


class UniqueId:
    """ncclUniqueId: the root's address and the session secret. Treat its bytes as a credential: hand them to the
    other ranks over a channel you trust (bytes(uid), UniqueId(data))."""

    def __init__(self, data: bytes):
        if len(data) != _lib.NCCL_UNIQUE_ID_BYTES:
            raise errors.bad_argument(f"a unique id has {_lib.NCCL_UNIQUE_ID_BYTES} bytes, not {len(data)}")
        self._data = bytes(data)

    @classmethod
    def generate(cls) -> "UniqueId":
        """ncclGetUniqueId: call on one rank, then give the bytes to every rank."""
        raw = _lib.UniqueIdStruct()
        errors.check(_lib.lib().ncclGetUniqueId(ctypes.byref(raw)), "ncclGetUniqueId")
        return cls(bytes(raw))

    def _struct(self) -> _lib.UniqueIdStruct:
        raw = _lib.UniqueIdStruct()
        ctypes.memmove(ctypes.byref(raw), self._data, _lib.NCCL_UNIQUE_ID_BYTES)
        return raw

    def __bytes__(self) -> bytes:
        return self._data

    def __repr__(self) -> str:
        return "<conflux.UniqueId (secret not shown)>"


@dataclass(frozen=True)
class FailureInfo:
    """One failed peer, as cfxCommGetFailures reports it."""
    rank: int
    reason: str  # "exited", "connection_lost" or "hung"
    detected_by: int
    pid: int
    op_seq: int
    host: str
    op: str
    text: str


_REASONS = {1: "exited", 2: "connection_lost", 3: "hung"}


@dataclass(frozen=True)
class StateSyncInfo:
    """What cfxSharedStateSync did on this rank. `hash` is the 128-bit digest every rank now holds."""
    hash: int
    replaced: bool
    source_rank: int
    n_outdated: int
    bytes_received: int


def _state_entries(buffers: Sequence[Any], writable: bool) -> tuple[Any, list[Buffer]]:
    bufs = [as_buffer(b, f"state entry {i}", writable=writable) for i, b in enumerate(buffers)]
    entries = (_lib.StateEntryStruct * max(len(bufs), 1))()
    for i, b in enumerate(bufs):
        entries[i].buffer, entries[i].count, entries[i].datatype = b.ptr, b.count, b.datatype
    return entries, bufs


_CODEC_MODES = {"auto": 0, "always": 1, "never": 2}
_FEEDBACK_LIBRARY = 1  # cfxFeedbackLibrary


def _codec(text: str, mode: str, feedback: bool = False) -> _lib.CodecStruct:
    """cfxCodecParse of `text` ("bf16", "int8", "topk:0.01", ...; see conflux.h), with cfxCompressMode `mode`;
    feedback: cfxFeedbackLibrary (the library keeps the residual per communicator and send buffer)."""
    if mode not in _CODEC_MODES:
        raise errors.bad_argument(f"codec mode {mode!r}: use auto, always or never")
    codec = _lib.CodecStruct()
    errors.check(_lib.lib().cfxCodecParse(text.encode(), ctypes.byref(codec)), "cfxCodecParse")
    codec.mode = _CODEC_MODES[mode]
    codec.feedback = _FEEDBACK_LIBRARY if feedback else 0
    return codec


@dataclass(frozen=True)
class CompressStats:
    """cfxCommGetCompressStats: what the last op that carried a codec did on this rank."""
    compressed: bool
    codec: str
    algorithm: str
    buffer_bytes: int
    wire_bytes: int


def _hash_int(words: Any) -> int:
    return int(words[0]) | (int(words[1]) << 64)


def state_hash(buffers: Sequence[Any]) -> int:
    """cfxStateHash: the 128-bit digest cfxSharedStateSync compares, computed locally."""
    entries, _ = _state_entries(buffers, writable=False)
    words = (ctypes.c_ulonglong * 2)()
    errors.check(_lib.lib().cfxStateHash(entries, len(buffers), words), "cfxStateHash")
    return _hash_int(words)


class _Group:
    """The state of `with conflux.group()` on one thread."""

    def __init__(self, async_op: bool):
        self.stream = HostStream() if async_op else None
        self.buffers: list[Buffer] = []
        self.results: list[Any] = []


_local = threading.local()


def _current_group() -> Optional[_Group]:
    return getattr(_local, "group", None)


class GroupHandle:
    """What `with conflux.group(...) as g` gives: after the block, g.wait()/g.done() for an asynchronous group."""

    def __init__(self) -> None:
        self.work: Optional[Work] = None

    def done(self) -> bool:
        return self.work is None or self.work.done()

    def wait(self) -> Any:
        return None if self.work is None else self.work.wait()


@contextlib.contextmanager
def group(async_op: bool = False) -> Iterator[GroupHandle]:
    """ncclGroupStart/End around the block: the calls inside are recorded and start together at its end (sends and
    receives that must progress together belong in one group). With async_op=True they run on one cfx host stream
    and the handle's wait()/done() follow them; calls inside never take async_op themselves. An exception inside the
    block ends the group without running anything."""
    if _current_group() is not None:
        raise errors.bad_usage("conflux.group() blocks do not nest")
    handle = GroupHandle()
    g = _Group(async_op)
    errors.check(_lib.lib().ncclGroupStart(), "ncclGroupStart")
    _local.group = g
    try:
        yield handle
    except BaseException:
        _local.group = None
        _lib.lib().ncclGroupSimulateEnd(None)  # ends the group without launching what it recorded
        if g.stream is not None:
            g.stream.destroy()
        raise
    _local.group = None
    rc = _lib.lib().ncclGroupEnd()
    if g.stream is None:
        errors.check(rc, "ncclGroupEnd")
        return
    if rc != _lib.SUCCESS:
        g.stream.destroy()
        errors.check(rc, "ncclGroupEnd")
    handle.work = Work("group", g.stream, g.buffers, g.results)


def _new_like(template: Buffer, count: int) -> Any:
    """A fresh output of `count` elements of template's type and kind (numpy array or torch tensor)."""
    owner = template.owner
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(owner, torch.Tensor):
        return torch.empty(count, dtype=owner.dtype)
    return np.empty(count, dtype=np.asarray(owner).dtype)


class Communicator:
    """One rank of a communicator over host memory. Use it from one thread at a time (calls are serialised by a
    lock); abort() may come from any thread. As a context manager it is destroyed on exit, or aborted when the
    block raised."""

    def __init__(self, handle: int, owned: bool = True):
        self._handle: Optional[int] = handle
        self._owned = owned
        self._lock = threading.RLock()
        self._works: "weakref.WeakSet[Work]" = weakref.WeakSet()
        rank, count = ctypes.c_int(), ctypes.c_int()
        errors.check(_lib.lib().ncclCommUserRank(handle, ctypes.byref(rank)), "ncclCommUserRank")
        errors.check(_lib.lib().ncclCommCount(handle, ctypes.byref(count)), "ncclCommCount")
        self.rank: int = rank.value
        self.size: int = count.value

    # ---- creation and shutdown ----------------------------------------------------------------------------

    @classmethod
    def from_env(cls) -> "Communicator":
        """cfxCommInitFromEnv: every process of the job calls it; rank, size and root come from torchrun
        (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI or Slurm variables; the secret from CFX_SECRET or
        CFX_SECRET_FILE."""
        handle = ctypes.c_void_p()
        errors.check(_lib.lib().cfxCommInitFromEnv(ctypes.byref(handle)), "cfxCommInitFromEnv")
        return cls(handle.value)

    @classmethod
    def from_unique_id(cls, uid: UniqueId, rank: int, size: int) -> "Communicator":
        """ncclCommInitRank: blocks until every rank joined the id."""
        handle = ctypes.c_void_p()
        errors.check(_lib.lib().ncclCommInitRank(ctypes.byref(handle), size, uid._struct(), rank), "ncclCommInitRank")
        return cls(handle.value)

    def split(self, color: int, key: int = 0) -> Optional["Communicator"]:
        """ncclCommSplit: collective over every rank; color None (or NCCL_SPLIT_NOCOLOR) takes part and gets None."""
        handle = ctypes.c_void_p()
        c = _lib.NCCL_SPLIT_NOCOLOR if color is None else color
        with self._lock:
            errors.check(_lib.lib().ncclCommSplit(self._live(), c, key, ctypes.byref(handle), None), "ncclCommSplit")
        return None if handle.value is None else Communicator(handle.value)

    def destroy(self) -> None:
        """Waits for this communicator's async ops, then ncclCommDestroy. Idempotent."""
        self._check_owned("destroy")
        with self._lock:
            if self._handle is None:
                return
            self._drain()
            handle, self._handle = self._handle, None
            errors.check(_lib.lib().ncclCommDestroy(handle), "ncclCommDestroy")

    def abort(self) -> None:
        """ncclCommAbort: stops every op still running (they fail) and frees the communicator; never hangs.
        Idempotent; callable from any thread."""
        self._check_owned("abort")
        handle, self._handle = self._handle, None
        if handle is None:
            return
        rc = _lib.lib().ncclCommAbort(handle)
        self._drain()
        errors.check(rc, "ncclCommAbort")

    def revoke(self) -> None:
        """ncclCommRevoke: stops in-flight ops on every rank; afterwards only destroy, abort and split work."""
        errors.check(_lib.lib().ncclCommRevoke(self._live(), 0), "ncclCommRevoke")

    def async_error(self) -> int:
        """ncclCommGetAsyncError: ncclSuccess (0), ncclInProgress, or the error that broke the communicator."""
        rc = ctypes.c_int()
        errors.check(_lib.lib().ncclCommGetAsyncError(self._live(), ctypes.byref(rc)), "ncclCommGetAsyncError")
        return rc.value

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if not self._owned:
            return
        if exc_type is None:
            self.destroy()
        else:
            self.abort()

    def __repr__(self) -> str:
        state = "live" if self._handle is not None else "closed"
        return f"<conflux.Communicator rank {self.rank} of {self.size}, {state}>"

    def _live(self) -> int:
        if self._handle is None:
            raise errors.bad_usage("the communicator was destroyed or aborted")
        return self._handle

    def _check_owned(self, what: str) -> None:
        if not self._owned:
            raise errors.bad_usage(
                f"{what}: this communicator belongs to its Member (cfxMemberUpdate); it ends at the next update or at "
                "leave()")

    def _drain(self) -> None:
        for work in list(self._works):
            work._finish()

    # ---- membership and state -----------------------------------------------------------------------------

    def failures(self) -> list[FailureInfo]:
        """cfxCommGetFailures: the failed peers this rank knows of, in the order it learned them."""
        n = ctypes.c_int()
        lib = _lib.lib()
        errors.check(lib.cfxCommGetFailures(self._live(), None, 0, ctypes.byref(n)), "cfxCommGetFailures")
        if n.value == 0:
            return []
        arr = (_lib.FailureInfoStruct * n.value)()
        errors.check(lib.cfxCommGetFailures(self._live(), arr, n.value, ctypes.byref(n)), "cfxCommGetFailures")
        return [FailureInfo(f.rank, _REASONS.get(f.reason, str(f.reason)), f.detectedBy, f.pid, f.opSeq,
                            f.host.decode(errors="replace"), f.op.decode(errors="replace"),
                            f.text.decode(errors="replace")) for f in arr[: min(n.value, len(arr))]]

    def set_codec(self, codec: Optional[str], mode: str = "auto") -> None:
        """cfxCommSetCodec: the default codec of this communicator's all-reduce, reduce-scatter, all-gather and
        broadcast on float32/float16/bfloat16 (sum, avg); None clears it. Call on every rank alike, between ops."""
        c = _codec(codec, mode) if codec else None
        with self._lock:
            errors.check(_lib.lib().cfxCommSetCodec(self._live(), ctypes.byref(c) if c else None), "cfxCommSetCodec")

    def compress_stats(self) -> CompressStats:
        """cfxCommGetCompressStats, after the op completed."""
        st = _lib.CompressStatsStruct()
        errors.check(_lib.lib().cfxCommGetCompressStats(self._live(), ctypes.byref(st)), "cfxCommGetCompressStats")
        return CompressStats(bool(st.compressed), st.codec.decode(errors="replace"),
                             st.algorithm.decode(errors="replace"), st.bufferBytes, st.wireBytes)

    def shared_state_sync(self, buffers: Sequence[Any]) -> StateSyncInfo:
        """cfxSharedStateSync: collective; afterwards every rank's buffers hold the majority's bytes."""
        entries, bufs = _state_entries(buffers, writable=True)
        info = _lib.StateSyncInfoStruct()
        with self._lock:
            rc = _lib.lib().cfxSharedStateSync(self._live(), entries, len(bufs), ctypes.byref(info))
        errors.check(rc, "cfxSharedStateSync")
        return StateSyncInfo(_hash_int(info.hash), bool(info.replaced), info.sourceRank, info.nOutdated,
                             info.bytesReceived)

    # ---- the calls ------------------------------------------------------------------------------------------

    def _launch(self, call: str, fn: Any, args: tuple, buffers: Sequence[Buffer], result: Any, async_op: bool) -> Any:
        """Calls fn(*args, stream) blocking, inside the current group, or on a fresh host stream."""
        lib_fn = getattr(_lib.lib(), fn)
        g = _current_group()
        if g is not None:
            if async_op:
                raise errors.bad_usage(f"{call}: inside conflux.group(), make the group asynchronous instead")
            rc = lib_fn(*args, g.stream.handle if g.stream else None)
            errors.check(rc, fn)
            g.buffers.extend(buffers)
            g.results.append(result)
            return result
        with self._lock:
            if not async_op:
                errors.check(lib_fn(*args, None), fn)
                return result
            stream = HostStream()
            rc = lib_fn(*args, stream.handle)
            if rc != _lib.SUCCESS:
                stream.destroy()
                errors.check(rc, fn)
            work = Work(call, stream, buffers, result)
            self._works.add(work)
            return work

    def _count(self, buf: Buffer, call: str, multiple: int) -> int:
        if buf.count % multiple:
            raise errors.bad_argument(
                f"{call}: {buf.what} holds {buf.count} elements, not a multiple of the {multiple} ranks")
        return buf.count // multiple

    def _pair(self, call: str, send: Any, recv: Any, recv_count: Optional[int] = None,
              reduces: bool = False) -> tuple[Buffer, Buffer, Any]:
        """The send and receive Buffers of a call; recv None means in place when recv_count is None, else a new
        output of recv_count elements."""
        s = as_buffer(send, "send", writable=recv is None and recv_count is None)
        if reduces:
            _buffers.no_bool(s, call)
        if recv is None:
            if recv_count is None:
                return s, s, send
            recv = _new_like(s, recv_count)
        r = as_buffer(recv, "recv", writable=True)
        _buffers.same_type(s, r, call)
        return s, r, recv

    @overload
    def all_reduce(self, send: Any, recv: Any = ..., op: OpLike = ..., *, codec: Optional[str] = ...,
                   codec_mode: str = ..., codec_feedback: bool = ..., async_op: Literal[False] = ...) -> Any: ...
    @overload
    def all_reduce(self, send: Any, recv: Any = ..., op: OpLike = ..., *, codec: Optional[str] = ...,
                   codec_mode: str = ..., codec_feedback: bool = ..., async_op: Literal[True]) -> Work: ...

    def all_reduce(self, send: Any, recv: Any = None, op: OpLike = "sum", *, codec: Optional[str] = None,
                   codec_mode: str = "auto", codec_feedback: bool = False, async_op: bool = False) -> Any:
        """Every rank gets the reduction of every rank's send (in place when recv is None). Returns the result.
        codec ("bf16", "int8", "topk:0.01", ... as cfxCodecParse reads it): cfxAllReduceCompressed, for float32,
        float16 and bfloat16 with sum or avg; codec_mode "auto" compresses where the planner prices it cheaper
        (slow links between hosts), "always" on every link. codec_feedback: error feedback, what the encoding
        dropped is added to this send buffer's next call (the library keeps the residual per communicator, send
        buffer and count; cfxCommFreeFeedback drops it). Every rank passes the same codec."""
        s, r, out = self._pair("all_reduce", send, recv, reduces=True)
        if r.count != s.count:
            raise errors.bad_argument(f"all_reduce: send holds {s.count} elements but recv {r.count}")
        if codec is None:
            args = (s.ptr, r.ptr, s.count, s.datatype, _reduce_op(op), self._live())
            return self._launch("all_reduce", "ncclAllReduce", args, [s, r], out, async_op)
        c = _codec(codec, codec_mode, codec_feedback)
        args = (s.ptr, r.ptr, s.count, s.datatype, _reduce_op(op), ctypes.byref(c), self._live())
        return self._launch("all_reduce", "cfxAllReduceCompressed", args, [s, r], out, async_op)

    def broadcast(self, buf: Any, root: int = 0, recv: Any = None, *, async_op: bool = False) -> Any:
        """Every rank gets root's buf (in place when recv is None)."""
        s, r, out = self._pair("broadcast", buf, recv)
        if r.count != s.count:
            raise errors.bad_argument(f"broadcast: send holds {s.count} elements but recv {r.count}")
        args = (s.ptr, r.ptr, s.count, s.datatype, root, self._live())
        return self._launch("broadcast", "ncclBroadcast", args, [s, r], out, async_op)

    def reduce(self, send: Any, root: int = 0, recv: Any = None, op: OpLike = "sum", *, async_op: bool = False) -> Any:
        """root gets the reduction of every rank's send (in place when recv is None; recv is unused elsewhere)."""
        s, r, out = self._pair("reduce", send, recv, reduces=True)
        if r.count != s.count:
            raise errors.bad_argument(f"reduce: send holds {s.count} elements but recv {r.count}")
        args = (s.ptr, r.ptr, s.count, s.datatype, _reduce_op(op), root, self._live())
        return self._launch("reduce", "ncclReduce", args, [s, r], out, async_op)

    def all_gather(self, send: Any, recv: Any = None, *, async_op: bool = False) -> Any:
        """Rank i's send lands at block i of recv on every rank (recv None: a new 1-D output of size*len(send))."""
        s = as_buffer(send, "send", writable=False)
        s, r, out = self._pair("all_gather", send, recv, recv_count=s.count * self.size)
        if r.count != s.count * self.size:
            raise errors.bad_argument(
                f"all_gather: recv holds {r.count} elements; it needs {self.size} x {s.count}")
        args = (s.ptr, r.ptr, s.count, s.datatype, self._live())
        return self._launch("all_gather", "ncclAllGather", args, [s, r], out, async_op)

    def reduce_scatter(self, send: Any, recv: Any = None, op: OpLike = "sum", *, async_op: bool = False) -> Any:
        """Rank i gets block i of the reduction of every rank's send (recv None: a new output of len(send)/size)."""
        s = as_buffer(send, "send", writable=False)
        count = self._count(s, "reduce_scatter", self.size)
        s, r, out = self._pair("reduce_scatter", send, recv, recv_count=count, reduces=True)
        if r.count != count:
            raise errors.bad_argument(f"reduce_scatter: recv holds {r.count} elements; it needs {count}")
        args = (s.ptr, r.ptr, count, s.datatype, _reduce_op(op), self._live())
        return self._launch("reduce_scatter", "ncclReduceScatter", args, [s, r], out, async_op)

    def all_to_all(self, send: Any, recv: Any = None, *, async_op: bool = False) -> Any:
        """Block j of send goes to rank j, whose block i of recv receives it (equal blocks)."""
        s = as_buffer(send, "send", writable=False)
        count = self._count(s, "all_to_all", self.size)
        s, r, out = self._pair("all_to_all", send, recv, recv_count=s.count)
        if r.count != s.count:
            raise errors.bad_argument(f"all_to_all: send holds {s.count} elements but recv {r.count}")
        args = (s.ptr, r.ptr, count, s.datatype, self._live())
        return self._launch("all_to_all", "ncclAlltoAll", args, [s, r], out, async_op)

    def all_to_all_v(self, send: Any, send_counts: Sequence[int], recv: Any, recv_counts: Sequence[int], *,
                     async_op: bool = False) -> Any:
        """Uneven all-to-all: the next send_counts[j] elements of send go to rank j, and rank i's block for this rank
        lands at recv's next recv_counts[i] elements (blocks packed in rank order). recv_counts[i] must equal what
        rank i sends here. Grouped sends and receives straight between the ranks; this rank's own block is copied
        at the call."""
        n = self.size
        s = as_buffer(send, "send", writable=False)
        r = as_buffer(recv, "recv", writable=True)
        _buffers.same_type(s, r, "all_to_all_v")
        sc, rc = self._split_counts("send", send_counts, s), self._split_counts("recv", recv_counts, r)
        if sc[self.rank] != rc[self.rank]:
            raise errors.bad_argument(
                f"all_to_all_v: this rank sends itself {sc[self.rank]} elements but expects {rc[self.rank]}")
        so, ro = np.concatenate(([0], np.cumsum(sc)[:-1])), np.concatenate(([0], np.cumsum(rc)[:-1]))
        item, me, lib = s.itemsize, self.rank, _lib.lib()
        g = _current_group()
        if g is not None and async_op:
            raise errors.bad_usage("all_to_all_v: inside conflux.group(), make the group asynchronous instead")
        with self._lock:
            comm = self._live()
            stream = g.stream if g is not None else (HostStream() if async_op else None)
            handle = stream.handle if stream is not None else None
            errors.check(lib.ncclGroupStart(), "ncclGroupStart")
            rc_first = _lib.SUCCESS
            for k in range(1, n):  # peers in a staggered order, as the direct algorithms go
                to, frm = (me + k) % n, (me - k) % n
                if sc[to]:
                    rc_first = rc_first or lib.ncclSend(s.ptr + int(so[to]) * item, int(sc[to]), s.datatype, to, comm,
                                                        handle)
                if rc[frm]:
                    rc_first = rc_first or lib.ncclRecv(r.ptr + int(ro[frm]) * item, int(rc[frm]), r.datatype, frm,
                                                        comm, handle)
            if rc_first != _lib.SUCCESS:
                lib.ncclGroupSimulateEnd(None)
                if stream is not None and g is None:
                    stream.destroy()
                errors.check(rc_first, "all_to_all_v")
            ctypes.memmove(r.ptr + int(ro[me]) * item, s.ptr + int(so[me]) * item, int(sc[me]) * item)
            end = lib.ncclGroupEnd()
            if g is not None:
                errors.check(end, "ncclGroupEnd")
                g.buffers.extend([s, r])
                g.results.append(recv)
                return recv
            if stream is None:
                errors.check(end, "all_to_all_v")
                return recv
            if end != _lib.SUCCESS:
                stream.destroy()
                errors.check(end, "all_to_all_v")
            work = Work("all_to_all_v", stream, [s, r], recv)
            self._works.add(work)
            return work

    def _split_counts(self, side: str, counts: Sequence[int], buf: Buffer) -> list[int]:
        out = [int(c) for c in counts]
        if len(out) != self.size or any(c < 0 for c in out):
            raise errors.bad_argument(
                f"all_to_all_v: {side}_counts needs {self.size} counts of zero or more, got {list(counts)}")
        if sum(out) > buf.count:
            raise errors.bad_argument(
                f"all_to_all_v: {side}_counts add up to {sum(out)} elements, but {buf.what} holds {buf.count}")
        return out

    def scan(self, send: Any, recv: Any = None, op: OpLike = "sum", *, async_op: bool = False) -> Any:
        """cfxScan (All-Scan): rank r gets the reduction of the sends of ranks 0..r, combined in rank order (in place
        when recv is None). sum, prod, max and min; avg has no prefix meaning and is refused."""
        return self._scan("scan", "cfxScan", send, recv, op, async_op)

    def exscan(self, send: Any, recv: Any = None, op: OpLike = "sum", *, async_op: bool = False) -> Any:
        """cfxExScan: rank r gets the reduction of the sends of ranks 0..r-1; rank 0 gets the op's identity (0 for
        sum, 1 for prod, the type's lowest value for max and highest for min)."""
        return self._scan("exscan", "cfxExScan", send, recv, op, async_op)

    def _scan(self, call: str, fn: str, send: Any, recv: Any, op: OpLike, async_op: bool) -> Any:
        s, r, out = self._pair(call, send, recv, reduces=True)
        if r.count != s.count:
            raise errors.bad_argument(f"{call}: send holds {s.count} elements but recv {r.count}")
        args = (s.ptr, r.ptr, s.count, s.datatype, _reduce_op(op), self._live())
        return self._launch(call, fn, args, [s, r], out, async_op)

    def gather(self, send: Any, root: int = 0, recv: Any = None, *, async_op: bool = False) -> Any:
        """root gets rank i's send at block i of recv (recv None on root: a new output; ignored elsewhere)."""
        s = as_buffer(send, "send", writable=False)
        if self.rank != root:
            args = (s.ptr, None, s.count, s.datatype, root, self._live())
            return self._launch("gather", "ncclGather", args, [s], None, async_op)
        s, r, out = self._pair("gather", send, recv, recv_count=s.count * self.size)
        if r.count != s.count * self.size:
            raise errors.bad_argument(f"gather: recv holds {r.count} elements; it needs {self.size} x {s.count}")
        args = (s.ptr, r.ptr, s.count, s.datatype, root, self._live())
        return self._launch("gather", "ncclGather", args, [s, r], out, async_op)

    def scatter(self, send: Any, recv: Any, root: int = 0, *, async_op: bool = False) -> Any:
        """Rank i gets block i of root's send in recv (send is ignored, and may be None, elsewhere)."""
        r = as_buffer(recv, "recv", writable=True)
        if self.rank != root:
            args = (None, r.ptr, r.count, r.datatype, root, self._live())
            return self._launch("scatter", "ncclScatter", args, [r], recv, async_op)
        s = as_buffer(send, "send", writable=False)
        _buffers.same_type(s, r, "scatter")
        if s.count != r.count * self.size:
            raise errors.bad_argument(f"scatter: send holds {s.count} elements; it needs {self.size} x {r.count}")
        args = (s.ptr, r.ptr, r.count, r.datatype, root, self._live())
        return self._launch("scatter", "ncclScatter", args, [s, r], recv, async_op)

    def send(self, buf: Any, peer: int, *, async_op: bool = False) -> Any:
        """Sends buf to peer, which receives it with recv() of the same size and dtype. A blocking send may wait for
        the receiver: pair sends and receives that must progress together in one conflux.group()."""
        s = as_buffer(buf, "send", writable=False)
        args = (s.ptr, s.count, s.datatype, peer, self._live())
        return self._launch("send", "ncclSend", args, [s], None, async_op)

    def recv(self, buf: Any, peer: int, *, async_op: bool = False) -> Any:
        """Receives peer's next send() to this rank into buf; returns buf."""
        r = as_buffer(buf, "recv", writable=True)
        args = (r.ptr, r.count, r.datatype, peer, self._live())
        return self._launch("recv", "ncclRecv", args, [r], buf, async_op)

    def barrier(self, *, async_op: bool = False) -> Any:
        """Returns once every rank has called it (a one-element all-reduce)."""
        token = np.zeros(1, dtype=np.int32)
        return self.all_reduce(token, async_op=async_op)
