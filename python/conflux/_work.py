# SPDX-License-Identifier: Apache-2.0
"""Handles of asynchronous operations: each owns one cfx host stream (conflux.h) and the buffers its op uses."""
from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Optional, Sequence

from . import _lib, errors
from ._buffers import Buffer


class HostStream:
    """A cfx host stream: ops enqueued on it run in order, on a progress thread of the communicator (collectives of
    different streams side by side where it has host lanes: CFX_HOST_LANES)."""

    def __init__(self) -> None:
        handle = ctypes.c_void_p()
        errors.check(_lib.lib().cfxHostStreamCreate(ctypes.byref(handle)), "cfxHostStreamCreate")
        self.handle: Optional[int] = handle.value

    def destroy(self) -> int:
        """Waits for the stream's ops and frees it; returns the first error of its ops (an ncclResult_t)."""
        if self.handle is None:
            return _lib.SUCCESS
        handle, self.handle = self.handle, None
        return _lib.lib().cfxHostStreamDestroy(handle)


class Work:
    """The handle of an asynchronous op (or of an asynchronous group).

    The op runs on its communicator's progress thread. Its buffers must stay as they are until the op is over:
    freeing, resizing or writing them meanwhile is illegal. The handle keeps a reference to each buffer, so
    dropping your own reference is safe; numpy then refuses to resize an array it holds, and a torch tensor that
    was resized, moved or written in place meanwhile makes wait() raise InvalidUsage (its contents are undefined).

    done() never blocks and never raises; wait() blocks, then returns the op's result (its output buffer) or raises
    the op's error (a ConfluxError carrying the ncclResult_t and the WARN text naming the failed peer). The handle
    lets go of the buffers in wait(). Dropping an unfinished handle waits for the op before they are released.
    """

    def __init__(self, call: str, stream: HostStream, buffers: Sequence[Buffer], result: Any = None,
                 on_finish: Optional[Callable[[], None]] = None):
        self.call = call
        self._stream = stream
        self._buffers = list(buffers)
        self._result = result
        self._on_finish = on_finish
        self._lock = threading.Lock()
        self._error: Optional[BaseException] = None
        self._finished = False

    def done(self) -> bool:
        """True once the op has completed or failed (wait() then returns or raises at once)."""
        if not self._lock.acquire(blocking=False):
            return False  # another thread is in wait(), finishing it
        try:
            return self._finished or _lib.lib().cfxHostStreamQuery(self._stream.handle) != _lib.IN_PROGRESS
        finally:
            self._lock.release()

    def wait(self) -> Any:
        """Blocks until the op is over; returns its result or raises its error."""
        self._finish()
        if self._error is not None:
            raise self._error
        return self._result

    def _finish(self) -> None:
        with self._lock:
            if self._finished:
                return
            rc = self._stream.destroy()  # waits for the op, bounded by the library's failure deadlines
            if rc != _lib.SUCCESS:
                self._error = errors.from_result(rc, self.call)
            else:
                for buf in self._buffers:
                    why = buf.changed()
                    if why:
                        self._error = errors.bad_usage(f"{self.call}: {why}; its contents are undefined")
                        break
            self._buffers = []
            self._finished = True
            on_finish, self._on_finish = self._on_finish, None
        if on_finish is not None:
            on_finish()

    def __del__(self) -> None:
        try:
            self._finish()
        except Exception:  # the interpreter may be shutting down; the stream is gone with the process anyway
            pass

    def __repr__(self) -> str:
        state = "finished" if self._finished else "pending"
        return f"<conflux.Work {self.call} {state}>"
