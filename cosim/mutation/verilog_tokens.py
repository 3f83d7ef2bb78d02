"""A token-level view of Verilog-2005 source: enough to find where mutants go, never to elaborate.

Tokens keep their character span in the source, so a mutant replaces exact text and the rest of
the file stays byte for byte as it was. Comments and whitespace are dropped from the token list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Longest operators first, so `<<<` is not read as `<<` `<`.
_OPS = ["<<<", ">>>", "===", "!==", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "~&", "~|", "~^", "^~",
        "+:", "-:", "**", "(*", "*)"]
_TOKEN_RE = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<comment>//[^\n]*|/\*.*?\*/)"
    r"|(?P<string>\"(?:\\.|[^\"\\])*\")"
    r"|(?P<number>(?:\d[\d_]*)?\s*'[sS]?[bBoOdDhH]\s*[0-9a-fA-FxXzZ_?]+|\d[\d_]*(?:\.\d+)?)"
    r"|(?P<directive>`[A-Za-z_]\w*)"
    r"|(?P<ident>[A-Za-z_][\w$]*|\\\S+)"
    r"|(?P<system>\$[A-Za-z_][\w$]*)"
    r"|(?P<op>" + "|".join(re.escape(o) for o in _OPS) + r"|[-+*/%&|^~!<>=?:;,.#@(){}\[\]])",
    re.S)
OPENERS = {"(": ")", "[": "]", "{": "}", "(*": "*)"}
CLOSERS = {v: k for k, v in OPENERS.items()}


class TokenError(ValueError):
    """The source has a character the tokenizer does not know."""


@dataclass(frozen=True)
class Token:
    """One token: its kind (number, ident, directive, string, system, op), text and span in the source."""

    kind: str
    text: str
    start: int
    end: int


def tokenize(text: str, where: str = "source") -> list[Token]:
    """The tokens of ``text`` (comments and whitespace dropped)."""
    out: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None or m.end() == pos:
            line = text.count("\n", 0, pos) + 1
            raise TokenError(f"{where}:{line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup or "op"
        if kind not in ("ws", "comment"):
            out.append(Token(kind, m.group(), m.start(), m.end()))
        pos = m.end()
    return out


def matching(tokens: list[Token], i: int) -> int:
    """The index of the bracket that closes the opener at ``i``."""
    depth = 0
    for j in range(i, len(tokens)):
        t = tokens[j].text
        if t in OPENERS:
            depth += 1
        elif t in CLOSERS:
            depth -= 1
            if depth == 0:
                return j
    raise TokenError(f"unbalanced {tokens[i].text!r} at offset {tokens[i].start}")


def line_of(text: str, offset: int) -> int:
    """The 1-based line of a character offset."""
    return text.count("\n", 0, offset) + 1


_NUM_RE = re.compile(r"^(?:(\d[\d_]*)\s*)?'([sS]?)([bBoOdDhH])\s*([0-9a-fA-F_]+)$")
_BASES = {"b": 2, "o": 8, "d": 10, "h": 16}


def number_value(text: str) -> tuple[int | None, bool, int] | None:
    """(size or None, signed, value) of a literal without x/z digits; None for one this cannot read."""
    if re.fullmatch(r"\d[\d_]*", text):
        return None, True, int(text.replace("_", ""))
    m = _NUM_RE.match(text)
    if not m:
        return None
    size = int(m.group(1).replace("_", "")) if m.group(1) else None
    return size, bool(m.group(2)), int(m.group(4).replace("_", ""), _BASES[m.group(3).lower()])


def number_text(size: int | None, signed: bool, value: int, unsized_decimal: bool) -> str:
    """A literal of ``value`` in the style of the one it replaces (decimal digits)."""
    if unsized_decimal:
        return str(value)
    return f"{size if size is not None else ''}'{'s' if signed else ''}d{value}"
