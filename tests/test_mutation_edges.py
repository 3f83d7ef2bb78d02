"""The mutation regression's hand-built edge Programs (cosim.mutation.edge_programs) on the plain
models: the ISS (the sequential oracle) and the TLM agree on each one's error (kind and pc) and, for
the valid ones, produce the golden outputs. The RTL side is checked by the campaign's baseline
(tests/test_mutation.py): these edges are properties of the ISA, not only of one mutant.
"""

from __future__ import annotations

import pytest

from cosim import models
from cosim.mutation.edge_programs import edge_programs
from hw.config import load_config

CFG = load_config("small")
PROGRAMS = {p.name: p for p in edge_programs(CFG)}
EXPECTED_ERROR = {"edge-shr": None, "edge-gemm-acc": "SRAM_RANGE", "edge-gemm-inp": "SRAM_RANGE",
                  "edge-alu-src": "SRAM_RANGE", "edge-uop-unloaded": "UNLOADED",
                  "edge-finish-deadlock": "DEADLOCK", "edge-no-iterations": None,
                  "edge-alu-back-to-back": None, "edge-clip-wide": None, "edge-no-finish": "DEADLOCK",
                  "edge-error-before-fetch-ends": "SRAM_RANGE", "edge-two-stores-then-finish": None}


def test_every_edge_program_is_listed():
    assert set(PROGRAMS) == set(EXPECTED_ERROR)
    assert edge_programs(load_config("small2")) == []    # one-core Programs only


@pytest.mark.parametrize("name", sorted(EXPECTED_ERROR))
def test_iss_and_tlm_agree_on_the_edge(name):
    p = PROGRAMS[name]
    ref, tlm = models.iss(p), models.tlm(p)
    want = EXPECTED_ERROR[name]
    for r in (ref, tlm):
        assert (r.error or {}).get("name") == want, (r.model, r.error)
    if want is None:
        if p.expected:
            assert models.first_mismatch(p.expected, tlm.outputs) is None
            assert models.first_mismatch(p.expected, ref.outputs) is None
    else:
        assert ref.error["pc"] == tlm.error["pc"]
        assert ("fault" in p.meta) and p.meta["fault"]
    if name == "edge-no-finish":   # no unit blocked: ERR_PC is INSN_COUNT
        assert tlm.error["pc"] == len(p.insns)
