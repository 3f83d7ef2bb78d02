"""DRAM tensors and on-chip buffer views: the operands kernels pass to intrinsics.

A DRAM tensor of ``n`` elements is addressed in whole vectors of ``lanes`` elements:
it occupies ``ceil(n / lanes)`` vectors, the last one zero-padded. Its Program region
keeps the user's shape when ``n`` is a multiple of the lane count and otherwise takes
the padded vector shape ``(nvec, lanes)`` (so ``Program.read_outputs`` returns the
whole padded region; runners cut the first ``n`` elements, see
:func:`unpad`).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from compiler.errors import CompileError, kernel_error
from compiler.symbolic import Expr, check_dimension


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of a DRAM tensor argument, for :func:`compiler.build`."""

    shape: tuple[int, ...]
    dtype: str = "int32"


def tensor(shape: int | tuple[int, ...] | list[int], dtype: str = "int32") -> TensorSpec:
    """Declare a DRAM tensor argument of ``shape`` and ``dtype`` (``int8``, ``int16``, ``int32``); a dimension
    may be an ``S.var`` expression (bound per value by :mod:`compiler.dynamic`)."""
    if isinstance(shape, Expr):
        shape = (shape,)
    shp = (int(shape),) if isinstance(shape, (int, np.integer)) else \
        tuple(s if isinstance(s, Expr) else int(s) for s in shape)
    for k, s in enumerate(shp):
        check_dimension(s, f"dimension {k} of the tensor")
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
    write; when tracing it is None, except for constants (the compiler must see them).
    ``loaded``/``stored`` record how the kernel used it (the compiler derives the region
    role from them). ``kind`` is ``"arg"`` for a kernel argument, ``"const"`` for a constant
    the kernel made (``S.const``: micro-op tables, identity weights; they share one DRAM region)
    and ``"scratch"`` for DRAM the kernel allocated for itself (``S.scratch``). ``region`` names
    the Program region holding it and ``region_offset`` its first byte there.

    A LOAD counts the tensor in entries of the buffer it fills (``HwConfig.elem_bytes``): an
    int32 accumulator vector, an int8 input vector, an int8 weight block, a 16-byte micro-op.
    """

    __slots__ = ("name", "shape", "dtype", "bits", "lanes", "size", "nvec", "data", "_loaded", "_stored", "kind",
                 "region", "region_offset", "parent", "_entries")

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str, lanes: int, data: np.ndarray | None = None,
                 kind: str = "arg", region: str | None = None, region_offset: int = 0):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = str(dtype)
        self.bits = _BITS.get(self.dtype) or np.dtype(dtype).itemsize * 8
        self.lanes = lanes
        self.size = prod(self.shape)
        self.nvec = -(-self.size // lanes)
        self.data = data
        self._loaded = False
        self._stored = False
        self.kind = kind
        self.region = name if region is None else region
        self.region_offset = region_offset
        self.parent: Tensor | None = None
        self._entries: dict[int, np.ndarray] = {}

    # A view's use is its parent's: the parent is the Program region whose role the compiler derives.
    @property
    def loaded(self) -> bool:
        return self._loaded

    @loaded.setter
    def loaded(self, v: bool) -> None:
        self._loaded = v
        if v and self.parent is not None:
            self.parent.loaded = True

    @property
    def stored(self) -> bool:
        return self._stored

    @stored.setter
    def stored(self, v: bool) -> None:
        self._stored = v
        if v and self.parent is not None:
            self.parent.stored = True

    def view(self, name: str, offset: int, shape: tuple[int, ...]) -> "Tensor":
        """A tensor of ``shape`` (this tensor's dtype) living inside this one from vector ``offset``: it
        shares the DRAM (on the golden path, the data) and the Program region, so several tensors (a
        network's weights, activations planned to reuse memory) fit one region. The compiler tracks
        the dependences of views of one region by address."""
        shape = tuple(int(s) for s in shape)
        t = Tensor(name, shape, self.dtype, self.lanes, kind=self.kind, region=self.region,
                   region_offset=self.region_offset + offset * self.lanes * self.bits // 8)
        if offset < 0 or offset + t.nvec > self.nvec or not shape or min(shape) <= 0:
            raise CompileError(f"view '{name}' of {t.nvec} vectors at vector {offset} does not fit tensor "
                               f"'{self.name}' ({self.nvec} vectors)")
        if self.data is not None:
            t.data = self.data[offset:offset + t.nvec]
        t.parent = self
        return t

    @property
    def region_shape(self) -> tuple[int, ...]:
        return region_shape(self.shape, self.lanes)

    @property
    def nbytes(self) -> int:
        """Bytes the tensor occupies in DRAM: whole vectors."""
        return self.nvec * self.lanes * self.bits // 8

    def entry_count(self, entry_bytes: int) -> int:
        """Whole entries of ``entry_bytes`` bytes in the tensor (what a LOAD may address)."""
        return self.nbytes // entry_bytes

    def entries(self, entry_shape: tuple[int, ...]) -> np.ndarray:
        """The golden data as whole entries of ``entry_shape`` elements (a view, cached): the
        ``(n, lanes)`` vectors themselves, ``(n, BLOCK, BLOCK)`` weight blocks, ``(n, 16)`` micro-op bytes."""
        n_el = prod(entry_shape)
        hit = self._entries.get(n_el)
        if hit is None or hit.shape[1:] != entry_shape:
            assert self.data is not None
            flat = self.data.reshape(-1)
            n = flat.size // n_el
            hit = self._entries[n_el] = flat[:n * n_el].reshape((n,) + tuple(entry_shape))
        return hit

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, shape={self.shape}, dtype={self.dtype}, nvec={self.nvec})"


class BufferView:
    """A run of entries of one on-chip buffer: ``base`` and (optionally) ``length``.

    ``S.acc[a:b]`` is the view of accumulator vectors a..b-1, ``S.acc[i]`` one vector; slicing a
    view is relative to its base. ``S.inp``, ``S.wgt`` and ``S.uop`` are the input, weight and
    micro-op buffers' views, alike. Views are plain indices: the intrinsics check them against the
    buffer depths of the config. Each buffer has its own view class (``BUF`` names it), so an
    intrinsic that wants an accumulator view refuses the others. (Plain slotted classes: views are
    made per tile on the golden path's hot loop.)
    """

    __slots__ = ("base", "length")
    BUF = ""
    PLAIN: type["BufferView"]  # the view class itself (the whole-buffer roots below are subclasses)

    def __init__(self, base: int, length: int | None = None):
        self.base = base
        self.length = length

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BufferView) and other.PLAIN is self.PLAIN \
            and (self.base, self.length) == (other.base, other.length)

    def __hash__(self) -> int:
        return hash((self.BUF, self.base, self.length))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base={self.base}, length={self.length})"

    def __len__(self) -> int:
        if self.length is None:
            raise TypeError(f"this {self.BUF} view has no length (write S.{self.BUF.lower()}[a:b])")
        return self.length

    def __getitem__(self, k: int | slice) -> "BufferView":
        cls = self.PLAIN
        if type(k) is slice and k.step is None and type(k.start) is int and type(k.stop) is int \
                and 0 <= k.start <= k.stop:  # the common S.acc[a:b], kept cheap
            return cls(self.base + k.start, k.stop - k.start)
        what = _BUFFER_WORDS.get(self.BUF, self.BUF)
        if isinstance(k, slice):
            if k.step not in (None, 1):
                raise self._error(f"{what} views take contiguous slices only (use the loop factors for strides)")
            start = 0 if k.start is None else self._index(k.start, f"{what} slice start")
            if start < 0:  # not Python's from-the-end: a view has no end to count from
                raise self._error(f"negative {what} slice start {start} (a slice counts from the view's start)")
            if k.stop is None:
                if self.length is None:
                    raise self._error(f"slice of an unsized {what} view needs an end")
                stop = self.length
            else:
                stop = self._index(k.stop, f"{what} slice end")
            if start < 0 or stop < start:
                raise self._error(f"bad {what} slice [{start}:{stop}]")
            return cls(self.base + start, stop - start)
        i = self._index(k, f"{what} index")
        if i < 0:
            raise self._error(f"negative {what} index {i}")
        return cls(self.base + i, 1)

    def __add__(self, k: int) -> "BufferView":
        return self.PLAIN(self.base + self._index(k, f"{_BUFFER_WORDS.get(self.BUF, self.BUF)} view offset"),
                          self.length)

    def _index(self, v: Any, what: str) -> int:
        """``v`` as an index: an integer (numpy's too; a symbolic dimension says it is not bound yet),
        never a float, bool or string cut to one."""
        if isinstance(v, bool):
            raise self._error(f"{what} must be an integer, got bool {v!r}")
        try:
            return operator.index(v)
        except TypeError:
            raise self._error(f"{what} must be an integer, got {type(v).__name__} {v!r}") from None

    def _error(self, reason: str) -> CompileError:
        """``reason`` as one line naming the kernel and its line when a kernel is running."""
        from compiler.context import current, in_kernel, source_line  # (context imports the DSL's users)

        if not in_kernel():
            return CompileError(reason)
        return kernel_error(current().kernel_name, None, f"S.{self.BUF.lower()}[...] at {source_line()}: {reason}")


_BUFFER_WORDS = {"ACC": "accumulator", "INP": "input buffer", "WGT": "weight buffer", "UOP": "micro-op buffer"}


class AccView(BufferView):
    """A run of accumulator-buffer vectors (``S.acc[a:b]``)."""

    __slots__ = ()
    BUF = "ACC"


class InpView(BufferView):
    """A run of input-buffer vectors (``S.inp[a:b]``): BLOCK_IN int8 each, read by GEMM."""

    __slots__ = ()
    BUF = "INP"


class WgtView(BufferView):
    """A run of weight-buffer blocks (``S.wgt[a:b]``): BLOCK_OUT x BLOCK_IN int8 each, read by GEMM."""

    __slots__ = ()
    BUF = "WGT"


class UopView(BufferView):
    """A run of micro-op-buffer entries (``S.uop[a:b]``): the (acc, inp, wgt) triples GEMM walks."""

    __slots__ = ()
    BUF = "UOP"


VIEW_CLASSES: dict[str, type[BufferView]] = {c.BUF: c for c in (AccView, InpView, WgtView, UopView)}
for _c in VIEW_CLASSES.values():
    _c.PLAIN = _c


def _root(cls: type[BufferView]) -> type[BufferView]:
    """The whole-buffer view class of ``cls``: also callable as ``S.acc(base, length)``."""

    def call(self: BufferView, base: int, length: int | None = None) -> BufferView:
        return cls(int(base), None if length is None else int(length))

    return type(f"_{cls.__name__}Root", (cls,), {"__slots__": (), "__call__": call})


acc = _root(AccView)(0, None)
inp = _root(InpView)(0, None)
wgt = _root(WgtView)(0, None)
uop = _root(UopView)(0, None)
