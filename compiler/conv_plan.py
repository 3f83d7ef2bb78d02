"""Tiling a convolution onto the accelerator's buffers: which tile sizes, where each buffer's halves
live, which micro-op tables GEMM walks, and what the choice should cost.

A convolution (a matmul is a 1x1 one) in the packed layout (:mod:`compiler.packing`) is cut
into *output tiles* of ``to`` output-channel blocks x ``th`` rows x ``tw`` columns, each summed
over *steps* of ``tc`` input-channel blocks. A step loads its input window (the rows and
columns the tile's taps read, zero padding at the image border) and its weight blocks, and
runs ONE GEMM instruction for the whole step: the micro-ops enumerate output column x input
channel block x kernel tap of one output row (``acc = c``, ``inp = ci*cb_pitch + ky*pitch +
c*stride + kx``, ``wgt = (ci*KH + ky)*KW + kx``, plus the buffer half's base), the outer loop
walks the rows, the inner one the output-channel blocks. Columns are the micro-ops' outermost
index, so a narrower tail tile walks a prefix of the same table. A micro-op carries absolute
indices, so each combination of accumulator half and input/weight half has its own table.

Buffers (double buffering where two halves are planned):

* ACC: ``halves`` output tiles (``to*th*tw`` vectors, co-major, rows ``tw'`` apart), then
  ``halves`` bias slots of ``to`` vectors, then one constant vector (a rounding term wider
  than the 16-bit immediate), then (a residual rescaled on its own, ``residual_acc``) its wide
  per-tensor constants, one vector each, and one residual
  region of ``to*th*tw`` vectors (one for both halves: only the compute unit touches it, within one
  tile's epilogue).
* INP: input halves of ``tc`` channel blocks x ``th_in`` rows x ``tw_in`` columns (a 1x1 strided
  convolution keeps only the rows it reads: ``ConvShape.row_skip``), then (when the epilogue adds a
  residual) one residual tile per accumulator half.
* WGT: weight halves of ``to*tc*KH*KW`` blocks, then the identity block of the residual.
* UOP: the micro-op tables, loaded once.

Tile sizes are chosen among balanced splits (a dimension of ``D`` in ``n`` tiles of
``ceil(D/n)`` or one less) by an estimate of the cycles from docs/microarch.md's formulas:
per step the GEMM (``N + 2`` EXEC cycles plus the unit's handshakes) against the DMA of its
loads (``Lr + beats + 1`` per burst, one cycle per padding entry), overlapped when the
input/weight buffers are double-buffered; per output tile the ALU epilogue, and the stores
(overlapped with the next tile's GEMMs when the accumulator is double-buffered).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field, replace
from math import ceil

from hw.config import HwConfig
from hw.isa import GEMM_ITER_BITS, PAD_BITS, UOP_BYTES

PAD_MAX = (1 << PAD_BITS) - 1
ITER_MAX = (1 << GEMM_ITER_BITS) - 1
INSN_HANDSHAKE = 3  # IDLE + WAIT + PUSH around every EXEC (docs/microarch.md "Units")


class PlanError(ValueError):
    """No tiling of the convolution fits the config's buffers (the message says what does not fit)."""


