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
O(1) events however long its loop, and its data is vectorised ``hw.gemm_numpy`` when EXECUTE
starts (the sequential result, which the RTL keeps by forwarding the distance-1 read-after-write
from its registered write data): indices and checks (``gemm_indices``, ``gemm_first_fault``),
then the products (``gemm_apply``). Tiled programs repeat GEMM words over the same micro-ops,
so the indices of a GEMM found fault-free are kept (:class:`GemmIndexCache`) until the micro-op
buffer is written or the run ends: its checks cannot fail later in the run, since the valid bits
are only set between two STARTs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hw import csr
from hw.gemm_numpy import (GemmFault, gemm_apply, gemm_first_fault, gemm_indices, gemm_iterations, gemm_uop_count,
                           gemm_uop_range_bad)
from sim.tlm.gemm_buffers import GemmBuffers
from sim.tlm.timing import Timing


@dataclass(frozen=True)
class GemmDepths:
    """The buffer depths GEMM checks its indices against (what ``run_gemm`` reads of a config)."""

    acc_depth: int
    inp_depth: int
    wgt_depth: int
    uop_depth: int


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


def gemm_range_error(insn: Any, depths: GemmDepths) -> tuple[int, str] | None:
    """WAIT's check of a GEMM: a non-empty loop naming micro-ops past the buffer."""
    if gemm_uop_range_bad(insn, depths.uop_depth):
        return csr.ERR_SRAM_RANGE, (f"GEMM reads micro-ops up to {insn.uop_end - 1}, past the micro-op "
                                    f"buffer's depth {depths.uop_depth}")
    return None


# The fields a GEMM's indices and checks depend on (not its dependency flags).
_LOOP_FIELDS = ("reset", "uop_begin", "uop_end", "iter_out", "iter_in", "acc_factor_out", "acc_factor_in",
                "inp_factor_out", "inp_factor_in", "wgt_factor_out", "wgt_factor_in")


class GemmIndexCache:
    """The ``(a, x, w)`` index arrays of the GEMMs found fault-free in one run (the compute unit
    holds one; START and soft reset make a new unit), by loop fields and micro-op buffer version
    (at most ``entries`` of at most ``max_iterations`` iterations each)."""

    def __init__(self, entries: int = 64, max_iterations: int = 1 << 16) -> None:
        self.entries, self.max_iterations = entries, max_iterations
        self._map: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def get(self, insn: Any, bufs: GemmBuffers) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The indices of ``insn`` over the micro-ops now in ``bufs``, if it was found fault-free."""
        return self._map.get(self._key(insn, bufs))

    def put(self, insn: Any, bufs: GemmBuffers, idx: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Keep the indices of ``insn``, found fault-free over the micro-ops now in ``bufs``."""
        if idx[0].size > self.max_iterations:
            return
        if len(self._map) >= self.entries:
            self._map.pop(next(iter(self._map)))  # the oldest
        self._map[self._key(insn, bufs)] = idx

    @staticmethod
    def _key(insn: Any, bufs: GemmBuffers) -> tuple[Any, ...]:
        return tuple(getattr(insn, f) for f in _LOOP_FIELDS) + (bufs.uop_version,)


def start_gemm(insn: Any, acc: np.ndarray, bufs: GemmBuffers, depths: GemmDepths,
               cache: GemmIndexCache | None = None) -> GemmExec:
    """EXECUTE begins: apply the iterations before the first fault to ``acc`` (in place, vectorised)
    and return what the timing needs."""
    n = gemm_iterations(insn)
    reset = bool(insn.reset)
    if n == 0:
        return GemmExec(0, 0, None, reset)
    hit = cache.get(insn, bufs) if cache is not None else None
    if hit is not None:
        gemm_apply(acc, bufs.inp, bufs.wgt, reset, *hit, gemm_uop_count(insn))
        return GemmExec(n, n, None, reset)
    u, a, x, w = gemm_indices(insn, bufs.uops)
    fault = gemm_first_fault(insn, depths, u, a, x, w, bufs.uop_valid, bufs.wgt_valid)
    stop = n if fault is None else fault.iteration
    gemm_apply(acc, bufs.inp, bufs.wgt, reset, a[:stop], x[:stop], w[:stop], gemm_uop_count(insn))
    if fault is None and cache is not None:
        cache.put(insn, bufs, (a, x, w))
    return GemmExec(n, stop, fault, reset)
