"""The context object that selects which half of every intrinsic runs.

A kernel runs inside exactly one context: a :class:`GoldenContext` (the Python
halves execute on numpy arrays) or a :class:`compiler.trace.TraceContext` (the
lowering halves record operations). Contexts live on a per-thread stack, so the
planned multi-core golden path can run one thread per core.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from compiler.errors import CompileError
from hw.config import HwConfig

_local = threading.local()
# Frames in these files are the DSL's own machinery; the "kernel's source line" of an
# error is the innermost frame outside them.
_INTERNAL = {os.path.join(os.path.dirname(__file__), f) for f in
             ("context.py", "intrinsic.py", "intrinsics.py", "tensor.py", "kernel.py", "trace.py")}


class Context:
    """Base of both contexts: the config, the kernel's name and which half runs (``mode``)."""

    mode = ""

    def __init__(self, cfg: HwConfig, kernel_name: str):
        self.cfg = cfg
        self.kernel_name = kernel_name
        # Sizes the intrinsics check on every call, read once (HwConfig derives them in properties).
        self.lanes = cfg.lanes
        self.acc_depth = cfg.acc_depth
        self.acc_width = cfg.acc_width
        self.out_width = cfg.out_width
        self.factor_max = (1 << cfg.sram_index_bits) - 1


class GoldenContext(Context):
    """The golden path: the accumulator buffer is an (acc_depth, lanes) int32 numpy array."""

    mode = "python"

    def __init__(self, cfg: HwConfig, kernel_name: str):
        super().__init__(cfg, kernel_name)
        self.acc = np.zeros((cfg.acc_depth, cfg.lanes), dtype=np.int32)


def current() -> Context:
    """The innermost active context; raises if an intrinsic is called outside a kernel run."""
    stack = getattr(_local, "stack", None)
    if not stack:
        raise CompileError("an intrinsic was called outside a kernel (call the kernel, or compiler.build it)")
    return stack[-1]


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
