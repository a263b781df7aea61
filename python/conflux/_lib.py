# SPDX-License-Identifier: Apache-2.0
"""Finds and loads the Conflux library, and declares the C functions the package calls (ctypes).

Why ctypes and not a compiled module: the binding stays pure Python, so `pip install ./python` needs no compiler
and one installed package works with any Python 3 that can load the library. ctypes releases the GIL around every
foreign call, so a rank blocked in a collective does not stop the process's other Python threads. The cost, about
a microsecond per call, is small beside a collective's.

Where the library comes from, first match wins:
  1. CFX_LIBRARY: the path of the libnccl.so.2 (or of a folder holding it) to load;
  2. when this package runs from a source checkout (python/conflux), that checkout's build/src/libnccl.so.2;
  3. the build tree `pip install ./python` was run beside, recorded at install time (_install_info.py);
  4. the dynamic loader's search path (an installed Conflux: libconflux.so, then libnccl.so.2).
Whatever is found must export cfxGetVersion: NVIDIA's libnccl.so.2 is refused by name.

Adding a C call (for example All-Scan, the other compressed collectives, all-to-all-v and MoE dispatch/combine):
declare its prototype in _PROTOTYPES below, exactly as the header has it (structs as ctypes.Structure, field for
field), and add a method that validates its buffers and calls Communicator._launch (comm.py), which gives it the
blocking, asynchronous and grouped forms.
"""
from __future__ import annotations

import ctypes
import os
import pathlib
import threading
from typing import Optional

c_int_p = ctypes.POINTER(ctypes.c_int)
NCCL_UNIQUE_ID_BYTES = 128
CFX_FAILURE_TEXT_BYTES = 256
NCCL_SPLIT_NOCOLOR = -1

# ncclResult_t
SUCCESS, UNHANDLED_CUDA_ERROR, SYSTEM_ERROR, INTERNAL_ERROR = 0, 1, 2, 3
INVALID_ARGUMENT, INVALID_USAGE, REMOTE_ERROR, IN_PROGRESS = 4, 5, 6, 7
RESULT_NAMES = {
    0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
    4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress",
}


class UniqueIdStruct(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * NCCL_UNIQUE_ID_BYTES)]


class FailureInfoStruct(ctypes.Structure):
    _fields_ = [
        ("rank", ctypes.c_int), ("reason", ctypes.c_int), ("detectedBy", ctypes.c_int), ("pid", ctypes.c_int),
        ("opSeq", ctypes.c_ulonglong), ("host", ctypes.c_char * 64), ("op", ctypes.c_char * 32),
        ("text", ctypes.c_char * CFX_FAILURE_TEXT_BYTES),
    ]


class StateEntryStruct(ctypes.Structure):
    _fields_ = [("buffer", ctypes.c_void_p), ("count", ctypes.c_size_t), ("datatype", ctypes.c_int)]


class StateSyncInfoStruct(ctypes.Structure):
    _fields_ = [
        ("hash", ctypes.c_ulonglong * 2), ("replaced", ctypes.c_int), ("sourceRank", ctypes.c_int),
        ("nOutdated", ctypes.c_int), ("bytesReceived", ctypes.c_size_t),
    ]


class EpochInfoStruct(ctypes.Structure):
    _fields_ = [
        ("epoch", ctypes.c_ulonglong), ("rank", ctypes.c_int), ("nRanks", ctypes.c_int),
        ("changed", ctypes.c_int), ("joined", ctypes.c_int), ("left", ctypes.c_int),
    ]


class CodecStruct(ctypes.Structure):
    """cfxCodec (conflux.h), field for field."""
    _fields_ = [
        ("format", ctypes.c_int), ("block", ctypes.c_int), ("rounding", ctypes.c_int),
        ("topkFraction", ctypes.c_float), ("topkValues", ctypes.c_int), ("mode", ctypes.c_int),
        ("feedback", ctypes.c_int), ("residual", ctypes.POINTER(ctypes.c_float)), ("seed", ctypes.c_ulonglong),
        ("measureError", ctypes.c_int),
    ]


class CompressStatsStruct(ctypes.Structure):
    """cfxCompressStats (conflux.h), field for field."""
    _fields_ = [
        ("compressed", ctypes.c_int), ("codec", ctypes.c_char * 48), ("algorithm", ctypes.c_char * 16),
        ("bufferBytes", ctypes.c_ulonglong), ("wireBytes", ctypes.c_ulonglong), ("relL2Error", ctypes.c_double),
    ]


_vp, _sz, _i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
_vpp = ctypes.POINTER(ctypes.c_void_p)
_uid_p = ctypes.POINTER(UniqueIdStruct)

