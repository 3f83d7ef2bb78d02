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

import time
from pathlib import Path
from typing import Any

import numpy as np

from hw import csr
from hw.config import HwConfig
from hw.isa import INSN_BYTES, Isa
from hw.program import Program
from hw.result import RunResult
from sim.tlm.acc_buffer import AccBuffer
from sim.tlm.axi_arbiter import AxiArbiter
from sim.tlm.compute_unit import ComputeUnit
from sim.tlm.csr_block import CsrBlock, RunStatus
from sim.tlm.dram import Dram
from sim.tlm.errors import TlmError
from sim.tlm.fast_forward import FastForward, enabled_by_default
from sim.tlm.fetch import Fetch
from sim.tlm.gemm_buffers import GemmBuffers
from sim.tlm.insn_queue import InsnQueue
from sim.tlm.load_unit import LoadUnit
from sim.tlm.region_check import RegionCheck
from sim.tlm.scheduler import PH_CHECK, PH_HALT, Scheduler
from sim.tlm.store_unit import StoreUnit
from sim.tlm.timing import Timing
from sim.tlm.token_queue import TOKEN_QUEUES, TokenQueue
from sim.tlm.trace import Tracer
from sim.tlm.unit_shell import IDLE, UnitShell


class TlmModel:
    """The transaction-level model of one accelerator (see ``sim/tlm/timing.py`` for its clock).

    ``write_csr``/``read_csr`` use the addresses of ``hw.csr``; writing ``CTRL.START``
    arms a run and :meth:`run` executes it. ``dram`` is the DRAM byte array
    (``numpy.uint8``, address 0 first); ``acc`` the accumulator buffer; ``gemm_buffers`` the
    GEMM core's input, weight and micro-op buffers.
    """

    def __init__(self, cfg: HwConfig, timing: Timing | None = None, trace: bool = False,
                 fast_forward: bool | None = None):
        self.cfg = cfg
        # advance repeating steady states in bulk (``sim/tlm/fast_forward.py``; same results); never
        # while tracing, whose timeline would lose the skipped part
        self.fast_forward = enabled_by_default() if fast_forward is None else fast_forward
        self.timing = timing or Timing.from_config(cfg)
        self.isa = Isa(cfg)
        self.dram_model = Dram(cfg.dram_bytes, cfg.lanes, cfg.out_width)
        self.acc_buffer = AccBuffer(cfg.acc_depth, cfg.lanes)
        self.gemm_buffers = GemmBuffers(cfg)
        self.regions = RegionCheck(cfg.dram_bytes)
        self.tracing = trace
        self.csr = CsrBlock(cfg)
        self._armed = False
        self._reset_state()

    # ---- public API --------------------------------------------------------------------------
    @property
    def acc(self) -> np.ndarray:
        """The accumulator buffer's contents (``(depth, lanes)`` int32; writable)."""
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
                                             self.cycles or 0, self.counters()))

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
        addr, addr_hi, count = self.csr.insn_window()
        self.regions.windows = self.csr.regions()
        self.insn_count = count
        if addr_hi != 0 or count == 0 or addr % INSN_BYTES != 0 or \
                not self.regions.ok(addr, addr + INSN_BYTES * count, csr.ATTR_READ):
            why = ("INSN_ADDR_HI is not 0" if addr_hi else "INSN_COUNT is 0" if count == 0 else
                   f"INSN_ADDR_LO 0x{addr:x} is not a multiple of {INSN_BYTES}" if addr % INSN_BYTES else
                   f"instruction window [0x{addr:x}, 0x{addr + INSN_BYTES * count:x}) is not inside one "
                   f"readable region")
            e = self.timing.start_check_cycles
            self._set_error(TlmError(csr.ERR_INSN_RANGE, 0, "fetch", e, why))
            return self.cycles or 0
        self.fetch = Fetch(self.sim, self.timing, self.isa, self.port, self.dram_model, self.queues, self.fault,
                           addr, count)
        self.fetch.start(0)
        if self.fast_forward and not self.tracing:
            self.ff = FastForward(self)
        self.sim.run()
        if not self.finished:  # the heap ran dry without DONE: nothing can progress
            self._deadlock()
        return self.cycles or 0

    def counters(self) -> dict[str, int]:
        """The counters under the lower-case names of ``hw.csr.COUNTERS``."""
        L, C, S = self.load, self.compute, self.store
        return {"load_busy": L.busy, "compute_busy": C.busy, "store_busy": S.busy,
                "load_stall": L.stall, "compute_stall": C.stall, "store_stall": S.stall,
                "load_insns": L.insns, "compute_insns": C.insns, "store_insns": S.insns,
                "dma_rd_bytes": self.port_beats("load") * self.timing.bus_bytes,
                "dma_wr_bytes": self.port_beats("store") * self.timing.bus_bytes,
                "fetch_bytes": self.port_beats("fetch") * self.timing.bus_bytes, "compute_wait": C.wait,
                "gemm_busy": C.gemm_busy, "gemm_ops": C.gemm_ops}

    def port_beats(self, client: str) -> int:
        """Beats the port moved for ``client`` (bursts granted; at an error: up to the error)."""
        beats = self._halt_beats if self._halt_beats is not None else self.port.beats
        return beats[client]

    @property
    def events(self) -> int:
        """Events the scheduler processed in the last run (grows with instructions, not cycles)."""
        return self.sim.events

    # ---- wiring and run control ----------------------------------------------------------------
    def _reset_state(self) -> None:
        self.sim = Scheduler()
        self.tracer: Tracer | None = Tracer() if self.tracing else None
        self.port = AxiArbiter(self.sim, self.tracer)
        self.port.on_free = self.check_finish
        T = self.timing
        sim, tr = self.sim, self.tracer
        self.tokens = {n: TokenQueue(n, T.token_queue_depth, T.token_latency_cycles, sim.at) for n in TOKEN_QUEUES}
        lat = T.queue_latency_cycles
        self.queues = {"load": InsnQueue("load", T.load_queue_depth, lat, tr),
                       "compute": InsnQueue("compute", T.compute_queue_depth, lat, tr),
                       "store": InsnQueue("store", T.store_queue_depth, lat, tr)}
        shell = (sim, T, tr)
        self.acc_buffer.new_run()
        self.gemm_buffers.new_run()  # START and soft reset clear the micro-op and weight valid bits
        self.load = LoadUnit(*shell, self.queues["load"], self.tokens, self.fault, self.unit_idle,
                             self.port, self.dram_model, self.regions, self.acc_buffer, self.gemm_buffers)
        self.compute = ComputeUnit(*shell, self.queues["compute"], self.tokens, self.fault, self.unit_idle,
                                   self.acc_buffer, self.gemm_buffers, self.cfg, self.check_finish,
                                   self.done)
        self.store = StoreUnit(*shell, self.queues["store"], self.tokens, self.fault, self.unit_idle,
                               self.port, self.dram_model, self.regions, self.acc_buffer)
        self.units: dict[str, UnitShell] = {"load": self.load, "compute": self.compute, "store": self.store}
        self.fetch: Fetch | None = None
        self.ff: FastForward | None = None
        self.cycles: int | None = None
        self.error: TlmError | None = None
        self.finished = False
        self.insn_count = 0
        self._faults: list[TlmError] = []
        self._checks: set[int] = set()
        self._halt_beats: dict[str, int] | None = None

    def unit_idle(self, t: int) -> None:
        """A unit is IDLE again from cycle ``t``: FINISH may be able to complete then."""
        self.check_finish(t)

    def check_finish(self, t: int) -> None:
        """Schedule FINISH's drain check at the end of cycle ``t`` (once per cycle)."""
        if self.compute.finishing and t not in self._checks:
            self._checks.add(t)
            self.sim.at(t, self._finish_check, phase=PH_CHECK)

    def _finish_check(self, t: int) -> bool:
        """The RTL's ``drained`` in cycle ``t`` (after that cycle's pops and grants): load and
        store IDLE with empty queues, the port free with no request."""
        self._checks.discard(t)
        c = self.compute
        if not c.finishing or self.sim.stopped or t < c.t_exec:
            return False
        for u in (self.load, self.store):
            if u.state != IDLE or not u.queue.visible_empty(t):
                return False
            if u.idle_from > t:
                self.check_finish(u.idle_from)
                return False
        if self.port.busy or self.port.pending:
            return False
        c.finish_drained(t)
        return True

    def done(self, t: int) -> None:
        """FINISH completed (its PUSH) in cycle ``t``: DONE rises at its end, unless an error
        is raised in the same cycle (the error wins, as in the RTL)."""
        self.sim.at(t, self._done, phase=PH_HALT)

    def _done(self, t: int) -> None:
        if self.sim.stopped or self._faults:
            return
        self.cycles = t
        self.finished = True
        if self.tracer is not None:
            self.tracer.done(t)
        self.sim.stop()

    def fault(self, t: int, code: int, pc: int, unit: str | None, msg: str) -> None:
        """Record a fault at ``t``; the lowest pc among this cycle's faults wins (at PH_HALT)."""
        if self.sim.stopped:
            return
        if not self._faults:
            self.sim.at(t, self._halt, phase=PH_HALT)
        self._faults.append(TlmError(code, pc, unit, t, msg))

    def _halt(self, t: int) -> None:
        err = min((e for e in self._faults if e.cycle == t), key=lambda e: e.pc)
        self._set_error(err)

    def _deadlock(self) -> None:
        """Nothing can progress: the stuck condition has held since the last state change."""
        T = self.timing
        since = [u.stuck_since() for u in self.units.values()]
        if self.fetch is not None and self.fetch.stuck_since is not None:
            since.append(self.fetch.stuck_since)
        since.append(self.port.free_since)
        t = max(max(since), 1)
        e = t + T.deadlock_cycles - 1
        blocked = [u for u in self.units.values() if u.blocked and u.pc is not None]
        if blocked:
            u = min(blocked, key=lambda u: u.pc)
            states = ", ".join(f"{v.name} {v.state} at {v.pc}" for v in blocked)
            err = TlmError(csr.ERR_DEADLOCK, u.pc, u.name, e, f"no unit can progress ({states})")
        else:
            err = TlmError(csr.ERR_DEADLOCK, self.insn_count, None, e,
                           "every unit is idle and FINISH never completed (missing FINISH?)")
        self._set_error(err)

    def _set_error(self, err: TlmError) -> None:
        """Stop at the error raised in cycle ``err.cycle``: DONE at the end of
        ``max(e + halt_cycles, end of the burst under way)``."""
        e = err.cycle
        c1 = e + self.timing.halt_cycles
        burst = self.port.inflight(e)
        self.error = err
        self._halt_beats = self.port.beats_at_halt(e)
        for u in self.units.values():
            u.partial_counts(e, c1, burst)
        self.cycles = max(c1, burst[1]) if burst is not None else c1
        self.finished = True
        if self.tracer is not None:
            self.tracer.done(self.cycles)
        self.sim.stop()

    # ---- tracing ----------------------------------------------------------------------------------
    def write_vcd(self, path: str | Path) -> Path:
        """Write the timeline of the last run as VCD (needs ``trace=True``)."""
        if self.tracer is None:
            raise RuntimeError("the model was built without trace=True")
        return self.tracer.write_vcd(path, self.cycles or 0)

    def write_trace(self, path: str | Path, sections: list[dict[str, Any]] | None = None) -> Path:
        """Write the Chrome/Perfetto trace JSON of the last run (needs ``trace=True``); ``sections``
        (a Program's ``meta["sections"]``) adds one span per section on a track of its own."""
        if self.tracer is None:
            raise RuntimeError("the model was built without trace=True")
        return self.tracer.write_perfetto(path, self.cycles or 0, self.isa, sections)


