"""The TLM's top (``hw/rtl/accel_top.v``): a CSR interface, a DRAM array and the event-driven
accelerator behind them, wired from one module per RTL block (``sim/tlm/__init__.py``).

Usage, as software would drive the hardware::

    m = TlmModel(cfg)
    m.load_dram(program.dram_image())
    for name, value in program.regs:          # region windows, INSN_ADDR/COUNT, CTRL.START
        m.write_csr(addr_of[name], value)
    m.run()                                    # simulate until DONE (or an error)
    m.read_csr(STATUS), m.read_csr(CYCLES_LO), ...

or simply :func:`run_program`. The model imports only ``hw.*``.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import numpy as np

from hw import csr
from hw.config import HwConfig
from hw.isa import INSN_BYTES, Isa
from hw.program import Program
from hw.result import RunResult
from sim.tlm.axi_arbiter import AxiArbiter
from sim.tlm.axi_inflight import AxiArbiterInFlight
from sim.tlm.barrier import Barrier
from sim.tlm.core import Core
from sim.tlm.csr_block import CsrBlock, RunStatus
from sim.tlm.dram import Dram
from sim.tlm.errors import TlmError
from sim.tlm.fast_forward import FastForward, enabled_by_default
from sim.tlm.fetch import Fetch
from sim.tlm.region_check import RegionCheck
from sim.tlm.scheduler import PH_HALT, Scheduler
from sim.tlm.timing import Timing
from sim.tlm.trace import Tracer, write_perfetto_cores


class TlmModel:
    """The transaction-level model of one accelerator (see ``sim/tlm/timing.py`` for its clock).

    ``write_csr``/``read_csr`` use the addresses of ``hw.csr``; writing ``CTRL.START``
    arms a run and :meth:`run` executes it. ``dram`` is the DRAM byte array
    (``numpy.uint8``, address 0 first); ``cores`` the cores (``sim/tlm/core.py``), each with its
    accumulator buffer and GEMM buffers; ``acc`` and ``gemm_buffers`` are core 0's.
    """

    def __init__(self, cfg: HwConfig, timing: Timing | None = None, trace: bool = False,
                 fast_forward: bool | None = None, observe_ports: bool = False):
        self.cfg = cfg
        # read-only observation for functional coverage: who held the accumulator's ports during
        # each ALU/GEMM EXECUTE (``port_holders``); it never changes a cycle
        self.observe_ports = observe_ports
        # advance repeating steady states in bulk (``sim/tlm/fast_forward.py``; same results); never
        # while tracing, whose timeline would lose the skipped part, nor on several cores, whose
        # steady states interleave through the shared port, nor with read bursts in flight (their port's
        # state is not walked)
        self.fast_forward = ((enabled_by_default() if fast_forward is None else fast_forward) and cfg.num_cores == 1
                             and cfg.dram_reads_in_flight == 1 and cfg.dram_writes_in_flight == 1)
        self.timing = timing or Timing.from_config(cfg)
        self.isa = Isa(cfg)
        self.dram_model = Dram(cfg.dram_bytes, cfg.lanes, cfg.out_width)
        self.regions = RegionCheck(cfg.dram_bytes)
        self.cores = [Core(k, cfg, self.timing, self.isa, self.dram_model, self.regions) for k in range(cfg.num_cores)]
        self.acc_buffer = self.cores[0].acc_buffer
        self.gemm_buffers = self.cores[0].gemm_buffers
        self.tracing = trace
        self.csr = CsrBlock(cfg)
        self._armed = False
        self._reset_state()

    # ---- public API --------------------------------------------------------------------------
    @property
    def acc(self) -> np.ndarray:
        """Core 0's accumulator buffer contents (``(depth, lanes)`` int32; writable)."""
        return self.acc_buffer.mem

    @property
    def dram(self) -> np.ndarray:
        """The DRAM contents (``uint8``, indexed by byte address; writable)."""
        return self.dram_model.mem

    def load_dram(self, image: bytes | bytearray | np.ndarray, addr: int = 0) -> None:
        """Copy a DRAM image (e.g. ``Program.dram_image()``) to byte address ``addr``."""
        self.dram_model.load_image(image, addr)

    def write_csr(self, addr: int, value: int) -> None:
        """An AXI4-Lite write. CTRL.START arms a run; CTRL.SOFT_RESET returns everything to idle."""
        ctrl = self.csr.write(addr, value)
        if ctrl & csr.CTRL_SOFT_RESET:
            self._reset_state()
            self._armed = False
        if ctrl & csr.CTRL_START:
            self._reset_state()
            self._armed = True

    def read_csr(self, addr: int) -> int:
        """An AXI4-Lite read."""
        return self.csr.read(addr, RunStatus(self._armed and not self.finished, self.finished, self.error,
                                             self.cycles or 0, self.core_counters()))

    @property
    def irq(self) -> bool:
        """The interrupt line: high once DONE (clean or error)."""
        return self.finished

    def run(self, max_events: int | None = None) -> int:
        """Simulate the armed run to DONE or an error; returns CYCLES.

        Errors do not raise here: they are in :attr:`error` (and STATUS/ERR_PC).
        """
        if not self._armed:
            raise RuntimeError("the register config never starts the accelerator (run() before a CTRL.START write)")
        if self.finished:
            return self.cycles or 0
        self.regions.windows = self.csr.regions()
        bad = []
        for c in self.cores:
            addr, addr_hi, count = self.csr.insn_window(c.index)
            c.insn_count = count
            if addr_hi != 0 or count == 0 or addr % INSN_BYTES != 0 or \
                    not self.regions.ok(addr, addr + INSN_BYTES * count, csr.ATTR_READ):
                why = ("INSN_ADDR_HI is not 0" if addr_hi else "INSN_COUNT is 0" if count == 0 else
                       f"INSN_ADDR_LO 0x{addr:x} is not a multiple of {INSN_BYTES}" if addr % INSN_BYTES else
                       f"instruction window [0x{addr:x}, 0x{addr + INSN_BYTES * count:x}) is not inside one "
                       f"readable region")
                bad.append(TlmError(csr.ERR_INSN_RANGE, 0, "fetch", self.timing.start_check_cycles,
                                    (f"core {c.index}: " if len(self.cores) > 1 else "") + why, core=c.index))
        if bad:  # every core checks its window in the same cycle: the lowest core's is reported
            self._set_error(bad[0])
            return self.cycles or 0
        for c in self.cores:
            addr, _, count = self.csr.insn_window(c.index)
            c.start_fetch(addr, count)
        self.insn_count = self.cores[0].insn_count
        if self.fast_forward and not self.tracing:
            self.ff = FastForward(self)
        self.sim.run()
        if not self.finished:  # the heap ran dry without DONE: nothing can progress
            self._deadlock()
        return self.cycles or 0

    def core_counters(self) -> list[dict[str, int]]:
        """Each core's counters under the lower-case names of ``hw.csr.COUNTERS``."""
        beats = self._halt_beats if self._halt_beats is not None else self.port.core_beats
        return [c.counters(b) for c, b in zip(self.cores, beats)]

    def counters(self) -> dict[str, int]:
        """The counters under the lower-case names of ``hw.csr.COUNTERS``, summed over the cores."""
        per = self.core_counters()
        return {k: sum(p[k] for p in per) for k in per[0]}

    def port_holders(self) -> dict[str, int]:
        """With ``observe_ports``: the cycles in which LOAD or STORE held an accumulator port during an
        ALU or GEMM EXECUTE of the last run, summed over the cores, by ``"<alu|alu_imm|gemm>.<holder>"``
        (``AccPorts.holders``; a period the fast-forward jumps is not observed again). Empty otherwise."""
        out: dict[str, int] = {}
        for c in self.cores:
            for k, n in (c.compute.port_log or {}).items():
                out[k] = out.get(k, 0) + n
        return out

    def port_beats(self, client: str) -> int:
        """Beats the port moved for ``client`` of every core (bursts granted; at an error: up to the error)."""
        beats = self._halt_beats if self._halt_beats is not None else self.port.core_beats
        return sum(b[client] for b in beats)

    @property
    def events(self) -> int:
        """Events the scheduler processed in the last run (grows with instructions, not cycles)."""
        return self.sim.events

    # ---- wiring and run control ----------------------------------------------------------------
    def _reset_state(self) -> None:
        self.sim = Scheduler()
        n = len(self.cores)
        self.tracer: Tracer | None = Tracer() if self.tracing else None
        # one core: its units record on the top's tracer (the VCD and Perfetto of one core as ever)
        self.core_tracers = [self.tracer] if n == 1 else [Tracer() if self.tracing else None for _ in range(n)]
        self.port: AxiArbiter | AxiArbiterInFlight
        if self.cfg.dram_reads_in_flight > 1 or self.cfg.dram_writes_in_flight > 1:
            self.port = AxiArbiterInFlight(self.sim, self.timing, self.cfg.dram_reads_in_flight, self.tracer, n,
                                           self.cfg.dram_writes_in_flight)
        else:
            self.port = AxiArbiter(self.sim, self.tracer, n)
        self.port.on_free = self._port_free
        self.barrier = Barrier(self.sim, n, self._release, self._core_fault)
        for c, tr in zip(self.cores, self.core_tracers):
            k = c.index
            c.new_run(self.sim, self.port, tr,
                      lambda t, code, pc, unit, msg, k=k: self.fault(t, code, pc, unit, msg, k),
                      lambda t, k=k: self._core_finished(k, t), lambda t, pc, k=k: self.barrier.arrive(k, t, pc))
            if self.observe_ports:
                c.compute.port_log = {}
        c0 = self.cores[0]
        # core 0's parts under the one-core names (the fast-forward and tests of one core use them)
        self.tokens, self.queues = c0.tokens, c0.queues
        self.load, self.compute, self.store, self.units = c0.load, c0.compute, c0.store, c0.units
        self.ff: FastForward | None = None
        self.cycles: int | None = None
        self.error: TlmError | None = None
        self.finished = False
        self.insn_count = 0
        self._faults: list[TlmError] = []
        self._finished: set[int] = set()
        self._halt_beats: list[dict[str, int]] | None = None
        self.bursts_at_error = 0  # bursts in flight in the cycle of the error (DONE waits for them)
        self.writes_at_error = 0  # write bursts among them (granted, B not yet)
        self.writes_at_error_per_core: list[int] = []  # ... of each core (writes in flight only)

    def in_steady_run(self) -> bool:
        """The run is under way with nothing that only happens once pending: no trace recorded, no
        fault raised, no drain check, not finished (the fast-forward looks only at such states)."""
        return (self.tracer is None and not self._faults and not any(c.drain_check_pending for c in self.cores)
                and not self.finished and not self.sim.stopped and not self.compute.finishing
                and self._halt_beats is None)

    @property
    def fetch(self) -> Fetch | None:
        """Core 0's FETCH."""
        return self.cores[0].fetch

    def _port_free(self, t: int) -> None:
        """The port is free again in cycle ``t``: a FINISH or BARRIER may be drained then."""
        for c in self.cores:
            c.check_drain(t)

    def _release(self, core: int, t: int) -> None:
        self.cores[core].release(t)

    def _core_finished(self, core: int, t: int) -> None:
        """``core``'s FINISH completed (its PUSH) in cycle ``t``: DONE once every core's has."""
        self._finished.add(core)
        self.barrier.finish(core, t)
        if len(self._finished) == len(self.cores):
            self.done(t)

    def done(self, t: int) -> None:
        """The last FINISH completed (its PUSH) in cycle ``t``: DONE rises at its end, unless an error
        is raised in the same cycle (the error wins, as in the RTL)."""
        self.sim.at(t, self._done, phase=PH_HALT)

    def _done(self, t: int) -> None:
        if self.sim.stopped or self._faults:
            return
        self.cycles = t
        self.finished = True
        for tr in {id(x): x for x in [self.tracer, *self.core_tracers] if x is not None}.values():
            tr.done(t)
        self.sim.stop()

    def _core_fault(self, t: int, code: int, pc: int, core: int, msg: str) -> None:
        self.fault(t, code, pc, "compute", msg, core)

    def fault(self, t: int, code: int, pc: int, unit: str | None, msg: str, core: int = 0) -> None:
        """Record a fault of ``core`` at ``t``; at PH_HALT the lowest core with a fault in that cycle
        wins, inside it the lowest pc (a BARRIER fault only when the core has no other)."""
        if self.sim.stopped:
            return
        if not self._faults:
            self.sim.at(t, self._halt, phase=PH_HALT)
        self._faults.append(TlmError(code, pc, unit, t, msg, core=core))

    def _halt(self, t: int) -> None:
        err = min((e for e in self._faults if e.cycle == t),
                  key=lambda e: (e.core, e.code == csr.ERR_BARRIER, e.pc))
        self._set_error(err)

    def _deadlock(self) -> None:
        """Nothing can progress: the stuck condition has held since the last state change."""
        T = self.timing
        since = [u.stuck_since() for c in self.cores for u in c.units.values()]
        since += [c.fetch.stuck_since for c in self.cores if c.fetch is not None and c.fetch.stuck_since is not None]
        since.append(self.port.free_since)
        t = max(max(since), 1)
        e = t + T.deadlock_cycles - 1
        err = None
        for c in self.cores:
            blocked = [u for u in c.units.values() if u.blocked and u.pc is not None]
            if blocked:
                u = min(blocked, key=lambda u: u.pc)
                states = ", ".join(f"{v.name} {v.state} at {v.pc}" for v in blocked)
                who = f"core {c.index}: " if len(self.cores) > 1 else ""
                err = TlmError(csr.ERR_DEADLOCK, u.pc, u.name, e, f"{who}no unit can progress ({states})", core=c.index)
                break
        if err is None:
            err = TlmError(csr.ERR_DEADLOCK, self.cores[0].insn_count, None, e,
                           "every unit is idle and FINISH never completed (missing FINISH?)")
        self._set_error(err)

    def _set_error(self, err: TlmError) -> None:
        """Stop at the error raised in cycle ``err.cycle``: DONE at the end of
        ``max(e + halt_cycles, end of the burst under way)``."""
        e = err.cycle
        c1 = e + self.timing.halt_cycles
        bursts = self.port.inflight_bursts(e)
        self.bursts_at_error = len(bursts)
        if isinstance(self.port, AxiArbiterInFlight):
            self.writes_at_error_per_core = [self.port.writes_at(e, c) for c in range(len(self.cores))]
        self.writes_at_error = sum(self.writes_at_error_per_core)
        self.error = err
        self._halt_beats = self.port.beats_at_halt(e)
        for c in self.cores:
            for u in c.units.values():
                u.partial_counts(e, c1, bursts.get((c.index, u.name)))
        self.cycles = max([c1, self.port.drain_end(e)] + [b[1] for b in bursts.values()])
        self.finished = True
        for tr in {id(x): x for x in [self.tracer, *self.core_tracers] if x is not None}.values():
            tr.done(self.cycles)
        self.sim.stop()

    # ---- tracing ----------------------------------------------------------------------------------
    def write_vcd(self, path: str | Path) -> Path:
        """Write the timeline of the last run as VCD (needs ``trace=True``)."""
        if self.tracer is None:
            raise RuntimeError("the model was built without trace=True")
        if len(self.cores) == 1:
            return self.tracer.write_vcd(path, self.cycles or 0)
        # several cores: the RTL's dbg_* probes are core 0's, the DMA probes the shared port's
        view = copy.copy(self.core_tracers[0])
        assert view is not None
        view.dmas = self.tracer.dmas
        return view.write_vcd(path, self.cycles or 0)

    def write_trace(self, path: str | Path, sections: list[dict[str, Any]] | None = None) -> Path:
        """Write the Chrome/Perfetto trace JSON of the last run (needs ``trace=True``); ``sections``
        (a Program's ``meta["sections"]``) adds one span per section on a track of its own."""
        if self.tracer is None:
            raise RuntimeError("the model was built without trace=True")
        if len(self.cores) == 1:
            return self.tracer.write_perfetto(path, self.cycles or 0, self.isa, sections)
        return write_perfetto_cores(path, self.cycles or 0, self.isa, self.tracer,
                                    [t for t in self.core_tracers if t is not None])


