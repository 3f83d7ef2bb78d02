"""Tracing: running a kernel with the lowering halves to record its operations in order.

The trace keeps, per operation, the accumulator indices it reads and writes and the
kernel's source line, and rejects a read of accumulator vectors nothing wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from compiler.context import Context, source_line
from compiler.errors import kernel_error
from compiler.ir import Index, Op, accesses, op_name
from compiler.tensor import Tensor
from hw.config import HwConfig


@dataclass
class Traced:
    """One recorded operation with its accumulator accesses and source line."""

    op: Op
    reads: list[Index]
    writes: list[Index]
    line: str


@dataclass
class Trace:
    """A kernel's operations in program order, and its tensor arguments by name."""

    kernel: str
    ops: list[Traced] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    consts: dict[str, object] = field(default_factory=dict)


def _describe(idx: Index, mask: np.ndarray) -> int:
    """The first index of ``idx`` whose ``mask`` entry is False."""
    ids = np.arange(idx.start, idx.stop) if isinstance(idx, slice) else idx
    return int(ids[~mask[ids]][0])


class TraceContext(Context):
    """The compile path: lowering halves call :meth:`record`."""

    mode = "lower"

    def __init__(self, cfg: HwConfig, kernel_name: str, trace: Trace):
        super().__init__(cfg, kernel_name)
        self.trace = trace
        self.written = np.zeros(cfg.acc_depth, dtype=bool)

    def record(self, op: Op) -> None:
        """Append ``op``; raise CompileError if it reads accumulator vectors never written."""
        reads, writes = accesses(op)
        line = source_line()
        for r in reads:
            if not self.written[r].all():
                i = _describe(r, self.written)
                raise kernel_error(self.kernel_name, None, f"S.{op_name(op)} at {line} reads "
                                   f"acc[{i}], which the kernel never wrote")
        for w in writes:
            self.written[w] = True
        self.trace.ops.append(Traced(op, reads, writes, line))
