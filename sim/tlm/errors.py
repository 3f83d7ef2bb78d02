"""The TLM's run-time error: what stopped the accelerator, where and when."""

from __future__ import annotations

from typing import Any

from hw import csr


class TlmError(Exception):
    """A fault that stopped a TLM run (the TLM's STATUS.error).

    Attributes: ``code`` (``hw.csr.ERR_*``), ``name`` (``hw.csr.ERROR_NAMES``), ``pc``
    (instruction index, the value of ERR_PC), ``unit`` ('fetch', 'load', 'compute',
    'store' or None), ``cycle`` (when the fault was raised), ``message`` (one line) and ``core``
    (the core whose instruction it is; STATUS.ERR_CORE).
    """

    def __init__(self, code: int, pc: int, unit: str | None, cycle: int, message: str, core: int = 0):
        self.code = int(code)
        self.core = int(core)
        self.name = csr.ERROR_NAMES.get(self.code, "?")
        self.pc = int(pc)
        self.unit = unit
        self.cycle = int(cycle)
        self.message = message.splitlines()[0] if message else self.name
        super().__init__(f"ERR_{self.name} at instruction {self.pc} (unit {self.unit or '-'}, "
                         f"cycle {self.cycle}): {self.message}")

    def to_dict(self, num_cores: int = 1) -> dict[str, Any]:
        """The RunResult ``error`` dict (with ``core`` on a config of several cores)."""
        d: dict[str, Any] = {"code": self.code, "name": self.name, "pc": self.pc, "unit": self.unit,
                             "cycle": self.cycle, "message": self.message}
        if num_cores > 1:
            d["core"] = self.core
        return d
