"""Check and regenerate every marked block of the docs (what `cosim docs` and `make docs` run).

A cheap block is stale when its text differs from what its figure computes now; an expensive block
when its recorded inputs hash differs from the current one (``--expensive`` recomputes it). Every
stale block is one line: page, line, name, why, and the command that regenerates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from cosim.docfigs.blocks import Block, find_blocks, fit_body, render, same_text
from cosim.docfigs.figures import FIGURES, REPO, Context, Figure, pages


@dataclass(frozen=True)
class Stale:
    """One block whose text (or recorded inputs) is not what the sources give now."""

    block: Block
    why: str
    command: str

    def line(self) -> str:
        where = self.block.page.relative_to(REPO) if self.block.page.is_relative_to(REPO) else self.block.page
        return f"stale: {where}:{self.block.line} figures '{self.block.name}': {self.why} (run `{self.command}`)"


def _selected(names: Sequence[str] | None) -> dict[str, Figure]:
    if not names:
        return dict(FIGURES)
    unknown = [n for n in names if n not in FIGURES]
    if unknown:
        raise ValueError(f"unknown figure(s) {', '.join(unknown)} (known: {', '.join(FIGURES)})")
    return {n: FIGURES[n] for n in names}


def all_blocks(page_list: Sequence[Path] | None = None) -> list[Block]:
    """Every block of the pages; a block naming no known figure is an error naming it."""
    out = []
    for page in page_list or pages():
        for b in find_blocks(page):
            if b.name not in FIGURES:
                raise ValueError(f"{page}:{b.line}: figures block '{b.name}' names no figure "
                                 f"(known: {', '.join(FIGURES)})")
            out.append(b)
    return out


def _differs(old: str, new: str) -> str:
    """A short account of the first difference between a block's text and the computed one."""
    a, b = " ".join(old.split()), " ".join(new.split())
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"the text differs at '{a[max(0, k - 20):k + 30]}' (now '{b[max(0, k - 20):k + 30]}')".replace("\n", " ")


def check(names: Sequence[str] | None = None, expensive: bool = False, page_list: Sequence[Path] | None = None,
          progress: Callable[[str], None] | None = None) -> list[Stale]:
    """The stale blocks of the selected figures: cheap ones recomputed; expensive ones by their
    inputs hash (and recomputed too with ``expensive``)."""
    chosen = _selected(names)
    ctx = Context(progress)
    stale = []
    inputs_now: dict[str, str] = {}
    for b in all_blocks(page_list):
        fig = chosen.get(b.name)
        if fig is None:
            continue
        if fig.inputs is not None:
            now = inputs_now.setdefault(fig.name, fig.inputs())
            if b.inputs != now:
                stale.append(Stale(b, f"its inputs changed (recorded {b.inputs or 'none'}, now {now})", fig.command))
                continue
            if not expensive:
                continue
        new = fit_body(b.body, fig.make(ctx))
        if not same_text(new, b.body):
            stale.append(Stale(b, _differs(b.body, new), fig.command))
    return stale


def regenerate(names: Sequence[str] | None = None, expensive: bool = False, page_list: Sequence[Path] | None = None,
               progress: Callable[[str], None] | None = None) -> list[tuple[Path, str]]:
    """Rewrite the selected blocks in place (expensive ones only with ``expensive``); returns the
    (page, figure) pairs whose text changed."""
    chosen = {n: f for n, f in _selected(names).items() if expensive or not f.expensive}
    ctx = Context(progress)
    changed = []
    by_page: dict[Path, list[Block]] = {}
    for b in all_blocks(page_list):
        if b.name in chosen:
            by_page.setdefault(b.page, []).append(b)
    inputs = {n: f.inputs() for n, f in chosen.items() if f.inputs is not None}
    for page, blocks in by_page.items():
        text = page.read_text()
        new_text = text
        for b in blocks:  # one block at a time: the same figure may stand inline and as a paragraph
            body = fit_body(b.body, chosen[b.name].make(ctx))
            if same_text(body, b.body):
                body = b.body  # the same figures: keep the page's wrapping
            new_text = new_text.replace(render(b.name, b.body, b.inputs), render(b.name, body, inputs.get(b.name)), 1)
            if body != b.body or b.inputs != inputs.get(b.name):
                changed.append((page, b.name))
        if new_text != text:
            page.write_text(new_text)
    return changed