# name: argument types, as include/nccl.h and include/conflux.h declare them. Every one returns ncclResult_t
# except those in _RESTYPES. Handles (ncclComm_t, cfxHostStream_t, cfxMaster_t, cfxMember_t) are void*.
_PROTOTYPES = {
    "ncclGetVersion": [c_int_p],
    "cfxGetVersion": [c_int_p],
    "ncclGetErrorString": [_i],
    "ncclGetLastError": [_vp],
    "ncclGetUniqueId": [_uid_p],
    "ncclCommInitRank": [_vpp, _i, UniqueIdStruct, _i],
    "cfxCommInitFromEnv": [_vpp],
    "ncclCommSplit": [_vp, _i, _i, _vpp, _vp],
    "ncclCommDestroy": [_vp],
    "ncclCommAbort": [_vp],
    "ncclCommRevoke": [_vp, _i],
    "ncclCommGetAsyncError": [_vp, c_int_p],
    "ncclCommCount": [_vp, c_int_p],
    "ncclCommUserRank": [_vp, c_int_p],
    "ncclAllReduce": [_vp, _vp, _sz, _i, _i, _vp, _vp],
    "ncclBroadcast": [_vp, _vp, _sz, _i, _i, _vp, _vp],
    "ncclReduce": [_vp, _vp, _sz, _i, _i, _i, _vp, _vp],
    "ncclAllGather": [_vp, _vp, _sz, _i, _vp, _vp],
    "ncclReduceScatter": [_vp, _vp, _sz, _i, _i, _vp, _vp],
    "ncclAlltoAll": [_vp, _vp, _sz, _i, _vp, _vp],
    "cfxScan": [_vp, _vp, _sz, _i, _i, _vp, _vp],
    "cfxExScan": [_vp, _vp, _sz, _i, _i, _vp, _vp],
    "ncclGather": [_vp, _vp, _sz, _i, _i, _vp, _vp],
    "ncclScatter": [_vp, _vp, _sz, _i, _i, _vp, _vp],
    "ncclSend": [_vp, _sz, _i, _i, _vp, _vp],
    "ncclRecv": [_vp, _sz, _i, _i, _vp, _vp],
    "ncclGroupStart": [],
    "ncclGroupEnd": [],
    "ncclGroupSimulateEnd": [_vp],
    "cfxHostStreamCreate": [_vpp],
    "cfxHostStreamQuery": [_vp],
    "cfxHostStreamSynchronize": [_vp],
    "cfxHostStreamDestroy": [_vp],
    "cfxCommGetFailures": [_vp, ctypes.POINTER(FailureInfoStruct), _i, c_int_p],
    "cfxSharedStateSync": [_vp, ctypes.POINTER(StateEntryStruct), _i, ctypes.POINTER(StateSyncInfoStruct)],
    "cfxStateHash": [ctypes.POINTER(StateEntryStruct), _i, ctypes.c_ulonglong * 2],
    "cfxMasterStart": [_uid_p, _uid_p, _vpp],
    "cfxMasterStop": [_vp],
    "cfxMasterGetEpoch": [_vp, ctypes.POINTER(ctypes.c_ulonglong), c_int_p],
    "cfxMemberJoin": [_uid_p, _vp, _vpp],
    "cfxMemberUpdate": [_vp, _vpp, ctypes.POINTER(EpochInfoStruct)],
    "cfxMemberLeave": [_vp],
    "cfxCodecParse": [ctypes.c_char_p, ctypes.POINTER(CodecStruct)],
    "cfxAllReduceCompressed": [_vp, _vp, _sz, _i, _i, ctypes.POINTER(CodecStruct), _vp, _vp],
    "cfxCommSetCodec": [_vp, ctypes.POINTER(CodecStruct)],
    "cfxCommGetCompressStats": [_vp, ctypes.POINTER(CompressStatsStruct)],
}
_RESTYPES = {"ncclGetErrorString": ctypes.c_char_p, "ncclGetLastError": ctypes.c_char_p}

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None


def _source_tree_candidates() -> list[pathlib.Path]:
    here = pathlib.Path(__file__).resolve().parent  # .../python/conflux in a checkout
    root = here.parent.parent
    if not (root / "include" / "conflux.h").is_file():
        return []
    return [root / "build" / "src" / "libnccl.so.2"]


def _install_candidates() -> list[pathlib.Path]:
    try:
        from . import _install_info  # written by setup.py at install time; absent in a checkout
    except ImportError:
        return []
    return [pathlib.Path(p) for p in getattr(_install_info, "LIBRARY_CANDIDATES", [])]


def _find() -> tuple[str, str]:
    """(what to pass to dlopen, where it came from)."""
    override = os.environ.get("CFX_LIBRARY")
    if override:
        path = pathlib.Path(override)
        if path.is_dir():
            path = path / "libnccl.so.2"
        if not path.is_file():
            raise OSError(f"CFX_LIBRARY={override}: no such library file")
        return str(path), "CFX_LIBRARY"
    for where, candidates in (("source tree", _source_tree_candidates()), ("install record", _install_candidates())):
        for path in candidates:
            if path.is_file():
                return str(path), where
    for name in ("libconflux.so", "libnccl.so.2"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return name, "dynamic loader"
    raise OSError(
        "the Conflux library was not found: set CFX_LIBRARY to its libnccl.so.2, build the checkout this package "
        "came from (make build), or install Conflux where the dynamic loader finds it")


def _declare(lib: ctypes.CDLL) -> None:
    for name, argtypes in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = _RESTYPES.get(name, ctypes.c_int)


def lib() -> ctypes.CDLL:
    """The loaded library, loaded on first use."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path, where = _find()
            loaded = ctypes.CDLL(path)
            if not hasattr(loaded, "cfxGetVersion"):
                raise OSError(f"{path} (from {where}) is not Conflux (it has no cfxGetVersion): "
                              "set CFX_LIBRARY to Conflux's libnccl.so.2")
            _declare(loaded)
            _path = path
            _lib = loaded
    return _lib


def library_path() -> str:
    """The file the package binds (resolved through /proc/self/maps when the loader found it by name)."""
    lib()
    assert _path is not None
    if "/" in _path:
        return os.path.realpath(_path)
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and os.path.basename(fields[-1]).startswith(("libnccl.so", "libconflux.so")):
                return fields[-1]
    return _path


def last_warn() -> str:
    """The text of the most recent WARN in this process ("" if none)."""
    text = lib().ncclGetLastError(None)
    return text.decode(errors="replace") if text else ""


def error_string(result: int) -> str:
    text = lib().ncclGetErrorString(result)
    return text.decode(errors="replace") if text else ""
