"""One core (``hw/rtl/core.v``): FETCH, the three instruction queues, the four token queues, the
three units, the accumulator buffer and GEMM's buffers, wired to the shared DRAM port through a
:class:`~sim.tlm.axi_arbiter.CorePort`. The top (``accel_top.py``) holds ``num_cores`` of them
around the arbiter, the barrier and the CSR block.

A core tests its *drain* (load and store IDLE with empty queues, none of its bursts on the port
and none requested: the RTL's ``drained``) for FINISH and BARRIER in the end-of-cycle phase; a
drained FINISH ends its EXEC (``finish_cycles`` later), a drained BARRIER makes the core arrived
at the barrier, which releases it.
"""

from __future__ import annotations

from typing import Callable

from hw.config import HwConfig
from hw.isa import Isa
from sim.tlm.acc_buffer import AccBuffer
from sim.tlm.axi_arbiter import AxiArbiter, CorePort
from sim.tlm.compute_unit import ComputeUnit
from sim.tlm.dram import Dram
from sim.tlm.fetch import Fetch
from sim.tlm.gemm_buffers import GemmBuffers
from sim.tlm.insn_queue import InsnQueue
from sim.tlm.load_unit import LoadUnit
from sim.tlm.region_check import RegionCheck
from sim.tlm.scheduler import PH_CHECK, Scheduler
from sim.tlm.store_unit import StoreUnit
from sim.tlm.timing import Timing
from sim.tlm.token_queue import TOKEN_QUEUES, TokenQueue
from sim.tlm.trace import Tracer
from sim.tlm.unit_shell import IDLE, UnitShell

# fault(cycle, code, pc, unit, message) of one core
CoreFault = Callable[[int, int, int, str | None, str], None]


class Core:
    """Core ``index``: its buffers live across runs (as the RTL's SRAMs do); :meth:`new_run` wires a
    fresh run's queues and units."""

    def __init__(self, index: int, cfg: HwConfig, timing: Timing, isa: Isa, dram: Dram, regions: RegionCheck):
        self.index = index
        self.cfg = cfg
        self.T = timing
        self.isa = isa
        self.dram = dram
        self.regions = regions
        self.acc_buffer = AccBuffer(cfg.acc_depth, cfg.lanes, cfg.dram_writes_in_flight > 1)
        self.gemm_buffers = GemmBuffers(cfg)

    def new_run(self, sim: Scheduler, arbiter: AxiArbiter, tracer: Tracer | None, fault: CoreFault,
                on_finish: Callable[[int], None], on_arrive: Callable[[int, int], None]) -> None:
        """Wire the run: ``on_finish(t)`` (FINISH's PUSH in cycle t), ``on_arrive(t, pc)`` (drained at
        a BARRIER from cycle t)."""
        T = self.T
        self.sim, self.arbiter, self.tracer = sim, arbiter, tracer
        self.fault, self.on_finish, self.on_arrive = fault, on_finish, on_arrive
        self.port = CorePort(arbiter, self.index)
        self.tokens = {n: TokenQueue(n, T.token_queue_depth, T.token_latency_cycles, sim.at) for n in TOKEN_QUEUES}
        lat = T.queue_latency_cycles
        self.queues = {"load": InsnQueue("load", T.load_queue_depth, lat, tracer),
                       "compute": InsnQueue("compute", T.compute_queue_depth, lat, tracer),
                       "store": InsnQueue("store", T.store_queue_depth, lat, tracer)}
        shell = (sim, T, tracer)
        self.acc_buffer.new_run()
        self.gemm_buffers.new_run()  # START and soft reset clear the micro-op and weight valid bits
        self.load = LoadUnit(*shell, self.queues["load"], self.tokens, fault, self.check_drain,
                             self.port, self.dram, self.regions, self.acc_buffer, self.gemm_buffers)
        self.compute = ComputeUnit(*shell, self.queues["compute"], self.tokens, fault, self.check_drain,
                                   self.acc_buffer, self.gemm_buffers, self.cfg, self.check_drain,
                                   on_finish, self._bar_done)
        self.store = StoreUnit(*shell, self.queues["store"], self.tokens, fault, self.check_drain,
                               self.port, self.dram, self.regions, self.acc_buffer)
        self.units: dict[str, UnitShell] = {"load": self.load, "compute": self.compute, "store": self.store}
        self.fetch: Fetch | None = None
        self.insn_count = 0
        self._checks: set[int] = set()

    def start_fetch(self, addr: int, count: int) -> None:
        """START with the instruction window ``[addr, addr + 16 * count)`` (already checked)."""
        self.insn_count = count
        self.fetch = Fetch(self.sim, self.T, self.isa, self.port, self.dram, self.queues, self.fault, addr, count)
        self.fetch.start(0)

    # ---- FINISH and BARRIER: the drain -------------------------------------------------------------
    @property
    def drain_check_pending(self) -> bool:
        """A FINISH's or BARRIER's drain check is scheduled."""
        return bool(self._checks)

    def check_drain(self, t: int) -> None:
        """Schedule the drain test at the end of cycle ``t`` (once per cycle) while FINISH or a
        BARRIER waits for it."""
        if self.compute.finishing and t not in self._checks:
            self._checks.add(t)
            self.sim.at(t, self._drain_check, phase=PH_CHECK)

    def _drain_check(self, t: int) -> bool:
        """The RTL's ``drained`` in cycle ``t`` (after that cycle's pops and grants): load and
        store IDLE with empty queues, none of this core's bursts on the port, none requested."""
        self._checks.discard(t)
        c = self.compute
        if not c.finishing or self.sim.stopped or t < c.t_exec:
            return False
        for u in (self.load, self.store):
            if u.state != IDLE or not u.queue.visible_empty(t):
                return False
            if u.idle_from > t:
                self.check_drain(u.idle_from)
                return False
        if self.arbiter.core_busy(self.index):
            return False
        if c.insn.MNEMONIC == "BARRIER":
            c.finishing = False
            self.on_arrive(t, c.pc)
        else:
            c.finish_drained(t)
        return True

    def release(self, t: int) -> None:
        """Every core is arrived in cycle ``t``: this core's BARRIER ends its EXEC."""
        self.compute.finish_drained(t)

    def _bar_done(self, t: int) -> None:
        """This core's BARRIER completed (its PUSH) in cycle ``t``: FETCH goes on."""
        if self.fetch is not None:
            self.fetch.resume(t)

    # ---- counters -----------------------------------------------------------------------------------
    def counters(self, beats: dict[str, int]) -> dict[str, int]:
        """This core's counters under the lower-case names of ``hw.csr.COUNTERS`` (``beats``: its
        beats per port client)."""
        L, C, S = self.load, self.compute, self.store
        bb = self.T.bus_bytes
        return {"load_busy": L.busy, "compute_busy": C.busy, "store_busy": S.busy,
                "load_stall": L.stall, "compute_stall": C.stall, "store_stall": S.stall,
                "load_insns": L.insns, "compute_insns": C.insns, "store_insns": S.insns,
                "dma_rd_bytes": beats["load"] * bb, "dma_wr_bytes": beats["store"] * bb,
                "fetch_bytes": beats["fetch"] * bb, "compute_wait": C.wait,
                "gemm_busy": C.gemm_busy, "gemm_ops": C.gemm_ops}
