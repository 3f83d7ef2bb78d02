"""COMPUTE (``hw/rtl/compute_unit.v``): the vector ALU over the accumulator buffer, the GEMM
core (``sim/tlm/gemm.py``, ``hw/rtl/gemm.v``), FINISH and BARRIER.

Inside the unit shell: WAIT checks the ALU's accumulator indices and a GEMM's micro-op range;
EXECUTE applies the instruction (the ALU with ``sim/tlm/alu.py``, GEMM with
``hw.gemm_numpy.run_gemm``; the result is the sequential one, which the RTL's pipelines keep
by forwarding) and lasts until the pipeline has had the free cycles it needs, cycles in
which the buffer's ports it uses are not taken (``AccPorts.nth_free``: LOAD writing a vector
takes the write port, STORE reading one takes the source operand's read port, which only an
ALU without immediate reads):

* ALU: ``alu_setup_cycles + iter_out*iter_in + alu_pipeline_cycles`` free cycles;
* GEMM: ``N + gemm_pipeline_cycles`` free cycles, or, when iteration k faults, up to its A
  stage, the ``(k + 1 + gemm_check_cycles)``-th free cycle, in which the error is raised.

The cycle is planned when EXECUTE starts and planned again whenever LOAD or STORE registers
(or withdraws) a port use at or before it, so an instruction costs O(1) events however long
its loop. A GEMM's error is raised by an event in the end-of-cycle phase of its cycle, after
every port use registered in that cycle is known. FINISH travels through the compute queue:
its EXECUTE waits until the rest of the accelerator has drained (the top decides,
:meth:`ComputeUnit.finish_drained`), and its PUSH ends the core's run. A BARRIER waits the same
way, then until every core has arrived (``sim/tlm/barrier.py``); its PUSH lets FETCH go on.

``port_log`` (None unless the top asks for it, ``TlmModel(observe_ports=True)``) is an observation
for functional coverage that never feeds back into the timing: per ALU or GEMM EXECUTE, the cycles in
which LOAD or STORE held the buffer's ports (``AccPorts.holders``), summed by
``"<alu|alu_imm|gemm>.<holder>"``.

Counters kept here: ``wait`` (COMPUTE_WAIT: EXEC cycles of an ALU or GEMM frozen on a port, up
to an error's cycle), ``gemm_busy`` (GEMM_BUSY: GEMM EXEC cycles, up to and including an
error's cycle) and ``gemm_ops`` (GEMM_OPS: E stages of non-reset GEMMs, iterations written).
"""

from __future__ import annotations

from typing import Any, Callable

from hw.config import HwConfig
from hw.isa import Alu, Gemm
from hw.isa_semantics import alu_last_indices
from sim.tlm.acc_buffer import AccBuffer
from sim.tlm.alu import run_alu
from sim.tlm.gemm import GemmExec, gemm_range_error, start_gemm
from sim.tlm.gemm_buffers import GemmBuffers
from sim.tlm.insn_queue import InsnQueue
from sim.tlm.scheduler import PH_CHECK, Scheduler
from sim.tlm.steady_state import StateWalk, Unsupported, steady_event
from sim.tlm.timing import Timing
from sim.tlm.token_queue import TokenQueue
from sim.tlm.trace import Tracer
from sim.tlm.unit_shell import EXEC, Fault, UnitShell


