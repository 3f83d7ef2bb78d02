"""What every model returns for one run of a Program, so results compare field by field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RunResult:
    """Outputs, cycles and counters of one model's run of one Program.

    ``counters`` uses the lower-case names of ``hw.csr.COUNTERS`` (``load_busy``,
    ``dma_rd_bytes``, ...). ``error`` is None for a clean run, else a dict with
    ``code`` (``hw.csr`` error number), ``name``, ``pc`` and, where the model knows
    them, ``unit``, ``cycle`` and ``message``.
    """

    model: str
    outputs: dict[str, np.ndarray]
    cycles: int | None = None
    counters: dict[str, int] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary (outputs are left out; they are compared, not printed)."""
        d: dict[str, Any] = {"model": self.model, "cycles": self.cycles, "wall_s": round(self.wall_s, 6),
                             "error": self.error}
        d.update(self.counters)
        d.update(self.extra)
        return d


def byte_size(n: int) -> str:
    """``n`` bytes for a person: ``812 B``, ``97.7 KB``, ``128.0 MB`` (powers of 1000)."""
    if n < 1000:
        return f"{n} B"
    return f"{n / 1e3:.1f} KB" if n < 1_000_000 else f"{n / 1e6:.1f} MB"
