# SPDX-License-Identifier: Apache-2.0
"""Python exceptions for ncclResult_t codes, each carrying the code and the library's last WARN text.

Bad input found before the library is called (a non-contiguous array, an unsupported dtype, a GPU tensor) raises
the same classes as the library would, with `warn` empty and the reason in the message.
"""
from __future__ import annotations

from typing import Optional

from . import _lib


class ConfluxError(RuntimeError):
    """A Conflux call failed. `result` is the ncclResult_t (an int), `result_name` its name, `warn` the text of the
    library's last WARN when the call returned (it names the peer, rank and operation), `call` the C function."""

    def __init__(self, message: str, result: int, warn: str = "", call: Optional[str] = None):
        super().__init__(message)
        self.result = result
        self.result_name = _lib.RESULT_NAMES.get(result, f"ncclResult {result}")
        self.warn = warn
        self.call = call


class CudaError(ConfluxError):
    """ncclUnhandledCudaError."""


class LocalSystemError(ConfluxError):
    """ncclSystemError: a system call or the network stack failed locally."""


class InternalError(ConfluxError):
    """ncclInternalError: a bug in the library."""


class InvalidArgument(ConfluxError, ValueError):
    """ncclInvalidArgument: a bad argument (also raised for bad buffers before the library is called)."""


class InvalidUsage(ConfluxError):
    """ncclInvalidUsage: a call not allowed in this state, or not supported."""


class RemoteError(ConfluxError):
    """ncclRemoteError: a peer died, hung past its deadline, or a connection broke. `warn` names the peer."""


_BY_RESULT = {
    _lib.UNHANDLED_CUDA_ERROR: CudaError, _lib.SYSTEM_ERROR: LocalSystemError, _lib.INTERNAL_ERROR: InternalError,
    _lib.INVALID_ARGUMENT: InvalidArgument, _lib.INVALID_USAGE: InvalidUsage, _lib.REMOTE_ERROR: RemoteError,
}


def from_result(result: int, call: str) -> ConfluxError:
    warn = _lib.last_warn()
    name = _lib.RESULT_NAMES.get(result, f"ncclResult {result}")
    message = f"{call} failed: {name}"
    message += f": {warn}" if warn else f" ({_lib.error_string(result)})"
    return _BY_RESULT.get(result, ConfluxError)(message, result, warn, call)


def check(result: int, call: str) -> None:
    """Raises the exception for `result` unless it is ncclSuccess."""
    if result != _lib.SUCCESS:
        raise from_result(result, call)


def bad_argument(message: str) -> InvalidArgument:
    return InvalidArgument(message, _lib.INVALID_ARGUMENT)


def bad_usage(message: str) -> InvalidUsage:
    return InvalidUsage(message, _lib.INVALID_USAGE)