class ComputeUnit(UnitShell):
    """The vector ALU and the GEMM core (and FINISH, which travels through the compute queue).

    ``check_finish(t)`` asks the core to test the drain condition in cycle ``t`` (FINISH, BARRIER);
    ``on_done(t)`` is told that FINISH completed in cycle ``t``, ``on_barrier(t)`` that a BARRIER did.
    """

    name = "compute"
    STEADY_STATE = ("_need", "_use_src", "_target", "_gemm", "_charged", "_plan_version", "finishing")
    STEADY_FIXED = ("on_barrier", "acc", "gemm_bufs", "cfg", "check_finish", "on_done", "wait", "gemm_busy",
                    "gemm_ops", "port_log")
    COUNTERS = UnitShell.COUNTERS + ("wait", "gemm_busy", "gemm_ops")

    def __init__(self, sim: Scheduler, timing: Timing, tracer: Tracer | None, queue: InsnQueue,
                 tokens: dict[str, TokenQueue], fault: Fault, on_idle: Callable[[int], None],
                 acc: AccBuffer, gemm_bufs: GemmBuffers, cfg: HwConfig, check_finish: Callable[[int], None],
                 on_done: Callable[[int], None], on_barrier: Callable[[int], None] = lambda t: None):
        super().__init__(sim, timing, tracer, queue, tokens, fault, on_idle)
        self.on_barrier = on_barrier
        self.acc = acc
        self.gemm_bufs = gemm_bufs
        self.cfg = cfg  # the buffer depths GEMM checks its indices against
        self.check_finish = check_finish
        self.on_done = on_done
        self.finishing = False
        self.wait = 0       # EXEC cycles frozen on a buffer port (COMPUTE_WAIT)
        self.gemm_busy = 0  # GEMM EXEC cycles (GEMM_BUSY)
        self.gemm_ops = 0   # GEMM iterations written, reset excluded (GEMM_OPS)
        # the pipeline of the instruction in EXECUTE: free cycles it needs, whether it reads
        # copy S, the planned cycle of its last free cycle (None: nothing planned), the GEMM
        self._need = 0
        self._use_src = False
        self._target: int | None = None
        self._gemm: GemmExec | None = None
        self._charged = False  # a GEMM's own fault charged its counters up to the error
        self._plan_version = 0
        self.port_log: dict[str, int] | None = None
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
        if isinstance(i, Gemm):
            return gemm_range_error(i, self.cfg)
        return None

    def begin(self, t: int) -> None:
        i, T = self.insn, self.T
        self._plan_version += 1  # an end planned for an earlier instruction is stale now
        self._target, self._gemm, self._charged = None, None, False
        if i.MNEMONIC in ("FINISH", "BARRIER"):
            self.finishing = True
            self.check_finish(t)
            return
        if self.data_log is not None:
            self.data_log.append(("gemm" if isinstance(i, Gemm) else "alu", i))
        if isinstance(i, Gemm):
            g = self._gemm = start_gemm(i, self.acc.mem, self.gemm_bufs, self.cfg)
            if self.tr is not None:
                self.tr.busy("gemm", t, 1)
            if g.iterations == 0:
                self.end_execute(t + T.min_execute_cycles)
                return
            self._need, self._use_src = g.free_cycles(T), False
        else:
            run_alu(self.acc.mem, i)
            n = i.iter_out * i.iter_in
            if n == 0:
                self.end_execute(t + T.min_execute_cycles)
                return
            self._need, self._use_src = T.alu_setup_cycles + n + T.alu_pipeline_cycles, not i.use_imm
        self.acc.ports.forget_before(t)
        self._plan()

    def _faulting(self) -> bool:
        return self._gemm is not None and self._gemm.fault is not None

    def _plan(self) -> None:
        """(Re)plan the instruction in EXECUTE with the port uses known now: its end (the cycle
        after its last free cycle), or a faulting GEMM's error (in its last free cycle)."""
        target = self.acc.ports.nth_free(self.t_exec, self._need, self._use_src)
        if target == self._target:
            return
        self._target = target
        self._plan_version += 1
        if self._faulting():
            self.sim.at(target, self._gemm_fault, self._plan_version, phase=PH_CHECK)
        else:
            self.t_end = target + 1
            self.sim.at(target + 1, self._planned_done, self._plan_version)

    def _log_ports(self, hi: int) -> None:
        """Add who held the ports in this EXECUTE's cycles up to ``hi`` to ``port_log`` (if kept)."""
        if self.port_log is None:
            return
        i = self.insn
        kind = "gemm" if isinstance(i, Gemm) else ("alu" if self._use_src else "alu_imm")
        for holder, n in self.acc.ports.holders(self.t_exec, hi).items():
            if n:
                key = f"{kind}.{holder}"
                self.port_log[key] = self.port_log.get(key, 0) + n

    def _ports_changed(self, t: int) -> None:
        """LOAD or STORE registered or withdrew port uses from cycle ``t`` on."""
        if (self.state == EXEC and self._target is not None and t <= self._target and not self.sim.stopped):
            self._plan()

    @steady_event(versioned=True)
    def _planned_done(self, t: int, version: int) -> bool:
        if version != self._plan_version or self.state != EXEC or self.sim.stopped:
            return False
        self.wait += t - self.t_exec - self._need
        self._log_ports(t - 1)
        self.end_execute(t)
        return True

    def _gemm_fault(self, e: int, version: int) -> bool:
        """A GEMM's faulting iteration reaches its A stage in cycle ``e``: the error is raised."""
        g = self._gemm
        if version != self._plan_version or self.state != EXEC or self.sim.stopped or g is None or g.fault is None:
            return False
        span = e - self.t_exec + 1
        self.wait += span - self._need
        self._log_ports(e)
        self.gemm_busy += span
        self.gemm_ops += g.ops_within(self._need, self.T)
        self._charged = True
        self.fault(e, g.fault.code, self.pc, self.name, g.fault.message)
        return True

    def complete(self, t: int) -> None:
        g = self._gemm
        if g is None or not isinstance(self.insn, Gemm):
            return
        self.gemm_busy += t - self.t_exec
        self.gemm_ops += g.ops_within(g.iterations + self.T.gemm_pipeline_cycles, self.T)
        if self.tr is not None:
            frozen = t - self.t_exec - self._need if self._target is not None else 0
            self.tr.busy("gemm", t, 0)
            self.tr.gemm(self.pc, self.t_exec, t, g.iterations, frozen)

    def partial_counts(self, e: int, c1: int, burst: tuple[str, int, bool, int] | None) -> None:
        # an ALU or GEMM stopped by an error waited in the blocked cycles of its EXEC up to e (the
        # halt freezes it from e + 1 on, which is not a wait); a GEMM counts its EXEC cycles and
        # the iterations it wrote up to e (its own fault charged them when it was raised)
        i = self.insn
        if self.state == EXEC and isinstance(i, (Alu, Gemm)) and self.t_exec <= e and not self._charged:
            hi = e if self.t_end is None else min(e, self.t_end - 1)
            blocked = 0
            if self._target is not None:
                blocked = self.acc.ports.blocked(self.t_exec, hi, self._use_src)
                self.wait += blocked
                self._log_ports(hi)
            g = self._gemm
            if isinstance(i, Gemm) and g is not None:
                span = hi - self.t_exec + 1
                self.gemm_busy += span
                if self._target is not None:
                    self.gemm_ops += g.ops_within(span - blocked, self.T)
        super().partial_counts(e, c1, burst)

    def walk_execute(self, w: StateWalk) -> None:
        """The pipeline of the ALU or GEMM in EXECUTE: the free cycles it needs, the port it reads,
        the GEMM's progress and its planned last free cycle (FINISH, BARRIER: not covered)."""
        if self.finishing:
            raise Unsupported
        if self.state != EXEC:
            return
        g = self._gemm
        if g is not None and g.fault is not None:
            raise Unsupported
        w.val((self._need, self._use_src, self._charged, g is not None and (g.iterations, g.applied, g.reset)))
        self._target = w.time(self._target)

    @property
    def event_version(self) -> int:
        """The plan's version: a planned end carrying an older one is stale."""
        return self._plan_version

    def advance_event_version(self, n: int) -> None:
        """Move the plan's version on by ``n`` (a fast-forward jump over ``n`` replans)."""
        self._plan_version += n

    def finish_drained(self, t: int) -> None:
        """FINISH's drain condition holds in cycle ``t`` (a BARRIER's: every core arrived in ``t``):
        PUSH (and DONE) ``finish_cycles`` later."""
        self.finishing = False
        self.end_execute(t + self.T.finish_cycles)

    def retired(self, t: int, insn: Any) -> bool:
        if insn.MNEMONIC == "FINISH":
            self.on_done(t)
            return True
        if insn.MNEMONIC == "BARRIER":
            self.on_barrier(t)
        return False

    def exec_stuck(self) -> bool:
        return self.state == EXEC and self.insn is not None and self.insn.MNEMONIC in ("FINISH", "BARRIER")
