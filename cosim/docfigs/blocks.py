"""The marked blocks of a Markdown page that a generator owns, found and rewritten in place.

A block is ``<!-- figures: NAME -->TEXT<!-- /figures -->`` (on one line or across lines); a block of
an expensive figure records the hash of its inputs in the opening marker,
``<!-- figures: NAME inputs=HASH -->``, so a changed input (an RTL file, the synthesis script) shows
it stale without running the expensive command. Everything outside the markers is prose and is
never touched; a marker written in backquotes (`` `<!-- /figures -->` ``) is prose too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

BLOCK_RE = re.compile(r"<!-- figures: (?P<name>[a-z0-9][a-z0-9-]*)(?: inputs=(?P<inputs>[0-9a-f]+))? -->"
                      r"(?P<body>.*?)<!-- /figures -->", re.S)
OPEN_RE = re.compile(r"<!-- figures:")
CLOSE = "<!-- /figures -->"


class BlockError(ValueError):
    """A page's markers are malformed (one line naming the page and the line)."""


@dataclass(frozen=True)
class Block:
    """One marked block of a page."""

    page: Path
    name: str
    inputs: str | None  # the recorded inputs hash (expensive figures), else None
    body: str           # the text between the markers
    line: int           # 1-based line of the opening marker


def find_blocks(page: Path, text: str | None = None) -> list[Block]:
    """Every block of ``page`` in order; a stray or unknown-form marker is a :class:`BlockError`."""
    text = page.read_text() if text is None else text
    blocks = []
    covered: list[tuple[int, int]] = []
    for m in BLOCK_RE.finditer(text):
        if _quoted(text, m.start()):
            continue
        line = text.count("\n", 0, m.start()) + 1
        if OPEN_RE.search(m.group("body")):
            raise BlockError(f"{page}:{line}: block '{m.group('name')}' has no closing {CLOSE} before the next block")
        blocks.append(Block(page, m.group("name"), m.group("inputs"), m.group("body"), line))
        covered.append((m.start(), m.end()))
    for m in list(OPEN_RE.finditer(text)) + list(re.finditer(re.escape(CLOSE), text)):
        if not any(a <= m.start() < b for a, b in covered) and not _quoted(text, m.start()):
            line = text.count("\n", 0, m.start()) + 1
            raise BlockError(f"{page}:{line}: a figures marker that is not part of a well-formed block "
                             f"(<!-- figures: NAME --> ... {CLOSE})")
    return blocks


def _quoted(text: str, at: int) -> bool:
    """A marker inside backquotes is prose about the syntax (as in the README), not a marker."""
    return at > 0 and text[at - 1] == "`"


def render(name: str, body: str, inputs: str | None = None) -> str:
    """The whole block text for ``name`` with ``body`` (and the inputs hash of an expensive figure)."""
    return f"<!-- figures: {name}{f' inputs={inputs}' if inputs else ''} -->{body}{CLOSE}"


def fit_body(old: str, generated: str) -> str:
    """``generated`` laid out like the block it replaces: a block whose markers stand on their own
    lines keeps them there (a leading and trailing newline), an inline block stays inline."""
    if old.startswith("\n"):
        return "\n" + generated.strip("\n") + "\n"
    return generated.strip("\n")


def same_text(a: str, b: str) -> bool:
    """Whether two block bodies say the same, whatever their line wrapping (a page wraps its prose)."""
    return a.split() == b.split()
