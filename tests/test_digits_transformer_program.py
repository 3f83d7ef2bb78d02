"""The whole digits transformer as one Program (compiler/networks/digits_transformer_program.py): golden,
ISS, TLM and RTL logits equal the int8 model's integer forward pass bit for bit, TLM = RTL cycles, the
per-layer sections, the logits' byte decoding, bad input, and (COSIM_NETWORKS=full) the whole test split
on the TLM within 2 points of the float model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler.errors import CompileError, ConfigFitError
from compiler.networks import NETWORKS, digits
from compiler.networks import digits_transformer_program as X
from cosim import models
from cosim.network_run import make_net_case, run_network
from hw.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def _case(images: int, config: str = "default"):  # noqa: ANN202 - a cosim.network_run.NetCase
    return make_net_case(NETWORKS["digits_transformer"], load_config(config), images)


def test_golden_iss_tlm_equal_the_reference_with_one_row_per_layer() -> None:
    case = _case(4)
    rep, sections = run_network(case, ["golden", "iss", "tlm"])
    assert rep["match"] and not rep["errors"], rep["mismatch"]
    assert case.reference.dtype == np.int64 and case.reference.shape == (4, 10)
    assert np.abs(case.reference).max() > 1 << 15  # int32 logits: a byte or two would not carry them
    assert [row["name"] for row in rep["layers"]] == list(X.SECTIONS)
    assert rep["layers_match_counters"] and rep["layer_cycles_sum"] == rep["cycles"]["tlm"]
    for name in ("norm1", "softmax", "attention"):
        assert next(r for r in rep["layers"] if r["name"] == name)["cycles"] > 0


def test_four_cores_split_the_images() -> None:
    case = _case(6, "quad")
    rep, _ = run_network(case, ["golden", "tlm"])
    assert rep["match"] and not rep["errors"], rep["mismatch"]
    assert case.program.num_cores == 4 and len(set(rep["program"]["cores"])) == 2  # 2, 2, 1, 1 images


def test_a_block_too_small_is_one_line() -> None:
    """A config the model cannot use (not a fault of the model): ConfigFitError, which `cosim sim` reports
    as a skipped row."""
    with pytest.raises(ConfigFitError, match="config 'small' has a block of 8; the model needs a block"):
        X.compile_transformer(X.model(), "small", 1)


def test_rtl_bit_and_cycle_exact_on_two_images() -> None:
    if models.rtl_available():
        pytest.skip(models.rtl_available())
    rep, _ = run_network(_case(2), ["tlm", "rtl"])
    assert rep["match"] and not rep["errors"], rep["mismatch"]
    assert rep["cycles"]["tlm_equals_rtl"] and rep["cycles"]["rtl"] == rep["cycles"]["tlm"]


def test_logits_bytes_round_trip() -> None:
    rng = np.random.default_rng(5)
    want = rng.integers(-(1 << 31), 1 << 31, size=(3, 10), dtype=np.int64)
    want[0, :4] = [-(1 << 31), (1 << 31) - 1, -1, 0]
    raw = np.zeros((3, X.LOGIT_BYTES, 16), dtype=np.int8)
    for j in range(X.LOGIT_BYTES):  # what the kernel stores: each lane narrowed like a C cast
        raw[:, j, :10] = ((want >> (8 * j)) & 0xFF).astype(np.uint8).view(np.int8)
    np.testing.assert_array_equal(X.logits_from_bytes(raw.reshape(-1, 16), 3, 16), want)


def test_bad_images_and_batch_give_one_line() -> None:
    tp = X.compile_transformer(X.model(), "default", 2)
    with pytest.raises(CompileError, match=r"input 'image' must be int8 of shape \(2, 1, 8, 8\)"):
        tp.set_inputs({"image": np.zeros((3, 1, 8, 8), np.int8)})
    with pytest.raises(CompileError, match="batch 0 must be an integer"):
        X.compile_transformer(X.model(), "default", 0)


def test_cosim_net_json_tlm() -> None:
    out = subprocess.run([sys.executable, "-m", "cosim.cli", "net", "digits_transformer", "--model", "tlm",
                          "--images", "2", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["match"] and rep["images"] == 2 and rep["accuracy"]["float"] is not None


@pytest.mark.skipif(os.environ.get("COSIM_NETWORKS") != "full",
                    reason="the whole test split on the TLM takes about 75 s; run with COSIM_NETWORKS=full")
def test_whole_test_split_on_the_tlm_within_two_points_of_float() -> None:
    images, _ = digits.dataset("test")
    case = _case(len(images))
    rep, _ = run_network(case, ["tlm"])
    assert rep["match"], rep["mismatch"]
    assert rep["accuracy"]["tlm"] >= rep["accuracy"]["float"] - 0.02
