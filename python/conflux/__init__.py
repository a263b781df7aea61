# SPDX-License-Identifier: Apache-2.0
"""conflux: Python binding of the Conflux collective-communication library, on host memory.

    import numpy as np, conflux
    with conflux.Communicator.from_env() as comm:      # torchrun / mpirun / Slurm variables, CFX_SECRET
        x = np.full(1024, comm.rank, dtype=np.float32)
        comm.all_reduce(x)                               # in place, blocking
        work = comm.all_gather(x, async_op=True)         # on a cfx host stream
        gathered = work.wait()

Every call takes numpy arrays, torch CPU tensors or other buffer-protocol objects, in place and without copies,
and raises a ConfluxError subclass carrying the ncclResult_t and the library's WARN text when it fails.
`import conflux.torch` registers the torch.distributed backend "conflux".
"""
from __future__ import annotations

import ctypes

from . import _lib, errors
from ._work import Work
from .comm import (CompressStats, Communicator, FailureInfo, GroupHandle, ReduceOp, StateSyncInfo, UniqueId,
                   group, state_hash)
from .errors import (ConfluxError, CudaError, InternalError, InvalidArgument, InvalidUsage, LocalSystemError,
                     RemoteError)
from .membership import EpochInfo, Master, Member

__all__ = [
    "Communicator", "UniqueId", "Work", "GroupHandle", "ReduceOp", "FailureInfo", "StateSyncInfo", "CompressStats",
    "EpochInfo",
    "Master", "Member", "group", "state_hash", "version", "nccl_version", "library_path", "ConfluxError",
    "CudaError", "LocalSystemError", "InternalError", "InvalidArgument", "InvalidUsage", "RemoteError",
]

__version__ = "0.1.0"


def version() -> int:
    """cfxGetVersion: the loaded library's release, MAJOR*10000 + MINOR*100 + PATCH."""
    v = ctypes.c_int()
    errors.check(_lib.lib().cfxGetVersion(ctypes.byref(v)), "cfxGetVersion")
    return v.value


def nccl_version() -> int:
    """ncclGetVersion: the NCCL API version the library implements (NCCL_VERSION_CODE)."""
    v = ctypes.c_int()
    errors.check(_lib.lib().ncclGetVersion(ctypes.byref(v)), "ncclGetVersion")
    return v.value


def library_path() -> str:
    """The file of the Conflux library this package binds."""
    return _lib.library_path()
