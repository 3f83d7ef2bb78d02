"""The digits transformer in int8 (compiler/networks/digits_transformer_int8.py): calibrated on the
training split, its integer forward pass (the operators' references, bit-exact with their kernels) is
within 2 points of the float model on the whole test split (measured: 96.94 % both)."""

from __future__ import annotations

import numpy as np

from compiler.networks import digits
from compiler.networks import digits_transformer_int8 as Q


def _params() -> dict[str, np.ndarray]:
    with np.load(Q.T_WEIGHTS_PATH, allow_pickle=False) as z:
        return {k[:-len("_float")]: z[k] for k in z.files if k.endswith("_float")}


def test_int8_accuracy_is_within_two_points_of_float_on_the_test_split() -> None:
    train, _ = digits.dataset("train")
    test, labels = digits.dataset("test")
    f, i = Q.evaluate(_params(), train, test, labels)
    assert f > 0.96 and abs(f - i) <= 0.02, (f, i)


def test_quantized_parameters_are_int8_and_scales_positive() -> None:
    train, _ = digits.dataset("train")
    q = Q.quantize(_params(), train[:64])
    for name in ("embed", "block.attn.q", "block.ffn1", "head"):
        assert q[name].dtype == np.int8 and np.abs(q[name]).max() == 127
    assert all(v > 0 for v in q["scales"].values()) and all(v > 0 for v in q["attn_scales"].values())
