"""The benchmark suite: Programs from a few thousand to over a million RTL cycles, per config.

Two kinds of Program:

* compiled examples (``compiler.examples.make_case``), some with bigger params than
  their defaults, timed for compile and golden too;
* hand-built Programs (``hw.assembler``, numpy expected outputs) whose length
  is set directly: ``alu_loop`` (long ALU loops over the accumulator buffer: many
  cycles, few bytes) and ``dma_stream`` (large tiled DMA in and out, double-buffered
  with tokens: many bytes). Their sizes scale with the config (buffer depth, DRAM
  size), so every config gets Programs of the same rough length.

``growth_*`` build the families for the TLM growth curves (instructions, bytes,
cycles per instruction).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hw.assembler import Assembler
from hw.config import HwConfig
from hw.program import Program


@dataclass
class Item:
    """One Program of the suite, with how it was made."""

    name: str
    program: Program
    kind: str                        # "example" or "hand"
    compile_s: float | None = None   # examples only
    golden: dict[str, np.ndarray] | None = None
    golden_s: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def expected(self) -> dict[str, np.ndarray]:
        return self.golden if self.golden is not None else self.program.expected

    @property
    def insns(self) -> int:
        return len(self.program.insns)


def _out_dtype(cfg: HwConfig) -> str:
    return f"int{cfg.out_width}"


def _narrow(cfg: HwConfig, v: np.ndarray) -> np.ndarray:
    return v.astype(np.int64).astype(np.int32).astype(_out_dtype(cfg))


# ---------------------------------------------------------------------------- hand-built
def alu_loop(cfg: HwConfig, n_alu: int, vecs: int | None = None, name: str | None = None) -> Program:
    """LOAD a tile, ``n_alu`` ALU ADD-immediate instructions over ``vecs`` vectors each, STORE.

    About ``n_alu * (vecs + 3)`` cycles with only two DMAs: the long ALU loop.
    """
    L = cfg.lanes
    vecs = vecs or min(cfg.acc_depth, 1024)
    rng = np.random.default_rng(7)
    a_data = rng.integers(-1000, 1000, size=(vecs, L)).astype(np.int32)
    asm = Assembler(cfg, name or f"alu_loop{n_alu}x{vecs}")
    a = asm.input("a", a_data)
    c = asm.output("c", (vecs, L))
    asm.load(a, x=vecs, push_next=True)
    total = 0
    for k in range(n_alu):
        imm = (k % 7) - 3
        total += imm
        asm.alu("ADD", imm=imm, iter_out=vecs, dst_base=0, dst_factor_out=1, pop_prev=k == 0,
                push_next=k == n_alu - 1)
    asm.store(c, x=vecs, pop_prev=True)
    asm.finish()
    return asm.program(expected={"c": _narrow(cfg, a_data.astype(np.int64) + total)})


def dma_stream(cfg: HwConfig, n_vecs: int, tile: int | None = None, name: str | None = None) -> Program:
    """``c = narrow(a + 1)`` over ``n_vecs`` vectors in tiles, double-buffered: mostly DMA.

    Per tile: LOAD (tile vectors), one ALU ADD-immediate, STORE; tokens l2c/c2s forward,
    s2c/c2l back so a half of the buffer is reloaded only after its store is done.
    """
    L = cfg.lanes
    half = cfg.acc_depth // 2
    tile = max(1, min(tile or half, half, n_vecs))
    tiles = [(s, min(tile, n_vecs - s)) for s in range(0, n_vecs, tile)]
    nt = len(tiles)
    rng = np.random.default_rng(11)
    a_data = rng.integers(-100000, 100000, size=(n_vecs, L)).astype(np.int32)
    asm = Assembler(cfg, name or f"dma_stream{n_vecs}")
    a = asm.input("a", a_data)
    c = asm.output("c", (n_vecs, L))
    for k, (s, m) in enumerate(tiles):
        base = (k % 2) * half
        asm.load(a, x=m, offset=s, sram=base, push_next=True, pop_next=k >= 2)
        # ALU k waits for store k-1 (s2c) and then frees half (k-1)%2 for load k+1 (c2l): a
        # load never overwrites a half before its store has read it.
        asm.alu("ADD", imm=1, iter_out=m, dst_base=base, dst_factor_out=1, pop_prev=True, push_next=True,
                pop_next=k >= 1, push_prev=1 <= k < nt - 1)
        asm.store(c, x=m, offset=s, sram=base, pop_prev=True, push_prev=k + 1 < nt)
    asm.finish()
    return asm.program(expected={"c": _narrow(cfg, a_data.astype(np.int64) + 1)})


# ---------------------------------------------------------------------------- examples
def example(name: str, cfg: HwConfig, params: dict[str, Any] | None = None, label: str | None = None) -> Item:
    from compiler.examples import make_case

    t0 = time.perf_counter()
    case = make_case(name, cfg, params)
    t1 = time.perf_counter()
    golden = case.golden()
    t2 = time.perf_counter()
    return Item(label or name, case.program, "example", compile_s=t1 - t0, golden=golden, golden_s=t2 - t1,
                meta={"example": name, "params": {k: list(v) if isinstance(v, tuple) else v
                                                  for k, v in (params or {}).items()}})


# The GEMM examples measured for MAC utilization (the ResNet-18 layer is RESNET_LAYER)
RESNET_LAYER = "conv2d_resnet"
GEMM_PROGRAMS = ("matmul", "conv3x3", "resnet_block", RESNET_LAYER)


def _dma_vecs_for(cfg: HwConfig, target_cycles: int) -> int:
    """Vectors for dma_stream to take about ``target_cycles`` on ``cfg`` (bounded by DRAM)."""
    beats = cfg.beats_per_acc_vec + cfg.beats_per_out_vec
    per_burst = cfg.dram_read_latency + 1
    per_vec = beats + per_burst * cfg.beats_per_acc_vec / cfg.max_burst + \
        (cfg.dram_write_latency + 1) * cfg.beats_per_out_vec / cfg.max_burst + 1
    n = int(target_cycles / per_vec)
    cap = (min(cfg.dram_bytes, 64 << 20) // 2) // (cfg.acc_vec_bytes + cfg.out_vec_bytes)
    return max(16, min(n, cap))


def long_programs(cfg: HwConfig) -> list[Program]:
    """The two >= 1 M-cycle hand-built Programs of the suite: the ALU loop and the DMA stream."""
    vecs = min(cfg.acc_depth, 1024)
    return [alu_loop(cfg, max(1, 1_050_000 // (vecs + 3)), vecs, "alu_loop_1M"),
            dma_stream(cfg, _dma_vecs_for(cfg, 1_200_000), name="dma_stream_1M")]


def build_suite(cfg: HwConfig, quick: bool = False) -> list[Item]:
    """The Programs for one config, shortest first."""
    vecs = min(cfg.acc_depth, 1024)
    items: list[Item] = [example("vadd", cfg), example("fused", cfg)]
    items.append(Item("alu_loop_small", alu_loop(cfg, 16, vecs, "alu_loop_small"), "hand"))
    items.append(Item("dma_stream_small", dma_stream(cfg, _dma_vecs_for(cfg, 20_000), name="dma_stream_small"),
                      "hand"))
    items.append(example("requant", cfg))
    items += [example(n, cfg) for n in GEMM_PROGRAMS]
    if quick:
        items.append(Item("alu_loop_1M", alu_loop(cfg, max(1, 1_050_000 // (vecs + 3)), vecs, "alu_loop_1M"), "hand"))
        return items
    items.append(example("vadd_large", cfg))
    items += [Item(p.name, p, "hand") for p in long_programs(cfg)]
    items.append(vadd_large_big(cfg))
    return items


def vadd_large_big(cfg: HwConfig) -> Item:
    """The largest vadd that fits the config's DRAM (a >= 1 M-cycle Program of the suite)."""
    return _largest_example("vadd_large", cfg, [(512, 1000), (256, 1000), (192, 1000)], "vadd_large_big")


