"""The context object that selects which half of every intrinsic runs.

A kernel runs inside exactly one context: a :class:`GoldenContext` (the Python
halves execute on numpy arrays) or a :class:`compiler.trace.TraceContext` (the
lowering halves record operations). Contexts live on a per-thread stack, so the
planned multi-core golden path can run one thread per core.
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from compiler.deferred_acc import DeferredAcc
from compiler.errors import CompileError
from hw.config import HwConfig

_local = threading.local()
# Frames in these files are the DSL's own machinery; the "kernel's source line" of an
# error is the innermost frame outside them.
_INTERNAL = {os.path.join(os.path.dirname(__file__), f) for f in
             ("context.py", "intrinsic_registry.py", "intrinsics.py", "tensor.py", "kernel.py", "trace.py", "dsl.py",
              "cores.py")}


class Context:
    """Base of both contexts: the config, the kernel's name and which half runs (``mode``)."""

    mode = ""
    core_id = 0
    cores: Any = None

    def __init__(self, cfg: HwConfig, kernel_name: str):
        self.cfg = cfg
        self.kernel_name = kernel_name
        # Sizes the intrinsics check on every call, read once (HwConfig derives them in properties).
        self.lanes = cfg.lanes
        self.acc_depth = cfg.acc_depth
        self.acc_width = cfg.acc_width
        self.out_width = cfg.out_width
        self.factor_max = (1 << cfg.sram_index_bits) - 1
        self._gemm: GemmBuffers | None = None

    @property
    def gemm_buffers(self) -> "GemmBuffers":
        """The input, weight and micro-op buffers (made on first use: most kernels never touch them)."""
        if self._gemm is None:
            self._gemm = GemmBuffers(self.cfg, with_data=self.mode == "python")
        return self._gemm


class GemmBuffers:
    """The GEMM side of the accelerator's state, as :mod:`hw.gemm_numpy` takes it.

    ``uops`` (UOP_DEPTH, 3) int64 rows (acc, inp, wgt), ``uop_loaded`` and ``wgt_loaded`` the valid
    bits (set by LOAD, cleared at start). With ``with_data`` (the golden path) also ``inp``
    (INP_DEPTH, LANES) int8 and ``wgt`` (WGT_DEPTH, BLOCK, BLOCK) int8. The trace keeps the micro-ops
    and valid bits only: it needs them to know what a GEMM touches and whether it faults.
    """

    def __init__(self, cfg: HwConfig, with_data: bool):
        self.uops = np.zeros((cfg.uop_depth, 3), dtype=np.int64)
        self.uop_loaded = np.zeros(cfg.uop_depth, dtype=bool)
        self.wgt_loaded = np.zeros(cfg.wgt_depth, dtype=bool)
        self.inp = np.zeros((cfg.inp_depth, cfg.lanes), dtype=np.int8) if with_data else None
        self.wgt = np.zeros((cfg.wgt_depth, cfg.block, cfg.block), dtype=np.int8) if with_data else None


