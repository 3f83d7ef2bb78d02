"""Splitting a convolution across cores (compiler.conv_plan.core_tiles): every output tile on exactly one
core, a narrow layer split by rows with each core loading only its band of input rows, the results
bit-exact on golden, ISS, TLM and RTL, and the ResNet layer more than twice as fast on ``quad`` (that no
example is slower on ``quad`` than on one core: tests/test_quad_vs_one_core.py)."""

from __future__ import annotations

from math import ceil
from typing import Any

import numpy as np
import pytest

import compiler.gemm_kernels as gemm_kernels
from compiler.conv_plan import ConvPlan, ConvShape, balanced_split, core_tiles, plan_conv
from compiler.examples import make_case
from cosim.models import first_mismatch, iss, rtl, rtl_available
from hw.config import load_config
from sim.tlm import run_program


def _row_plan(shape: ConvShape, th: int, cores: int) -> ConvPlan:
    """One output-channel tile, whole rows of width, ``th``-row tiles, shared by ``cores`` cores."""
    return ConvPlan(shape, shape.ob, 1, th, shape.wo, 2, 2, 0, 0, balanced_split(shape.ob, 1),
                    balanced_split(shape.cb, shape.cb), balanced_split(shape.ho, ceil(shape.ho / th)),
                    balanced_split(shape.wo, 1), cores=cores)


@pytest.mark.parametrize("cores", [2, 3, 4])
@pytest.mark.parametrize("ho, th", [(13, 3), (7, 1), (5, 2), (3, 1)])
def test_every_tile_lands_on_one_core_in_contiguous_balanced_runs(cores: int, ho: int, th: int) -> None:
    shape = ConvShape(batch=2, cb=1, h=ho, w=5, ob=1, kh=3, kw=3, stride=1, pad=1)
    plan = _row_plan(shape, th, cores)
    every = [(n, o0, to, r0, t, c0, tw) for o0, to in plan.o_tiles for n in range(2) for r0, t in plan.h_tiles
             for c0, tw in plan.w_tiles]
    shares = [core_tiles(plan, 4, k) for k in range(4)]
    assert [t for s in shares for t in s] == every  # in order, each once
    sizes = [len(s) for s in shares[:cores]]
    assert max(sizes) - min(sizes) <= 1 and all(not s for s in shares[cores:])
    assert core_tiles(plan, 1, 0) == sorted(every)  # one core: image by image


def test_a_plan_never_shares_its_tiles_among_more_cores_than_the_config_has() -> None:
    shape = ConvShape(batch=1, cb=16, h=14, w=14, ob=16, kh=3, kw=3, stride=1, pad=1, bias=True, alu_passes=3)
    assert plan_conv(load_config("default"), shape).cores == 1
    quad = plan_conv(load_config("quad"), shape)
    assert 1 <= quad.cores <= 4 and quad.cores <= len(quad.o_tiles) * len(quad.h_tiles) * len(quad.w_tiles)


def _odd_row_case(monkeypatch) -> tuple[Any, ConvPlan]:
    """conv3x3 with 13 output rows in 5 row tiles (3, 3, 3, 2, 2 rows) on ``quad``: core 0 two tiles."""
    chosen: dict[str, ConvPlan] = {}

    def rows(cfg, shape):  # the tiling under test instead of the estimate's choice
        chosen["plan"] = _row_plan(shape, 3, cfg.num_cores)
        return chosen["plan"]

    monkeypatch.setattr(gemm_kernels, "plan_conv", rows)
    case = make_case("conv3x3", load_config("quad"), {"C": 16, "H": 13, "W": 11, "O": 16}, 0)
    return case, chosen["plan"]


def test_a_narrow_conv_split_by_odd_rows_is_bit_exact_and_each_core_loads_its_band(monkeypatch) -> None:
    """Golden, ISS and TLM equal the numpy reference, every core runs GEMMs, and each core reads fewer
    input bytes than the image."""
    case, plan = _odd_row_case(monkeypatch)
    assert len(plan.o_tiles) == 1 and len(plan.h_tiles) == 5 and plan.cores == 4
    ref = case.reference()
    assert ref is not None
    golden = case.golden()
    assert first_mismatch(ref, golden) is None
    r_iss = iss(case.program)
    assert r_iss.error is None and first_mismatch(golden, r_iss.outputs) is None
    r_tlm = run_program(case.program, raise_on_error=False)
    assert r_tlm.error is None and first_mismatch(golden, r_tlm.outputs) is None
    image_bytes = 13 * 11 * 16  # one channel block of the input
    per_core = r_tlm.extra["cores"]
    assert all(c["gemm_ops"] > 0 for c in per_core)
    weights = 9 * 256 + 16 * 1024  # at most the weights and the micro-ops beside the band
    for c in per_core[1:]:  # one tile each: its 3 rows (+2 halo), never the whole image
        assert c["dma_rd_bytes"] - weights < image_bytes


@pytest.mark.skipif(rtl_available() is not None, reason="no RTL simulator")
def test_the_odd_row_split_takes_as_many_cycles_on_the_rtl_as_on_the_tlm(monkeypatch) -> None:
    case, _ = _odd_row_case(monkeypatch)
    r_rtl = rtl([case.program], case.program.config)[0]
    r_tlm = run_program(case.program)
    assert r_rtl.error is None and first_mismatch(case.golden(), r_rtl.outputs) is None
    assert r_rtl.cycles == r_tlm.cycles


def test_the_resnet_layer_runs_at_least_3_5_times_faster_on_quad() -> None:
    # the plan counts the port's overlapped read latencies, so all four cores take output-channel tiles
    c1 = run_program(make_case("conv2d_resnet", load_config("default")).program).cycles
    c4 = run_program(make_case("conv2d_resnet", load_config("quad")).program).cycles
    assert c4 * 3.5 <= c1, (c4, c1)


@pytest.mark.parametrize("cfg, name, params", [("default", "dense", {"M": 1024, "K": 64, "N": 64}),
                                               ("small", "matmul", {})])
def test_a_window_of_whole_rows_is_one_load_row(cfg: str, name: str, params: dict[str, Any]) -> None:
    """A matmul or dense layer split by rows (on `default` 1,024 rows of two output blocks overflow the
    accumulator; `small`'s buffers split the example): each channel block's window is whole rows, one run
    in DRAM, so it is LOADed as one row of bursts, not one burst per image row. Bit-exact on golden, ISS
    and TLM, and the RTL takes the TLM's cycles."""
    from hw.isa import BUFFERS, Load

    case = make_case(name, load_config(cfg), params)
    prog = case.program
    inp = [i for i in prog.insns if isinstance(i, Load) and i.buf == BUFFERS["INP"]]
    m = params.get("M", 37)
    assert len(inp) > 1 and all(i.y_size == 1 for i in inp), [(i.y_size, i.x_size) for i in inp]
    assert max(i.x_size for i in inp) < m  # the rows are split: not the whole-plane LOAD
    golden = case.golden()
    assert first_mismatch(case.reference(), golden) is None
    r_iss = iss(prog)
    assert r_iss.error is None and first_mismatch(golden, r_iss.outputs) is None
    r_tlm = run_program(prog, raise_on_error=False)
    assert r_tlm.error is None and first_mismatch(golden, r_tlm.outputs) is None
    if rtl_available() is None:
        r_rtl = rtl([prog], prog.config)[0]
        assert r_rtl.error is None and first_mismatch(golden, r_rtl.outputs) is None
        assert r_rtl.cycles == r_tlm.cycles