@dataclass(frozen=True)
class ConvShape:
    """A convolution in blocks: ``batch`` images of ``cb`` input-channel blocks x ``h`` x ``w`` pixels,
    ``ob`` output-channel blocks, a ``kh`` x ``kw`` kernel, ``stride``, zero ``pad`` on every side (or
    ``pads``: ``(top, left, bottom, right)``). ``bias``/``rounding_const``/``residual`` say what the
    epilogue needs room for; ``bias_map``: the accumulator starts from a per-position int32 map (a
    convolution whose input zero point meets padding) instead of the bias vectors; ``consts``: per
    output channel, int32 vectors the epilogue reads beside the bias (a real-scale requantization)."""

    batch: int
    cb: int
    h: int
    w: int
    ob: int
    kh: int
    kw: int
    stride: int
    pad: int
    bias: bool = False
    rounding_const: bool = False
    residual: bool = False
    alu_passes: int = 0  # ALU instructions over the whole tile in the epilogue
    pads: tuple[int, int, int, int] | None = None  # (top, left, bottom, right); None: ``pad`` on every side
    bias_map: bool = False
    consts: int = 0
    border: int = 0  # border-correction vectors per output channel (compiler.conv_engine.BorderFix)
    residual_acc: bool = False  # the residual is rescaled in an accumulator region of its own (a quantized add)
    wide_consts: int = 0  # per-tensor constant vectors of that rescaling (values wider than the immediate)

    @property
    def pad_sides(self) -> tuple[int, int, int, int]:
        """``(top, left, bottom, right)``."""
        return self.pads if self.pads is not None else (self.pad,) * 4

    @property
    def ho(self) -> int:
        t, _, b, _ = self.pad_sides
        return (self.h + t + b - self.kh) // self.stride + 1

    @property
    def wo(self) -> int:
        _, l, _, r = self.pad_sides
        return (self.w + l + r - self.kw) // self.stride + 1

    @property
    def slots(self) -> int:
        """Accumulator vectors per output-channel block beside the tiles: the bias and the constants
        (at least one, as the plans have always reserved)."""
        return max(1, (1 if self.bias and not self.bias_map else 0) + self.consts + self.border)

    @property
    def taps(self) -> int:
        return self.kh * self.kw

    @property
    def row_skip(self) -> bool:
        """A 1x1 convolution with a stride and no vertical padding reads every ``stride``-th input row
        only: its LOADs fetch just those rows (a DRAM row stride ``stride`` times the image's), packed on
        chip, instead of the whole window."""
        top, _, bottom, _ = self.pad_sides
        return self.kh == 1 and self.stride > 1 and top == bottom == 0

    @property
    def row_pitch_factor(self) -> int:
        """On-chip input rows between two output rows: 1 when rows are skipped, else the stride."""
        return 1 if self.row_skip else self.stride


@functools.lru_cache(maxsize=4096)
def balanced_split(total: int, parts: int) -> list[tuple[int, int]]:
    """``(start, size)`` of ``parts`` consecutive pieces of ``total``, the first ones one larger (cached:
    do not modify the list)."""
    q, r = divmod(total, parts)
    out, start = [], 0
    for k in range(parts):
        size = q + (1 if k < r else 0)
        out.append((start, size))
        start += size
    return out


def tile_sizes(total: int) -> list[int]:
    """The largest piece of every balanced split of ``total`` (the candidate full tile sizes)."""
    return sorted({ceil(total / n) for n in range(1, total + 1)}, reverse=True)


@dataclass(frozen=True)
class Window:
    """The part of one input dimension a tile reads: ``pad0`` zeros, ``size`` entries from ``start``
    of the image, ``pad1`` zeros (``pad0 + size + pad1`` entries on chip)."""

    start: int
    size: int
    pad0: int
    pad1: int


def window(out_start: int, out_size: int, span: int, stride: int, pad: int, kernel: int, extent: int) -> Window:
    """The input window of ``out_size`` outputs from ``out_start``, ``span`` entries wide on chip."""
    lo = out_start * stride - pad
    hi = lo + span
    pad0, pad1 = max(0, -lo), max(0, hi - extent)
    return Window(max(lo, 0), span - pad0 - pad1, pad0, pad1)


