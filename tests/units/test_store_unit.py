"""The store unit (hw/rtl/store_unit.v) on every level: accumulator -> DRAM with the narrowing cast.

Each case LOADs known vectors, hands the token on through compute, and STOREs them:
single vectors, a max burst and its tail, many bursts, strided rows (the gaps stay
untouched), a row crossing a 4 KiB page, the wrap-around of the narrowing cast at its
edges, an empty store, the last buffer entries, two stores to one place (program order
wins) and two output regions.
"""

from __future__ import annotations

import numpy as np

from hw.assembler import Assembler
from hw.config import HwConfig, load_config
from tests.units.every_level import Case, level_tests
from tests.units.programs import narrow, random_vectors, relay


def stored(cfg: HwConfig, name: str, data: np.ndarray, x: int, y: int = 1, offset: int = 0,
           stride: int | None = None, sram: int = 0, out_vecs: int | None = None) -> Case:
    """LOAD ``data`` (y*x vectors) into ``sram``..; STORE it as ``y`` rows of ``x`` vectors to
    ``out`` from vector ``offset``, rows ``stride`` apart (default ``x``)."""
    stride = x if stride is None else stride
    n = out_vecs or offset + (y - 1) * stride + x
    exp = np.zeros((n, cfg.lanes), dtype=np.int64)
    for r in range(y):
        exp[offset + r * stride:offset + r * stride + x] = data[r * x:(r + 1) * x]
    asm = Assembler(cfg, name)
    a = asm.input("a", data)
    out = asm.output("out", (n, cfg.lanes))
    asm.load(a, x=len(data), sram=sram, push_next=True)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=x, y=y, offset=offset, stride=stride, sram=sram, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, exp)}))


def crossing_4k(cfg: HwConfig) -> Case:
    """A row of several max bursts starting on the last output vector before a 4 KiB page."""
    ovb = cfg.out_vec_bytes
    page = 4096 // ovb
    x = min(cfg.acc_depth, 2 * cfg.max_burst * cfg.bus_bytes // ovb + 1)
    data = random_vectors(cfg, x, 21)
    n = 2 * page + x
    probe = Assembler(cfg, "probe")
    probe.input("a", data)
    o = probe.output("out", (n, cfg.lanes))
    vo = probe.address(o, insn_count=4) // ovb
    first = (vo // page + 1) * page - 1 - vo
    return stored(cfg, "store_crossing_4k", data, x, offset=first, out_vecs=n)


def narrowing_edges(cfg: HwConfig) -> Case:
    """Lanes at the edges of the output width: the cast wraps, as in C."""
    w = cfg.out_width
    edges = [0, 1, -1, (1 << (w - 1)) - 1, 1 << (w - 1), -(1 << (w - 1)), -(1 << (w - 1)) - 1, (1 << w) - 1,
             1 << w, (1 << w) + 1, 2**31 - 1, -2**31, 0x12345678, -0x12345678, 0x7F80, -0x8080]
    lanes = np.resize(np.array(edges, dtype=np.int64), (2, cfg.lanes))
    lanes[1] = lanes[1][::-1]
    return stored(cfg, "store_narrowing_edges", lanes.astype(np.int32), 2)


def twice(cfg: HwConfig) -> Case:
    """Two STOREs to the same vectors: the store unit is in order, the second one is what DRAM keeps;
    a third STORE sends the first tile to a second output region."""
    first, second = random_vectors(cfg, 3, 22), random_vectors(cfg, 3, 23)
    asm = Assembler(cfg, "store_twice")
    a, b = asm.input("a", first), asm.input("b", second)
    out, other = asm.output("out", (3, cfg.lanes)), asm.output("other", (3, cfg.lanes))
    asm.load(a, x=3)
    asm.load(b, x=3, sram=3, push_next=True)
    relay(asm, pop_prev=True, push_next=True)
    asm.store(out, x=3, pop_prev=True)
    asm.store(out, x=3, sram=3)
    asm.store(other, x=3)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, second), "other": narrow(cfg, first)}))


def nothing(cfg: HwConfig) -> Case:
    """An empty STORE (one EXECUTE cycle) writes nothing."""
    asm = Assembler(cfg, "store_nothing")
    out = asm.output("out", (2, cfg.lanes))
    asm.alu("MOV", imm=9, iter_out=2, dst_factor_out=1, push_next=True)
    asm.store(out, x=0, y=0, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, np.zeros((2, cfg.lanes)))}))


def cases(cfg: HwConfig) -> list[Case]:
    depth = cfg.acc_depth
    omax = max(1, cfg.max_burst // cfg.beats_per_out_vec)   # output vectors per max write burst
    many = min(depth, 5 * omax + 1)
    return [
        stored(cfg, "store_one_vector", random_vectors(cfg, 1, 11), 1, offset=2),
        stored(cfg, "store_max_burst", random_vectors(cfg, omax, 12), omax),
        stored(cfg, "store_burst_and_tail", random_vectors(cfg, omax + 1, 13), omax + 1, sram=2),
        stored(cfg, "store_many_bursts", random_vectors(cfg, many, 14), many),
        stored(cfg, "store_rows_strided", random_vectors(cfg, 6, 15), 2, 3, offset=1, stride=5),
        stored(cfg, "store_at_buffer_end", random_vectors(cfg, 3, 16), 3, sram=depth - 3),
        crossing_4k(cfg),
        narrowing_edges(cfg),
        twice(cfg),
        nothing(cfg),
    ]


CFG = load_config("default")
CASES = cases(CFG)
test_iss, test_tlm, rtl_results, test_rtl_matches_tlm = level_tests(CASES, CFG)
