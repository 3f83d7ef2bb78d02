"""The ISS shares no meaning with what it checks, so a bug in the shared semantics is a fuzz mismatch.

The golden path and the TLM run the shared semantics modules (``hw/isa_semantics.py``,
``hw/gemm_numpy.py``, ``hw/alu_numpy.py``, ``hw/analysis.py``); ``sim/iss.py`` is written from
the docs on its own. Two proofs:

* statically: no file of the ISS imports one of those modules (nor the TLM or the compiler);
* by mutation: a bug planted in a shared function, as the golden path and the TLM see it (the
  module's own name and every ``from ... import`` binding of it in ``hw``, ``sim.tlm`` and
  ``compiler``; never in the fuzzer, which only generates the Programs), makes a short seeded
  campaign of the in-process fuzzer (``cosim.fuzz.campaign``) report ISS-vs-TLM mismatches. The
  same campaign without the bug reports none, so the mismatches are the bug's doing and the bug
  really changes what the TLM does (the ISS is untouched by it: the static proof).

Which of these the ISS that ran the shared modules would have missed: the GEMM loop factor
(it called ``hw.gemm_numpy.run_gemm``), the error-check order (``hw.isa_semantics.classify_word``),
the LOAD footprint (``load_tile_shape``, ``sram_last_index``) and the token route (``hw.analysis``
on ``hw.isa_semantics.TOKEN_ROUTES``): with the bug in the shared source it would have computed
the same wrong answer as the TLM, so those campaigns would have passed. The SHR rounding bug
it would have caught too: its ALU already ran its own lanes (on ``ALU_SCALAR``), not
``hw/alu_numpy.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hw.alu_numpy
import hw.gemm_numpy
import hw.isa_semantics
import sim.tlm  # noqa: F401 - loads the TLM's modules, whose bindings the plants replace
import compiler.intrinsics  # noqa: F401 - the golden path's, likewise
from cosim.fuzz import campaign as C
from hw import csr
from hw.assembler import patched
from hw.config import load_config
from hw.isa import Load, Store

ROOT = Path(__file__).resolve().parents[1]
SHARED = ("hw.gemm_numpy", "hw.isa_semantics", "hw.alu_numpy", "hw.analysis")
FORBIDDEN_PACKAGES = ("sim.tlm", "compiler", "cosim", "testbench")
ISS_VS_TLM = ("iss vs tlm", "ref vs tlm")  # the reference is the ISS (its results say model "iss")


def _iss_files() -> list[Path]:
    single = ROOT / "sim" / "iss.py"
    package = ROOT / "sim" / "iss"
    return ([single] if single.exists() else []) + (sorted(package.rglob("*.py")) if package.is_dir() else [])


def _imports(path: Path) -> set[str]:
    """Every module a file imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``), relative
    imports resolved against ``sim.iss``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(["sim", "iss"][:max(0, 2 - node.level + 1)] + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def test_the_iss_imports_none_of_the_shared_semantics() -> None:
    """The AST of every ISS file names none of the shared modules, the TLM, the compiler or the tools."""
    files = _iss_files()
    assert files, "no ISS source found"
    for path in files:
        mods = _imports(path)
        bad = sorted(m for m in mods for s in SHARED + FORBIDDEN_PACKAGES if m == s or m.startswith(s + "."))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
        assert mods & {"hw.isa", "hw.csr"}, f"{path.relative_to(ROOT)}: the parse found no project import"


def test_no_name_of_the_iss_comes_from_them() -> None:
    """No function, class or table the ISS holds is one of the shared modules' (no indirect way in:
    ``hw.program``, which the ISS uses to read a Program, loads ``hw.analysis`` for its own checks)."""
    import hw.isa
    import sim.iss as iss

    for m in SHARED:
        __import__(m)
    # tables the shared modules define (not the encoding's, which they import too)
    encoding = {id(v) for v in vars(hw.isa).values()}
    tables = {id(v) for m in SHARED for v in vars(sys.modules[m]).values()
              if isinstance(v, (dict, list, tuple)) and id(v) not in encoding}
    leaked = sorted(k for k, v in vars(iss).items()
                    if getattr(v, "__module__", None) in SHARED or id(v) in tables)
    assert not leaked, f"sim.iss holds {leaked} of the shared modules"


# ---- planting a bug where the golden path and the TLM see it ------------------------------------
def _plant(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, bad: Any,
           where: tuple[str, ...] = ("hw.", "sim.tlm", "compiler")) -> None:
    """Replace ``module.name`` by ``bad`` in ``module`` and in every loaded module under ``where``
    that imported the same object by name. The fuzzer (``cosim``) keeps the original: it generates
    and judges, it is not a model."""
    good = getattr(module, name)
    hits = 0
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not mod_name.startswith(where) or mod_name.startswith("sim.iss"):
            continue
        if getattr(mod, name, None) is good:
            monkeypatch.setattr(mod, name, bad)
            hits += 1
    assert hits, f"{module.__name__}.{name} is bound nowhere"


def _campaign(count: int, seed: int, configs: list[str], fault_rate: float) -> C.Summary:
    return C.run_campaign(count, seed, configs, fault_rate=fault_rate, do_shrink=False, progress=False)


def _ref_vs_tlm(s: C.Summary) -> list[str]:
    return [p for f in s.failures for p in f["problems"] if p.startswith(ISS_VS_TLM)]


# ---- the mutations ---------------------------------------------------------------------------------
def _gemm_inp_factor_plus_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """GEMM's input index walks ``inp_factor_out + 1`` per outer iteration (an off-by-one in the loop)."""
    good = hw.gemm_numpy.run_gemm

    def bad(acc, inp, wgt, uops, insn, cfg, uop_loaded, wgt_loaded):
        if insn.iter_out > 1 and not insn.reset:
            insn = dataclasses.replace(insn, inp_factor_out=insn.inp_factor_out + 1)
        return good(acc, inp, wgt, uops, insn, cfg, uop_loaded, wgt_loaded)
    _plant(monkeypatch, hw.gemm_numpy, "run_gemm", bad)


def _reserved_bits_after_field_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The word's checks in the wrong order: the field checks (flags towards a missing stage, STORE's
    buffer and padding: BAD_FIELD) before the reserved bits (BAD_OPCODE)."""
    S = hw.isa_semantics
    from hw.isa import INSN_BITS, OPCODE_NAMES, opcode_of

    def bad(isa, word):
        name = OPCODE_NAMES.get(opcode_of(word))
        if name is None:
            return None, csr.ERR_BAD_OPCODE, f"unknown opcode {opcode_of(word)} (word 0x{word:032x})"
        insn = isa.unpack(name, word & ((1 << isa.used_bits(name)) - 1))
        code, msg = S.dispatch_fault(insn)
        if code:
            return insn, code, msg
        if word >> isa.used_bits(name):
            return None, csr.ERR_BAD_OPCODE, f"{name} has non-zero reserved bits [{INSN_BITS - 1}:" \
                                               f"{isa.used_bits(name)}] (word 0x{word:032x})"
        return insn, code, msg
    _plant(monkeypatch, S, "classify_word", bad)


def _load_tile_one_row_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """A LOAD's padded tile forgets its bottom padding rows (``y_pad_1``): one row (or more) too short."""
    def bad(insn):
        return insn.y_pad_0 + insn.y_size, insn.x_pad_0 + insn.x_size + insn.x_pad_1
    _plant(monkeypatch, hw.isa_semantics, "load_tile_shape", bad)