def _largest_example(name: str, cfg: HwConfig, shapes: list[tuple[int, ...]], label: str) -> Item:
    """The example with the first shape that fits the config's DRAM."""
    from compiler.errors import CompileError

    for shape in shapes:
        try:
            return example(name, cfg, {"shape": shape}, label=label)
        except CompileError:
            continue
    return example(name, cfg, None, label=label)


# ---------------------------------------------------------------------------- growth families
def growth_insns(cfg: HwConfig, quick: bool = False) -> list[Program]:
    """ALU loops of a fixed 64 vectors per instruction and 2^k instructions."""
    ns = [64, 256, 1024] if quick else [64, 128, 256, 512, 1024, 2048, 4096]
    v = min(64, cfg.acc_depth)
    return [alu_loop(cfg, n, v, f"g_insns{n}") for n in ns]


def growth_cpi(cfg: HwConfig, quick: bool = False) -> list[Program]:
    """256 ALU instructions each, 4 .. acc_depth vectors per instruction (cycles per instruction grows)."""
    vs = [4, 64, 1024] if quick else [4, 16, 64, 256, 1024, 2048]
    return [alu_loop(cfg, 256, v, f"g_cpi{v}") for v in vs if v <= cfg.acc_depth]


def growth_bytes(cfg: HwConfig, quick: bool = False) -> list[Program]:
    """32 tiles of DMA each, tile size (hence bytes moved) doubling."""
    half = cfg.acc_depth // 2
    tiles = [t for t in ([4, 32, 512] if quick else [4, 16, 32, 64, 256, 1024]) if t <= half]  # >= 2 points on every config
    return [dma_stream(cfg, 32 * t, t, f"g_bytes{t}") for t in tiles]
