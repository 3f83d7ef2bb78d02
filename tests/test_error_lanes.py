"""Which unit raises which error code (``hw.csr.UNIT_ERRORS``, ``TOP_ERRORS``): the codes each unit's
Verilog names are the table's, the fuzz campaign's error bins place each code on a unit that raises it,
and the TLM's errors of a fault in each unit of each core carry a code of their unit (the RTL's are
compared with the TLM's in ``tests/test_cores_hw.py``). The coverage's per-lane error-code bounds
(``cosim/coverage/toggle_bounds.py``) rest on this table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cosim.fuzz.bins import ERROR_SITES
from hw import csr
from hw.config import load_config

RTL = Path(__file__).resolve().parents[1] / "hw" / "rtl"
# the Verilog files whose err_code output is each unit's lane; csr_block.v raises the top's codes
LANE_FILES = {"fetch": ("fetch.v",), "load": ("load_unit.v",), "compute": ("compute_unit.v", "gemm.v"),
              "store": ("store_unit.v",)}
CODES = {name: code for code, name in csr.ERROR_NAMES.items()}


def _codes_named(text: str) -> set[int]:
    """The ``ERR_*`` macros a Verilog text uses outside comments, as codes (ERR_NONE left out)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return {CODES[n] for n in re.findall(r"`ERR_(\w+)", text)} - {csr.ERR_NONE}


def test_every_unit_s_verilog_raises_exactly_its_codes() -> None:
    for unit, files in LANE_FILES.items():
        named = set().union(*(_codes_named((RTL / f).read_text()) for f in files))
        assert named == set(csr.UNIT_ERRORS[unit]), (unit, sorted(csr.ERROR_NAMES[c] for c in named))
    assert _codes_named((RTL / "csr_block.v").read_text()) == set(csr.TOP_ERRORS)
    others = {p.name: _codes_named(p.read_text()) for p in RTL.glob("*.v")
              if p.name != "csr_block.v" and not any(p.name in f for f in LANE_FILES.values())}
    assert not any(others.values()), {k: v for k, v in others.items() if v}


def test_the_decoder_raises_only_the_decode_codes() -> None:
    """FETCH's decoder (``dec_code``) holds BAD_OPCODE or BAD_FIELD; the window check adds INSN_RANGE."""
    text = (RTL / "fetch.v").read_text()
    assigned = set(re.findall(r"dec_code\s*=\s*`ERR_(\w+)", text)) - {"NONE"}
    assert {CODES[n] for n in assigned} == set(csr.DECODE_ERRORS)
    assert set(csr.UNIT_ERRORS["fetch"]) == set(csr.DECODE_ERRORS) | {csr.ERR_INSN_RANGE}


def test_the_fuzz_bins_place_each_code_on_a_unit_that_raises_it() -> None:
    """Every (code, unit) error bin of a lane's code names a unit whose lane raises it (the ALU and GEMM
    are the compute unit), and every pair of the table has a bin; the top's codes are bins of any unit."""
    lane = {"alu": "compute", "gemm": "compute"}
    sites = set()
    for kind, unit, _, _ in ERROR_SITES:
        code = CODES[kind]
        if code in csr.TOP_ERRORS or code == csr.ERR_UNSUPPORTED:
            continue
        sites.add((lane.get(unit, unit), code))
    assert sites == {(u, c) for u, codes in csr.UNIT_ERRORS.items() for c in codes}
    assert set(csr.ERROR_NAMES) == ({csr.ERR_NONE, csr.ERR_UNSUPPORTED} | set(csr.TOP_ERRORS)
                                    | {c for codes in csr.UNIT_ERRORS.values() for c in codes})


@pytest.mark.parametrize("config", ["small", "small2"])
def test_the_tlm_s_faults_carry_a_code_of_their_unit(config: str) -> None:
    from sim.tlm import run_program
    from tests.test_cores_hw import FAULTS, fault_on_core

    cfg = load_config(config)
    for k in range(cfg.num_cores):
        for kind in FAULTS:
            e = run_program(fault_on_core(cfg, k, kind), raise_on_error=False).error
            assert e is not None, (kind, k)
            assert e["code"] in csr.UNIT_ERRORS.get(e["unit"], ()) + csr.TOP_ERRORS, (kind, k, e)
