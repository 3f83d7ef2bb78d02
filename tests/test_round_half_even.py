"""Requantization rounds half to even where an exact tie is reachable: the ALU steps of
:func:`compiler.fixed_point.alu_steps` (run with the ALU's own semantics) against exact rational
rounding of ``x * M * 2**-(31+n)`` (``np.rint``'s rule), and the golden ``rescale`` against the steps."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from compiler.fixed_point import (alu_steps, fixed_point, headroom, rescale, rescale_fixed, round_half_even, run_steps,
                                  tie_plan)


def _exact_rint(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """x * M/2**(31+n) rounded half to even, with Fractions (independent of the int64 code)."""
    out = []
    for xi, si in zip(np.ravel(x), np.ravel(np.broadcast_to(scale, np.shape(x)))):
        m, n = fixed_point(float(si))
        v = Fraction(int(xi) * m, 1 << (31 + n))
        fl = v.numerator // v.denominator
        rem = v - fl
        out.append(fl + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2) else 0))
    return np.array(out, dtype=np.int64).reshape(np.shape(x))


def _samples(bound: int, rng: np.random.Generator, e: int) -> np.ndarray:
    """Random values in [-bound, bound], every tie class near 0 and near the bound, and the ends."""
    step = 1 << max(e - 1, 0)
    ties = np.arange(-8, 9) * step
    top = (bound // step) * step - np.arange(0, 8) * step
    return np.unique(np.clip(np.concatenate([rng.integers(-bound, bound + 1, 4000), ties, top, -top, ties + 1, ties - 1,
                                             [bound, -bound, 0]]), -bound, bound))


# (scale, bound): power-of-two scales of an average pool / add, odd multipliers (0.75, 1.5, 3/64), and bounds up
# to the largest the steps allow (about 2**29 for 0.5)
TIE_CASES = [(0.25, 1020), (0.5, 383), (0.125, 4 * 255 * 2), (0.75, 5000), (1.5, 30000), (3 / 64, 1 << 20),
             (0.5, (1 << 29) - 1), (0.0625, 1 << 24), (2.0 ** -8, 1 << 12), (0.5, 1),
             (2.0 ** -12, 255 * 2 * 2048), (2.0 ** -14, 1 << 28)]


@pytest.mark.parametrize("scale,bound", TIE_CASES)
def test_tie_steps_round_half_to_even_exactly(scale: float, bound: int) -> None:
    m, n = fixed_point(scale)
    plan = tie_plan(m, n, bound)
    assert plan is not None, "a tie is reachable here"
    rng = np.random.default_rng(bound)
    x = _samples(bound, rng, 31 + n - ((m & -m).bit_length() - 1))  # ties at odd multiples of 2**(e-1)
    steps = alu_steps(scale, bound)
    assert [op for op, _ in steps] == ["SHR", "MULHR", "MULHR"]  # as many ops as half up
    got = run_steps(x.astype(np.int32), steps).astype(np.int64)
    want = _exact_rint(x, np.float64(scale))
    assert np.array_equal(got, want)
    assert np.array_equal(rescale(x, scale, bound), got)  # the golden half gives the same bits
    assert np.array_equal(np.rint(x * (m / 2.0 ** (31 + n))), want)  # and that is numpy's rint


def test_tie_steps_cover_every_value_of_a_small_bound() -> None:
    """Every x of an average pool's 4-position sum, scale 0.25 and 0.75: steps = rint, exhaustively."""
    x = np.arange(-1020, 1021)
    for scale in (0.25, 0.75, 0.375):
        got = run_steps(x.astype(np.int32), alu_steps(scale, 1020))
        assert np.array_equal(got, _exact_rint(x, np.float64(scale)))


@pytest.mark.parametrize("scale,bound", [(0.01, 1000), (0.3, 1 << 20), (3.0, 1000), (0.5, 0), (0.5, (1 << 31) - 1),
                                         (0.25, (1 << 31) - 1), (2.0 ** -31, 1 << 20),
                                         (2.0 ** -20, 1 << 25)])
