"""charlm in int8: the committed model reproduces, the decode steps equal the whole-window pass, and the
int8 model's held-out next-character accuracy is within 2 points of the float model's."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.networks import charlm as C
from compiler.networks import charlm_int8 as Q


@pytest.fixture(scope="module")
def q() -> dict:
    return Q.load()


def test_quantizing_reproduces_the_committed_file() -> None:
    fresh = Q.build()
    with np.load(Q.WEIGHTS_PATH, allow_pickle=False) as z:
        assert sorted(z.files) == sorted(fresh)
        for k in z.files:
            assert z[k].dtype == fresh[k].dtype and np.array_equal(z[k], fresh[k]), k


def test_decode_steps_equal_the_window_pass_and_fill_the_cache(q: dict) -> None:
    toks = C.encode("Beautiful is better than ugly.\nExplicit")
    whole = Q.int8_forward(q, toks)
    cache = Q.KVCache()
    for p, tok in enumerate(toks):
        logits = Q.decode_step(q, cache, int(tok))
        assert cache.length == p + 1
        assert np.array_equal(logits, whole[p]), p
    # a step's attention sees only the cache's rows: garbage past the length changes nothing
    dirty = Q.KVCache(cache.k.copy(), cache.v.copy(), 5)
    dirty.k[6:], dirty.v[6:] = 99, -77
    clean = Q.KVCache(cache.k.copy(), cache.v.copy(), 5)
    clean.k[6:], clean.v[6:] = 0, 0
    assert np.array_equal(Q.decode_step(q, dirty, int(toks[5])), Q.decode_step(q, clean, int(toks[5])))


def test_int8_greedy_text_and_context_limit(q: dict) -> None:
    text = Q.generate(q, "Beautiful is", 12)
    assert len(text) == 12 and set(text) <= set(C.vocabulary())
    with pytest.raises(ValueError, match="need 129 positions, more than the context"):
        Q.generate(q, "x" * 120, 10)
    assert len(Q.generate(q, "x" * 120, 9)) == 9  # the last character fills position 128 of 128: fits
    full = Q.KVCache(length=C.CONTEXT)
    with pytest.raises(ValueError, match="holds 128 positions"):
        Q.decode_step(q, full, 0)


def test_int8_accuracy_is_within_two_points_of_float(q: dict) -> None:
    acc_i, ppl_i = Q.held_out_scores(q)
    acc_f, ppl_f = C.held_out_scores(Q.float_params())
    assert abs(acc_i - acc_f) <= 0.02, (acc_i, acc_f)
    assert 0.9 < ppl_i / ppl_f < 1.1, (ppl_i, ppl_f)


def test_bad_out_is_one_line(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        Q.main(["--out", str(tmp_path / "no" / "x.npz")])
    assert e.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
