"""A mismatch report names the first differing element and the instructions behind it."""

from __future__ import annotations

import numpy as np

from hw.config import load_config
from hw.isa import Alu, Store
from hw.result import RunResult
from cosim import models
from cosim.mismatch import last_writers


def test_injected_data_difference_names_store_and_producer():
    job = models.make_job("vadd", load_config("default"))
    prog = job.program
    out = {k: v.copy() for k, v in job.expected.items()}
    name = next(iter(out))
    # vadd: 64 vectors in 4 tiles of 16; element of vector 20 belongs to the second tile.
    idx = (0, 20, 0, 3)
    out[name][idx] ^= 1
    rep = models.judge(job, RunResult("tlm", out, cycles=1))
    assert rep["match"] is False
    stores = [pc for pc, i in enumerate(prog.insns) if isinstance(i, Store)]
    assert f"output '{name}'[0, 20, 0, 3]" in rep["mismatch"]
    assert f"STORE #{stores[1]}" in rep["mismatch"]
    w = last_writers(prog, name, idx)
    assert w.store_pc == stores[1]
    assert isinstance(prog.insns[w.producer_pc], Alu) and w.producer_pc < w.store_pc


def test_no_blame_where_the_register_config_fetches_another_stream():
    """A Program whose register config fetches instructions from elsewhere than its own stream (a folder
    whose regs.json was edited): the instructions of insn.bin are not what ran, so none is blamed."""
    job = models.make_job("vadd", load_config("default"))
    prog = job.program
    prog.regs = [(n, v + 16 if n == "INSN_ADDR_LO" else v) for n, v in prog.regs]
    out = {k: v.copy() for k, v in job.expected.items()}
    name = next(iter(out))
    out[name][(0, 20, 0, 3)] ^= 1
    rep = models.judge(job, RunResult("tlm", out, cycles=1))
    assert rep["match"] is False and "output" in rep["mismatch"] and "last written by" not in rep["mismatch"]


def test_first_mismatch_equal_and_shape():
    a = {"x": np.arange(6, dtype=np.int8).reshape(2, 3)}
    assert models.first_mismatch(a, {"x": a["x"].copy()}) is None
    mm = models.first_mismatch(a, {"x": np.zeros((3, 2), np.int8)})
    assert mm is not None and mm.output == "x"
