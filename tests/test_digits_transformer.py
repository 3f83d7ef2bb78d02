"""The digits transformer's float model and training: the nonlinear functions from basic operations
agree with numpy's, the backward pass with finite differences, the training reproduces the committed
weights bit for bit, and the float model classifies the test split."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from compiler.networks import digits
from compiler.networks import digits_transformer as T
from compiler.networks import train_digits_transformer as train
from compiler.networks import transformer as tf

ROOT = Path(__file__).resolve().parents[1]


def test_exp_softmax_and_gelu_agree_with_their_definitions() -> None:
    x = np.linspace(-60.0, 10.0, 7001)
    assert np.max(np.abs(tf.exp(x) / np.exp(x) - 1.0)) < 1e-12
    assert tf.exp(np.array([-800.0]))[0] == 0.0
    s = np.random.RandomState(0).normal(0, 5, size=(6, 8))
    ref = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(tf.softmax(s), ref / ref.sum(axis=1, keepdims=True), rtol=1e-12)
    erf = np.vectorize(math.erf)
    u = np.linspace(-4, 4, 801)
    gelu = 0.5 * u * (1 + erf(u / math.sqrt(2)))
    assert np.max(np.abs(tf.gelu(u) - gelu)) < 0.02  # I-BERT's polynomial: within 0.02 of the exact GELU
    assert np.array_equal(tf.gelu(np.array([-10.0, 0.0, 10.0])), np.array([0.0, 0.0, 10.0]))
    h = 1e-6
    np.testing.assert_allclose(tf.gelu_grad(u), (tf.gelu(u + h) - tf.gelu(u - h)) / (2 * h), atol=1e-6)


def test_backward_pass_matches_finite_differences() -> None:
    rs = np.random.RandomState(3)
    p = {k: v + rs.normal(0, 0.05, size=v.shape) for k, v in tf.init_params(T.PARAMS, rs).items()}
    x, labels = rs.uniform(0, 112 / 128, size=(3, T.TOKENS, T.TOKEN_PIXELS)), rs.randint(0, 10, size=3)
    _, grads = train.loss_and_grads(p, x, labels)
    assert set(grads) == set(T.PARAMS)
    for name in T.PARAMS:
        flat = p[name].reshape(-1)
        for i in rs.choice(flat.size, min(3, flat.size), replace=False):
            old, h = flat[i], 1e-6
            flat[i] = old + h
            up = train.loss_and_grads(p, x, labels)[0]
            flat[i] = old - h
            down = train.loss_and_grads(p, x, labels)[0]
            flat[i] = old
            num, ana = (up - down) / (2 * h), grads[name].reshape(-1)[i]
            assert abs(num - ana) <= 1e-4 * max(1e-3, abs(num) + abs(ana)), (name, i, num, ana)


def test_training_reproduces_the_committed_weights(tmp_path: Path) -> None:
    out = tmp_path / "t.npz"
    r = subprocess.run([sys.executable, "-m", "compiler.networks.train_digits_transformer", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    with np.load(train.WEIGHTS_PATH) as committed, np.load(out) as fresh:
        assert sorted(committed.files) == sorted(fresh.files) == sorted([f"{k}_float" for k in T.PARAMS] + ["meta"])
        for key in committed.files:
            np.testing.assert_array_equal(committed[key], fresh[key], err_msg=key)


def test_float_model_classifies_the_test_split() -> None:
    with np.load(train.WEIGHTS_PATH) as f:
        params = {k: f[f"{k}_float"] for k in T.PARAMS}
        meta = json.loads(str(f["meta"]))
    images, labels = digits.dataset("test")
    acc = float(np.mean(np.argmax(T.float_logits(params, images), axis=1) == labels))
    assert acc == meta["float_accuracy_test"] and acc >= 0.95


def test_training_bad_arguments(tmp_path: Path) -> None:
    for argv, words in ([["--out", str(tmp_path / "no" / "x.npz")], "does not exist"],
                        [["--out", str(tmp_path)], "is a folder"], [["--epochs", "0"], "at least 1"]):
        r = subprocess.run([sys.executable, "-m", "compiler.networks.train_digits_transformer", *argv], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stdout == "", argv
        assert len(r.stderr.splitlines()) == 1 and words in r.stderr, r.stderr
