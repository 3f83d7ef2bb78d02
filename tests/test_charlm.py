"""charlm, the character-level language model of the Zen of Python: its text, vocabulary and held-out
split, the causal model's backward pass against finite differences, the training reproducing the
committed weights bit for bit, and the float model's greedy continuation and held-out scores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler.networks import charlm as C
from compiler.networks import train_charlm as train
from compiler.networks import transformer as tf

ROOT = Path(__file__).resolve().parents[1]


def _weights() -> tuple[dict[str, np.ndarray], dict]:
    with np.load(train.WEIGHTS_PATH) as f:
        return {k: f[f"{k}_float"] for k in C.params()}, json.loads(str(f["meta"]))


def test_text_vocabulary_and_split() -> None:
    t = C.text()
    assert len(t) == 856 and t.startswith("The Zen of Python, by Tim Peters\n\nBeautiful is better than ugly.")
    assert len(C.vocabulary()) == 45 and C.decode(C.encode(t)) == t
    train_part, held = C.split()
    assert train_part + held == t and held.count("\n") == C.HELD_OUT_LINES and len(held) == 264
    with pytest.raises(ValueError, match="character 'é' at position 2 is not in charlm's vocabulary"):
        C.encode("Beé")


def test_causal_backward_pass_matches_finite_differences() -> None:
    rs = np.random.RandomState(5)
    p = {k: v + rs.normal(0, 0.05, size=v.shape) for k, v in tf.init_params(C.params(), rs).items()}
    x, y = rs.randint(0, 45, size=(2, 10)), rs.randint(0, 45, size=(2, 10))

    def cross_entropy() -> float:
        probs = tf.softmax(C.forward(p, x)["logits"])
        return float(-np.log(np.take_along_axis(probs, y[..., None], -1)).mean())

    _, grads = train.loss_and_grads(p, x, y)
    for name in C.params():
        flat = p[name].reshape(-1)
        where = np.flatnonzero(grads[name].reshape(-1)) if name in ("embed.table", "pos") else np.arange(flat.size)
        for i in rs.choice(where, min(3, where.size), replace=False):
            old, h = flat[i], 1e-6
            flat[i] = old + h
            up = cross_entropy()
            flat[i] = old - h
            down = cross_entropy()
            flat[i] = old
            num, ana = (up - down) / (2 * h), grads[name].reshape(-1)[i]
            assert abs(num - ana) <= 1e-4 * max(1e-3, abs(num) + abs(ana)), (name, i, num, ana)


def test_attention_is_causal() -> None:
    p, _ = _weights()
    x = C.encode("Beautiful is better")[None, :]
    changed = x.copy()
    changed[0, -1] = (changed[0, -1] + 1) % 45
    a, b = C.forward(p, x)["logits"], C.forward(p, changed)["logits"]
    assert np.array_equal(a[0, :-1], b[0, :-1]) and not np.array_equal(a[0, -1], b[0, -1])


def test_a_short_training_reproduces_the_digest_the_weights_file_keeps() -> None:
    from threadpoolctl import threadpool_limits

    _, meta = _weights()
    with threadpool_limits(1):
        assert train.digest(train.train_float(train.SEED, train.SAMPLE_EPOCHS)) == \
            meta[f"digest_{train.SAMPLE_EPOCHS}_epochs"]


@pytest.mark.skipif(os.environ.get("COSIM_NETWORKS") != "full",
                    reason="retrains for about a minute of CPU; run with COSIM_NETWORKS=full (make networks)")
def test_training_reproduces_the_committed_weights(tmp_path: Path) -> None:
    out = tmp_path / "c.npz"
    r = subprocess.run([sys.executable, "-m", "compiler.networks.train_charlm", "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    with np.load(train.WEIGHTS_PATH) as committed, np.load(out) as fresh:
        assert sorted(committed.files) == sorted(fresh.files) == sorted([f"{k}_float" for k in C.params()] + ["meta"])
        for key in committed.files:
            np.testing.assert_array_equal(committed[key], fresh[key], err_msg=key)


def test_float_model_continues_the_zen_and_scores_the_held_out_lines() -> None:
    p, meta = _weights()
    assert C.generate(p, "Beautiful is", 32) == meta["sample_float"] == " better than ugly.\nExplicit is b"
    acc, ppl = C.held_out_scores(p)
    assert acc == meta["held_out_accuracy_float"] and round(ppl, 6) == meta["held_out_perplexity_float"]
    with pytest.raises(ValueError, match="129 tokens, the context holds 1..128"):
        C.forward(p, np.zeros((1, 129), dtype=np.int64))


def test_training_bad_arguments(tmp_path: Path) -> None:
    for argv, words in ([["--out", str(tmp_path / "no" / "x.npz")], "does not exist"],
                        [["--out", str(tmp_path)], "is a folder"], [["--epochs", "0"], "at least 1"]):
        r = subprocess.run([sys.executable, "-m", "compiler.networks.train_charlm", *argv], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stdout == "", argv
        assert len(r.stderr.splitlines()) == 1 and words in r.stderr, r.stderr