class GoldenContext(Context):
    """The golden path: the accumulator buffer is an (acc_depth, lanes) int32 numpy array.

    With ``batch > 1`` the context runs ``batch`` copies of the accelerator in lockstep
    (see :meth:`compiler.kernel.Kernel.run_golden`): ``acc`` is an (acc_depth, batch, lanes)
    array, copy k in ``acc[:, k]``, and the DRAM tensors the kernel sees are
    (nvec, batch, lanes) views. Every intrinsic checks its indices once (they are the same
    for every copy) and its numpy half updates all copies at once: a run of vectors of
    every copy is one contiguous block.
    """

    mode = "python"
    # Whether contexts defer the fusable intrinsic calls when not told (``defer=None``): the switch that
    # runs a whole golden path call by call, to compare the two or measure what deferring buys.
    DEFER = True

    def __init__(self, cfg: HwConfig, kernel_name: str, batch: int = 1, core_id: int = 0, cores: Any = None,
                 defer: bool | None = None):
        super().__init__(cfg, kernel_name)
        self.batch = batch
        self.core_id = core_id
        self.cores = cores  # compiler.cores.Cores of a multi-core run (footprints, barrier), else None
        if batch == 1:
            self._acc = np.zeros((cfg.acc_depth, cfg.lanes), dtype=np.int32)
        else:
            n = cfg.acc_depth * batch * cfg.lanes
            self._flat = _spare_acc(n)
            self._acc = self._flat[:n].reshape(cfg.acc_depth, batch, cfg.lanes)
        # The pending accumulator writes of the fusable intrinsic calls (compiler.deferred_acc), or None
        # for a run that executes every call as it comes (``defer=False``, and a core of a multi-core run,
        # whose DRAM other cores write between its calls).
        if defer is None:
            defer = self.DEFER
        self.deferred = DeferredAcc(self._acc, self.filled) if defer and cores is None else None
        self._acc_read = False  # whether ``acc`` was handed out (then anything up to acc_high may be written)
        # One past the highest accumulator vector any intrinsic wrote: the footprint a lockstep run
        # sizes its batch by (compiler.kernel), and what release() clears. Kept by the Python halves of
        # LOAD and the ALU ops, the only ones that write the buffer of several copies (GEMM and LOAD
        # into the other buffers refuse a lockstep context).
        self.acc_high = 0

    @property
    def acc(self) -> np.ndarray:
        """The accumulator buffer, every deferred write done (the plain Python halves and any reader of the
        state use this; the deferred calls work on the buffer behind it)."""
        d = self.deferred
        if d is not None and d.pending:
            d.flush()
        self._acc_read = True
        return self._acc

    @property
    def acc_written(self) -> bool:
        """Whether the accumulator buffer itself may have been written (not only deferred writes)."""
        d = self.deferred
        return d is None or self._acc_read or d.written_high > 0

    def release(self) -> None:
        """After a lockstep run that ended normally: clear the vectors it wrote and keep the buffer for
        the next run of this thread (fresh pages cost a fault each, far more than clearing them in
        cache). The context must not be used afterwards."""
        if self.batch > 1:
            d = self.deferred
            # pending writes are dropped (nobody reads this run's buffer again); a run whose every call was
            # deferred wrote only what the deferral wrote early
            high = self.acc_high if d is None or self._acc_read else d.written_high
            self._acc[:high] = 0
            _local.spare_acc = self._flat
            self._acc = None  # type: ignore[assignment]
            self.deferred = None

    @staticmethod
    def filled(shape: tuple[int, ...], value: int) -> np.ndarray:
        """A read-only int32 array of ``shape`` full of ``value``, cached for this thread's runs (the
        Python halves use it where numpy is slow with a scalar operand; kept across runs, as fresh pages
        cost a fault each). A static method: the deferred calls hold it without holding the context (a
        cycle would keep a run's tensors alive until the cyclic collector runs)."""
        cache = getattr(_local, "filled", None)
        if cache is None:
            cache = _local.filled = {}
        key = (shape, value)
        a = cache.get(key)
        if a is None:
            if len(cache) >= _FILLED_KEPT:
                cache.clear()
            a = cache[key] = np.full(shape, value, dtype=np.int32)
            a.flags.writeable = False
        return a


# How many arrays GoldenContext.filled keeps per thread (each at most one tile of every copy).
_FILLED_KEPT = 8

# Above this size an accumulator is mapped from fresh zero pages: only the vectors a kernel touches cost
# anything (an allocator's calloc may instead clear the whole block, most of which a lockstep run of
# many copies never reads).
_MAPPED_BYTES = 1 << 22


def _spare_acc(n: int) -> np.ndarray:
    """A flat zeroed int32 buffer of at least ``n`` elements for a lockstep context's accumulator: the one
    the last lockstep run of this thread released when it is big enough (taken, so two contexts never
    share it), else a new one."""
    spare = getattr(_local, "spare_acc", None)
    _local.spare_acc = None
    if spare is None or spare.size < n:
        spare = zeroed_int32((n,))
    return spare


def zeroed_int32(shape: tuple[int, ...]) -> np.ndarray:
    """A writable int32 array of ``shape`` full of zeros; a large one is an anonymous memory map, so its
    pages are made (zeroed by the kernel) on first touch and returned when the array is freed."""
    n = int(np.prod(shape)) * 4
    if n < _MAPPED_BYTES:
        return np.zeros(shape, dtype=np.int32)
    m = mmap.mmap(-1, n)
    if hasattr(mmap, "MADV_HUGEPAGE"):  # fewer TLB misses over a footprint of several copies' tiles
        m.madvise(mmap.MADV_HUGEPAGE)
    return np.frombuffer(m, dtype=np.int32).reshape(shape)


def current() -> Context:
    """The innermost active context; raises if an intrinsic is called outside a kernel run."""
    stack = getattr(_local, "stack", None)
    if not stack:
        raise CompileError("an intrinsic was called outside a kernel (call the kernel, or compiler.build it)")
    return stack[-1]


def in_kernel() -> bool:
    """Whether a kernel is running (golden or traced) in this thread: a kernel called now is composed
    into it rather than run on its own."""
    return bool(getattr(_local, "stack", None))


@contextmanager
def active(ctx: Context) -> Iterator[Context]:
    """Make ``ctx`` the current context for the duration of the ``with`` block."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(ctx)
    try:
        yield ctx
    finally:
        stack.pop()


def source_line() -> str:
    """``file.py:LINE`` of the innermost caller outside the DSL machinery (the kernel's line)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in _INTERNAL:
        f = f.f_back
    if f is None:
        return "?"
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}"
