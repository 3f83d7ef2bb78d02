"""The three execution units (LOAD, COMPUTE, STORE): queue, token handshake, EXECUTE.

Each unit runs IDLE -> pop -> TOKEN_WAIT -> EXECUTE -> TOKEN_PUSH -> IDLE
(docs/microarch.md). Every transition is one scheduled event (or a direct call when
it happens in the current cycle), so an instruction costs O(1) events whatever its
size: a DMA instruction hands its bursts to the port as segments, an ALU instruction
is applied with numpy and its end computed arithmetically.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from hw import csr
from hw.isa import Alu, Instruction
from sim.tlm.alu import run_alu
from sim.tlm.axi_port import Segment
from sim.tlm.dram import row_burst_beats
from sim.tlm.tokens import TOKEN_ROUTES, TokenQueue

if TYPE_CHECKING:
    from sim.tlm.model import TlmModel

IDLE, DECODE, WAIT, EXEC, PUSH = "idle", "decode", "token_wait", "execute", "token_push"
_POP_FLAGS = ("pop_prev", "pop_next")
_PUSH_FLAGS = ("push_prev", "push_next")


class Unit:
    """What the three units share: the instruction queue and the state machine."""

    name = "unit"

    def __init__(self, model: "TlmModel", depth: int):
        self.m = model
        self.sim = model.sim
        self.T = model.timing
        self.tr = model.tracer
        self.depth = depth
        self.queue: deque[tuple[int, int, Instruction]] = deque()  # (visible cycle, pc, insn)
        self.state = IDLE
        self.pc: int | None = None
        self.insn: Any = None
        self.busy = self.stall = self.insns = 0
        self.t_wait = self.t_exec = self.t_push = self.t_pop = 0
        self._wake_at: int | None = None
        self._pop_qs: list[TokenQueue] = []
        self._push_qs: list[TokenQueue] = []
        tq = model.tokens
        self._routes = {flag: tq[TOKEN_ROUTES[(self.name, flag)]]
                        for flag in _POP_FLAGS + _PUSH_FLAGS if (self.name, flag) in TOKEN_ROUTES}

    # ---- queue ----------------------------------------------------------------------------
    def enqueue(self, d: int, pc: int, insn: Instruction) -> None:
        """FETCH dispatches ``insn`` at cycle ``d`` (now or later)."""
        self.queue.append((d, pc, insn))
        if self.tr is not None:
            self.tr.queue(self.name, d, +1)
        if self.state == IDLE and (self._wake_at is None or d < self._wake_at):
            self._wake_at = d
            self.sim.at(d, self._wake)

    def visible_empty(self, t: int) -> bool:
        return not self.queue or self.queue[0][0] > t

    def _wake(self, t: int) -> bool:
        if self._wake_at == t:
            self._wake_at = None
        return self.try_pop(t)

    def try_pop(self, t: int) -> bool:
        if self.state != IDLE or not self.queue or self.m.halted:
            return False
        d, pc, insn = self.queue[0]
        if d > t:
            if self._wake_at is None or d < self._wake_at:
                self._wake_at = d
                self.sim.at(d, self._wake)
            return False
        self.queue.popleft()
        self.state, self.pc, self.insn, self.t_pop = DECODE, pc, insn, t
        self._pop_qs = [self._routes[f] for f in _POP_FLAGS if getattr(insn, f)]
        self._push_qs = [self._routes[f] for f in _PUSH_FLAGS if getattr(insn, f)]
        if self.tr is not None:
            self.tr.queue(self.name, t, -1)
            self.tr.pc(self.name, t, pc)
        self.m.fetch.on_pop(self.name, t)
        self.sim.at(t + self.T.insn_pop_cycles, self._ready)
        return True

    # ---- state machine ---------------------------------------------------------------------
    def _ready(self, t: int) -> bool:
        """Decode done: range checks, then TOKEN_WAIT."""
        if self.m.halted:
            return False
        bad = self.check(self.insn)
        if bad is not None:
            self.state = "fault"
            self.m.fault(t, bad[0], self.pc, self.name, bad[1])
            return True
        self.state, self.t_wait = WAIT, t
        self._try_tokens(t)
        return True

    def _try_tokens(self, t: int) -> None:
        if self.m.halted:
            return
        for q in self._pop_qs:
            if q.count == 0:
                q.waiting_pop = self._try_tokens
                return
        for q in self._pop_qs:
            q.take(t)
        self.stall += t - self.t_wait
        self.sim.now_or_later(t + (self.T.token_pop_cycles if self._pop_qs else 0), self._execute)

    def _execute(self, t: int) -> None:
        if self.m.halted:
            return
        self.state, self.t_exec = EXEC, t
        if self.tr is not None:
            self.tr.busy(self.name, t, 1)
        self.begin(t)

    def end_execute(self, t: int) -> None:
        """EXECUTE ends at cycle ``t`` (now or later; never earlier than the minimum)."""
        t = max(t, self.t_exec + self.T.min_execute_cycles)
        self.sim.now_or_later(t, self._exec_done)

    def _exec_done(self, t: int) -> None:
        if self.m.halted:
            return
        self.complete(t)
        self.busy += t - self.t_exec
        if self.tr is not None:
            self.tr.busy(self.name, t, 0)
            self.tr.insn(self.name, self.pc, self.insn, self.t_pop, self.t_exec, t)
        self.state, self.t_push = PUSH, t
        self._try_push(t)

    def _try_push(self, t: int) -> None:
        if self.m.halted:
            return
        for q in self._push_qs:
            if q.full:
                q.waiting_push = self._try_push
                return
        for q in self._push_qs:
            q.push(t)
        self.stall += t - self.t_push
        self.sim.now_or_later(t + (self.T.token_push_cycles if self._push_qs else 0), self._retire)

    def _retire(self, t: int) -> None:
        if self.m.halted:
            return
        self.insns += 1
        insn = self.insn
        self.state, self.pc, self.insn = IDLE, None, None
        if self.tr is not None:
            self.tr.pc(self.name, t, None)
        if insn.MNEMONIC == "FINISH":
            self.m.done(t)
            return
        self.m.unit_idle(t)
        self.try_pop(t)

    def partial_counts(self, t: int) -> None:
        """Charge the cycles of the state the unit is stopped in (at an error) up to ``t``."""
        if self.state == WAIT:
            self.stall += max(0, t - self.t_wait)
        elif self.state == PUSH:
            self.stall += max(0, t - self.t_push)
        elif self.state == EXEC:
            self.busy += max(0, t - self.t_exec)

    @property
    def blocked(self) -> bool:
        """Waiting on a token (to pop, or room to push)."""
        return self.state in (WAIT, PUSH)

    # ---- per unit ----------------------------------------------------------------------------
    def check(self, insn: Any) -> tuple[int, str] | None:
        """Range checks before the instruction touches anything: None or (code, message)."""
        return None

    def begin(self, t: int) -> None:
        """Start EXECUTE at ``t``; must eventually call :meth:`end_execute`."""
        self.end_execute(t)

    def complete(self, t: int) -> None:
        """Side effects at the end of EXECUTE."""

    # ---- DMA jobs ------------------------------------------------------------------------------
    def start_dma(self, t: int, write: bool, beats: np.ndarray, dur: np.ndarray,
                  bounds: list[tuple[int, int]], gaps: list[int], trail: int) -> None:
        """Issue segments ``beats[a:b]`` after ``gaps[k]`` cycles each, then wait ``trail``."""
        self._dma = (write, beats, dur, bounds, gaps, trail)
        self._dma_k = 0
        self._dma_next(t)

    def _dma_next(self, t: int) -> None:
        write, beats, dur, bounds, gaps, trail = self._dma
        k = self._dma_k
        if k == len(bounds):
            self.end_execute(t + trail)
            return
        self.sim.now_or_later(t + gaps[k], self._dma_request)

    def _dma_request(self, t: int) -> None:
        if self.m.halted:
            return
        write, beats, dur, bounds, gaps, trail = self._dma
        a, b = bounds[self._dma_k]
        self.m.port.request(t, Segment(self.name, write, beats[a:b], dur[a:b], self._dma_seg_done))

    def _dma_seg_done(self, t: int) -> None:
        self._dma_k += 1
        self._dma_next(t)


def _sram_bad(last: int, depth: int, what: str) -> tuple[int, str] | None:
    if last >= depth:
        return csr.ERR_SRAM_RANGE, f"{what} reaches accumulator index {last}, past its depth {depth}"
    return None


class LoadUnit(Unit):
    """DRAM -> accumulator buffer, 2-D with stride and zero padding."""

    name = "load"

    def check(self, i: Any) -> tuple[int, str] | None:
        vb = self.T.acc_vec_bytes
        if i.y_size * i.x_size > 0:
            lo, hi = self.m.dram_model.tile_span(i.dram_base, i.y_size, i.x_size, i.x_stride, vb)
            if not self.m.dram_model.window_ok(lo, hi, csr.ATTR_READ):
                return csr.ERR_DRAM_RANGE, f"LOAD reads DRAM [0x{lo:x}, 0x{hi:x}), not inside one readable region"
        n = (i.y_pad_0 + i.y_size + i.y_pad_1) * (i.x_pad_0 + i.x_size + i.x_pad_1)
        if n > 0:
            return _sram_bad(i.sram_base + n - 1, self.m.acc.shape[0], "LOAD")
        return None

    def begin(self, t: int) -> None:
        i, T = self.insn, self.T
        row_len = i.x_pad_0 + i.x_size + i.x_pad_1
        pad = T.pad_vector_cycles
        if i.y_size * i.x_size == 0:  # padding only
            self.end_execute(t + ((i.y_pad_0 + i.y_size + i.y_pad_1) * row_len - i.y_size * i.x_size) * pad)
            return
        vb = T.acc_vec_bytes
        addrs = (i.dram_base + np.arange(i.y_size, dtype=np.int64) * i.x_stride) * vb
        beats, per_row = row_burst_beats(addrs, i.x_size * vb, T.bus_bytes, T.max_burst)
        dur = beats + (T.rd_burst_overhead + T.read_latency)
        lead = (i.y_pad_0 * row_len + i.x_pad_0) * pad
        trail = (i.x_pad_1 + i.y_pad_1 * row_len) * pad
        if i.x_pad_0 + i.x_pad_1 == 0:  # rows back to back: one segment
            bounds, gaps = [(0, len(beats))], [lead]
        else:  # padding cycles between rows: one segment per row
            ends = np.cumsum(per_row).tolist()
            bounds = list(zip([0] + ends[:-1], ends))
            gaps = [lead] + [(i.x_pad_1 + i.x_pad_0) * pad] * (len(bounds) - 1)
        self.start_dma(t, False, beats, dur, bounds, gaps, trail)

    def complete(self, t: int) -> None:
        i = self.insn
        m = self.m
        lanes = m.acc.shape[1]
        rows, cols = i.y_pad_0 + i.y_size + i.y_pad_1, i.x_pad_0 + i.x_size + i.x_pad_1
        if rows * cols == 0:
            return
        full = np.zeros((rows, cols, lanes), dtype=np.int32)
        if i.y_size * i.x_size:
            full[i.y_pad_0:i.y_pad_0 + i.y_size, i.x_pad_0:i.x_pad_0 + i.x_size] = \
                m.dram_model.read_acc_tile(i.dram_base, i.y_size, i.x_size, i.x_stride)
            m.dma_rd_bytes += i.y_size * i.x_size * self.T.acc_vec_bytes
        m.acc[i.sram_base:i.sram_base + rows * cols] = full.reshape(-1, lanes)


class StoreUnit(Unit):
    """Accumulator buffer -> DRAM with the narrowing cast."""

    name = "store"

    def check(self, i: Any) -> tuple[int, str] | None:
        n = i.y_size * i.x_size
        if n > 0:
            lo, hi = self.m.dram_model.tile_span(i.dram_base, i.y_size, i.x_size, i.x_stride, self.T.out_vec_bytes)
            if not self.m.dram_model.window_ok(lo, hi, csr.ATTR_WRITE):
                return csr.ERR_DRAM_RANGE, f"STORE writes DRAM [0x{lo:x}, 0x{hi:x}), not inside one writable region"
            return _sram_bad(i.sram_base + n - 1, self.m.acc.shape[0], "STORE")
        return None

    def begin(self, t: int) -> None:
        i, T, m = self.insn, self.T, self.m
        if i.y_size * i.x_size == 0:
            self.end_execute(t)
            return
        # The data moves now: the unit reads the buffer as the W beats need it, and tokens
        # keep compute off these vectors until the store pushes.
        tile = m.acc[i.sram_base:i.sram_base + i.y_size * i.x_size].astype(m.dram_model.out_dtype)
        m.dram_model.write_out_tile(i.dram_base, i.x_stride, tile.reshape(i.y_size, i.x_size, -1))
        vb = T.out_vec_bytes
        addrs = (i.dram_base + np.arange(i.y_size, dtype=np.int64) * i.x_stride) * vb
        beats, _ = row_burst_beats(addrs, i.x_size * vb, T.bus_bytes, T.max_burst)
        dur = beats + (T.wr_burst_overhead + T.write_latency)
        if T.b_resp_cycles == 0:
            bounds, gaps, trail = [(0, len(beats))], [0], 0
        else:  # the unit pauses after each B: every burst is its own segment
            bounds = [(k, k + 1) for k in range(len(beats))]
            gaps, trail = [0] + [T.b_resp_cycles] * (len(beats) - 1), T.b_resp_cycles
        self.start_dma(t, True, beats, dur, bounds, gaps, trail)

    def complete(self, t: int) -> None:
        self.m.dma_wr_bytes += self.insn.y_size * self.insn.x_size * self.T.out_vec_bytes


class ComputeUnit(Unit):
    """The vector ALU (and FINISH, which travels through the compute queue)."""

    name = "compute"

    def __init__(self, model: "TlmModel", depth: int):
        super().__init__(model, depth)
        self.finishing = False

    def check(self, i: Any) -> tuple[int, str] | None:
        if isinstance(i, Alu) and i.iter_out * i.iter_in > 0:
            depth = self.m.acc.shape[0]
            last = i.dst_base + (i.iter_out - 1) * i.dst_factor_out + (i.iter_in - 1) * i.dst_factor_in
            bad = _sram_bad(last, depth, "ALU destination")
            if bad is None and not i.use_imm:
                last = i.src_base + (i.iter_out - 1) * i.src_factor_out + (i.iter_in - 1) * i.src_factor_in
                bad = _sram_bad(last, depth, "ALU source")
            return bad
        return None

    def begin(self, t: int) -> None:
        i, T = self.insn, self.T
        if i.MNEMONIC == "FINISH":
            self.finishing = True
            self.m.check_finish(t)
            return
        run_alu(self.m.acc, i)
        self.end_execute(t + T.alu_setup_cycles + i.iter_out * i.iter_in + T.alu_pipeline_cycles)

    def finish_drained(self, t: int) -> None:
        """FINISH's drain condition holds at ``t``: DONE after ``finish_cycles``."""
        self.finishing = False
        self.end_execute(t + self.T.finish_cycles)
