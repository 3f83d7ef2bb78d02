"""The three execution units (LOAD, COMPUTE, STORE): queue, token handshake, EXECUTE.

Each unit runs IDLE -> WAIT -> EXEC -> PUSH -> IDLE as the RTL does (docs/microarch.md,
"RTL cycle costs (measured)"; the constants are in ``sim/tlm/timing.py``):

* IDLE: pops the queue head in the first cycle ``p >= idle_from`` in which it is visible
  (``queue_latency_cycles`` after its dispatch);
* WAIT from ``w = p + insn_pop_cycles``: range checks (a fault is raised at ``w``), then
  the named tokens are taken in the first cycle ``tau >= w`` in which all are visible;
  ``tau - w`` cycles are stalls;
* EXEC from ``x = tau + token_pop_cycles`` for E cycles (busy);
* PUSH from ``x + E``: the tokens are pushed in the first cycle ``u`` in which none of the
  named queues is full (``u - (x + E)`` stall cycles); the instruction completes at ``u``;
  IDLE from ``u + token_push_cycles``.

Every transition is one scheduled event (or a direct call when it happens in the current
cycle), so an instruction costs O(1) events whatever its size: a DMA instruction hands its
bursts to the port as segments, an ALU instruction is applied with numpy and its end
computed arithmetically. A state is recorded with the cycle it starts in as soon as that
is known (possibly a cycle ahead), so an error can charge the cycles each unit spends in
its state up to the halt exactly (:meth:`Unit.partial_counts`).
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

IDLE, WAIT, EXEC, PUSH = "idle", "token_wait", "execute", "token_push"
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
        self.qlat = self.T.queue_latency_cycles
        self.queue: deque[tuple[int, int, Instruction]] = deque()  # (cycle it can be popped, pc, insn)
        self.recent_pops: list[int] = []  # pop cycles whose freed slot FETCH may not see yet
        self.state = IDLE
        self.pc: int | None = None
        self.insn: Any = None
        self.busy = self.stall = self.insns = 0
        self.idle_from = 0
        self.t_pop = self.t_wait = self.t_exec = self.t_push = 0
        self.t_end: int | None = None     # planned end of EXEC (the PUSH cycle), once known
        self.faulted = False              # range fault raised in WAIT (it takes no token)
        self._wake_at: int | None = None
        self._pop_qs: list[TokenQueue] = []
        self._push_qs: list[TokenQueue] = []
        tq = model.tokens
        self._routes = {flag: tq[TOKEN_ROUTES[(self.name, flag)]]
                        for flag in _POP_FLAGS + _PUSH_FLAGS if (self.name, flag) in TOKEN_ROUTES}
        self._dma_last = False            # the DMA segment under way is the instruction's last

    # ---- queue ----------------------------------------------------------------------------
    def room_from(self, d: int) -> int | None:
        """The first cycle ``>= d`` in which FETCH sees room in this queue, counting only pops
        already made; None when it needs a pop that has not happened yet."""
        n = len(self.queue)
        if n >= self.depth:
            return None
        vis = sorted(p + self.qlat for p in self.recent_pops if p + self.qlat > d)
        r = self.depth - 1 - n          # slots that may still look taken
        if len(vis) <= r:
            return d
        return vis[len(vis) - r - 1]

    def enqueue(self, d: int, pc: int, insn: Instruction) -> None:
        """FETCH dispatches ``insn`` at cycle ``d`` (now or later)."""
        vis = d + self.qlat
        self.queue.append((vis, pc, insn))
        if self.tr is not None:
            self.tr.queue(self.name, vis, +1)
        if self.state == IDLE:
            self._wake(max(vis, self.idle_from))

    def _wake(self, t: int) -> None:
        if self._wake_at is None or t < self._wake_at:
            self._wake_at = t
            self.sim.at(t, self._woken)

    def visible_empty(self, t: int) -> bool:
        """The RTL's ``q_empty`` in cycle ``t`` (for FINISH's drain check, after pops of ``t``)."""
        return not self.queue or self.queue[0][0] > t

    def _woken(self, t: int) -> bool:
        if self._wake_at == t:
            self._wake_at = None
        return self.try_pop(t)

    def try_pop(self, t: int) -> bool:
        if self.state != IDLE or not self.queue or self.m.halted:
            return False
        vis, pc, insn = self.queue[0]
        if vis > t or self.idle_from > t:
            self._wake(max(vis, self.idle_from))
            return False
        self.queue.popleft()
        lat = self.qlat
        rp = self.recent_pops
        if rp and rp[0] + lat <= t:
            rp[:] = [p for p in rp if p + lat > t]
        rp.append(t)
        w = t + self.T.insn_pop_cycles
        self.state, self.pc, self.insn, self.t_pop, self.t_wait = WAIT, pc, insn, t, w
        self.t_end, self.faulted = None, False
        self._pop_qs = [self._routes[f] for f in _POP_FLAGS if getattr(insn, f)]
        self._push_qs = [self._routes[f] for f in _PUSH_FLAGS if getattr(insn, f)]
        if self.tr is not None:
            self.tr.queue(self.name, t + lat, -1)
            self.tr.pc(self.name, w, pc)
        self.m.fetch.on_pop(self.name, t)
        self.sim.now_or_later(w, self._ready)
        return True

    # ---- state machine ---------------------------------------------------------------------
    def _ready(self, t: int) -> bool:
        """First WAIT cycle: range checks, then the tokens."""
        if self.m.halted:
            return False
        bad = self.check(self.insn)
        if bad is not None:
            self.faulted = True
            self.m.fault(t, bad[0], self.pc, self.name, bad[1])
            return True
        self._try_tokens(t)
        return True

    def _try_tokens(self, t: int) -> None:
        if self.m.halted:
            return
        for q in self._pop_qs:
            if not q.can_take(t):
                q.wait_take(t, self._try_tokens)
                return
        for q in self._pop_qs:
            q.take(t)
        self.stall += t - self.t_wait
        x = t + self.T.token_pop_cycles
        self.state, self.t_exec, self.t_end = EXEC, x, None
        if self.tr is not None:
            self.tr.busy(self.name, x, 1)
        self.sim.now_or_later(x, self._execute)

    def _execute(self, t: int) -> None:
        if self.m.halted:
            return
        self.begin(t)

    def end_execute(self, t: int) -> None:
        """EXECUTE ends at cycle ``t`` (the first PUSH cycle; never before the minimum)."""
        t = max(t, self.t_exec + self.T.min_execute_cycles)
        self.t_end = t
        self.sim.now_or_later(t, self._exec_done)

    def _exec_done(self, t: int) -> None:
        if self.m.halted:
            return
        self.complete(t)
        self.busy += t - self.t_exec
        if self.tr is not None:
            self.tr.busy(self.name, t, 0)
        self.state, self.t_push = PUSH, t
        self._try_push(t)

    def _try_push(self, t: int) -> None:
        if self.m.halted:
            return
        for q in self._push_qs:
            if not q.can_push(t):
                q.wait_push(t, self._try_push)
                return
        for q in self._push_qs:
            q.push(t)
        self.stall += t - self.t_push
        self.insns += 1
        insn = self.insn
        idle = t + self.T.token_push_cycles
        if self.tr is not None:
            self.tr.pc(self.name, idle, None)
            self.tr.insn(self.name, self.pc, insn, self.t_pop, self.t_exec, self.t_push)
        self.state, self.pc, self.insn, self.idle_from = IDLE, None, None, idle
        if insn.MNEMONIC == "FINISH":
            self.m.done(t)
            return
        self.m.unit_idle(idle)
        if self.queue:
            self._wake(max(self.queue[0][0], idle))

    # ---- errors and deadlock ----------------------------------------------------------------
    def partial_counts(self, e: int, c1: int, burst: tuple[str, int, bool, int] | None) -> None:
        """Charge the cycles of the state the unit is stopped in: every cycle up to ``c1``
        (the cycle after the error ``e``, in which the RTL's units still hold their state),
        or, for the owner of the ``burst`` under way (client, end, last, beats), up to the
        burst's end, where it is still in EXECUTE, or in PUSH after its last burst."""
        st = self.state
        if st == WAIT and self.t_wait <= c1:
            lo = self.t_wait
            self.stall += max(0, min(e, c1 + 1) - lo)  # before e: tokens missing (else taken)
            self.stall += sum(1 for c in range(max(lo, e), c1 + 1) if not self._tokens_ok(c))
        elif st == EXEC and self.t_exec <= c1:
            if burst is not None and burst[0] == self.name:
                end = burst[1]
                self.busy += end - self.t_exec
                if burst[2] and self._dma_last:
                    self.stall += 0 if self._room_ok(end) else 1
                else:
                    self.busy += 1
            elif self.t_end is not None and self.t_end <= c1:
                self.busy += self.t_end - self.t_exec
                self.stall += sum(1 for c in range(self.t_end, c1 + 1) if not self._room_ok(c))
            else:
                self.busy += c1 + 1 - self.t_exec
        elif st == PUSH and self.t_push <= c1:
            lo = self.t_push
            self.stall += max(0, min(e, c1 + 1) - lo)  # before e: blocked (else pushed)
            self.stall += sum(1 for c in range(max(lo, e), c1 + 1) if not self._room_ok(c))

    def _tokens_ok(self, c: int) -> bool:
        return all(q.can_take(c) for q in self._pop_qs)

    def _room_ok(self, c: int) -> bool:
        return all(q.can_push(c) for q in self._push_qs)

    @property
    def blocked(self) -> bool:
        """Holding an instruction it cannot progress on (a token to take or room to push,
        or FINISH waiting for the drain)."""
        return self.state in (WAIT, PUSH) or (self.state == EXEC and self.insn is not None
                                              and self.insn.MNEMONIC == "FINISH")

    def stuck_since(self) -> int:
        """The cycle from which the unit has been in its current (stuck) state."""
        return {IDLE: self.idle_from, WAIT: self.t_wait, PUSH: self.t_push}.get(self.state, self.t_exec)

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
        self._dma_last = self._dma_k == len(bounds) - 1 and trail == 0
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
        """FINISH's drain condition holds in cycle ``t``: PUSH (and DONE) ``finish_cycles`` later."""
        self.finishing = False
        self.end_execute(t + self.T.finish_cycles)
