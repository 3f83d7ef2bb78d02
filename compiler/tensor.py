"""DRAM tensors and on-chip buffer views: the operands kernels pass to intrinsics.

A DRAM tensor of ``n`` elements is addressed in whole vectors of ``lanes`` elements:
it occupies ``ceil(n / lanes)`` vectors, the last one zero-padded. Its Program region
keeps the user's shape when ``n`` is a multiple of the lane count and otherwise takes
the padded vector shape ``(nvec, lanes)`` (so ``Program.read_outputs`` returns the
whole padded region; runners cut the first ``n`` elements, see
:func:`unpad`).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from compiler.errors import CompileError


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of a DRAM tensor argument, for :func:`compiler.build`."""

    shape: tuple[int, ...]
    dtype: str = "int32"


def tensor(shape: int | tuple[int, ...] | list[int], dtype: str = "int32") -> TensorSpec:
    """Declare a DRAM tensor argument of ``shape`` and ``dtype`` (``int8``, ``int16``, ``int32``)."""
    shp = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    return TensorSpec(shp, str(np.dtype(dtype)))


def region_shape(shape: tuple[int, ...], lanes: int) -> tuple[int, ...]:
    """The Program region shape of a tensor: its own shape when whole vectors, else (nvec, lanes)."""
    n = prod(shape)
    return tuple(shape) if n % lanes == 0 else (-(-n // lanes), lanes)


def unpad(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Cut a region-shaped array back to the user's ``shape`` (drops the padding lanes)."""
    return np.asarray(a).reshape(-1)[:prod(shape)].reshape(shape)


def pad_to_vectors(a: np.ndarray, lanes: int, dtype: Any) -> np.ndarray:
    """``a`` flattened and zero-padded to (nvec, lanes) of ``dtype``; a view when nothing changes."""
    flat = np.asarray(a).reshape(-1)
    n = flat.size
    nvec = -(-n // lanes)
    if n == nvec * lanes and flat.dtype == np.dtype(dtype):
        return flat.reshape(nvec, lanes)
    out = np.zeros(nvec * lanes, dtype=dtype)
    out[:n] = flat
    return out.reshape(nvec, lanes)


_BITS = {"int8": 8, "int16": 16, "int32": 32}


class Tensor:
    """A DRAM tensor as a kernel sees it: name, shape, dtype, vector count.

    On the golden path ``data`` is the (nvec, lanes) array the intrinsics read and
    write; when tracing it is None. ``loaded``/``stored`` record how the kernel used
    it (the compiler derives the region role from them).
    """

    __slots__ = ("name", "shape", "dtype", "bits", "lanes", "size", "nvec", "data", "loaded", "stored")

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str, lanes: int, data: np.ndarray | None = None):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = str(dtype)
        self.bits = _BITS.get(self.dtype) or np.dtype(dtype).itemsize * 8
        self.lanes = lanes
        self.size = prod(self.shape)
        self.nvec = -(-self.size // lanes)
        self.data = data
        self.loaded = False
        self.stored = False

    @property
    def region_shape(self) -> tuple[int, ...]:
        return region_shape(self.shape, self.lanes)

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, shape={self.shape}, dtype={self.dtype}, nvec={self.nvec})"


class AccView:
    """A run of accumulator-buffer vectors: ``base`` and (optionally) ``length``.

    ``S.acc[a:b]`` is the view of vectors a..b-1, ``S.acc[i]`` one vector; slicing a
    view is relative to its base. Views are plain indices: the intrinsics check them
    against the buffer depth of the config. (A plain slotted class: views are made
    per tile on the golden path's hot loop.)
    """

    __slots__ = ("base", "length")

    def __init__(self, base: int, length: int | None = None):
        self.base = base
        self.length = length

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AccView) and (self.base, self.length) == (other.base, other.length)

    def __hash__(self) -> int:
        return hash((self.base, self.length))

    def __repr__(self) -> str:
        return f"AccView(base={self.base}, length={self.length})"

    def __len__(self) -> int:
        if self.length is None:
            raise TypeError("this accumulator view has no length (write S.acc[a:b])")
        return self.length

    def __getitem__(self, k: int | slice) -> "AccView":
        if type(k) is slice and k.step is None and type(k.start) is int and type(k.stop) is int \
                and 0 <= k.start <= k.stop:  # the common S.acc[a:b], kept cheap
            return AccView(self.base + k.start, k.stop - k.start)
        if isinstance(k, slice):
            if k.step not in (None, 1):
                raise CompileError("accumulator views take contiguous slices only (use the ALU factors for strides)")
            start = 0 if k.start is None else int(k.start)
            if k.stop is None:
                if self.length is None:
                    raise CompileError("slice of an unsized accumulator view needs an end")
                stop = self.length
            else:
                stop = int(k.stop)
            if start < 0 or stop < start:
                raise CompileError(f"bad accumulator slice [{start}:{stop}]")
            return AccView(self.base + start, stop - start)
        i = int(k)
        if i < 0:
            raise CompileError(f"negative accumulator index {i}")
        return AccView(self.base + i, 1)

    def __add__(self, k: int) -> "AccView":
        return AccView(self.base + int(k), self.length)


class _AccRoot(AccView):
    """The whole accumulator buffer as a view: ``S.acc[a:b]``, ``S.acc[i]``, ``S.acc(base, length)``."""

    def __call__(self, base: int, length: int | None = None) -> AccView:
        return AccView(int(base), None if length is None else int(length))


acc = _AccRoot(0, None)
