"""The CSR block (``hw/rtl/csr_block.v``): the register file behind the AXI4-Lite interface.

Writes land in the register file (read-only registers ignore them, as the RTL does);
``CTRL`` is a command, not a register: :meth:`CsrBlock.write` returns its START /
SOFT_RESET bits for the top to act on. Reads decode the register map of ``hw/csr.py``:
STATUS, ERR_PC, CYCLES and the counters show the run's :class:`RunStatus`, which the top
hands in; VERSION and CONFIG_ID are constants. The region windows and the instruction
window are read from the register file at START. The run control the RTL's block also
holds (error arbitration, deadlock detection, DONE) is the top's (``accel_top.py``), since
in the TLM it follows from the units' events rather than from per-cycle counters.
"""

from __future__ import annotations

from dataclasses import dataclass

from hw import csr
from hw.config import HwConfig
from sim.tlm.errors import TlmError
from sim.tlm.region_check import RegionWindow

_A = {c.name: c.addr for c in csr.csr_map(16)}


@dataclass(frozen=True)
class RunStatus:
    """What the core shows through the status registers when they are read."""

    busy: bool
    done: bool
    error: TlmError | None
    cycles: int
    counters: list[dict[str, int]]  # per core


class CsrBlock:
    """The register file of one accelerator (kept across runs, as the RTL's is)."""

    def __init__(self, cfg: HwConfig):
        self.cfg = cfg
        self._map = csr.csr_by_addr(cfg.max_regions, cfg.num_cores)
        self.regs: dict[int, int] = {}
        # the registers of each core's bank by address: (core, name without COREk_); the fixed
        # INSN_*, ERR_PC and counter addresses are core 0's
        self._bank: dict[int, tuple[int, str]] = {_A[n]: (0, n) for n, _, _ in csr.bank_registers()}
        if cfg.num_cores > 1:
            for k in range(cfg.num_cores):
                for n, off, _ in csr.bank_registers():
                    self._bank[csr.CORE_BANK_BASE + csr.CORE_BANK_STRIDE * k + off] = (k, n)
        self._where = {v: a for a, v in self._bank.items() if a < csr.CORE_BANK_BASE}  # (core, name) -> fixed

    def write(self, addr: int, value: int) -> int:
        """An AXI4-Lite write; returns the CTRL bits written (0 for any other register)."""
        reg = self._map.get(addr)
        if reg is None:
            raise ValueError(f"write to unmapped CSR address 0x{addr:03x}")
        value &= 0xFFFFFFFF
        if reg.name == "CTRL":
            return value & (csr.CTRL_START | csr.CTRL_SOFT_RESET)
        if reg.access != "ro":
            self.regs[self._home(addr)] = value
        return 0

    def _home(self, addr: int) -> int:
        """The one address a register is kept under (core 0's bank: its fixed address)."""
        return self._where.get(self._bank[addr], addr) if addr in self._bank else addr

    def read(self, addr: int, run: RunStatus) -> int:
        """An AXI4-Lite read, the status registers showing ``run``."""
        reg = self._map.get(addr)
        if reg is None:
            raise ValueError(f"read of unmapped CSR address 0x{addr:03x}")
        n = reg.name
        if n == "CTRL":
            return 0
        if n == "STATUS":
            s = 0
            if run.busy:
                s |= csr.STATUS_BUSY
            if run.done:
                s |= csr.STATUS_DONE
            if run.error is not None:
                s |= csr.STATUS_ERROR | (run.error.code << csr.STATUS_ERR_CODE_SHIFT) | \
                    (run.error.core << csr.STATUS_ERR_CORE_SHIFT)
            return s
        if n == "VERSION":
            return csr.VERSION
        if n == "CONFIG_ID":
            return self.cfg.config_id
        if n == "CORES":
            return self.cfg.num_cores
        if n == "CYCLES_LO":
            return run.cycles & 0xFFFFFFFF
        if n == "CYCLES_HI":
            return run.cycles >> 32
        if addr in self._bank:
            core, name = self._bank[addr]
            if name == "ERR_PC":
                return run.error.pc if run.error is not None and (run.error.core == core or n == "ERR_PC") else 0
            if name in csr.COUNTERS:
                return run.counters[core][name.lower()] & 0xFFFFFFFF
        return self.regs.get(self._home(addr), 0)

    def insn_window(self, core: int = 0) -> tuple[int, int, int]:
        """Core ``core``'s ``(INSN_ADDR_LO, INSN_ADDR_HI, INSN_COUNT)`` as written."""
        return tuple(self.regs.get(self._home(self._addr(core, n)), 0)  # type: ignore[return-value]
                     for n in ("INSN_ADDR_LO", "INSN_ADDR_HI", "INSN_COUNT"))

    def _addr(self, core: int, name: str) -> int:
        return _A[name] if core == 0 else next(a for a, v in self._bank.items() if v == (core, name))

    def regions(self) -> list[RegionWindow]:
        """The region windows currently programmed."""
        out = []
        for i in range(self.cfg.max_regions):
            a = csr.REGION_BASE_ADDR + csr.REGION_STRIDE * i
            out.append(RegionWindow(self.regs.get(a, 0), self.regs.get(a + 4, 0), self.regs.get(a + 8, 0)))
        return out
