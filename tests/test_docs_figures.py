"""`cosim docs`: every measured figure of README.md and docs/*.md is current.

The cheap figures (TLM and golden runs, the ISA: seconds) are recomputed and compared with the pages;
the expensive ones (synthesis, the example sweep) are checked by the inputs hash their block records,
and one of them, `small` on ECP5 (about 15 s of yosys, or the synthesis cache), is recomputed as a
sample. A stale block fails with the line `cosim docs --check` prints and the command to run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hw.config import load_config
from cosim.cli import main
from cosim.docfigs.blocks import BlockError, find_blocks
from cosim.docfigs.figures import FIGURES, Context, ff_bound_terms
from cosim.docfigs.refresh import all_blocks, check, regenerate

CHEAP = [n for n, f in FIGURES.items() if not f.expensive]
EXPENSIVE = [n for n, f in FIGURES.items() if f.expensive]


def test_cheap_figures_are_current() -> None:
    stale = check(CHEAP)
    assert not stale, "\n".join(s.line() for s in stale)


def test_expensive_figures_record_the_current_inputs() -> None:
    """A changed RTL file, synthesis script, yosys, compiler or TLM makes this fail until `make docs`."""
    stale = check(EXPENSIVE)
    assert not stale, "\n".join(s.line() for s in stale)


def test_inputs_hash_reads_code_not_comments(tmp_path: Path) -> None:
    """The sweep's hash moves with what the code does, not with a comment, docstring or layout edit."""
    from cosim.docfigs.figures import _code_bytes
    src = tmp_path / "m.py"
    src.write_text('"""Doc."""\ndef f(x):\n    """Doc."""\n    return x + 1  # why\n')
    before = _code_bytes(src)
    src.write_text('"""Other words."""\n\n\ndef f(x):\n    """More."""\n    # a comment\n    return (x + 1)\n')
    assert _code_bytes(src) == before
    src.write_text('"""Doc."""\ndef f(x):\n    """Doc."""\n    return x + 2\n')
    assert _code_bytes(src) != before
    src.write_text('def f(x):\n    """Only a docstring."""\n')
    assert _code_bytes(src) != before
    (tmp_path / "bad.py").write_text("def (:\n")
    assert _code_bytes(tmp_path / "bad.py") == b"def (:\n"


def test_every_figure_stands_on_a_page() -> None:
    assert {b.name for b in all_blocks()} == set(FIGURES)


def test_sampled_synthesis_row_is_what_yosys_gives() -> None:
    """The `small` ECP5 row of docs/synthesis.md's table, recomputed (or read from the synthesis cache,
    whose key hashes the same inputs)."""
    page = Path(__file__).resolve().parents[1] / "docs" / "synthesis.md"
    block = next(b for b in find_blocks(page) if b.name == "synth-table")
    row = next(line for line in block.body.splitlines() if line.startswith("| small | ecp5 |"))
    a = Context().area("small", "ecp5")
    cells = [c.strip().replace(",", "") for c in row.strip("|").split("|")]
    assert cells[2:6] == [str(a["cells"]), str(a["ffs"]), str(a["luts"]), str(a["brams"])], (row, a)


def test_ff_bound_is_the_one_the_synthesis_test_checks() -> None:
    from tests.test_synth import flip_flop_bound
    for name in ("small", "default"):
        cfg = load_config(name)
        assert sum(ff_bound_terms(cfg).values()) == flip_flop_bound(cfg)


def test_a_stale_block_is_one_line_and_regenerated(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("ALU ops: <!-- figures: alu-ops -->ADD SUB<!-- /figures -->.\n\nprose 1,234 stays\n")
    stale = check(["alu-ops"], page_list=[page])
    assert len(stale) == 1 and "\n" not in stale[0].line()
    assert re.search(r"p\.md:1 figures 'alu-ops': the text differs .*run `cosim docs`", stale[0].line())
    assert regenerate(["alu-ops"], page_list=[page]) == [(page, "alu-ops")]
    text = page.read_text()
    assert "MULHR" in text and text.endswith("prose 1,234 stays\n") and check(["alu-ops"], page_list=[page]) == []
    assert regenerate(["alu-ops"], page_list=[page]) == []  # the same figures: nothing rewritten


def test_an_expensive_block_with_old_inputs_is_stale_without_recomputing(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("<!-- figures: synth-readme inputs=0123456789abcdef -->old<!-- /figures -->\n")
    [s] = check(["synth-readme"], page_list=[page])
    assert "its inputs changed (recorded 0123456789abcdef" in s.line() and "cosim docs --expensive" in s.line()


@pytest.mark.parametrize("text, want", [
    ("<!-- figures: alu-ops -->x\n", "not part of a well-formed block"),
    ("x<!-- /figures -->\n", "not part of a well-formed block"),
    ("<!-- figures: alu-ops -->a <!-- figures: digits -->b<!-- /figures -->\n", "no closing"),
])
def test_malformed_markers_are_one_line(tmp_path: Path, text: str, want: str) -> None:
    page = tmp_path / "p.md"
    page.write_text(text)
    with pytest.raises(BlockError, match=want):
        find_blocks(page)


def test_unknown_figure_and_cli_check(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    page = tmp_path / "p.md"
    page.write_text("<!-- figures: no-such -->1<!-- /figures -->\n")
    with pytest.raises(ValueError, match="names no figure"):
        all_blocks([page])
    assert main(["docs", "--check", "--quiet", "nope"]) == 2
    assert "unknown figure(s) nope" in capsys.readouterr().err
    assert main(["docs", "--check", "--quiet", "alu-ops"]) == 0
    assert "every figures block is current" in capsys.readouterr().out