def simulate(prog: Program, timing: Timing | None = None, trace: bool = False,
             fast_forward: bool | None = None) -> tuple[TlmModel, float]:
    """Build a model for ``prog``'s config, load its DRAM image, play its register config (START)
    and run it; returns the model (outputs in ``dram``, ``tracer`` when ``trace``) and the wall time
    of the run in seconds."""
    m = TlmModel(prog.config, timing, trace=trace, fast_forward=fast_forward)
    m.load_dram(prog.dram_image())
    addr = csr.csr_by_name(prog.config.max_regions)
    t0 = time.perf_counter()
    for name, value in prog.regs:
        m.write_csr(addr[name].addr, value)
    m.run()
    return m, time.perf_counter() - t0


def run_program(program: Program | str | Path, *, vcd: str | Path | None = None, trace: str | Path | None = None,
                timing: Timing | None = None, raise_on_error: bool = True,
                cfg: HwConfig | None = None, fast_forward: bool | None = None) -> RunResult:
    """Run a Program (object or saved folder) on the TLM and return its RunResult.

    The register config is played through the model's CSR interface; outputs are cut
    from DRAM by the Program's layout. ``vcd``/``trace`` write the timeline (VCD with
    the RTL's ``dbg_*`` probe names; Chrome/Perfetto JSON). With ``raise_on_error`` a
    fault raises :class:`TlmError` (after the trace files are written), else it is in
    ``result.error``. ``extra`` carries ``events`` and ``insns_per_s``. ``fast_forward`` (default:
    on unless ``COSIM_TLM_FAST_FORWARD=0``; always off while tracing) jumps over repeating steady
    states with the very same results (``sim/tlm/fast_forward.py``).
    """
    prog = program if isinstance(program, Program) else Program.load(program, cfg)
    m, wall = simulate(prog, timing, trace=vcd is not None or trace is not None, fast_forward=fast_forward)
    if vcd is not None:
        m.write_vcd(vcd)
    if trace is not None:
        m.write_trace(trace, prog.meta.get("sections"))
    res = RunResult("tlm", prog.read_outputs(m.dram), m.cycles, m.counters(),
                    m.error.to_dict() if m.error is not None else None, wall,
                    extra={"events": m.events})
    if m.error is not None and raise_on_error:
        raise m.error
    return res