@dataclass
class ConvPlan:
    """The chosen tiling of a :class:`ConvShape` and where everything lives in the buffers."""

    shape: ConvShape
    to: int
    tc: int
    th: int
    tw: int
    acc_halves: int
    in_halves: int
    estimate: int  # cycles
    insns: int     # instructions
    o_tiles: list[tuple[int, int]] = field(default_factory=list)
    c_tiles: list[tuple[int, int]] = field(default_factory=list)
    h_tiles: list[tuple[int, int]] = field(default_factory=list)
    w_tiles: list[tuple[int, int]] = field(default_factory=list)
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # things derived from the plan
    cores: int = 1  # the cores sharing the tiles (core_tiles); the others idle through this layer

    # ---- geometry ------------------------------------------------------------------------------
    @property
    def th_in(self) -> int:
        """Input rows a full tile holds on chip (its window's height, or with ``row_skip`` the rows it
        reads; the channel-block pitch's rows)."""
        return self.th if self.shape.row_skip else (self.th - 1) * self.shape.stride + self.shape.kh

    @property
    def tw_in(self) -> int:
        """Input columns of every window: the row pitch of the input tile."""
        return (self.tw - 1) * self.shape.stride + self.shape.kw

    @property
    def whole_planes(self) -> bool:
        """Every input window is a whole channel plane (no padding, one tile per image): a step's
        channel blocks are one contiguous run in DRAM and on chip, moved by one LOAD."""
        s = self.shape
        return (s.pad_sides == (0, 0, 0, 0) and not s.row_skip and (self.th_in, self.tw_in) == (s.h, s.w)
                and len(self.h_tiles) == len(self.w_tiles) == 1)

    @property
    def cb_pitch(self) -> int:
        return self.th_in * self.tw_in

    @property
    def acc_tile(self) -> int:
        return self.to * self.th * self.tw

    @property
    def inp_tile(self) -> int:
        return self.tc * self.cb_pitch

    @property
    def wgt_tile(self) -> int:
        return self.to * self.tc * self.shape.taps

    # ---- buffer layout -------------------------------------------------------------------------
    def acc_base(self, half: int) -> int:
        return half * self.acc_tile

    def bias_base(self, half: int) -> int:
        """The half's bias slots: ``slots`` runs of ``to`` vectors (the bias, then the constants)."""
        return self.acc_halves * self.acc_tile + half * self.to * self.shape.slots

    @property
    def const_slot(self) -> int:
        return self.acc_halves * (self.acc_tile + self.to * self.shape.slots)

    @property
    def wide_base(self) -> int:
        """The per-tensor constant vectors of a residual rescaled on its own (``shape.wide_consts``)."""
        return self.const_slot + (1 if self.shape.rounding_const else 0)

    @property
    def res_acc_base(self) -> int:
        """The accumulator region of a residual rescaled on its own (``shape.residual_acc``)."""
        return self.wide_base + self.shape.wide_consts

    def inp_base(self, half: int) -> int:
        return half * self.inp_tile

    def res_base(self, half: int) -> int:
        return self.in_halves * self.inp_tile + half * self.acc_tile

    def wgt_base(self, half: int) -> int:
        return half * self.wgt_tile

    @property
    def identity_slot(self) -> int:
        return self.in_halves * self.wgt_tile

    @property
    def tc_variants(self) -> list[int]:
        """The distinct input-channel tile sizes (a balanced split has at most two)."""
        return sorted({s for _, s in self.c_tiles}, reverse=True)

    def acc_used(self) -> int:
        return (self.const_slot + (1 if self.shape.rounding_const else 0)
                + self.shape.wide_consts + (self.acc_tile if self.shape.residual_acc else 0))

    def inp_used(self) -> int:
        return self.in_halves * self.inp_tile + (self.acc_halves * self.acc_tile if self.shape.residual else 0)

    def wgt_used(self) -> int:
        return self.in_halves * self.wgt_tile + (1 if self.shape.residual else 0)

    def uop_used(self) -> int:
        conv = self.acc_halves * self.in_halves * sum(self.tw * v * self.shape.taps for v in self.tc_variants)
        return conv + (self.acc_halves if self.shape.residual else 0)


