"""FETCH's dispatch-time decoder: a 128-bit word -> instruction, or the error code it earns.

The TLM decodes the binary itself (never the kernel). What a word means and the order
in which its faults are checked (docs/microarch.md "FETCH") are
:func:`hw.isa_semantics.classify_word`, shared with the ISS; this module only caches it
per word for the dispatch loop.
"""

from __future__ import annotations

from hw.isa import Instruction, Isa
from hw.isa_semantics import WordClassifier


class Decoder:
    """Decodes and classifies instruction words for one config, caching by word."""

    def __init__(self, isa: Isa):
        self.isa = isa
        self._classifier = WordClassifier(isa)

    def decode(self, word: int) -> tuple[Instruction | None, int, str]:
        """``(insn, ERR_NONE, "")`` for a good word, else ``(None or insn, code, message)``."""
        return self._classifier.classify(word)
