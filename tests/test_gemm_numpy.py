"""hw.gemm_numpy (the meaning of GEMM every model runs) against a plain Python loop over the ISA text."""

from __future__ import annotations

import numpy as np
import pytest

from hw import csr
from hw.config import load_config
from hw.gemm_numpy import gemm_iterations, gemm_sum_ready, gemm_uop_range_bad, run_gemm, run_gemm_sum
from hw.isa import Gemm, decode_uops, encode_uops

CFG = load_config("small")


def loop_reference(acc, inp, wgt, uops, g, uop_loaded, wgt_loaded):
    """The docstring of hw/isa.py, one iteration at a time: (acc after, iterations done, fault code)."""
    acc = acc.astype(np.int64).copy()
    k = 0
    for i in range(g.iter_out):
        for j in range(g.iter_in):
            for u in range(g.uop_begin, g.uop_end):
                if not uop_loaded[u]:
                    return acc, k, csr.ERR_UNLOADED
                ua, ux, uw = (int(v) for v in uops[u])
                a = ua + i * g.acc_factor_out + j * g.acc_factor_in
                x = ux + i * g.inp_factor_out + j * g.inp_factor_in
                w = uw + i * g.wgt_factor_out + j * g.wgt_factor_in
                if a >= CFG.acc_depth or (not g.reset and (x >= CFG.inp_depth or w >= CFG.wgt_depth)):
                    return acc, k, csr.ERR_SRAM_RANGE
                if not g.reset and not wgt_loaded[w]:
                    return acc, k, csr.ERR_UNLOADED
                if g.reset:
                    acc[a] = 0
                else:
                    acc[a] = (acc[a] + wgt[w].astype(np.int64) @ inp[x].astype(np.int64) + 2**31) % 2**32 - 2**31
                k += 1
    return acc, k, None


def _buffers(rng):
    acc = rng.integers(-2**31, 2**31, (CFG.acc_depth, CFG.lanes)).astype(np.int32)
    inp = rng.integers(-128, 128, (CFG.inp_depth, CFG.lanes)).astype(np.int8)
    wgt = rng.integers(-128, 128, (CFG.wgt_depth, CFG.block, CFG.block)).astype(np.int8)
    uops = np.stack([rng.integers(0, 8, CFG.uop_depth), rng.integers(0, 8, CFG.uop_depth),
                     rng.integers(0, 8, CFG.uop_depth)], axis=1).astype(np.int64)
    return acc, inp, wgt, uops


@pytest.mark.parametrize("seed", range(4))
def test_random_gemms_match_the_loop(seed):
    """Structured (batched matmul), flat and faulting paths all equal the loop, incl. 32-bit wrap."""
    rng = np.random.default_rng(seed)
    acc, inp, wgt, uops = _buffers(rng)
    uop_loaded = rng.random(CFG.uop_depth) < 0.97
    wgt_loaded = rng.random(CFG.wgt_depth) < 0.97
    faults = 0
    for _ in range(150):
        b = int(rng.integers(0, 12))

        def f() -> int:
            return int(rng.choice([0, 0, 1, int(rng.integers(0, 9)), 40]))
        g = Gemm(reset=bool(rng.random() < 0.1), uop_begin=b, uop_end=b + int(rng.integers(0, 6)),
                 iter_out=int(rng.integers(0, 5)), iter_in=int(rng.integers(0, 5)), acc_factor_out=f(),
                 acc_factor_in=f(), inp_factor_out=f(), inp_factor_in=f(), wgt_factor_out=f(), wgt_factor_in=f())
        want, k_want, code_want = loop_reference(acc, inp, wgt, uops, g, uop_loaded, wgt_loaded)
        got = acc.copy()
        k, fault = run_gemm(got, inp, wgt, uops, g, CFG, uop_loaded, wgt_loaded)
        assert (None if fault is None else fault.code) == code_want, g
        assert k == k_want and (fault is None or fault.iteration == k), g
        assert np.array_equal(got, want.astype(np.int32)), g
        faults += fault is not None
    assert 5 < faults < 140  # both kinds of outcome were exercised


@pytest.mark.parametrize("seed", range(3))
def test_gemm_sum_equals_one_gemm_per_copy(seed):
    """``run_gemm_sum`` on K copies of INP and WGT (the fast-forward's skipped periods) leaves the
    accumulator ``run_gemm`` leaves when run on each copy in turn, 32-bit wrap included; what it
    does not take (reset, weights moving with i, a possible fault) ``gemm_sum_ready`` refuses."""
    rng = np.random.default_rng(40 + seed)
    acc, _, _, uops = _buffers(rng)
    uop_loaded = np.ones(CFG.uop_depth, dtype=bool)
    wgt_loaded = rng.random(CFG.wgt_depth) < 0.98
    taken = refused = 0
    for _ in range(120):
        K = int(rng.integers(1, 6))
        inps = rng.integers(-128, 128, (K, CFG.inp_depth, CFG.lanes)).astype(np.int8)
        wgts = rng.integers(-128, 128, (K, CFG.wgt_depth, CFG.block, CFG.block)).astype(np.int8)
        b = int(rng.integers(0, 12))

        def f() -> int:
            return int(rng.choice([0, 0, 1, int(rng.integers(0, 9)), 40]))
        g = Gemm(reset=bool(rng.random() < 0.1), uop_begin=b, uop_end=b + int(rng.integers(0, 6)),
                 iter_out=int(rng.integers(0, 5)), iter_in=int(rng.integers(0, 5)), acc_factor_out=f(),
                 acc_factor_in=f(), inp_factor_out=f(), inp_factor_in=f(), wgt_factor_out=int(rng.choice([0, 0, 0, 1])),
                 wgt_factor_in=f())
        if not gemm_sum_ready(g, CFG, uops, uop_loaded, wgt_loaded):
            refused += 1
            continue
        want = acc.copy()
        for k in range(K):
            n, fault = run_gemm(want, inps[k], wgts[k], uops, g, CFG, uop_loaded, wgt_loaded)
            assert fault is None and n == gemm_iterations(g), g
        got = acc.copy()
        run_gemm_sum(got, inps, wgts, uops, g)
        assert np.array_equal(got, want), g
        taken += 1
    assert taken > 10 and refused > 10  # both outcomes exercised


def test_counts_and_static_range():
    g = Gemm(uop_begin=3, uop_end=7, iter_out=2, iter_in=5)
    assert gemm_iterations(g) == 40
    assert gemm_iterations(Gemm(uop_begin=7, uop_end=3)) == 0
    assert gemm_uop_range_bad(Gemm(uop_begin=0, uop_end=CFG.uop_depth + 1), CFG.uop_depth)
    assert not gemm_uop_range_bad(Gemm(uop_begin=0, uop_end=CFG.uop_depth), CFG.uop_depth)
    assert not gemm_uop_range_bad(Gemm(uop_begin=0, uop_end=CFG.uop_depth + 1, iter_in=0), CFG.uop_depth)


def test_uop_encoding_round_trip():
    uops = [(0, 0, 0), (65535, 1, 2), (7, 300, 65535)]
    data = encode_uops(uops)
    assert len(data) == 16 * len(uops)
    assert decode_uops(data) == uops
    noisy = data[16:22] + b"\xaa" * 10  # bits [127:48] are ignored
    assert decode_uops(noisy) == [uops[1]]
    with pytest.raises(ValueError, match="micro-op 0: wgt index 65536 does not fit 16 bits"):
        encode_uops([(0, 0, 65536)])
