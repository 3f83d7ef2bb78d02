"""The burst-length block (hw/rtl/burst_calc.v, used by fetch, load and store) alone: its cocotb
bench (testbench/units/burst_calc_bench.py) on two bus widths and MAX_BURSTs. Bursts of whole
Programs crossing 4 KiB pages are checked on every level in tests/units/test_load_unit.py,
test_store_unit.py and test_fetch.py. The TLM's vector beats per burst against a walk over the beats."""

from __future__ import annotations

import numpy as np
import pytest

from hw.config import load_config
from sim.tlm.burst_calc import vector_beats
from testbench.block_bench import run_block_bench
from tests.units.every_level import needs_rtl


@needs_rtl
@pytest.mark.parametrize("config", ["small", "wide"])
def test_block_bench(config):
    """min(MAX_BURST, beats left, beats to the 4 KiB boundary), operand by operand and transfer by transfer."""
    run_block_bench("burst_calc", "testbench.units.burst_calc_bench", load_config(config))


def test_vector_beats_match_a_walk_over_the_beats() -> None:
    """Per burst, the first beat that ends (``last``) or starts a vector and how many such beats it
    has, as a walk over every beat of every row finds them: bursts of whole vectors (the shortcut)
    and bursts that split vectors."""
    rng = np.random.default_rng(3)
    for _ in range(2000):
        bpv = int(rng.integers(1, 9))
        whole = rng.random() < 0.5
        spans: list[list[tuple[int, int]]] = []  # per row, each burst's beats [a, b) in the row
        for _row in range(int(rng.integers(1, 5))):
            total = int(rng.integers(1, 12)) * bpv
            unit = bpv if whole else 1
            cuts = rng.choice(np.arange(1, total // unit), size=int(rng.integers(0, total // unit)), replace=False)
            edges = [0, *sorted(int(c) * unit for c in cuts), total]
            spans.append(list(zip(edges, edges[1:])))
        beats = np.array([b - a for row in spans for a, b in row], dtype=np.int64)
        per_row = np.array([len(row) for row in spans], dtype=np.int64)
        for last in (True, False):
            mark = bpv - 1 if last else 0
            marked = [[j - a for j in range(a, b) if j % bpv == mark] for row in spans for a, b in row]
            m0, count = vector_beats(beats, per_row, bpv, last)
            assert count.tolist() == [len(m) for m in marked]
            assert [m for m, n in zip(m0.tolist(), count.tolist()) if n] == [m[0] for m in marked if m]
