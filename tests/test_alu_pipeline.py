"""The ALU's pipeline on the synchronous accumulator SRAM keeps the sequential semantics.

A kernel whose ALU instructions each read what their previous iteration wrote (a prefix
sum inside one instruction, tests/kernels/prefix_sum.py) runs on golden, TLM and RTL, with
LOAD and STORE of neighbouring tiles taking the buffer's ports meanwhile: all three give the
plain numpy running sum, and the TLM gives the RTL's cycles and counters. Hand-built
hazards at instruction level (distance 1 and 2, a destination read back every iteration,
conflicts with padding and store reads) are in tests/units/test_compute_unit.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hw.config import load_config
from cosim.models import first_mismatch, make_job, rtl_available, run_golden, run_rtl, run_tlm

KERNEL = Path(__file__).parent / "kernels" / "prefix_sum.py"
# (config, vectors, tile): tails, a one-vector tail, a single tile
SHAPES = [("small", 37, 8), ("small", 17, 4), ("default", 50, 16), ("default", 9, 16)]


def job(cfg_name: str, nvec: int, tile: int, seed: int = 0):
    cfg = load_config(cfg_name)
    shape = f"{nvec}x{cfg.lanes}"
    return make_job(f"{KERNEL}:prefix_sum", cfg, {"X": shape, "Y": f"{shape}:int8", "tile": tile}, seed)


@pytest.fixture(scope="module")
def jobs():
    return [job(*s, seed=k) for k, s in enumerate(SHAPES)]


def test_golden_is_the_running_sum(jobs) -> None:
    for j in jobs:
        assert j.reference is not None
        assert run_golden(j).extra["mismatch"] is None, j.kernel
        x = j.program.inputs["X"].astype(np.int64)
        want = np.cumsum(x, axis=0).astype(np.int32).astype(np.int8)
        assert np.array_equal(j.expected["Y"], want)


def test_tlm_matches_golden(jobs) -> None:
    for j in jobs:
        r = run_tlm(j)
        assert r.error is None and first_mismatch(j.expected, r.outputs) is None, (j.kernel, r.error)


@pytest.mark.skipif(rtl_available() is not None, reason=str(rtl_available()))
@pytest.mark.parametrize("cfg_name", sorted({s[0] for s in SHAPES}))
def test_rtl_matches_golden_and_tlm_cycles(jobs, cfg_name: str) -> None:
    mine = [j for j, s in zip(jobs, SHAPES) if s[0] == cfg_name]
    for j, r in zip(mine, run_rtl(mine)):
        t = run_tlm(j)
        assert r.error is None and first_mismatch(j.expected, r.outputs) is None, (cfg_name, r.error)
        assert (t.cycles, t.counters) == (r.cycles, r.counters), cfg_name


def test_the_kernel_meets_port_conflicts(jobs, monkeypatch) -> None:
    """Guard: these runs do exercise the frozen pipeline (the ALU waiting for LOAD's writes
    and STORE's reads): without the port plan's conflicts the compute unit would be busy for
    fewer cycles."""
    from sim.tlm.acc_buffer import AccPorts

    real = [run_tlm(j).counters["compute_busy"] for j in jobs]
    monkeypatch.setattr(AccPorts, "blocked", lambda self, lo, hi, use_src: 0)
    free = [run_tlm(j).counters["compute_busy"] for j in jobs]
    assert all(f <= r for f, r in zip(free, real))
    assert sum(f < r for f, r in zip(free, real)) >= 2, (real, free)
