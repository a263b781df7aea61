# SPDX-License-Identifier: Apache-2.0
"""Turns numpy arrays, torch CPU tensors and other buffer-protocol objects into (pointer, count, datatype) without
copying, or refuses them with a clear exception: never a silent copy, never a pointer the library cannot use."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from . import errors

# ncclDataType_t
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = range(10)
DTYPE_NAMES = {INT8: "int8", UINT8: "uint8", INT32: "int32", UINT32: "uint32", INT64: "int64", UINT64: "uint64",
               FLOAT16: "float16", FLOAT32: "float32", FLOAT64: "float64", BFLOAT16: "bfloat16"}

_NUMPY = {np.dtype(np.int8): INT8, np.dtype(np.uint8): UINT8, np.dtype(np.int32): INT32,
          np.dtype(np.uint32): UINT32, np.dtype(np.int64): INT64, np.dtype(np.uint64): UINT64,
          np.dtype(np.float16): FLOAT16, np.dtype(np.float32): FLOAT32, np.dtype(np.float64): FLOAT64}
_NUMPY_BOOL = np.dtype(np.bool_)


def _torch_dtypes(torch: Any) -> dict:
    return {torch.int8: INT8, torch.uint8: UINT8, torch.int32: INT32, torch.int64: INT64, torch.float16: FLOAT16,
            torch.float32: FLOAT32, torch.float64: FLOAT64, torch.bfloat16: BFLOAT16}


@dataclass
class Buffer:
    """One user buffer as the library sees it. `owner` keeps the memory alive for as long as an async op holds this
    Buffer (so numpy's resize(), which checks references, refuses to resize it meanwhile)."""
    ptr: int
    count: int
    datatype: int
    itemsize: int
    owner: Any
    what: str
    is_bool: bool = False
    _version: Optional[int] = field(default=None, repr=False)  # torch's in-place write counter at the call

    @property
    def nbytes(self) -> int:
        return self.count * self.itemsize

    def changed(self) -> Optional[str]:
        """Why the memory is no longer what the op was given (resized, moved, written meanwhile), or None."""
        o = self.owner
        if isinstance(o, np.ndarray):
            moved = o.ctypes.data != self.ptr or o.size != self.count
        elif self._version is not None:
            moved = o.data_ptr() != self.ptr or o.numel() != self.count
            if not moved and o._version != self._version:
                return f"{self.what} was written to (in place) while its async op ran"
        else:
            return None
        return f"{self.what} was resized or moved while its async op ran" if moved else None


def _torch_module() -> Any:
    return sys.modules.get("torch")


def as_buffer(obj: Any, what: str, writable: bool) -> Buffer:
    """The Buffer for obj, or InvalidArgument saying why it cannot be one."""
    torch = _torch_module()
    if torch is not None and isinstance(obj, torch.Tensor):
        return _from_tensor(torch, obj, what)
    if isinstance(obj, np.ndarray):
        return _from_array(obj, what, writable)
    try:
        view = memoryview(obj)
    except TypeError:
        raise errors.bad_argument(
            f"{what}: {type(obj).__name__} is not a buffer; pass a numpy array, a torch CPU tensor or another object "
            "with the buffer protocol (lists are refused rather than silently copied)") from None
    return _from_array(np.asarray(view), what, writable, owner=obj)


def _from_array(arr: np.ndarray, what: str, writable: bool, owner: Any = None) -> Buffer:
    if not arr.flags.c_contiguous:
        raise errors.bad_argument(
            f"{what}: array of shape {arr.shape} with strides {arr.strides} is not C-contiguous; the library reads "
            "memory in place (np.ascontiguousarray makes a contiguous copy if that is what you want)")
    if writable and not arr.flags.writeable:
        raise errors.bad_argument(f"{what}: the array is read-only, but this call writes into it")
    dt = arr.dtype
    is_bool = dt == _NUMPY_BOOL
    if is_bool:
        datatype = UINT8
    elif dt.isnative and dt.newbyteorder("=") in _NUMPY:
        datatype = _NUMPY[dt.newbyteorder("=")]
    else:
        raise errors.bad_argument(
            f"{what}: dtype {dt} is not supported (int8, uint8, int32, uint32, int64, uint64, float16, float32, "
            "float64 in native byte order; bool for calls that do not reduce; torch tensors also bfloat16)")
    return Buffer(arr.ctypes.data, arr.size, datatype, dt.itemsize, arr if owner is None else owner, what,
                  is_bool=is_bool)


def _from_tensor(torch: Any, t: Any, what: str) -> Buffer:
    if t.device.type != "cpu":
        raise errors.bad_argument(
            f"{what}: the tensor is on {t.device}, but this binding's communicators are host-only (they move host "
            "memory); copy it to the CPU first, or use the torch.distributed backend 'conflux' for device tensors")
    if t.layout != torch.strided:
        raise errors.bad_argument(f"{what}: {t.layout} tensors are not supported; pass a dense (strided) tensor")
    if not t.is_contiguous():
        raise errors.bad_argument(
            f"{what}: tensor of shape {tuple(t.shape)} with strides {t.stride()} is not contiguous; the library reads "
            "memory in place (t.contiguous() makes a contiguous copy if that is what you want)")
    is_bool = t.dtype == torch.bool
    datatype = UINT8 if is_bool else _torch_dtypes(torch).get(t.dtype)
    if datatype is None:
        raise errors.bad_argument(
            f"{what}: dtype {t.dtype} is not supported (int8, uint8, int32, int64, float16, bfloat16, float32, "
            "float64; bool for calls that do not reduce)")
    return Buffer(t.data_ptr(), t.numel(), datatype, t.element_size(), t, what, is_bool=is_bool,
                  _version=t._version)


def same_type(a: Buffer, b: Buffer, call: str) -> None:
    if a.datatype != b.datatype or a.is_bool != b.is_bool:
        raise errors.bad_argument(
            f"{call}: {a.what} is {dtype_name(a)} but {b.what} is {dtype_name(b)}; both must have one dtype")


def dtype_name(b: Buffer) -> str:
    return "bool" if b.is_bool else DTYPE_NAMES[b.datatype]


def no_bool(b: Buffer, call: str) -> None:
    if b.is_bool:
        raise errors.bad_argument(f"{call}: {b.what} is bool, which cannot be reduced; use uint8 with 'max'/'min'")
