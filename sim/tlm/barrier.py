"""The barrier (``hw/rtl/barrier.v``): where the cores meet, and which cores have finished.

A core is *arrived* from the cycle its compute unit, holding a BARRIER in EXECUTE, finds its core
drained (it stays arrived: its FETCH holds and its queues are empty). In the cycle the last core
arrives every core is released (each compute unit PUSHes its BARRIER ``finish_cycles`` later).
A core is *finished* from the cycle after its FINISH's PUSH; the run is done when every core has
finished. A core waiting at a BARRIER while every other core is arrived or finished, and at least
one finished, can never be released: ERR_BARRIER in the first cycle that holds, on the lowest
arrived core at its BARRIER's pc. One core: released as soon as it arrives (a BARRIER only drains).
"""

from __future__ import annotations

from typing import Callable

from hw import csr
from sim.tlm.scheduler import PH_CHECK, Scheduler


class Barrier:
    """The barrier of ``cores`` cores; ``release(core, t)`` ends a core's BARRIER wait at cycle ``t``
    (the cycle every core is arrived); ``fault(t, code, pc, core, message)`` raises ERR_BARRIER."""

    def __init__(self, sim: Scheduler, cores: int, release: Callable[[int, int], None],
                 fault: Callable[[int, int, int, int, str], None]):
        self.sim = sim
        self.cores = cores
        self.release = release
        self.fault = fault
        self.arrived: dict[int, tuple[int, int]] = {}  # core -> (cycle arrived, BARRIER pc)
        self.finished: dict[int, int] = {}             # core -> first cycle its flag is set

    def arrive(self, core: int, t: int, pc: int) -> None:
        """``core`` is arrived from cycle ``t`` (the current cycle) at its BARRIER ``pc``."""
        self.arrived[core] = (t, pc)
        if len(self.arrived) == self.cores:
            waiting = sorted(self.arrived)
            self.arrived.clear()
            for k in waiting:
                self.release(k, t)
        else:
            self._check_stranded()

    def finish(self, core: int, t: int) -> None:
        """``core``'s FINISH completed (its PUSH) in cycle ``t``: finished from ``t + 1``."""
        self.finished[core] = t + 1
        self._check_stranded()

    def _check_stranded(self) -> None:
        """Every core arrived or finished, some finished: ERR_BARRIER once both flags are seen."""
        if self.arrived and self.finished and len(self.arrived) + len(self.finished) == self.cores:
            e = max(max(t for t, _ in self.arrived.values()), max(self.finished.values()))
            self.sim.at(e, self._stranded, phase=PH_CHECK)

    def _stranded(self, e: int) -> bool:
        if self.sim.stopped or not self.arrived:
            return False
        core = min(self.arrived)
        _, pc = self.arrived[core]
        finished = ", ".join(str(k) for k in sorted(self.finished))
        self.fault(e, csr.ERR_BARRIER, pc, core,
                   f"core {core} waits at BARRIER (instruction {pc}) but core(s) {finished} finished without "
                   f"reaching it")
        return True
