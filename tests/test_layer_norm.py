"""The integer layer norm operator (compiler/layer_norm.py): golden bit-exact with the int64 numpy
reference written apart, ISS and TLM bit-exact with golden, on random and edge tokens; its error
against the float layer norm in output LSBs; bad parameters give one clear line. The RTL runs the
`layer_norm` example with every other example in tests/test_tlm_vs_rtl.py (outputs and cycles)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompileError
from compiler.examples import _attach, make_case
from compiler.layer_norm import (layer_norm_constants, layer_norm_float, layer_norm_reference, rows_needed)
from cosim import models
from hw.config import load_config


def _edge_tokens(n: int, lanes: int, bound: int, rng: np.random.Generator) -> np.ndarray:
    """Tokens (one per lane) that reach the corners: all equal (no spread), one feature apart, the
    widest spread, a tiny spread, an arithmetic ramp, the bound's extremes."""
    a = rng.integers(-bound, bound + 1, size=(n, lanes)).astype(np.int64)
    alt = np.where(np.arange(n) % 2 == 0, bound, -bound)
    cols = [np.full(n, 7), np.r_[1, np.zeros(n - 1)], alt, np.arange(n) % 2, np.arange(n) - n // 2,
            np.full(n, -bound), np.r_[bound, np.full(n - 1, -bound)], np.zeros(n)]
    for k, c in enumerate(cols[:lanes]):
        a[:, k] = c
    return a.astype(np.int32)


def _constants(n: int, lanes: int, rng: np.random.Generator, in_scale: float, out_scale: float, bound: int
               ) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    gamma, beta = rng.uniform(0.5, 1.5, n), rng.uniform(-0.5, 0.5, n)
    k = layer_norm_constants(gamma, beta, in_scale, out_scale, bound)
    rep = lambda v: np.repeat(np.asarray(v)[:, None], lanes, axis=1).astype(np.int32)  # noqa: E731
    return k, rep(k["G"]), rep(k["Bb"]), np.stack([gamma, beta])


@pytest.mark.parametrize("config", ["default", "small"])
def test_golden_reference_iss_tlm_agree_and_error_is_about_half_a_lsb(config: str) -> None:
    cfg = load_config(config)
    n = 16 if config == "default" else 8
    rng = np.random.default_rng(3)
    worst, means = 0.0, []
    for k, (in_scale, out_scale, bound) in enumerate([(0.05, 1 / 32, 127), (1e-3, 1 / 16, 30000),
                                                      (1.0, 1 / 32, 127), (2e-5, 1 / 32, 1 << 20)]):
        consts, g, bb, gb = _constants(n, cfg.lanes, rng, in_scale, out_scale, bound)
        params = {"n": n, "shape": (n, cfg.lanes), "eps": consts["eps"], "eps_frac": consts["eps_frac"],
                  "shift": consts["shift"]}
        case = make_case("layer_norm", cfg, params)
        a = _edge_tokens(n, cfg.lanes, bound, rng) if k % 2 == 0 else \
            rng.integers(-bound, bound + 1, size=(n, cfg.lanes)).astype(np.int32)
        case.user_inputs.update({"A": a, "G": g, "Bb": bb})
        golden = case.golden()["C"].reshape(n, cfg.lanes)
        ref = layer_norm_reference(a, g, bb, **params).reshape(n, cfg.lanes).astype(np.int8)
        assert np.array_equal(golden, ref), (k, np.argwhere(golden != ref)[:4])
        _attach(case)
        for run in (models.iss, models.tlm):
            r = run(case.program)
            assert r.error is None and models.first_mismatch(case.program.expected, r.outputs) is None, run
        real = np.clip(layer_norm_float(a * in_scale, gb[0], gb[1]) / out_scale, -128, 127)
        err = np.abs(golden.astype(np.float64) - real)
        worst, means = max(worst, float(err.max())), means + [float(err.mean())]
    # rounding to the int8 grid alone is up to 0.5 LSB; the reciprocal square root adds a few hundredths
    assert worst < 0.6 and max(means) < 0.35, (worst, means)


def test_error_against_float_over_many_tokens() -> None:
    """The reference (bit-exact with the kernel above) over 4,000 random tokens of 32 features, every
    spread from a few LSBs to the bound: max error 0.52 LSB, mean 0.25 when measured."""
    rng = np.random.default_rng(9)
    n, lanes, in_scale, out_scale, bound = 32, 4000, 0.05, 1 / 32, 127
    consts, g, bb, gb = _constants(n, lanes, rng, in_scale, out_scale, bound)
    spread = rng.integers(1, bound + 1, size=lanes)
    a = np.clip(rng.normal(0, 1, size=(n, lanes)) * spread + rng.integers(-20, 21, size=lanes),
                -bound, bound).astype(np.int64)
    out = layer_norm_reference(a, g, bb, n=n, eps=consts["eps"], eps_frac=consts["eps_frac"],
                               shift=consts["shift"]).reshape(n, lanes)
    real = np.clip(layer_norm_float(a * in_scale, gb[0], gb[1]) / out_scale, -128, 127)
    err = np.abs(out - real)
    assert err.max() < 0.6 and err.mean() < 0.27, (err.max(), err.mean())


def test_bad_parameters_give_one_line() -> None:
    cfg = load_config("small")
    with pytest.raises(CompileError, match=r"n.*must be an integer 1\.\.256"):
        make_case("layer_norm", cfg, {"n": 0})
    with pytest.raises(CompileError, match=r"is not \(n, lanes\) = \(8, 8\)"):
        make_case("layer_norm", cfg, {"n": 8, "shape": (16, 8)})
    with pytest.raises(CompileError, match=r"needs \d+ accumulator vectors"):
        make_case("layer_norm", cfg, {"n": 14, "shape": (14, 8)})
    with pytest.raises(CompileError, match=r"eps.*must be an integer 0\.\."):
        make_case("layer_norm", cfg, {"eps": -1})
    assert rows_needed(13) <= cfg.acc_depth < rows_needed(14)
    with pytest.raises(ValueError, match="too large"):
        layer_norm_constants(np.ones(32), np.zeros(32), 0.05, 1 / 32, 1 << 26)
