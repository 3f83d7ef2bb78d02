"""Which bits of a signal family can move on a config: the reasons of the config-bound toggle waivers,
computed.

A toggle waiver in ``hw/rtl/coverage_waivers.json`` may name one of :data:`MOVABLE` (``"movable":
NAME``): it then claims that no bit of its range can move on any shipped config, and
``tests/test_coverage.py`` checks that claim against every config (``check_waiver_bounds``), so a new
config or a changed width that makes a waived bit reachable fails the test instead of hiding a point.
Each function gives, for one config, the set of bit indices that some run can set.
"""

from __future__ import annotations

from typing import Callable, Iterable

from hw import csr
from hw.config import HwConfig, list_configs, load_config
from hw.isa import INSN_BYTES

BUFFERS = ("ACC", "INP", "WGT", "UOP")


def _bits_below(v: int) -> set[int]:
    """The bits a value in [0, v] can set: 0 .. bit_length(v) - 1."""
    return set(range(max(int(v), 0).bit_length()))


def _max_depth(cfg: HwConfig) -> int:
    """The largest buffer's depth."""
    return max(cfg.depth_of(b) for b in BUFFERS)


def _max_entry_log2(cfg: HwConfig) -> int:
    """log2 of the largest DRAM entry a LOAD addresses (an accumulator vector, input, weight block or micro-op)."""
    return max(cfg.elem_bytes(b) for b in BUFFERS).bit_length() - 1


