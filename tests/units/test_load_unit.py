"""The load unit (hw/rtl/load_unit.v) on every level: DRAM -> accumulator tiles.

Each case LOADs a tile, hands the l2c token through a compute no-op to a STORE of the
whole tile, so the tile the unit wrote is visible in DRAM: single vectors, a max burst
and its tail, many bursts, strided and overlapping rows, rows crossing a 4 KiB page,
zero padding (with and without data), empty loads, the last buffer entries, and a load
that waits for compute's c2l token.
"""

from __future__ import annotations

import numpy as np

from hw.assembler import Assembler
from hw.config import HwConfig, load_config
from tests.units.every_level import Case, level_tests
from tests.units.programs import load_tile, narrow, pad_stride, random_vectors, relay


def roundtrip(cfg: HwConfig, name: str, data: np.ndarray, x: int, y: int = 1, offset: int = 0,
              stride: int | None = None, sram: int = 0, **pads: int) -> Case:
    """LOAD a tile of ``data`` into ``sram``; a compute no-op passes l2c on as c2s; STORE the tile."""
    stride = x if stride is None else stride
    tile = load_tile(data, offset, x, y, stride, **pads)
    asm = Assembler(cfg, name)
    a = asm.input("a", data)
    out = asm.output("out", (len(tile), cfg.lanes))
    asm.load(a, x=x, y=y, offset=offset, stride=stride, sram=sram, push_next=True, **pads)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=len(tile), sram=sram, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, tile)}))


def overwrite(cfg: HwConfig, name: str, fill: int, n: int, **load: int) -> Case:
    """Fill ``n`` vectors with ``fill`` (compute), then a LOAD that writes no DRAM data (padding only,
    or nothing) waits for compute's c2l token; the STORE of the ``n`` vectors shows what it wrote."""
    asm = Assembler(cfg, name)
    a = asm.input("a", random_vectors(cfg, 4, 5))
    out = asm.output("out", (n, cfg.lanes))
    asm.alu("MOV", imm=fill, iter_out=n, dst_factor_out=1, push_prev=True)
    asm.load(a, x=0, y=0, pop_next=True, push_next=True, **load)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=n, pop_prev=True)
    asm.finish()
    rows = load.get("y_pad_0", 0) + load.get("y_pad_1", 0)
    cols = load.get("x_pad_0", 0) + load.get("x_pad_1", 0)
    exp = np.full((n, cfg.lanes), fill, dtype=np.int64)
    exp[:rows * cols] = 0
    return Case(asm.program(expected={"out": narrow(cfg, exp)}))


def crossing_4k(cfg: HwConfig) -> Case:
    """Two rows of several max bursts; the first row starts on the last vector before a 4 KiB page."""
    vb = cfg.acc_vec_bytes
    page = 4096 // vb
    data = random_vectors(cfg, 3 * page + 8, 7)
    x = max(3, 2 * cfg.max_burst * cfg.bus_bytes // vb + 1)
    probe = Assembler(cfg, "probe")
    a = probe.input("a", data)
    probe.output("out", (2 * x, cfg.lanes))
    va = probe.address(a, insn_count=4) // vb
    first = (va // page + 1) * page - 1 - va
    return roundtrip(cfg, "load_crossing_4k", data, x, 2, offset=first, stride=x + page // 2)


def cases(cfg: HwConfig) -> list[Case]:
    depth = cfg.acc_depth
    vmax = max(1, cfg.max_burst // cfg.beats_per_acc_vec)   # vectors per max read burst
    many = min(depth, 5 * vmax + 1)
    return [
        roundtrip(cfg, "load_one_vector", random_vectors(cfg, 8, 1), 1, offset=2, sram=3),
        roundtrip(cfg, "load_max_burst", random_vectors(cfg, vmax, 2), vmax),
        roundtrip(cfg, "load_burst_and_tail", random_vectors(cfg, vmax + 1, 3), vmax + 1, sram=1),
        roundtrip(cfg, "load_many_bursts", random_vectors(cfg, many + 3, 4), many, offset=3),
        roundtrip(cfg, "load_rows_strided", random_vectors(cfg, 13, 5), 2, 3, offset=1, stride=5),
        roundtrip(cfg, "load_rows_overlapping", random_vectors(cfg, 8, 6), 4, 3, stride=2),
        roundtrip(cfg, "load_one_row_repeated", random_vectors(cfg, 2, 8), 2, 3, stride=0),
        crossing_4k(cfg),
        roundtrip(cfg, "load_padding", random_vectors(cfg, 8, 9), 2, 2, stride=4, y_pad_0=1, y_pad_1=1,
                  x_pad_0=2, x_pad_1=1),
        roundtrip(cfg, "load_at_buffer_end", random_vectors(cfg, 4, 10), 4, sram=depth - 4),
        Case(pad_stride(cfg)),
        overwrite(cfg, "load_padding_only", 7, 8, y_pad_0=2, x_pad_0=3),
        overwrite(cfg, "load_nothing", 5, 2),
    ]


CFG = load_config("default")
CASES = cases(CFG)
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)