def _fits(p: ConvPlan, cfg: HwConfig) -> str:
    """'' when the plan fits the config, else what does not."""
    s = p.shape
    if p.acc_used() > cfg.acc_depth:
        return f"accumulator ({p.acc_used()} > {cfg.acc_depth} vectors)"
    if p.inp_used() > cfg.inp_depth:
        return f"input buffer ({p.inp_used()} > {cfg.inp_depth} vectors)"
    if p.wgt_used() > cfg.wgt_depth:
        return f"weight buffer ({p.wgt_used()} > {cfg.wgt_depth} blocks)"
    if p.uop_used() > cfg.uop_depth:
        return f"micro-op buffer ({p.uop_used()} > {cfg.uop_depth} micro-ops)"
    fmax = (1 << cfg.sram_index_bits) - 1
    if max(p.th * p.tw, s.row_pitch_factor * p.tw_in, p.tc * s.taps) > fmax or max(p.th, p.to) > ITER_MAX:
        return "GEMM loop fields"
    if p.acc_tile > ITER_MAX:
        return "ALU loop fields"
    return ""


def _windows_ok(p: ConvPlan) -> str:
    """'' when every tile's input window has data and padding within the 4-bit LOAD fields."""
    s = p.shape
    top, left, _, _ = s.pad_sides
    for name, tiles, span_of, stride, extent, k, pad in (
            ("rows", p.h_tiles, lambda n: (n - 1) * s.stride + s.kh, s.stride, s.h, s.kh, top),
            ("columns", p.w_tiles, lambda n: p.tw_in, s.stride, s.w, s.kw, left)):
        for start, size in tiles:
            win = window(start, size, span_of(size), stride, pad, k, extent)
            if win.size <= 0:  # a border tile's window lies in the padding (a taller tile may reach data)
                return (f"some output {name} read padding only (a tile's input {name} are all padding: padding "
                        f"{pad} with a {k}-wide kernel on {extent} input {name}); the engine loads data in every tile")
            if max(win.pad0, win.pad1) > PAD_MAX:
                return f"a tile's input {name} need {max(win.pad0, win.pad1)} padding entries (at most {PAD_MAX})"
    return ""


def core_tiles(plan: ConvPlan, cores: int, core: int) -> list[tuple[int, int, int, int, int, int, int]]:
    """Core ``core``'s output tiles ``(image, o0, to, r0, th, c0, tw)`` of ``cores``, in issue order.

    The plan says how many cores share the tiles (``plan.cores``: a port-bound layer may run faster
    on fewer); the others get none. One core: every tile, image by image. Several: contiguous,
    balanced runs of every tile in
    (output-channel tile, image, row, column) order. With at least as many output-channel tiles as
    cores, a core takes whole channel tiles (it loads only their weights); with fewer (a narrow
    layer) the cores share a channel tile's images and rows, so a core computes a band of rows and
    loads only that band's input rows and their halo.
    """
    s = plan.shape
    cores = min(cores, plan.cores)
    if core >= cores:
        return []
    if cores == 1:
        return [(n, o0, to, r0, th, c0, tw) for n in range(s.batch) for o0, to in plan.o_tiles
                for r0, th in plan.h_tiles for c0, tw in plan.w_tiles]
    every = [(n, o0, to, r0, th, c0, tw) for o0, to in plan.o_tiles for n in range(s.batch)
             for r0, th in plan.h_tiles for c0, tw in plan.w_tiles]
    lo, size = balanced_split(len(every), cores)[core]
    return every[lo:lo + size]


