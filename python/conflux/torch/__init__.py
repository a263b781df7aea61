# SPDX-License-Identifier: Apache-2.0
"""The torch.distributed backend "conflux": `import conflux.torch` registers it.

    import conflux.torch                                   # 1. registers the backend
    torch.distributed.init_process_group("conflux")        # 2. env:// as torchrun sets it (MASTER_ADDR, ...)

CPU tensors of dtypes float32, float64, float16, bfloat16, int8, uint8, int32, int64 and bool; every operation of
ProcessGroup that DDP and torch.distributed use. The unique id (with its secret) goes through PyTorch's store.
Subgroups from new_group() are split from the default group's communicator when that group is "conflux": every
rank of the default group calls new_group(), as PyTorch requires, and the ranks outside the new group take part in
the split (torch 1.13 never calls a backend on them, so this module makes them). See docs for what differs from Gloo.
"""
from __future__ import annotations

import datetime
import functools
import inspect
from typing import Any, Optional

import torch.distributed as dist
from torch.distributed import distributed_c10d as _c10d

from .. import _lib

try:
    from .. import _torch_backend
    from .._torch_backend import ProcessGroupConflux
except ImportError as e:  # the extension was not built (no PyTorch at install time, or a plain checkout)
    raise ImportError(
        "conflux.torch: the extension conflux._torch_backend is missing; in a checkout run `make python-ext`, or "
        "reinstall with PyTorch present (pip install ./python)") from e

Options = ProcessGroupConflux.Options
BACKEND = "conflux"

__all__ = ["ProcessGroupConflux", "Options", "BACKEND", "use_shared_host_memory", "shared_host_memory_stats"]


def use_shared_host_memory(enabled: bool = True, min_bytes: int = 1 << 20) -> None:
    """CPU tensors of at least `min_bytes` bytes come from memory the ranks on this host share (ncclMemAlloc
    blocks); smaller ones, and every tensor once called with enabled=False, from PyTorch's allocator.

    Conflux then reads a same-host peer's tensor in place instead of copying it through shared-memory FIFOs at
    both ends: a 4-rank all-reduce of a DDP gradient bucket copies about a third of the bytes. Call it before
    building the model and DDP (the buckets are allocated then). Freed blocks are kept for reuse (up to 512 MiB).
    Not the default because the blocks are shared mappings: a process forked afterwards (a DataLoader worker)
    that writes into a tensor it inherited writes into its parent's tensor as well."""
    if not enabled:
        _torch_backend._stop_shared_host_memory()
        return
    if min_bytes <= 0:
        raise ValueError(f"min_bytes must be positive, not {min_bytes}")
    _torch_backend._use_shared_host_memory(int(min_bytes), _lib.library_path())


def shared_host_memory_stats() -> dict:
    """What use_shared_host_memory() has done: blocks made and reused, bytes held by tensors and cached."""
    return _torch_backend._shared_host_stats()


def _timeout_of(pg_options: Optional[Options], timeout: Any) -> Options:
    if pg_options is not None:
        if not isinstance(pg_options, Options):
            raise TypeError(f"pg_options for the conflux backend must be conflux.torch.Options, not "
                            f"{type(pg_options).__name__}")
        return pg_options
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    return Options(timeout=timeout)


def _default_conflux_group() -> Optional[ProcessGroupConflux]:
    try:
        default = _c10d._get_default_group()
    except RuntimeError:  # not initialized: this call makes the default group
        return None
    return default if isinstance(default, ProcessGroupConflux) else None


def _create(backend_opts: Any, pg_options: Optional[Options]) -> ProcessGroupConflux:
    options = _timeout_of(pg_options, backend_opts.timeout)
    ranks = list(backend_opts.global_ranks_in_group)
    default = _default_conflux_group() if ranks else None
    if default is not None:
        return default._split(ranks, options)
    return ProcessGroupConflux(backend_opts.store, backend_opts.group_rank, backend_opts.group_size, options,
                               _lib.library_path())


def _wrap_group_helper() -> None:
    """new_group() on the ranks outside the new group: they take part in the split of the default communicator
    (ncclCommSplit is collective over the parent), which torch 1.13 does not ask a backend to do."""
    helper = _c10d._new_process_group_helper
    if getattr(helper, "_conflux_wrapped", False):
        return
    signature = inspect.signature(helper)
    if "global_ranks_in_group" not in signature.parameters or "backend" not in signature.parameters:
        return  # another PyTorch: subgroups then come from the store, as for a non-conflux default group

    @functools.wraps(helper)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        ranks = bound.arguments.get("global_ranks_in_group") or []
        backend = bound.arguments.get("backend")
        if ranks and backend is not None and str(dist.Backend(backend)).lower() == BACKEND:
            default = _default_conflux_group()
            if default is not None and default.rank() not in ranks:
                default._split_nocolor()
        return helper(*args, **kwargs)

    wrapped._conflux_wrapped = True  # type: ignore[attr-defined]
    _c10d._new_process_group_helper = wrapped


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create, extended_api=True)
    _wrap_group_helper()