def pc(cfg: HwConfig) -> set[int]:
    """A program counter (or a count of instructions fetched) is at most the instructions DRAM holds:
    dram_bytes / 16 (the fetch of the next one past the DRAM's end is a slave error)."""
    return _bits_below(cfg.dram_bytes // INSN_BYTES)


def insn_index(cfg: HwConfig) -> set[int]:
    """An instruction's own pc (a BARRIER's, a unit's instruction's): below the instructions DRAM holds."""
    return _bits_below(cfg.dram_bytes // INSN_BYTES - 1)


def error_code(cfg: HwConfig) -> set[int]:
    """An 8-bit error code holds one of hw.csr's codes (0 .. the largest of ERROR_NAMES)."""
    return _bits_below(max(csr.ERROR_NAMES))


def _bits_of(values: Iterable[int]) -> set[int]:
    """The bits some value of ``values`` sets."""
    return {b for v in values for b in range(int(v).bit_length()) if v >> b & 1}


def _codes_bound(codes: tuple[int, ...], doc: str) -> Callable[[HwConfig], set[int]]:
    """The bound of an error lane that holds only ``codes``: the bits they set."""
    def bound(cfg: HwConfig) -> set[int]:
        return _bits_of(codes)
    bound.__doc__ = doc
    return bound


decode_error_code = _codes_bound(
    csr.DECODE_ERRORS, "FETCH's decoder's code: BAD_OPCODE or BAD_FIELD (hw.csr.DECODE_ERRORS).")


def gemm_acc_index(cfg: HwConfig) -> set[int]:
    """GEMM's accumulator index (gemm.v's ``a_idx``, micro-op field + loop offset): each micro-op is first
    read at offset 0 (i = j = 0), where a field at or past ACC_DEPTH faults, so an index with an offset
    is a field below ACC_DEPTH plus an offset below 2^(SRAM_IDX_BITS + 1) (it saturates there); at offset
    0 it is the 16-bit field itself."""
    from hw.isa import UOP_FIELD_BITS

    return _bits_below(max((1 << UOP_FIELD_BITS) - 1, cfg.acc_depth - 1 + (1 << (cfg.sram_index_bits + 1)) - 1))


def _queue_word(mnemonic: str) -> Callable[[HwConfig], set[int]]:
    def bound(cfg: HwConfig) -> set[int]:
        from hw.isa import INSN_BITS, INSN_CLASSES, OPCODE_BITS, OPCODES, Isa
        from hw.isa_semantics import dispatch_fault

        fixed = {b for b in range(OPCODE_BITS) if not OPCODES[mnemonic] >> b & 1}
        for f in Isa(cfg).layouts[mnemonic]:
            if f.name in ("pop_prev", "pop_next", "push_prev", "push_next", "buf"):
                fixed |= {f.lo + b for b in range(f.width)
                          if dispatch_fault(INSN_CLASSES[mnemonic](**{f.name: 1 << b}))[0] != csr.ERR_NONE}
        return set(range(INSN_BITS)) - fixed
    bound.__doc__ = (f"A word in the {mnemonic} queue: FETCH dispatches only {mnemonic}s there, and refuses the "
                     f"dependency flags and buffer codes hw.isa_semantics.dispatch_fault rejects, so those bits "
                     f"and the opcode's zeros are 0.")
    return bound


def entry_log2(cfg: HwConfig) -> set[int]:
    """load_unit's ``elog2``: log2 of the DRAM bytes of a buffer's entry (at most a 256-byte weight block)."""
    return _bits_below(max(_log2(cfg.elem_bytes(b)) for b in BUFFERS))


def entry_beats_log2(cfg: HwConfig) -> set[int]:
    """load_unit's ``blog2``: log2 of the bus beats of a buffer's entry (entries are whole beats)."""
    return _bits_below(max(_log2(cfg.elem_bytes(b) // cfg.bus_bytes) for b in BUFFERS))


def insn_beat(cfg: HwConfig) -> set[int]:
    """FETCH's ``bcnt``: the beat within a 16-byte instruction, 0 .. its beats - 1."""
    return _bits_below(cfg.beats_per_insn - 1)


def burst_len(cfg: HwConfig) -> set[int]:
    """A burst's beat count, 1 .. MAX_BURST."""
    return _bits_below(cfg.max_burst)


def load_burst_len(cfg: HwConfig) -> set[int]:
    """A LOAD burst's beat count: rows start on an entry and bursts are cut at MAX_BURST beats and at 4 KiB
    pages (entry-aligned), so a multiple of the fewest beats an entry has, up to MAX_BURST."""
    step = max(1, min(cfg.elem_bytes(b) for b in BUFFERS) // cfg.bus_bytes)
    return _bits_of(range(step, cfg.max_burst + 1, step))


def store_burst_len(cfg: HwConfig) -> set[int]:
    """A STORE burst's beat count: a multiple of an output vector's beats, up to MAX_BURST."""
    return _bits_of(range(cfg.beats_per_out_vec, cfg.max_burst + 1, cfg.beats_per_out_vec))


def posted_write_len(cfg: HwConfig) -> set[int]:
    """The arbiter's ``wlenm1`` (a posted write's AWLEN, written only with writes in flight): 0 .. MAX_BURST - 1."""
    return _bits_below(cfg.max_burst - 1) if cfg.dram_writes_in_flight > 1 else set()


def load_address(cfg: HwConfig) -> set[int]:
    """A LOAD burst's byte address: entry-aligned (rows start on an entry; cuts fall on MAX_BURST beats of
    whole entries or on 4 KiB pages), so its bits below the smallest entry's log2 bytes are 0."""
    return set(range(_log2(min(cfg.elem_bytes(b) for b in BUFFERS)), 32))


def store_address(cfg: HwConfig) -> set[int]:
    """A STORE burst's byte address: aligned to an output vector."""
    return set(range(_log2(cfg.out_vec_bytes), 32))


def burst_beat_next(cfg: HwConfig) -> set[int]:
    """A beat counter plus one (store_unit's ``bbeat_next``): 1 .. MAX_BURST + 1."""
    return _bits_below(cfg.max_burst + 1)


def burst_len_minus_1(cfg: HwConfig) -> set[int]:
    """AXI's AxLEN (beats - 1) and a beat counter within a burst: 0 .. MAX_BURST - 1."""
    return _bits_below(cfg.max_burst - 1)


def bus_aligned_address(cfg: HwConfig) -> set[int]:
    """A DRAM port's byte address is bus-aligned: bits below log2(bus bytes) are 0."""
    return set(range(cfg.bus_bytes.bit_length() - 1, 32))


def sram_index(cfg: HwConfig) -> set[int]:
    """An SRAM index field zero-extended (load_unit's ``base_ext``): only its CFG_SRAM_IDX_BITS low bits."""
    return set(range(cfg.sram_index_bits))


def _log2(v: int) -> int:
    return int(v).bit_length() - 1


def load_x_beats(cfg: HwConfig) -> set[int]:
    """A LOAD row's beats (``x_beats``, and ``row_beats`` counting them down): a 16-bit x_size times the
    beats of one entry, at most 256-byte entries over the bus width."""
    most = max(cfg.elem_bytes(b) for b in BUFFERS) // cfg.bus_bytes
    return _bits_below(((1 << 16) - 1) * most)


def load_row_beats(cfg: HwConfig) -> set[int]:
    """The beats left in a LOAD's row (load_unit's ``row_beats``), loaded from ``x_beats`` only when the
    instruction passed its checks: a row that fits its buffer, at most depth x an entry's beats."""
    return _bits_below(max(cfg.depth_of(b) * (cfg.elem_bytes(b) // cfg.bus_bytes) for b in BUFFERS))


def store_row_beats(cfg: HwConfig) -> set[int]:
    """The beats left in a STORE's row (store_unit's ``row_beats``), loaded when the instruction passed its
    checks: at most the accumulator's depth x an output vector's beats."""
    return _bits_below(cfg.acc_depth * cfg.beats_per_out_vec)


def load_stride_bytes(cfg: HwConfig) -> set[int]:
    """A LOAD's row stride in bytes: a 16-bit x_stride shifted by its entry's log2 bytes (3 to 8)."""
    shifts = [_log2(cfg.elem_bytes(b)) for b in BUFFERS]
    return set(range(min(shifts), 16 + max(shifts)))


def store_x_beats(cfg: HwConfig) -> set[int]:
    """A STORE row's beats (``x_beats``, ``row_beats``): a 16-bit x_size times the beats of an output vector."""
    return _bits_below(((1 << 16) - 1) * cfg.beats_per_out_vec)


def store_stride_bytes(cfg: HwConfig) -> set[int]:
    """A STORE's row stride in bytes: a 16-bit x_stride shifted by the output vector's log2 bytes."""
    return set(range(_log2(cfg.out_vec_bytes), 16 + _log2(cfg.out_vec_bytes)))


def fetch_bytes(cfg: HwConfig) -> set[int]:
    """FETCH_BYTES of one run: at most the instructions a DRAM holds (dram_bytes, 16 bytes each; the fetch
    past the DRAM's end is a slave error), plus one burst of MAX_BURST beats past the window's end."""
    return _bits_below(cfg.dram_bytes + cfg.max_burst * cfg.bus_bytes)


def byte_counter(cfg: HwConfig) -> set[int]:
    """A byte counter that adds the bus's bytes per beat (DMA_RD/WR_BYTES, FETCH_BYTES, 32 bits) from 0:
    only bits log2(bus bytes) and up move."""
    return set(range(cfg.bus_bytes.bit_length() - 1, 32))


def page_beats(cfg: HwConfig) -> set[int]:
    """Beats to the next 4 KiB boundary: 1 .. 4096 / bus bytes."""
    return _bits_below(4096 // cfg.bus_bytes)


def buffer_depth(cfg: HwConfig) -> set[int]:
    """load_unit's ``depth`` is one of the four buffer depths (powers of two): only their bits are ever 1."""
    return {k for b in BUFFERS for k in range(36) if cfg.depth_of(b) >> k & 1}


def queue_count(cfg: HwConfig) -> set[int]:
    """An instruction queue's fill count (the debug port's), 0 .. its depth."""
    return _bits_below(max(cfg.load_queue_depth, cfg.compute_queue_depth, cfg.store_queue_depth))


def write_core(cfg: HwConfig) -> set[int]:
    """The core of a write burst (the arbiter's write owner, AWID and BID with write bursts in flight):
    0 .. num_cores - 1."""
    return _bits_below(cfg.num_cores - 1)


def read_slot(cfg: HwConfig) -> set[int]:
    """A read's slot, {core, client} (the arbiter's ARID, echoed on RID): 0 .. 2 * num_cores - 1."""
    return _bits_below(2 * cfg.num_cores - 1)


def reads_in_flight(cfg: HwConfig) -> set[int]:
    """The port's count of read bursts granted and not yet finished: 0 .. dram_reads_in_flight."""
    return _bits_below(cfg.dram_reads_in_flight)


def writes_in_flight(cfg: HwConfig) -> set[int]:
    """A count of write bursts granted and not yet answered by B (the port's, a core's, a STORE's):
    0 .. dram_writes_in_flight."""
    return _bits_below(cfg.dram_writes_in_flight)


def tile_walk(cfg: HwConfig) -> set[int]:
    """A LOAD's or STORE's row and column index in its tile, and their next values: a tile walks only
    when it fits its buffer (else SRAM_RANGE before EXEC), so at most the largest buffer's depth."""
    return _bits_below(_max_depth(cfg))


def tile_column(cfg: HwConfig) -> set[int]:
    """A LOAD's column in its tile and the next one after a wrap (load_unit's ``c``, ``c_new``): below
    the tile's columns, so below the largest buffer's depth."""
    return _bits_below(_max_depth(cfg) - 1)


def out_vec_beat(cfg: HwConfig) -> set[int]:
    """The beat within an output vector a STORE is sending: 0 .. its beats - 1."""
    return _bits_below(cfg.beats_per_out_vec - 1)


def entry_beat(cfg: HwConfig) -> set[int]:
    """The beat within the entry a LOAD is writing (the weight buffer's bank): 0 .. the largest entry's
    beats - 1 (an accumulator vector, input, weight block or micro-op over the bus)."""
    return _bits_below(max(cfg.elem_bytes(b) for b in BUFFERS) // cfg.bus_bytes - 1)


def load_dram_lo(cfg: HwConfig) -> set[int]:
    """A LOAD's first byte: a 32-bit entry index shifted by the entry's log2 bytes."""
    return set(range(32 + _max_entry_log2(cfg)))


def load_dram_hi(cfg: HwConfig) -> set[int]:
    """A LOAD's end: first byte plus span (< 2^32 entries: (y - 1) * stride + x of 16-bit fields), shifted."""
    return set(range(33 + _max_entry_log2(cfg)))


def store_dram_lo(cfg: HwConfig) -> set[int]:
    """A STORE's first byte: a 32-bit vector index shifted by the output vector's log2 bytes."""
    return set(range(32 + cfg.out_vec_bytes.bit_length() - 1))


def store_dram_hi(cfg: HwConfig) -> set[int]:
    """A STORE's end: first byte plus a span below 2^32 vectors, shifted."""
    return set(range(33 + cfg.out_vec_bytes.bit_length() - 1))


def checked_lo(cfg: HwConfig) -> set[int]:
    """region_check's ``lo``: a LOAD's or STORE's first byte, or the instruction window's (32 bits)."""
    return load_dram_lo(cfg) | store_dram_lo(cfg) | set(range(32))


def checked_hi(cfg: HwConfig) -> set[int]:
    """region_check's ``hi``: a LOAD's or STORE's end, or the window's (below 2^32 + 16 * 2^32 < 2^37)."""
    return load_dram_hi(cfg) | store_dram_hi(cfg) | set(range(37))


MOVABLE: dict[str, Callable[[HwConfig], set[int]]] = {
    "pc": pc, "insn_index": insn_index, "error_code": error_code, "burst_len": burst_len,
    "burst_len_minus_1": burst_len_minus_1, "burst_beat_next": burst_beat_next,
    "bus_aligned_address": bus_aligned_address, "byte_counter": byte_counter, "fetch_bytes": fetch_bytes,
    "sram_index": sram_index, "load_x_beats": load_x_beats, "load_stride_bytes": load_stride_bytes,
    "store_x_beats": store_x_beats, "store_stride_bytes": store_stride_bytes, "page_beats": page_beats,
    "buffer_depth": buffer_depth, "queue_count": queue_count, "load_dram_lo": load_dram_lo,
    "load_dram_hi": load_dram_hi, "store_dram_lo": store_dram_lo, "store_dram_hi": store_dram_hi,
    "checked_lo": checked_lo, "checked_hi": checked_hi, "write_core": write_core,
    "writes_in_flight": writes_in_flight, "out_vec_beat": out_vec_beat, "entry_beat": entry_beat,
    "tile_walk": tile_walk, "decode_error_code": decode_error_code, "gemm_acc_index": gemm_acc_index,
    **{f"{unit}_error_code": _codes_bound(
        csr.UNIT_ERRORS[unit], f"The {unit} unit's error lane holds one of the codes it raises (hw.csr.UNIT_ERRORS).")
        for unit in ("fetch", "load", "compute", "store")},
    "load_queue_word": _queue_word("LOAD"), "store_queue_word": _queue_word("STORE"), "entry_log2": entry_log2,
    "entry_beats_log2": entry_beats_log2, "insn_beat": insn_beat, "read_slot": read_slot,
    "reads_in_flight": reads_in_flight, "tile_column": tile_column, "load_row_beats": load_row_beats,
    "store_row_beats": store_row_beats, "load_burst_len": load_burst_len, "store_burst_len": store_burst_len,
    "posted_write_len": posted_write_len, "load_address": load_address, "store_address": store_address,
}


def check_waiver_bounds(waivers: Iterable[object], configs: Iterable[str] | None = None) -> list[str]:
    """The problems of the config-bound waivers: a ``movable`` name that is not in :data:`MOVABLE`, a
    bound waiver without a bit range, or a waived bit that can move on a config (empty: all hold)."""
    from cosim.coverage.waivers import toggle_pattern

    cfgs = [load_config(c) for c in (configs or list_configs())]
    bad = []
    for w in waivers:
        name = getattr(w, "movable", None)
        if not name:
            continue
        pattern = getattr(w, "pattern")
        if name not in MOVABLE:
            bad.append(f"{pattern}: unknown movable bound '{name}' (known: {', '.join(MOVABLE)})")
            continue
        bits = toggle_pattern(pattern)[1]
        if bits is None:
            bad.append(f"{pattern}: a '{name}' bound needs a bit range [HI:LO]")
            continue
        # a lane (``lane_bits`` wide) is one core's: lane k exists only on configs of more than k cores
        lane = getattr(w, "lane_bits", None) or 1 << 30
        for c in cfgs:
            waived = {b % lane for b in range(bits[0], bits[1] + 1) if b // lane < c.num_cores}
            moving = waived & MOVABLE[name](c)
            if moving:
                bad.append(f"{pattern}: bits {sorted(moving)} can move on config {c.name} ({name})")
    return bad
