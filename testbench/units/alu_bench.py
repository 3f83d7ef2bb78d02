"""cocotb bench of hw/rtl/alu.v (the vector ALU: LANES lanes, the operand an immediate sign-extended
from 16 bits or the source vector's lane) against the scalar meaning of every ALU op.

Each check drives random destination and source vectors and an op; every lane must give
``op(dst[l], imm or src[l])`` (so a lane wired to another's operand, or an immediate not
sign-extended, shows).
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.triggers import Timer

from hw.isa import ALU_OPS
from hw.isa_semantics import INT32_MAX, INT32_MIN, alu_scalar
from testbench.units.bench_setup import bench_config, bench_rng


def pack(values: list[int]) -> int:
    return sum((v & 0xFFFF_FFFF) << (32 * k) for k, v in enumerate(values))


def unpack(word: int, lanes: int) -> list[int]:
    out = []
    for k in range(lanes):
        v = (word >> (32 * k)) & 0xFFFF_FFFF
        out.append(v - (1 << 32) if v & (1 << 31) else v)
    return out


@cocotb.test()
async def every_op_lane_by_lane(dut: Any) -> None:
    lanes = bench_config().lanes
    rng = bench_rng("every_op_lane_by_lane")
    for _ in range(60):
        for name, op in ALU_OPS.items():
            dst = [rng.randint(INT32_MIN, INT32_MAX) for _ in range(lanes)]
            src = [rng.choice([rng.randint(INT32_MIN, INT32_MAX), rng.randint(-40, 40)]) for _ in range(lanes)]
            use_imm = rng.random() < 0.5
            imm = rng.choice([rng.randint(-(1 << 15), (1 << 15) - 1), -1, -(1 << 15), (1 << 15) - 1, 31])
            dut.op.value = op
            dut.use_imm.value = int(use_imm)
            dut.imm.value = imm & 0xFFFF
            dut.dst.value = pack(dst)
            dut.src.value = pack(src)
            await Timer(1, unit="ns")
            got = unpack(int(dut.result.value), lanes)
            want = [alu_scalar(op, x, imm if use_imm else s) for x, s in zip(dst, src)]
            assert got == want, f"{name} use_imm={use_imm} imm={imm}: lanes {got}, want {want}"
