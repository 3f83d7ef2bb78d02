"""Multi-head self-attention as one kernel (compiler/attention.py): golden bit-exact with the natural numpy
reference (np.matmul, the rescale of compiler.fixed_point and the int64 softmax reference: no packing, no
micro-ops, no transpose trick), ISS and TLM bit-exact with golden, on every config; its error against
the same attention computed in float from the same int8 weights; bad parameters give one line. The RTL
runs the `attention` example with every other example in tests/test_tlm_vs_rtl.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler.attention import DEFAULT_SCALES, attention, attention_args, attention_reference
from compiler.errors import CompileError
from compiler.examples import make_case
from compiler.gemm_ops import GEMM_OPERATORS
from compiler.tensor import tensor
from cosim import models
from hw.config import load_config


@pytest.mark.parametrize("config", ["default", "small", "quad"])
def test_golden_reference_iss_tlm_agree(config: str) -> None:
    for seed in (0, 1):
        case = make_case("attention", config, seed=seed)
        ref, gold = case.reference(), case.golden()
        assert np.array_equal(ref["Y"], gold["Y"]) and np.unique(gold["Y"]).size > 10
        for run in (models.iss, models.tlm):
            r = run(case.program)
            assert r.error is None and models.first_mismatch(case.program.expected, r.outputs) is None, run


def _float_attention(x: np.ndarray, w: dict, heads: int, s: dict) -> np.ndarray:
    """The same composite in float64 from the same int8 parameters: no rounding, the real softmax."""
    f = {k: v.astype(np.float64) for k, v in w.items()}
    q = (x @ f["wq"].T + f["bq"]) * s["s_q"]
    k = (x @ f["wk"].T + f["bk"]) * s["s_k"]
    v = (x @ f["wv"].T + f["bv"]) * s["s_v"]
    dh = x.shape[1] // heads
    ctx = np.zeros_like(q)
    for h in range(heads):
        c = slice(h * dh, (h + 1) * dh)
        logits = (q[:, c] @ k[:, c].T) * s["s_logit"] / 256      # (queries, keys), real units
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        ctx[:, c] = 128 * (e / e.sum(axis=1, keepdims=True)) @ v[:, c] * s["s_ctx"]
    return np.clip((ctx @ f["wo"].T + f["bo"]) * s["s_out"], -128, 127)


def test_error_against_float_attention() -> None:
    """Over 20 random token sets (default config's shapes): the int8 pipeline (four int8 roundings of
    intermediates, the Q7 probabilities) within 1.5 output LSBs of float: measured max 1.48, mean 0.31."""
    op = GEMM_OPERATORS["attention"]
    params = {"tokens": 8, "D": 32, "heads": 2}
    worst, means = 0.0, []
    for seed in range(20):
        a = op.random_inputs(np.random.default_rng(seed), params)
        got = attention_reference(a["x"], a, 2, DEFAULT_SCALES)
        real = _float_attention(a["x"].astype(np.float64), a, 2, DEFAULT_SCALES)
        err = np.abs(got - real)
        worst, means = max(worst, float(err.max())), means + [float(err.mean())]
    assert worst < 1.6 and float(np.mean(means)) < 0.35, (worst, float(np.mean(means)))


def test_bad_parameters_give_one_line() -> None:
    cfg = load_config("default")
    rng = np.random.default_rng(0)
    w = {k: rng.integers(-9, 9, size=(32, 32)).astype(np.int8) for k in ("wq", "wk", "wv", "wo")}
    w.update({k: np.zeros(32, dtype=np.int32) for k in ("bq", "bk", "bv", "bo")})
    args = attention_args(np.zeros((8, 32), dtype=np.int8), w, cfg.block)
    y = tensor((1, 2, 8, 1, 16), "int8")
    with pytest.raises(CompileError, match=r"3 heads over 32 features, 10.6667 each: a head must be a whole number"):
        attention.run_golden(cfg, {**args, "Y": y, "heads": 3})
    with pytest.raises(CompileError, match=r"tokens.*must be an integer 1\.\.16"):
        attention.run_golden(cfg, {**args, "Y": y, "tokens": 17})
    with pytest.raises(CompileError, match=r"s_logit.*must be a number"):
        attention.run_golden(cfg, {**args, "Y": y, "s_logit": 0.0})
    with pytest.raises(CompileError, match=r"W.*must be int8"):
        attention.run_golden(cfg, {**args, "W": args["W"][:-16], "Y": y})
    assert math.isclose(DEFAULT_SCALES["s_logit"], 0.011)