def _shr_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """SHR rounds to nearest (adds half the divisor first) instead of flooring as the sign fill does."""
    good_val = hw.alu_numpy.ALU_NUMPY["SHR"]

    def bad(x, s):
        r = np.asarray(good_val(x, s), dtype=np.int32)
        s_arr = np.broadcast_to(np.asarray(s, dtype=np.int64), np.shape(x))
        shift = np.clip(s_arr, 1, 31)
        half = (np.asarray(x, dtype=np.int64) >> (shift - 1)) & 1  # the last bit shifted out
        return np.where(s_arr > 0, r + half, r).astype(np.int32)

    def bad_inplace(x, s):
        x[...] = bad(x.copy(), s)
    monkeypatch.setitem(hw.alu_numpy.ALU_NUMPY, "SHR", bad)
    monkeypatch.setitem(hw.alu_numpy.ALU_INPLACE, "SHR", bad_inplace)


def _compute_pops_swapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A token route off: the compute unit's ``pop_prev`` takes the store's token (s2c) and its
    ``pop_next`` the load's (l2c). Planted in the TLM's view of ``TOKEN_ROUTES`` (the fuzzer's generator
    builds its token rule on the same table, so it keeps the original)."""
    routes = dict(hw.isa_semantics.TOKEN_ROUTES)
    routes[("compute", "pop_prev")], routes[("compute", "pop_next")] = "s2c", "l2c"
    _plant(monkeypatch, hw.isa_semantics, "TOKEN_ROUTES", routes, where=("sim.tlm",))


def _double_fault_cases(count: int, seed: int, config: str) -> list[C.Case]:
    """Seeded cases whose one bad word is a LOAD or STORE with two faults: a flag towards its missing
    stage (BAD_FIELD) and a reserved bit (BAD_OPCODE, checked first: docs/microarch.md "FETCH")."""
    cfg = load_config(config)
    cases = []
    for index in range(count):
        case = C.make_case(cfg, seed, index, fault_rate=0.0)
        p = case.program
        rng = np.random.default_rng([seed, index, 11])
        ks = [k for k, i in enumerate(p.insns) if isinstance(i, (Load, Store))]
        k = int(rng.choice(ks))
        insn = p.insns[k]
        name = insn.MNEMONIC
        word = p.isa.encode_word(insn)
        word = p.isa.set_field(word, name, "pop_prev" if name == "LOAD" else "pop_next", 1)
        word |= 1 << int(rng.integers(p.isa.used_bits(name), 128))
        cases.append(C.Case(index, case.seed, cfg, patched(p, {k: word}), "bad_opcode"))
    return cases


def _double_fault_campaign() -> int:
    cases = _double_fault_cases(12, 5, "small") + _double_fault_cases(12, 6, "default")
    C.run_cases(cases, rtl=False)
    return sum(1 for c in cases if any(p.startswith(ISS_VS_TLM) for p in c.problems))


# mutation -> the campaign that catches it: (count, seed, configs, fault rate); each ~1-3 s
CAMPAIGNS = {
    "gemm_inp_factor_plus_one": (_gemm_inp_factor_plus_one, (40, 1, ["small", "default"], 0.0)),
    "load_tile_one_row_short": (_load_tile_one_row_short, (40, 1, ["small", "default"], 0.0)),
    "shr_rounds": (_shr_rounds, (40, 1, ["small", "default"], 0.0)),
    "compute_pops_swapped": (_compute_pops_swapped, (20, 1, ["small"], 0.0)),
}


@pytest.mark.parametrize("mutation", sorted(CAMPAIGNS))
def test_a_bug_in_the_shared_semantics_is_a_campaign_mismatch(mutation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Clean, the campaign agrees; with the bug planted in golden's and the TLM's view, the ISS disagrees."""
    plant, (count, seed, configs, rate) = CAMPAIGNS[mutation]
    clean = _campaign(count, seed, configs, rate)
    assert clean.mismatches == 0 and clean.errors == 0, clean.failures[:2]
    plant(monkeypatch)
    s = _campaign(count, seed, configs, rate)
    found = _ref_vs_tlm(s)
    assert found, f"{mutation}: the ISS did not notice ({s.line()})"


def test_an_error_check_order_bug_is_a_campaign_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Words with two faults: the ISS and the TLM agree on BAD_OPCODE, until the TLM's check order is
    swapped (single-fault words would not tell: every fault kind the generator injects has one code)."""
    assert _double_fault_campaign() == 0
    _reserved_bits_after_field_checks(monkeypatch)
    assert _double_fault_campaign() > 0