def _row_bursts(cfg: HwConfig, beats_per_row: int) -> int:
    """Bursts of at most MAX_BURST beats that carry one row."""
    return -(-beats_per_row // cfg.max_burst)


def _dma_cycles(cfg: HwConfig, rows: int, beats_per_row: int, pad_entries: int = 0) -> int:
    """LOAD/STORE EXEC estimate: bursts of at most MAX_BURST beats per row, each ``latency + n + 1``."""
    if rows * beats_per_row == 0:
        return 1
    bursts = _row_bursts(cfg, beats_per_row)
    return rows * (bursts * (cfg.dram_read_latency + 1) + beats_per_row) + pad_entries + INSN_HANDSHAKE


def _store_cycles(cfg: HwConfig, rows: int, beats_per_row: int) -> float:
    """STORE EXEC estimate. One write at a time: as ``_dma_cycles``. With ``dram_writes_in_flight`` = WIF
    > 1 the STORE posts its bursts: each holds the W channel for its ``n`` beats + 1, up to WIF wait for
    their B together (``n + Lw + 1`` cycles each from the grant), and EXEC ends after the last B."""
    wif = cfg.dram_writes_in_flight
    if wif == 1 or rows * beats_per_row == 0:
        return _dma_cycles(cfg, rows, beats_per_row)
    bursts = _row_bursts(cfg, beats_per_row)
    n = beats_per_row / bursts
    per_burst = max(n + 1, (n + cfg.dram_write_latency + 1) / wif)
    return (rows * bursts - 1) * per_burst + n + cfg.dram_write_latency + 1 + INSN_HANDSHAKE


def _port_read_cycles(cfg: HwConfig, rows: int, beats_per_row: int) -> float:
    """The shared port's cycles for a LOAD's read bursts when several cores read at once: with
    ``dram_reads_in_flight`` = RIF the latencies of up to RIF bursts overlap, so a burst holds the
    port for about ``(latency + 1) / RIF + n`` cycles (``_dma_cycles`` with RIF = 1)."""
    if rows * beats_per_row == 0:
        return 1
    bursts = _row_bursts(cfg, beats_per_row)
    return rows * (bursts * (cfg.dram_read_latency + 1) / cfg.dram_reads_in_flight + beats_per_row)


def _estimate(p: ConvPlan, cfg: HwConfig) -> tuple[int, int]:
    """(cycles, instructions) of the plan, from full-size average tiles (tails change it little)."""
    s = p.shape
    n_o, n_c, n_h, n_w = len(p.o_tiles), len(p.c_tiles), len(p.h_tiles), len(p.w_tiles)
    to, tc, th, tw = s.ob / n_o, s.cb / n_c, s.ho / n_h, s.wo / n_w
    bpi, bpw = cfg.inp_vec_bytes // cfg.bus_bytes, cfg.wgt_block_bytes // cfg.bus_bytes
    gemm = to * tc * th * tw * s.taps + 2 + INSN_HANDSHAKE
    rows_in = th if s.row_skip else (th - 1) * s.stride + s.kh
    cols_in = min(p.tw_in, s.w)
    if p.whole_planes:  # one LOAD of the step's channel planes, back to back
        load = _dma_cycles(cfg, 1, round(tc * s.h * s.w * bpi))
        port_load = _port_read_cycles(cfg, 1, round(tc * s.h * s.w * bpi))
    else:
        load = tc * _dma_cycles(cfg, round(rows_in), round(cols_in * bpi), round(rows_in * p.tw_in - rows_in * cols_in))
        port_load = tc * _port_read_cycles(cfg, round(rows_in), round(cols_in * bpi))
    load += _dma_cycles(cfg, round(to), round(tc * s.taps * bpw))
    port_load += _port_read_cycles(cfg, round(to), round(tc * s.taps * bpw))
    step = max(gemm, load) if p.in_halves == 2 else gemm + load
    tile_vecs = to * th * tw
    alu = (s.alu_passes + 1) * (tile_vecs + 1 + INSN_HANDSHAKE)
    if s.residual:
        alu += tile_vecs + 2 + INSN_HANDSHAKE + to * _dma_cycles(cfg, round(th), round(tw * bpi))
    bias = _dma_cycles(cfg, 1, round(to * cfg.beats_per_acc_vec * s.slots)) if s.bias or s.consts else 0
    if s.border:  # the border's corrections: a few short ALU ADDs per tile
        alu += 4 * (to + 2 + INSN_HANDSHAKE) + s.border * (th + tw)
    if s.bias_map:  # the tile's start values come from DRAM
        bias += _dma_cycles(cfg, round(to), round(th * tw * cfg.beats_per_acc_vec))
    store = (_store_cycles(cfg, round(to), round(th * tw * cfg.beats_per_out_vec)) if p.tw == s.wo
             else to * _store_cycles(cfg, round(th), round(tw * cfg.beats_per_out_vec)))
    per_tile = n_c * step + alu + (bias if p.acc_halves == 1 else 0) + (store if p.acc_halves == 1 else 0)
    tiles = s.batch * n_o * n_h * n_w
    first = load  # the first step's loads are never hidden
    stores = 1 if p.tw == s.wo else to  # whole rows of every channel block go out in one STORE
    insns_tile = (n_c * ((1 if p.whole_planes else tc) + 2) + s.alu_passes + 1 + (2 if s.bias else 0)
                  + (1 + stores if s.residual else 0) + stores)
    insns = tiles * insns_tile + 4
    cores = p.cores
    # several cores: the busiest core's tiles (core_tiles), and every core's DMA through the one port
    per_core = ceil(tiles / cores)
    fetch_cost = (cfg.dram_read_latency + cfg.max_burst + 1) * cfg.beats_per_insn / cfg.max_burst
    fetch = (per_core * insns_tile + 4) * fetch_cost
    cycles = per_core * per_tile + first + store + fetch
    if cores > 1:
        # each busy core loads the micro-op tables its tiles use (conv_engine.uop_span), then its tiles
        uops = p.tw * s.taps * tc * min(per_core * n_c, p.acc_halves * p.in_halves)
        uop_beats = round(uops * UOP_BYTES / cfg.bus_bytes)
        uop_load = _dma_cycles(cfg, 1, uop_beats)
        # the cores run their tiles in rounds; in a round of c cores a tile takes its own time or c tiles'
        # DMA through the one port, whichever is longer (the last, partial round has fewer cores). The
        # cores start together: unless the port is the bound anyway, the last core's first loads and
        # tables wait for the others' before its first GEMM
        # (a core's own LOAD waits each burst's whole latency; the port overlaps the cores' reads)
        # (with writes in flight the stores take the write channels, beside the reads)
        reads = n_c * port_load + bias
        port_tile = reads + store if cfg.dram_writes_in_flight == 1 else max(reads, store)
        rounds, rest = divmod(tiles, cores)
        body = rounds * max(per_tile, cores * port_tile) + (max(per_tile, rest * port_tile) if rest else 0)
        queued = cores if per_tile > cores * port_tile else 1
        # the others' first loads and tables hold the port for their port time (reads in flight overlap)
        cycles = body + first + uop_load + (queued - 1) * (port_load + _port_read_cycles(cfg, 1, uop_beats)) \
            + store + fetch
    return round(cycles), round(insns)


# Estimates within this fraction of the best are taken as equal, and the plan with the fewest
# instructions among them wins: the estimate is approximate, and every instruction costs fetch
# bandwidth, unit handshakes, compile time and golden-path time.
ESTIMATE_TOLERANCE = 0.03


# Several cores: a layer is split among them only when the estimate gains at least this fraction over
# running it on one core (the shared port's contention is modelled more roughly than one core's timing).
SPLIT_MARGIN = 0.15


@functools.lru_cache(maxsize=256)
def plan_conv(cfg: HwConfig, shape: ConvShape) -> ConvPlan:
    """The cheapest tiling of ``shape`` that fits ``cfg`` (module docstring); raises PlanError if none."""
    s = shape
    if s.ho < 1 or s.wo < 1:
        raise PlanError(f"the {s.kh}x{s.kw} kernel with padding {s.pad_sides} does not fit the {s.h}x{s.w} input")
    fitting: list[ConvPlan] = []
    extra_acc = 1 if s.rounding_const else 0
    for to, tc, th, tw in itertools.product(tile_sizes(s.ob), tile_sizes(s.cb), tile_sizes(s.ho), tile_sizes(s.wo)):
        # the buffer sizes first, in plain arithmetic (most candidates fail here)
        rows_in = th if s.row_skip else (th - 1) * s.stride + s.kh
        acc_tile, cb_pitch = to * th * tw, rows_in * ((tw - 1) * s.stride + s.kw)
        n_c = ceil(s.cb / tc)
        tables = tw * s.taps * (tc + (s.cb // n_c if s.cb % n_c else 0))
        for acc_halves, in_halves in ((2, 2), (1, 2), (2, 1), (1, 1)):
            if (acc_halves * (acc_tile + to * s.slots) + extra_acc + s.wide_consts + (acc_tile if s.residual_acc else 0)
                    > cfg.acc_depth
                    or in_halves * tc * cb_pitch + (acc_halves * acc_tile if s.residual else 0) > cfg.inp_depth
                    or in_halves * to * tc * s.taps + (1 if s.residual else 0) > cfg.wgt_depth
                    or acc_halves * in_halves * tables + (acc_halves if s.residual else 0) > cfg.uop_depth):
                continue
            p = ConvPlan(s, to, tc, th, tw, acc_halves, in_halves, 0, 0,
                         balanced_split(s.ob, ceil(s.ob / to)), balanced_split(s.cb, n_c),
                         balanced_split(s.ho, ceil(s.ho / th)), balanced_split(s.wo, ceil(s.wo / tw)))
            if _fits(p, cfg):
                continue
            tiles = s.batch * len(p.o_tiles) * len(p.h_tiles) * len(p.w_tiles)
            for cores in range(1, min(cfg.num_cores, tiles) + 1):  # several cores: on how many to split
                q = replace(p, cores=cores, cache={})
                q.estimate, q.insns = _estimate(q, cfg)
                fitting.append(q)
    one = _choose([p for p in fitting if p.cores == 1], cfg, s)
    if cfg.num_cores == 1:
        return one
    # several cores: the one-core choice shared among k cores wins on any estimated gain (same loads and
    # GEMMs, only spread); another tiling's split must gain SPLIT_MARGIN, as the port's model is rough
    tiles = s.batch * len(one.o_tiles) * len(one.h_tiles) * len(one.w_tiles)
    best = one
    for k in range(2, min(cfg.num_cores, tiles) + 1):
        q = replace(one, cores=k, cache={})
        q.estimate, q.insns = _estimate(q, cfg)
        if q.estimate < best.estimate:
            best = q
    split = [p for p in fitting if p.cores > 1 and p.estimate < (1 - SPLIT_MARGIN) * one.estimate
             and not _windows_ok(p)]
    if split:  # the lowest estimate (no instruction-count tie-break: the gain must come from the split)
        other = min(split, key=lambda p: (p.estimate, p.insns))
        # estimates within ESTIMATE_TOLERANCE are equal: then the one-core choice's split stays (a
        # double-buffered tiling's overlap is what the rough port model misses most)
        if other.estimate < best.estimate * (1 - ESTIMATE_TOLERANCE):
            best = other
    return best


def _choose(fitting: list[ConvPlan], cfg: HwConfig, s: ConvShape) -> ConvPlan:
    """The cheapest plan of ``fitting`` whose windows are valid, preferring fewer instructions within
    ESTIMATE_TOLERANCE; PlanError (the reason of the smallest or the last plan) if there is none."""
    fitting.sort(key=lambda p: (p.estimate, p.insns))
    best = next((p for p in fitting if not _windows_ok(p)), None)
    if best is None:
        if not fitting:  # the smallest tile's reason, with the exact numbers
            p = ConvPlan(s, 1, 1, 1, 1, 1, 1, 0, 0, balanced_split(s.ob, s.ob), balanced_split(s.cb, s.cb),
                         balanced_split(s.ho, s.ho), balanced_split(s.wo, s.wo))
            raise PlanError(f"no tiling fits config '{cfg.name}': the smallest tile overflows the {_fits(p, cfg)}")
        why = _windows_ok(fitting[-1])
        raise PlanError(f"config '{cfg.name}': {why}" if "are all padding" in why else
                        f"no tiling fits config '{cfg.name}': {why}")
    close = [p for p in fitting if p.estimate <= best.estimate * (1 + ESTIMATE_TOLERANCE)]
    close.sort(key=lambda p: (p.insns, p.estimate))
    return next(p for p in close if not _windows_ok(p))