def simulate(prog: Program, timing: Timing | None = None, trace: bool = False,
             fast_forward: bool | None = None, observe_ports: bool = False) -> tuple[TlmModel, float]:
    """Build a model for ``prog``'s config, load its DRAM image, play its register config (START)
    and run it; returns the model (outputs in ``dram``, ``tracer`` when ``trace``) and the wall time
    of the run in seconds."""
    m = TlmModel(prog.config, timing, trace=trace, fast_forward=fast_forward, observe_ports=observe_ports)
    m.load_dram(prog.dram_image())
    addr = csr.csrs_of(prog.config)
    t0 = time.perf_counter()
    for name, value in prog.regs:
        m.write_csr(addr[name].addr, value)
    m.run()
    return m, time.perf_counter() - t0


def result_of(m: TlmModel, prog: Program, wall: float) -> RunResult:
    """The RunResult of a finished simulation ``m`` of ``prog``: outputs cut from its DRAM, cycles,
    counters, the error; ``extra`` has ``events`` (and ``cores``, every core's counters, on several)."""
    extra: dict[str, Any] = {"events": m.events}
    if len(m.cores) > 1:
        extra["cores"] = m.core_counters()
    return RunResult("tlm", prog.read_outputs(m.dram), m.cycles, m.counters(),
                     m.error.to_dict(len(m.cores)) if m.error is not None else None, wall, extra=extra)


