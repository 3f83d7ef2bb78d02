"""The mutant schemata: ONE copy of the RTL that holds every selected mutant behind a run-time switch.

Each module with mutants gets a 32-bit register ``mut_sel`` read from the plusarg ``+MUT=K`` in an
initial block (0 when absent). A mutated expression becomes
``(mut_sel == 32'dK) ? (<mutant>) : ... : (<original>)`` and a stuck bit becomes
``begin <statement> if (mut_sel == 32'dK) <bit> <= 1'bV; end``, so ``+MUT=0`` is the original
design and one Verilator build runs every mutant. The switch sits around the whole expression,
never inside it: the expression keeps its context width, and an arm has the original's width
whenever the change keeps it.

A mutant may change a width on purpose (a stuck bit, a dropped ``&&`` term becomes a reduction),
so the mutated files waive Verilator's WIDTH warnings; every other -Wall warning stays on.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from cosim.mutation.points import Mutant, MutationError, module_headers
from cosim.mutation.verilog_tokens import tokenize

SEL = "mut_sel"
PLUSARG = "MUT"
_WAIVER = ("// Mutant schemata copy (generated): mutants may change widths on purpose.\n"
           "/* verilator lint_off WIDTH */\n")


def _sel_decl(indent: str = "    ") -> str:
    return (f"\n{indent}// mutant switch: +{PLUSARG}=K runs mutant K (0 = the original design)\n"
            f"{indent}reg [31:0] {SEL};\n"
            f"{indent}initial begin\n"
            f"{indent}    if (!$value$plusargs(\"{PLUSARG}=%d\", {SEL})) {SEL} = 32'd0;\n"
            f"{indent}end\n")


def mutate_text(text: str, numbered: list[tuple[int, Mutant]]) -> str:
    """The file ``text`` with every mutant of ``numbered`` (K, mutant) behind its switch."""
    exprs: dict[tuple[int, int], list[tuple[int, Mutant]]] = {}
    stmts: dict[tuple[int, int], list[tuple[int, Mutant]]] = {}
    for k, m in numbered:
        (exprs if m.form == "expr" else stmts).setdefault((m.start, m.end), []).append((k, m))
    edits: list[tuple[int, int, str]] = []   # (start, end, new text); spans nest, never overlap partly
    for (s, e), ms in exprs.items():
        chain = "".join(f"({SEL} == 32'd{k}) ? ({m.text}) : " for k, m in ms)
        edits.append((s, e, f"{chain}({text[s:e]})"))
    for (s, e), ms in stmts.items():
        edits.append((s, s, "begin "))
        edits.append((e, e, "".join(f" if ({SEL} == 32'd{k}) {m.text}" for k, m in ms) + " end"))
    # modules that get a switch: those with a mutant
    tokens = tokenize(text)
    mods = module_headers(tokens)
    used = {m.module for _, m in numbered}
    for name, semi, _ in mods:
        if name in used:
            edits.append((tokens[semi].end, tokens[semi].end, _sel_decl()))
    # apply from the end; at one position an insertion after a replaced span goes first
    out = text
    for s, e, new in sorted(edits, key=lambda x: (x[0], x[1]), reverse=True):
        _check_nesting(s, e, edits)
        out = out[:s] + new + out[e:]
    return _WAIVER + out


def _check_nesting(s: int, e: int, edits: list[tuple[int, int, str]]) -> None:
    for s2, e2, _ in edits:
        if s2 < e2 and s < e and (s < s2 < e < e2 or s2 < s < e2 < e):
            raise MutationError(f"mutant regions overlap at offsets {s}-{e} and {s2}-{e2}")


def write_schemata(rtl_dir: Path, out_dir: Path, mutants: list[Mutant]) -> Path:
    """Write the schemata copy of ``rtl_dir`` into ``out_dir``; mutant K is ``mutants[K-1]``.

    Only the files with mutants change; ``sources.txt`` and the generated headers are copied.
    Returns ``out_dir``. Never writes into ``rtl_dir``.
    """
    rtl_dir, out_dir = Path(rtl_dir).resolve(), Path(out_dir).resolve()
    if out_dir == rtl_dir or rtl_dir in out_dir.parents:
        raise MutationError(f"the schemata copy must be outside the RTL folder ({rtl_dir})")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    shutil.copytree(rtl_dir, out_dir)
    by_file: dict[str, list[tuple[int, Mutant]]] = {}
    for k, m in enumerate(mutants, 1):
        by_file.setdefault(m.file, []).append((k, m))
    for f, numbered in by_file.items():
        src = rtl_dir / f
        (out_dir / f).write_text(mutate_text(src.read_text(), numbered))
    return out_dir


def schemata_id(rtl_dir: Path, mutants: list[Mutant]) -> str:
    """A short hash of the RTL files and the mutant list: names the build of this schemata."""
    from hw.introspect.parse import source_files

    h = hashlib.sha256()
    for f in source_files(rtl_dir):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    for m in mutants:
        h.update(m.id.encode() + b"\0" + m.text.encode())
    return h.hexdigest()[:12]