def test_no_reachable_tie_keeps_the_half_up_steps(scale: float, bound: int) -> None:
    """Where no tie is reachable (or the bound leaves the steps no room: 0.5 or 0.25 at int32 bounds, 2**-20 with
    ties from 2**19 on) the steps are today's, rounding half up."""
    m, n = fixed_point(scale)
    assert tie_plan(m, n, bound) is None
    rng = np.random.default_rng(7)
    x = np.clip(np.concatenate([rng.integers(-bound, bound + 1, 2000), [bound, -bound]]), -bound, bound)
    got = run_steps(x.astype(np.int32), alu_steps(scale, bound))
    assert np.array_equal(got, rescale(x, scale, bound))
    assert np.array_equal(got, rescale_fixed(x, m, n, headroom(np.int64(n), bound)))  # the half-up R_B


def test_tie_reachability_follows_the_bound() -> None:
    """0.25 ties at x = 2 (mod 4): unreachable for |x| <= 1, reachable from 2 on; 3/64 (M = 3*2**29, n = 4)
    ties at odd multiples of 2**5."""
    m, n = fixed_point(0.25)
    assert tie_plan(m, n, 1) is None and tie_plan(m, n, 2) is not None
    m, n = fixed_point(3 / 64)
    assert tie_plan(m, n, 31) is None and tie_plan(m, n, 32) is not None
    assert tie_plan(*fixed_point(5.0), 1 << 20) is None  # an integer scale never ties


def test_per_channel_mixed_tie_and_plain_channels() -> None:
    """Per-channel scales, some with reachable ties, some without: one op sequence, each channel exact."""
    scales = np.array([0.25, 0.01, 0.5, 0.3, 1.5, 2.0 ** -12])
    bounds = np.array([1000, 1000, 400, 1 << 20, 3000, (1 << 31) - 1])
    steps = alu_steps(scales, bounds)
    assert [op for op, _ in steps] == ["SHR", "MULHR", "MULHR"]
    rng = np.random.default_rng(3)
    x = np.stack([np.clip(rng.integers(-b, b + 1, 3000, dtype=np.int64), -b, b) for b in bounds], axis=-1)
    x[:8] = bounds  # the bounds themselves, both signs
    x[8:16] = -bounds
    got = run_steps(x.astype(np.int32), steps)
    assert np.array_equal(rescale(x, scales, bounds), got)
    plain = [tie_plan(*fixed_point(float(s)), int(b)) is None for s, b in zip(scales, bounds)]
    assert plain == [False, True, False, True, False, True]
    for c in np.flatnonzero(~np.array(plain)):
        assert np.array_equal(got[:, c], _exact_rint(x[:, c], np.float64(scales[c])))
    # the plain channels keep their half-up results
    for c in np.flatnonzero(plain):
        m, n = fixed_point(float(scales[c]))
        assert np.array_equal(got[:, c], rescale_fixed(x[:, c], m, n, headroom(np.int64(n), int(bounds[c]))))


def test_a_plain_channel_without_rounding_shift_keeps_the_layer_half_up() -> None:
    """Scale 3.0 has no rounding shift (MULHR alone): a layer mixing it with a tie channel rounds half up."""
    scales, bounds = np.array([0.25, 3.0]), np.array([1000, 1000])
    steps = alu_steps(scales, bounds)
    x = np.stack([np.arange(-1000, 1001)] * 2, axis=-1)
    got = run_steps(x.astype(np.int32), steps)
    assert np.array_equal(got, rescale(x, scales, bounds))
    assert got[1002, 0] == 1 and x[1002, 0] == 2  # 2 * 0.25 = 0.5 rounds up here


def test_round_half_even_helper_matches_fractions() -> None:
    rng = np.random.default_rng(11)
    x = rng.integers(-(1 << 31), 1 << 31, 500)
    for scale in (0.5, 0.75, 3.0, 2.0 ** -31, 1e-5, 2.0 ** 15):
        m, n = fixed_point(scale)
        assert np.array_equal(round_half_even(x, m, n), _exact_rint(x, np.float64(scale)))
