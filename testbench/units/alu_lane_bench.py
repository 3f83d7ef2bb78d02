"""cocotb bench of hw/rtl/alu_lane.v (one lane of the vector ALU) against the scalar meaning of
every ALU op (``hw.isa_semantics.alu_scalar``, docs/microarch.md "Data semantics").

Edge operands (0, ±1, the 32-bit extremes, shift amounts around 31/32, the Q31 multipliers MULHR
is made for) crossed with each other, then seeded random ones, op by op.
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.triggers import Timer

from hw.isa import ALU_OPS
from hw.isa_semantics import INT32_MAX, INT32_MIN, alu_scalar
from testbench.units.bench_setup import bench_rng

EDGES = [0, 1, -1, 2, -2, 5, 31, 32, 33, -31, -32, -33, 127, -128, 1 << 15, -(1 << 15), (1 << 30) - 1, 1 << 30,
         -(1 << 30), INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1, 0x5555_5555, -0x5555_5556]


def signed(v: int) -> int:
    return v - (1 << 32) if v & (1 << 31) else v


async def lane(dut: Any, op: int, x: int, s: int) -> int:
    dut.op.value = op
    dut.x.value = x & 0xFFFF_FFFF
    dut.s.value = s & 0xFFFF_FFFF
    await Timer(1, unit="ns")
    return signed(int(dut.y.value))


@cocotb.test()
async def every_op_on_edge_and_random_operands(dut: Any) -> None:
    rng = bench_rng("every_op_on_edge_and_random_operands")
    for name, op in ALU_OPS.items():
        pairs = [(x, s) for x in EDGES for s in EDGES]
        pairs += [(rng.randint(INT32_MIN, INT32_MAX), rng.choice([rng.randint(INT32_MIN, INT32_MAX),
                                                                  rng.randint(-40, 40)])) for _ in range(400)]
        for x, s in pairs:
            got = await lane(dut, op, x, s)
            want = alu_scalar(op, x, s)
            assert got == want, f"{name}(x={x}, s={s}): lane gives {got}, want {want}"
