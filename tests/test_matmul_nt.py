"""The product of two int8 activations with a transpose (compiler.gemm_kernels.matmul_nt, C = requant(A @
X^T)): X is loaded as weight blocks as it lies in DRAM. Golden against the natural numpy reference
(np.matmul), ISS and TLM bit-exact with golden, on shapes with tails; bad shapes give one line. The RTL
runs the `matmul_nt` example with every other example in tests/test_tlm_vs_rtl.py."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompileError
from compiler.examples import make_case
from compiler.gemm_ops import GEMM_OPERATORS
from compiler.gemm_kernels import matmul_nt
from compiler.tensor import tensor
from cosim import models
from hw.config import load_config


@pytest.mark.parametrize("config, params", [
    ("default", {"M": 8, "K": 16, "N": 8, "shift": 0}),      # one head of the digits transformer: Q K^T
    ("default", {"M": 24, "K": 40, "N": 33, "shift": 7}),    # tails in every dimension
    ("small", {"M": 9, "K": 20, "N": 13, "shift": 16}),      # a rounding term wider than the immediate
])
def test_golden_reference_iss_tlm_agree(config: str, params: dict) -> None:
    cfg = load_config(config)
    op = GEMM_OPERATORS["matmul_nt"]
    arrays = op.random_inputs(np.random.default_rng(2), params)
    a, x = arrays["A"].astype(np.int64), arrays["X"].astype(np.int64)
    want = np.clip((a @ x.T + ((1 << params["shift"]) >> 1)) >> params["shift"], -128, 127)
    assert np.array_equal(op.run(cfg, arrays, params), want.astype(np.int8))
    case = make_case("matmul_nt", cfg, params, seed=3)
    for run in (models.iss, models.tlm):
        r = run(case.program)
        assert r.error is None and models.first_mismatch(case.program.expected, r.outputs) is None, run


def test_bad_shapes_give_one_line() -> None:
    cfg = load_config("small")
    t8 = lambda *s: tensor(s, "int8")  # noqa: E731
    with pytest.raises(CompileError, match=r"X.*has 12 rows.*multiple of 8"):
        matmul_nt.run_golden(cfg, {"A": t8(1, 2, 4, 1, 8), "X": t8(1, 2, 12, 1, 8), "C": t8(1, 2, 4, 1, 8)})
    with pytest.raises(CompileError, match=r"X.*with A's 2 column blocks"):
        matmul_nt.run_golden(cfg, {"A": t8(1, 2, 4, 1, 8), "X": t8(1, 3, 16, 1, 8), "C": t8(1, 2, 4, 1, 8)})
    with pytest.raises(CompileError, match=r"needs 80 entries of the input buffer.*has 64"):
        make_case("matmul_nt", cfg, {"M": 40, "N": 16})
    with pytest.raises(CompileError, match=r"needs 72 entries of the accumulator.*has 64"):
        make_case("matmul_nt", cfg, {"M": 24, "N": 17})
