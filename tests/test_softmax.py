"""The integer softmax operator (compiler/softmax.py): golden bit-exact with the int64 numpy reference
written apart, ISS and TLM bit-exact with golden, on random and edge logits; its error against the
real softmax in output LSBs; bad parameters give one clear line. The RTL runs the `softmax` example
with every other example in tests/test_tlm_vs_rtl.py (outputs and cycles)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompileError
from compiler.examples import _attach, make_case
from compiler.softmax import MAX_ROW, rows_needed, softmax_float, softmax_reference
from cosim import models
from hw.config import load_config

N = 16


def _edge_logits(lanes: int, rng: np.random.Generator) -> np.ndarray:
    """Rows (one per lane) that reach the corners: all equal, one dominant, the clamp, wide ones,
    two tied maxima, int32 extremes (the subtraction of the max wraps nowhere: the range is bounded)."""
    a = rng.integers(-2000, 2001, size=(N, lanes)).astype(np.int64)
    cols = [np.zeros(N), np.full(N, -5000), np.r_[4000, np.full(N - 1, -4000)],
            np.r_[np.full(N - 1, -(1 << 20)), 1 << 20], np.r_[7, 7, np.full(N - 2, -300)],
            np.arange(N) * 177, np.arange(N) * -2000, np.r_[(1 << 30), np.full(N - 1, (1 << 30) - 4096)]]
    for k, c in enumerate(cols[:lanes]):
        a[:, k] = c
    return a.astype(np.int32)


@pytest.mark.parametrize("config", ["default", "small"])
def test_golden_reference_iss_tlm_agree_and_error_is_under_a_lsb(config: str) -> None:
    cfg = load_config(config)
    case = make_case("softmax", cfg)
    rng = np.random.default_rng(5)
    worst, means = 0.0, []
    for k in range(4):
        a = _edge_logits(cfg.lanes, rng) if k == 0 else \
            rng.integers(-(600 << k), (600 << k) + 1, size=(N, cfg.lanes)).astype(np.int32)
        case.user_inputs["A"] = a
        golden = case.golden()["C"].reshape(N, cfg.lanes)
        ref = softmax_reference(a, n=N).reshape(N, cfg.lanes).astype(np.int8)
        assert np.array_equal(golden, ref), (k, np.argwhere(golden != ref)[:4])
        _attach(case)
        for run in (models.iss, models.tlm):
            r = run(case.program)
            assert r.error is None and models.first_mismatch(case.program.expected, r.outputs) is None, run
        # against the real softmax clipped to int8's top (a probability of 1.0 is 128, stored as 127)
        err = np.abs(golden.astype(np.float64) - np.minimum(softmax_float(a, N), 127))
        worst, means = max(worst, float(err.max())), means + [float(err.mean())]
        assert golden.min() >= 0 and np.all(np.abs(golden.astype(int).sum(axis=0) - 128) <= N // 2)
    # rounding to Q7 alone is up to 0.5 LSB: the exp polynomial and the reciprocal add a few hundredths
    assert worst < 0.6 and max(means) < 0.3, (worst, means)


def test_reciprocal_by_clz_and_newton_is_exact_to_a_lsb_of_r() -> None:
    """Step 7's r = 2**38 / s, for sums over the whole range (one big element: s = e), against exact
    integer division: the Newton steps from the CLZ-normalized start leave at most 1 LSB."""
    from compiler.softmax import NEWTON_STEPS, Y0_A, Y0_B
    s = np.unique(np.r_[np.geomspace(1 << 21, (1 << 31) - 1, 3000).astype(np.int64), 1 << 22, 1 << 30,
                        (1 << 31) - 1, 3 << 21])
    k = np.array([32 - int(v).bit_length() for v in s], dtype=np.int64)
    m = s << (k - 1)
    mulhr = lambda u, v: (u * v + (1 << 30)) >> 31  # noqa: E731
    y = Y0_A - mulhr(m, Y0_B)
    for _ in range(NEWTON_STEPS):
        y = y + mulhr((1 << 31) - 4 * mulhr(m, y), y)
    r = y >> (23 - k)
    exact = (1 << 38) // s
    assert np.all(np.abs(r - exact) <= 1), s[np.abs(r - exact) > 1][:4]


@pytest.mark.parametrize("config", ["default", "small"])
def test_clz_buys_cycles_over_a_pure_alu_search(config: str) -> None:
    """The same softmax with the sum's leading zeros found by a five-round search of plain ALU ops:
    the same outputs on the ISS and the TLM, 46 more instructions and more cycles."""
    cfg = load_config(config)
    runs = {}
    for norm in ("clz", "search"):
        case = make_case("softmax", cfg, {"normalize": norm})
        tlm, iss = models.tlm(case.program), models.iss(case.program)
        for r in (tlm, iss):
            assert r.error is None and models.first_mismatch(case.program.expected, r.outputs) is None
        runs[norm] = (case.golden()["C"], len(case.program.insns), tlm.cycles)
    assert np.array_equal(runs["clz"][0], runs["search"][0])
    assert runs["search"][1] - runs["clz"][1] == 46 and runs["search"][2] > runs["clz"][2] + 200, runs


def test_bad_parameters_give_one_line() -> None:
    cfg = load_config("small")
    with pytest.raises(CompileError, match=r"param 'n'.*must be an integer 1\.\.511|n.*1\.\.511"):
        make_case("softmax", cfg, {"n": 0})
    with pytest.raises(CompileError, match=r"is not \(n, lanes\) = \(16, 8\)"):
        make_case("softmax", cfg, {"shape": (16, 16)})
    with pytest.raises(CompileError, match=r"needs 63 accumulator vectors|needs .* accumulator vectors"):
        make_case("softmax", cfg, {"n": 20, "shape": (20, 8)})
    with pytest.raises(CompileError, match=r"'fast' is not one of clz, search"):
        make_case("softmax", cfg, {"normalize": "fast"})
    assert rows_needed(17) <= cfg.acc_depth < rows_needed(18) and MAX_ROW * (1 << 22) < 1 << 31
