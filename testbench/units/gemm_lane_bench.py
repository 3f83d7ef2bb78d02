"""cocotb bench of hw/rtl/gemm_lane.v (one output lane of GEMM's multiply-accumulate): ``y = acc +
sum_k x[k] * w[k]`` over BLOCK int8 pairs, wrapping at 32 bits (docs/microarch.md "GEMM"), on edge
vectors (all -128, all 127, mixed extremes) and random ones.
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.triggers import Timer

from testbench.units.bench_setup import bench_config, bench_rng


def pack8(v: list[int]) -> int:
    return sum((a & 0xFF) << (8 * k) for k, a in enumerate(v))


def wrap32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


@cocotb.test()
async def dot_products_on_edge_and_random_vectors(dut: Any) -> None:
    block = bench_config().block
    rng = bench_rng("dot_products_on_edge_and_random_vectors")
    edges = [[-128] * block, [127] * block, [(-128, 127)[k % 2] for k in range(block)], [0] * block, [-1] * block]
    cases = [(x, w) for x in edges for w in edges]
    cases += [([rng.randint(-128, 127) for _ in range(block)], [rng.randint(-128, 127) for _ in range(block)])
              for _ in range(2000)]
    for n, (x, w) in enumerate(cases):
        acc = rng.choice([0, 1, -1, (1 << 31) - 1, -(1 << 31), rng.randint(-(1 << 31), (1 << 31) - 1)])
        dut.acc.value = acc & 0xFFFF_FFFF
        dut.x.value = pack8(x)
        dut.w.value = pack8(w)
        await Timer(1, unit="ns")
        got = int(dut.y.value)
        got = got - (1 << 32) if got & (1 << 31) else got
        want = wrap32(acc + sum(a * b for a, b in zip(x, w)))
        assert got == want, f"case {n}: acc {acc}, x {x}, w {w}: y {got}, want {want}"
