# SPDX-License-Identifier: Apache-2.0
"""Dynamic membership (cfxMaster*, cfxMember*): peers join and leave a running group at epoch boundaries.

One process runs a Master and hands its id (bytes(master.id)) to the peers out of band. Each peer joins with
Member.join(id) and calls update() between steps; update() returns the epoch's Communicator, which belongs to the
member (do not destroy it; it is valid until the next update() or leave()). See conflux.h for the all-or-nothing
rule of collectives on these communicators and for what happens when a member dies.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Optional

from . import _lib, errors
from .comm import Communicator, UniqueId


@dataclass(frozen=True)
class EpochInfo:
    epoch: int      # grows at every boundary that changed the members
    rank: int       # this member's rank in the epoch's communicator
    size: int
    changed: bool   # a new communicator was formed at this boundary
    joined: int     # members admitted at this boundary
    left: int       # members gone since the previous epoch


class Master:
    """cfxMasterStart: decides epochs. restart_from: the id of a master that died, to take its place."""

    def __init__(self, restart_from: Optional[UniqueId] = None):
        raw_id, handle = _lib.UniqueIdStruct(), ctypes.c_void_p()
        prev = ctypes.byref(restart_from._struct()) if restart_from is not None else None
        errors.check(_lib.lib().cfxMasterStart(prev, ctypes.byref(raw_id), ctypes.byref(handle)), "cfxMasterStart")
        self.id = UniqueId(bytes(raw_id))
        self._handle: Optional[int] = handle.value

    def epoch(self) -> tuple[int, int]:
        """(the current epoch, how many members it has)."""
        epoch, members = ctypes.c_ulonglong(), ctypes.c_int()
        errors.check(_lib.lib().cfxMasterGetEpoch(self._live(), ctypes.byref(epoch), ctypes.byref(members)),
                     "cfxMasterGetEpoch")
        return epoch.value, members.value

    def stop(self) -> None:
        """cfxMasterStop; idempotent. Members reconnect to a restarted master at their next update."""
        handle, self._handle = self._handle, None
        if handle is not None:
            errors.check(_lib.lib().cfxMasterStop(handle), "cfxMasterStop")

    def _live(self) -> int:
        if self._handle is None:
            raise errors.bad_usage("the master was stopped")
        return self._handle

    def __enter__(self) -> "Master":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Member:
    """cfxMemberJoin: connects to the master; admitted at the first update()."""

    def __init__(self, master_id: UniqueId):
        handle = ctypes.c_void_p()
        errors.check(_lib.lib().cfxMemberJoin(ctypes.byref(master_id._struct()), None, ctypes.byref(handle)),
                     "cfxMemberJoin")
        self._handle: Optional[int] = handle.value
        self.comm: Optional[Communicator] = None

    def update(self) -> tuple[Communicator, EpochInfo]:
        """cfxMemberUpdate: the epoch boundary. Blocks until the master decides it; returns the epoch's communicator
        (the previous one is invalid from here on) and what changed. On an error, call update() again."""
        handle, info = ctypes.c_void_p(), _lib.EpochInfoStruct()
        self._retire_comm()
        errors.check(_lib.lib().cfxMemberUpdate(self._live(), ctypes.byref(handle), ctypes.byref(info)),
                     "cfxMemberUpdate")
        self.comm = Communicator(handle.value, owned=False)
        return self.comm, EpochInfo(info.epoch, info.rank, info.nRanks, bool(info.changed), info.joined, info.left)

    def leave(self) -> None:
        """cfxMemberLeave: tells the master, ends the member's communicator and frees the member. Idempotent."""
        handle, self._handle = self._handle, None
        self._retire_comm()
        if handle is not None:
            errors.check(_lib.lib().cfxMemberLeave(handle), "cfxMemberLeave")

    def _retire_comm(self) -> None:
        # The library may abort the epoch's communicator at the next boundary: the old wrapper must not reach it.
        if self.comm is not None:
            self.comm._handle = None
        self.comm = None

    def _live(self) -> int:
        if self._handle is None:
            raise errors.bad_usage("the member has left")
        return self._handle

    def __enter__(self) -> "Member":
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()
