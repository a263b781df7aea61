# SPDX-License-Identifier: Apache-2.0
"""A rank killed mid-job (test_faults.py): every survivor gets an exception naming it, within the library's
deadlines rather than a hang, and shuts down cleanly. The last rank kills itself with SIGKILL."""
from __future__ import annotations

import datetime
import os
import signal
import sys

import numpy as np

import conflux

ROUNDS = 10000  # far more than it takes; the launcher's timeout catches a hang


def setup():
    return None


def die_if_last(rank, n):
    if rank == n - 1:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def check_binding_survivors_get_remote_error(_):
    comm = conflux.Communicator.from_env()
    comm.barrier()
    die_if_last(comm.rank, comm.size)
    x = np.ones(1 << 14, np.float32)
    try:
        for _ in range(ROUNDS):
            comm.all_reduce(x)
        raise AssertionError("all-reduces kept succeeding after a peer was killed")
    except conflux.RemoteError as e:
        assert e.result == 6 and f"rank {comm.size - 1}" in e.warn, e
    failures = comm.failures()
    assert [f.rank for f in failures] == [comm.size - 1] and failures[0].reason == "exited", failures
    comm.abort()


def check_torch_survivors_get_an_exception(_):
    import torch
    import torch.distributed as dist
    import conflux.torch  # noqa: F401

    dist.init_process_group("conflux", init_method="env://", timeout=datetime.timedelta(seconds=120))
    rank, n = dist.get_rank(), dist.get_world_size()
    dist.barrier()
    die_if_last(rank, n)
    t = torch.ones(1 << 14)
    try:
        for _ in range(ROUNDS):
            dist.all_reduce(t)
        raise AssertionError("all-reduces kept succeeding after a peer was killed")
    except RuntimeError as e:
        assert "ncclRemoteError" in str(e) and f"rank {n - 1}" in str(e), e
    try:
        dist.all_reduce(t)
        raise AssertionError("the group kept working after the failure")
    except RuntimeError:
        pass
    dist.destroy_process_group()  # must return: the group aborts rather than wait for the dead peer
