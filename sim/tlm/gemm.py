"""The GEMM core (``hw/rtl/gemm.v``, inside the compute unit): one GEMM instruction's data,
its fault and how many free cycles of the accumulator's write port its EXECUTE lasts.

Timing (docs/microarch.md "GEMM timing"; RTL = TLM cycle for cycle): a pipeline of three
stages, U (micro-op read), A (indices, checks, operand reads) and E (MACs, the write of
``acc[a]`` through the accumulator's write port), that advances only in a *free* cycle, one
in which LOAD does not write the accumulator (GEMM never reads copy S, so STORE never stops
it). Counting the free cycles of EXECUTE from 1, iteration k is in U at free cycle k+1, in A
at k+2, in E at k+3, so with N = iter_out * iter_in * (uop_end - uop_begin) iterations EXECUTE
ends with its (N + 2)-th free cycle: ``E_gemm = N + 2 + frozen cycles`` (1 cycle when N = 0).
A faulting iteration k raises its error in its A stage, the (k + 2)-th free cycle; iterations
before k are applied (k - 1 is written in that very cycle), k and later are not.

The compute unit finds those cycles with the port plan (``AccPorts.nth_free``, the ALU's
machinery, replanned when LOAD registers a port use inside the window), so a GEMM costs
O(1) events however long its loop, and its data is one vectorised ``hw.gemm_numpy.run_gemm``
call when EXECUTE starts (the sequential result, which the RTL keeps by forwarding the
distance-1 read-after-write from its registered write data).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hw import csr
from hw.config import HwConfig
from hw.gemm_numpy import GemmFault, gemm_iterations, gemm_uop_range_bad, run_gemm
from sim.tlm.gemm_buffers import GemmBuffers
from sim.tlm.timing import Timing


@dataclass(frozen=True)
class GemmExec:
    """One GEMM instruction in EXECUTE: its iterations, those applied, its fault (None if it
    completes) and whether it resets (a reset writes zeros and is no MAC operation)."""

    iterations: int
    applied: int
    fault: GemmFault | None
    reset: bool

    def free_cycles(self, T: Timing) -> int:
        """The free cycles of EXECUTE the instruction lives for (>= 1): up to and including its
        last E stage (``N + gemm_pipeline_cycles``), or, when iteration k faults, its A stage
        (``k + 1 + gemm_check_cycles``), the cycle the error is raised in."""
        if self.fault is not None:
            return self.fault.iteration + 1 + T.gemm_check_cycles
        return self.iterations + T.gemm_pipeline_cycles

    def ops_within(self, free: int, T: Timing) -> int:
        """``GEMM_OPS`` of the first ``free`` free cycles: the E stages (iterations written) of a
        non-reset GEMM among them. Iteration k's E stage is free cycle ``k + 1 + pipeline``."""
        if self.reset:
            return 0
        return max(0, min(self.applied, free - T.gemm_pipeline_cycles))


def gemm_range_error(insn: Any, cfg: HwConfig) -> tuple[int, str] | None:
    """WAIT's check of a GEMM: a non-empty loop naming micro-ops past the buffer."""
    if gemm_uop_range_bad(insn, cfg.uop_depth):
        return csr.ERR_SRAM_RANGE, (f"GEMM reads micro-ops up to {insn.uop_end - 1}, past the micro-op "
                                    f"buffer's depth {cfg.uop_depth}")
    return None


def start_gemm(insn: Any, acc: np.ndarray, bufs: GemmBuffers, cfg: HwConfig) -> GemmExec:
    """EXECUTE begins: apply the iterations before the first fault to ``acc`` (in place, one
    vectorised ``hw.gemm_numpy.run_gemm`` call) and return what the timing needs."""
    n = gemm_iterations(insn)
    if n == 0:
        return GemmExec(0, 0, None, bool(insn.reset))
    applied, fault = run_gemm(acc, bufs.inp, bufs.wgt, bufs.uops, insn, cfg, bufs.uop_valid, bufs.wgt_valid)
    return GemmExec(n, applied, fault, bool(insn.reset))