def run_program(program: Program | str | Path, *, vcd: str | Path | None = None, trace: str | Path | None = None,
                timing: Timing | None = None, raise_on_error: bool = True,
                cfg: HwConfig | None = None, fast_forward: bool | None = None,
                observe_ports: bool = False) -> RunResult:
    """Run a Program (object or saved folder) on the TLM and return its RunResult.

    The register config is played through the model's CSR interface; outputs are cut
    from DRAM by the Program's layout. ``vcd``/``trace`` write the timeline (VCD with
    the RTL's ``dbg_*`` probe names; Chrome/Perfetto JSON). With ``raise_on_error`` a
    fault raises :class:`TlmError` (after the trace files are written), else it is in
    ``result.error``. ``extra`` carries ``events`` and ``insns_per_s``. ``fast_forward`` (default:
    on unless ``COSIM_TLM_FAST_FORWARD=0``; always off while tracing) jumps over repeating steady
    states with the very same results (``sim/tlm/fast_forward.py``). ``observe_ports`` adds
    ``extra["acc_ports"]`` (:meth:`TlmModel.port_holders`), an observation that changes nothing.
    With read bursts in flight (``dram_reads_in_flight`` > 1) ``extra`` also has
    ``reads_in_flight_max`` (the most reads in flight at once) and, after an error,
    ``bursts_in_flight_at_error`` and ``writes_in_flight_at_error``; with write bursts in flight
    (``dram_writes_in_flight`` > 1) also ``writes_in_flight_max`` and ``reads_beside_writes`` (reads
    granted while a write was in flight) and, after an error on several cores,
    ``writes_in_flight_at_error_per_core`` (the writes in flight at the error, by core: DONE waits for
    their B's).
    """
    prog = program if isinstance(program, Program) else Program.load(program, cfg)
    m, wall = simulate(prog, timing, trace=vcd is not None or trace is not None, fast_forward=fast_forward,
                       observe_ports=observe_ports)
    if vcd is not None:
        m.write_vcd(vcd)
    if trace is not None:
        m.write_trace(trace, prog.meta.get("sections"))
    res = result_of(m, prog, wall)
    if observe_ports:
        res.extra["acc_ports"] = m.port_holders()
    if isinstance(m.port, AxiArbiterInFlight):  # what the port did with read bursts in flight
        res.extra["reads_in_flight_max"] = m.port.max_reads_seen
        if m.cfg.dram_writes_in_flight > 1:
            res.extra["writes_in_flight_max"] = m.port.max_writes_seen
            res.extra["reads_beside_writes"] = m.port.reads_beside_writes
        if m.error is not None:
            res.extra["bursts_in_flight_at_error"] = m.bursts_at_error
            res.extra["writes_in_flight_at_error"] = m.writes_at_error
            if len(m.cores) > 1 and m.cfg.dram_writes_in_flight > 1:
                res.extra["writes_in_flight_at_error_per_core"] = m.writes_at_error_per_core
    if m.error is not None and raise_on_error:
        raise m.error
    return res
