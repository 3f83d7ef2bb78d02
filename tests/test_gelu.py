"""The integer GELU operator (compiler/gelu.py): golden bit-exact with the int64 numpy reference written
apart, ISS and TLM bit-exact with golden, on random values and every input of small bounds; its error
against I-BERT's float GELU (and the exact erf GELU) in output LSBs; bad parameters give one clear line.
The RTL runs the `gelu` example with every other example in tests/test_tlm_vs_rtl.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler.errors import CompileError
from compiler.examples import _attach, make_case
from compiler.gelu import gelu_constants, gelu_float, gelu_reference
from cosim import models
from hw.config import load_config

SCALES = [(1 / 64, 1 / 32, 4096), (0.05, 1 / 16, 127), (1e-3, 1 / 32, 1 << 16), (2e-5, 1 / 64, 1 << 20),
          (0.5, 0.25, 100)]


@pytest.mark.parametrize("config", ["default", "small"])
def test_golden_reference_iss_tlm_agree(config: str) -> None:
    cfg = load_config(config)
    rng = np.random.default_rng(4)
    for k, (si, so, bound) in enumerate(SCALES[:3]):
        params = {"in_scale": si, "out_scale": so, "in_bound": bound, "shape": (3, 41)}
        if config == "small":
            params["tile"] = 3  # several tiles and a tail
        case = make_case("gelu", cfg, params)
        a = rng.integers(-bound, bound + 1, size=(3, 41)).astype(np.int32)
        a[0, :5] = [bound, -bound, 0, 1, -1]
        case.user_inputs["A"] = a
        golden = case.golden()["C"].reshape(-1)[:a.size]
        assert np.array_equal(golden, gelu_reference(a, si, so, bound).reshape(-1).astype(np.int8)), k
        _attach(case)
        for run in (models.iss, models.tlm):
            r = run(case.program)
            assert r.error is None and models.first_mismatch(case.program.expected, r.outputs) is None, (k, run)


@pytest.mark.parametrize("si, so, bound", SCALES)
def test_error_against_float_is_half_a_lsb(si: float, so: float, bound: int) -> None:
    """Every input of the bound: within 0.51 LSB of I-BERT's float GELU (rounding alone is 0.5), and
    I-BERT's polynomial itself within 0.02 of the exact GELU (in real units)."""
    x = np.arange(-bound, bound + 1)
    out = gelu_reference(x, si, so, bound)
    real = np.clip(gelu_float(x * si) / so, -128, 127)
    err = np.abs(out - real)
    inside = np.abs(real) < 127
    assert err.max() < 0.511 and err[inside].mean() < 0.26, (err.max(), err[inside].mean())
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x[::max(1, bound // 500)] * si])
    assert np.abs(gelu_float(x[::max(1, bound // 500)] * si) - exact).max() < 0.02


def test_bad_parameters_give_one_line() -> None:
    cfg = load_config("small")
    with pytest.raises(CompileError, match=r"in_scale.*must be positive"):
        make_case("gelu", cfg, {"in_scale": -1.0})
    with pytest.raises(CompileError, match=r"tile.*must be an integer 1\.\.9"):
        make_case("gelu", cfg, {"tile": 10})
    with pytest.raises(ValueError, match="outside 1..30"):
        gelu_constants(1 / 64, 1e-9, 4096)
