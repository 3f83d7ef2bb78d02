"""Hand-built Programs for the TLM tests (no compiler needed): instructions from hw.isa,
layouts from hw.program.plan_layout, inputs attached, expected outputs computed with numpy."""

from __future__ import annotations

import numpy as np

from hw.config import HwConfig
from hw.isa import ALU_OPS, Alu, Finish, Instruction, Load, Store
from hw.program import Program, plan_layout


def out_dtype(cfg: HwConfig) -> str:
    return "int8" if cfg.out_width == 8 else "int16"


def make_program(cfg: HwConfig, insns: list[Instruction], tensors: list[tuple[str, str, tuple[int, ...], str]],
                 inputs: dict[str, np.ndarray] | None = None, expected: dict[str, np.ndarray] | None = None,
                 name: str = "hand") -> Program:
    """A Program of ``insns`` over ``tensors`` (name, role, shape, dtype), instructions at address 0."""
    regions = plan_layout(cfg, tensors, len(insns))
    return Program.create(cfg, insns, regions, name=name, inputs=inputs, expected=expected)


def vadd_program(cfg: HwConfig, n: int, seed: int = 0, tile: int | None = None) -> Program:
    """out = narrow(a + b) over ``n`` vectors, tiled with double buffering through tokens.

    Tile t loads a and b into one half of the accumulator buffer, adds, stores.
    Tokens: load pushes l2c after b; compute pops l2c, pushes c2s and c2l (buffer free
    for reuse two tiles later); store pops c2s, pushes s2c.
    """
    lanes = cfg.lanes
    rng = np.random.default_rng(seed)
    a = rng.integers(-1000, 1000, size=(n, lanes), dtype=np.int32)
    b = rng.integers(-1000, 1000, size=(n, lanes), dtype=np.int32)
    od = out_dtype(cfg)
    exp = (a.astype(np.int64) + b).astype(np.int32).astype(od)
    tensors = [("a", "input", (n, lanes), "int32"), ("b", "input", (n, lanes), "int32"),
               ("out", "output", (n, lanes), od)]
    half = cfg.acc_depth // 2
    tile = tile or max(1, min(half // 2, n))
    tiles = [(s, min(tile, n - s)) for s in range(0, n, tile)]
    count = 4 * len(tiles) + 1  # 2 loads + alu + store per tile, + FINISH
    regions = plan_layout(cfg, tensors, count)
    ra, rb, ro = (r for r in regions[1:])
    va, vb_, vo = ra.addr // cfg.acc_vec_bytes, rb.addr // cfg.acc_vec_bytes, ro.addr // cfg.out_vec_bytes
    insns: list[Instruction] = []
    for k, (s, m) in enumerate(tiles):
        base = (k % 2) * half
        insns.append(Load(sram_base=base, dram_base=va + s, y_size=1, x_size=m, x_stride=m,
                          pop_next=k >= 2))
        insns.append(Load(sram_base=base + tile, dram_base=vb_ + s, y_size=1, x_size=m, x_stride=m,
                          push_next=True))
        insns.append(Alu(alu_op=ALU_OPS["ADD"], iter_out=1, iter_in=m, dst_base=base, src_base=base + tile,
                         dst_factor_in=1, src_factor_in=1, pop_prev=True, pop_next=k >= 1, push_next=True,
                         push_prev=k + 2 < len(tiles)))
        insns.append(Store(sram_base=base, dram_base=vo + s, y_size=1, x_size=m, x_stride=m, pop_prev=True,
                           push_prev=k + 1 < len(tiles)))
    insns.append(Finish())
    return Program.create(cfg, insns, regions, name=f"vadd{n}", inputs={"a": a, "b": b}, expected={"out": exp})
