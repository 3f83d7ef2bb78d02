"""COMPUTE (``hw/rtl/compute_unit.v``): the vector ALU over the accumulator buffer, and FINISH.

Inside the unit shell: WAIT checks the ALU's accumulator indices; EXECUTE applies the
instruction with the ALU (``sim/tlm/alu.py``, ``hw/rtl/alu.v``; the result is the sequential
one, which the RTL's pipeline keeps by forwarding) and lasts until the ALU's pipeline has had
``alu_setup_cycles + iter_out*iter_in + alu_pipeline_cycles`` cycles in which the buffer's
ports it needs are free (``AccPorts.nth_free``: LOAD writing a vector takes the write port,
STORE reading one takes the source operand's read port). The end is planned when EXECUTE
starts and planned again whenever LOAD or STORE registers (or withdraws) a port use inside
the window. FINISH travels through the compute queue: its EXECUTE waits until the rest of
the accelerator has drained (the top decides, :meth:`ComputeUnit.finish_drained`), and its
PUSH ends the run.
"""

from __future__ import annotations

from typing import Any, Callable

from hw.isa import Alu
from hw.isa_semantics import alu_last_indices
from sim.tlm.acc_buffer import AccBuffer
from sim.tlm.alu import run_alu
from sim.tlm.insn_queue import InsnQueue
from sim.tlm.scheduler import Scheduler
from sim.tlm.timing import Timing
from sim.tlm.token_queue import TokenQueue
from sim.tlm.trace import Tracer
from sim.tlm.unit_shell import EXEC, Fault, UnitShell


class ComputeUnit(UnitShell):
    """The vector ALU (and FINISH, which travels through the compute queue).

    ``check_finish(t)`` asks the top to test FINISH's drain condition in cycle ``t``;
    ``on_done(t)`` is told that FINISH completed in cycle ``t``.
    """

    name = "compute"

    def __init__(self, sim: Scheduler, timing: Timing, tracer: Tracer | None, queue: InsnQueue,
                 tokens: dict[str, TokenQueue], fault: Fault, on_idle: Callable[[int], None],
                 acc: AccBuffer, check_finish: Callable[[int], None], on_done: Callable[[int], None]):
        super().__init__(sim, timing, tracer, queue, tokens, fault, on_idle)
        self.acc = acc
        self.check_finish = check_finish
        self.on_done = on_done
        self.finishing = False
        self.wait = 0  # EXEC cycles frozen on a buffer port (COMPUTE_WAIT)
        self._plan_version = 0
        acc.ports.on_change = self._ports_changed

    def check(self, i: Any) -> tuple[int, str] | None:
        if isinstance(i, Alu):
            dst_last, src_last = alu_last_indices(i)
            if dst_last is None:
                return None
            bad = self.acc.range_error(dst_last, "ALU destination")
            if bad is None and src_last is not None:
                bad = self.acc.range_error(src_last, "ALU source")
            return bad
        return None

    def begin(self, t: int) -> None:
        i, T = self.insn, self.T
        self._plan_version += 1  # an end planned for an earlier instruction is stale now
        if i.MNEMONIC == "FINISH":
            self.finishing = True
            self.check_finish(t)
            return
        run_alu(self.acc.mem, i)
        if i.iter_out * i.iter_in == 0:
            self.end_execute(t + T.min_execute_cycles)
            return
        self.acc.ports.forget_before(t)
        self._plan()

    def _plan(self) -> None:
        """(Re)plan the end of the ALU instruction in EXECUTE with the port uses known now."""
        end = self.acc.ports.nth_free(self.t_exec, self._need(), not self.insn.use_imm) + 1
        if end != self.t_end:
            self.t_end = end
            self._plan_version += 1
            self.sim.at(end, self._alu_done, self._plan_version)

    def _ports_changed(self, t: int) -> None:
        """LOAD or STORE registered or withdrew port uses from cycle ``t`` on."""
        i = self.insn
        if (self.state == EXEC and isinstance(i, Alu) and i.iter_out * i.iter_in and self.t_end is not None
                and t < self.t_end and not self.sim.stopped):
            self._plan()

    def _alu_done(self, t: int, version: int) -> bool:
        if version != self._plan_version or self.state != EXEC or self.sim.stopped:
            return False
        self.wait += t - self.t_exec - self._need()
        self.end_execute(t)
        return True

    def _need(self) -> int:
        """Free cycles the ALU instruction in EXECUTE needs (reads, then the last write)."""
        T, i = self.T, self.insn
        return T.alu_setup_cycles + i.iter_out * i.iter_in + T.alu_pipeline_cycles

    def partial_counts(self, e: int, c1: int, burst: tuple[str, int, bool, int] | None) -> None:
        # an ALU stopped by an error waited in the blocked cycles of its EXEC up to e (the
        # halt freezes it from e + 1 on, which is not a wait)
        i = self.insn
        if self.state == EXEC and isinstance(i, Alu) and i.iter_out * i.iter_in and self.t_exec <= e:
            hi = e if self.t_end is None else min(e, self.t_end - 1)
            self.wait += self.acc.ports.blocked(self.t_exec, hi, not i.use_imm)
        super().partial_counts(e, c1, burst)

    def finish_drained(self, t: int) -> None:
        """FINISH's drain condition holds in cycle ``t``: PUSH (and DONE) ``finish_cycles`` later."""
        self.finishing = False
        self.end_execute(t + self.T.finish_cycles)

    def retired(self, t: int, insn: Any) -> bool:
        if insn.MNEMONIC == "FINISH":
            self.on_done(t)
            return True
        return False

    def exec_stuck(self) -> bool:
        return self.state == EXEC and self.insn is not None and self.insn.MNEMONIC == "FINISH"
