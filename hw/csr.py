"""The CSR map of the accelerator's AXI4-Lite slave: addresses, bits and error codes.

The RTL's constants come from the header generated from this module, the TLM's CSR
interface uses the same addresses, and a Program's register config is a list of
writes to these names. Imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass

VERSION = 0xACC0_0300  # magic 0xACC0, major 3 (several cores), minor 0

# CTRL bits (write 1; both self-clear)
CTRL_START = 1 << 0
CTRL_SOFT_RESET = 1 << 1
# STATUS bits
STATUS_BUSY = 1 << 0
STATUS_DONE = 1 << 1
STATUS_ERROR = 1 << 2
STATUS_ERR_CODE_SHIFT = 8
STATUS_ERR_CODE_MASK = 0xFF
STATUS_ERR_CORE_SHIFT = 16  # STATUS[19:16]: the core whose error is reported (0 on one core)
STATUS_ERR_CORE_MASK = 0xF
# REGIONn_ATTR bits
ATTR_READ = 1 << 0
ATTR_WRITE = 1 << 1

# Error codes reported in STATUS[15:8] (RTL) and carried by the TLM's errors.
ERR_NONE = 0
ERR_BAD_OPCODE = 1   # unknown opcode, ALU op or buffer, or non-zero reserved bits
ERR_BAD_FIELD = 2    # a field that encodes but is illegal (dependency flag of a missing stage, store padding)
ERR_DRAM_RANGE = 3   # a DMA would touch DRAM outside every region that allows it
ERR_SRAM_RANGE = 4   # a buffer index past the buffer's depth
ERR_DEADLOCK = 5     # every unit waits for a token that can never arrive
ERR_UNSUPPORTED = 6  # an instruction this hardware does not execute (none today; kept for future classes)
ERR_AXI_RESP = 7     # DRAM answered SLVERR or DECERR
ERR_INSN_RANGE = 8   # the instruction window is outside every readable region
ERR_UNLOADED = 9     # a GEMM reads a micro-op or weight block that no LOAD has written since START
ERR_BARRIER = 10     # a core waits at a BARRIER that another core, having FINISHed, can never reach

ERROR_NAMES = {
    ERR_NONE: "NONE", ERR_BAD_OPCODE: "BAD_OPCODE", ERR_BAD_FIELD: "BAD_FIELD",
    ERR_DRAM_RANGE: "DRAM_RANGE", ERR_SRAM_RANGE: "SRAM_RANGE", ERR_DEADLOCK: "DEADLOCK",
    ERR_UNSUPPORTED: "UNSUPPORTED", ERR_AXI_RESP: "AXI_RESP", ERR_INSN_RANGE: "INSN_RANGE",
    ERR_UNLOADED: "UNLOADED", ERR_BARRIER: "BARRIER",
}

# The codes each unit raises on its error lane (its ``err_code`` output, hw/rtl/<unit>.v; the TLM's
# ``TlmError.unit``): FETCH's window check and decoder, the DMA units' and the compute unit's range
# checks and GEMM's valid bits. The top adds TOP_ERRORS itself (a DRAM slave error, whichever unit's
# burst; a deadlock, reported at a blocked unit's pc; a BARRIER never reached). A bit that no code of a
# lane sets is constant on that lane (the coverage's error-code bounds).
DECODE_ERRORS = (ERR_BAD_OPCODE, ERR_BAD_FIELD)
UNIT_ERRORS: dict[str, tuple[int, ...]] = {
    "fetch": (ERR_INSN_RANGE, *DECODE_ERRORS),
    "load": (ERR_DRAM_RANGE, ERR_SRAM_RANGE),
    "compute": (ERR_SRAM_RANGE, ERR_UNLOADED),
    "store": (ERR_DRAM_RANGE, ERR_SRAM_RANGE),
}
TOP_ERRORS = (ERR_AXI_RESP, ERR_DEADLOCK, ERR_BARRIER)

REGION_BASE_ADDR = 0x100  # REGIONn_{BASE,SIZE,ATTR} at 0x100 + 16*n + {0,4,8}
REGION_STRIDE = 0x10
# Several cores: core k's own registers (its instruction window, ERR_PC, counters) in a bank at
# CORE_BANK_BASE + CORE_BANK_STRIDE * k; the fixed map's INSN_* / ERR_PC / counter addresses are
# core 0's bank under its old names (a one-core Program is written exactly as before).
CORE_BANK_BASE = 0x800
CORE_BANK_STRIDE = 0x80
MAX_CORES = 16


@dataclass(frozen=True)
class Csr:
    """One 32-bit register."""

    name: str
    addr: int
    access: str  # "rw", "ro" or "wo"
    doc: str


_FIXED = [
    Csr("CTRL", 0x000, "wo", "bit0 START, bit1 SOFT_RESET (write 1, self-clearing)"),
    Csr("STATUS", 0x004, "ro", "bit0 BUSY, bit1 DONE, bit2 ERROR, bits[15:8] error code, bits[19:16] the "
                               "core of the error"),
    Csr("VERSION", 0x008, "ro", "0xACC0_MMmm: magic, major, minor"),
    Csr("CONFIG_ID", 0x00C, "ro", "CRC32 of the hardware config this RTL was built for"),
    Csr("INSN_ADDR_LO", 0x010, "rw", "byte address of the instruction stream, low word (core 0)"),
    Csr("INSN_ADDR_HI", 0x014, "rw", "byte address of the instruction stream, high word (must be 0; core 0)"),
    Csr("INSN_COUNT", 0x018, "rw", "number of 16-byte instructions (core 0)"),
    Csr("ERR_PC", 0x01C, "ro", "index of the faulting instruction in the stream of STATUS's error core"),
    Csr("CYCLES_LO", 0x020, "ro", "cycles from START to DONE, low word"),
    Csr("CYCLES_HI", 0x024, "ro", "cycles from START to DONE, high word"),
    Csr("LOAD_BUSY", 0x028, "ro", "cycles the load unit executed an instruction"),
    Csr("COMPUTE_BUSY", 0x02C, "ro", "cycles the compute unit executed an instruction"),
    Csr("STORE_BUSY", 0x030, "ro", "cycles the store unit executed an instruction"),
    Csr("LOAD_STALL", 0x034, "ro", "cycles the load unit held an instruction waiting on tokens"),
    Csr("COMPUTE_STALL", 0x038, "ro", "cycles the compute unit held an instruction waiting on tokens"),
    Csr("STORE_STALL", 0x03C, "ro", "cycles the store unit held an instruction waiting on tokens"),
    Csr("LOAD_INSNS", 0x040, "ro", "instructions completed by the load unit"),
    Csr("COMPUTE_INSNS", 0x044, "ro", "instructions completed by the compute unit (FINISH included)"),
    Csr("STORE_INSNS", 0x048, "ro", "instructions completed by the store unit"),
    Csr("DMA_RD_BYTES", 0x04C, "ro", "bytes read from DRAM by LOAD"),
    Csr("DMA_WR_BYTES", 0x050, "ro", "bytes written to DRAM by STORE"),
    Csr("FETCH_BYTES", 0x054, "ro", "bytes of instructions read from DRAM by FETCH"),
    Csr("COMPUTE_WAIT", 0x058, "ro", "cycles the compute unit's EXECUTE waited for an accumulator port "
                                     "held by LOAD or STORE (part of COMPUTE_BUSY)"),
    Csr("GEMM_BUSY", 0x05C, "ro", "cycles the compute unit executed a GEMM instruction (part of COMPUTE_BUSY)"),
    Csr("GEMM_OPS", 0x060, "ro", "blocks multiplied by GEMM (iterations without reset): MACs = GEMM_OPS * "
                                 "BATCH * BLOCK * BLOCK"),
    Csr("CORES", 0x064, "ro", "number of cores (each with its register bank at 0x800 + 0x80 * core)"),
]

# Counters every model reports under these names (lower-case in results).
COUNTERS = ["LOAD_BUSY", "COMPUTE_BUSY", "STORE_BUSY", "LOAD_STALL", "COMPUTE_STALL", "STORE_STALL",
            "LOAD_INSNS", "COMPUTE_INSNS", "STORE_INSNS", "DMA_RD_BYTES", "DMA_WR_BYTES", "FETCH_BYTES",
            "COMPUTE_WAIT", "GEMM_BUSY", "GEMM_OPS"]


def region_csrs(n: int) -> list[Csr]:
    out = []
    for i in range(n):
        base = REGION_BASE_ADDR + REGION_STRIDE * i
        out += [Csr(f"REGION{i}_BASE", base, "rw", f"DRAM region {i}: first byte address"),
                Csr(f"REGION{i}_SIZE", base + 4, "rw", f"DRAM region {i}: size in bytes (0 = unused)"),
                Csr(f"REGION{i}_ATTR", base + 8, "rw", f"DRAM region {i}: bit0 readable, bit1 writable")]
    return out


# A core bank's registers: (name, offset, access); the counters follow from 0x10 in COUNTERS order.
BANK_FIXED = [("INSN_ADDR_LO", 0x00, "rw"), ("INSN_ADDR_HI", 0x04, "rw"), ("INSN_COUNT", 0x08, "rw"),
              ("ERR_PC", 0x0C, "ro")]
BANK_COUNTERS_OFFSET = 0x10


def bank_registers() -> list[tuple[str, int, str]]:
    """The registers of one core's bank: (name without the ``COREk_`` prefix, offset, access)."""
    return BANK_FIXED + [(n, BANK_COUNTERS_OFFSET + 4 * i, "ro") for i, n in enumerate(COUNTERS)]


def core_csrs(num_cores: int) -> list[Csr]:
    """The ``COREk_*`` banks of ``num_cores`` cores (none for one core: its registers are the fixed map's)."""
    if num_cores <= 1:
        return []
    fixed = {c.name: c for c in _FIXED}
    out = []
    for k in range(num_cores):
        base = CORE_BANK_BASE + CORE_BANK_STRIDE * k
        for name, off, access in bank_registers():
            doc = fixed[name].doc.replace(" (core 0)", "").replace("; core 0)", ")")
            if name == "ERR_PC":
                doc = "index of the faulting instruction when this core is STATUS's error core, else 0"
            out.append(Csr(f"CORE{k}_{name}", base + off, access, f"core {k}: {doc}"))
    return out


def csr_map(max_regions: int, num_cores: int = 1) -> list[Csr]:
    """Every register of a config with ``max_regions`` DRAM region slots and ``num_cores`` cores."""
    return _FIXED + region_csrs(max_regions) + core_csrs(num_cores)


def csr_by_name(max_regions: int, num_cores: int = 1) -> dict[str, Csr]:
    return {c.name: c for c in csr_map(max_regions, num_cores)}


def csr_by_addr(max_regions: int, num_cores: int = 1) -> dict[int, Csr]:
    return {c.addr: c for c in csr_map(max_regions, num_cores)}


def csrs_of(cfg) -> dict[str, Csr]:  # noqa: ANN001 - any object with max_regions and num_cores
    """The register map of a hardware config, by name."""
    return csr_by_name(int(cfg.max_regions), int(getattr(cfg, "num_cores", 1)))


def core_reg(name: str, core: int, num_cores: int) -> str:
    """The CSR name of core ``core``'s register ``name`` (``INSN_COUNT``, ``LOAD_BUSY``, ...): the fixed
    map's name on a one-core config, ``COREk_NAME`` otherwise."""
    return name if num_cores <= 1 else f"CORE{core}_{name}"


def decode_status(status: int) -> dict[str, object]:
    """STATUS as a dict: busy, done, error, err_code, err_name, err_core."""
    code = (status >> STATUS_ERR_CODE_SHIFT) & STATUS_ERR_CODE_MASK
    return {"busy": bool(status & STATUS_BUSY), "done": bool(status & STATUS_DONE),
            "error": bool(status & STATUS_ERROR), "err_code": code, "err_name": ERROR_NAMES.get(code, "?"),
            "err_core": (status >> STATUS_ERR_CORE_SHIFT) & STATUS_ERR_CORE_MASK}


def counter_reads(num_cores: int) -> list[str]:
    """The CSRs a driver reads for the counters: the fixed map's on one core, every core's bank on several."""
    return list(COUNTERS) if num_cores <= 1 else [f"CORE{k}_{c}" for k in range(num_cores) for c in COUNTERS]


def counters_of(values: dict[str, int], num_cores: int) -> tuple[dict[str, int], list[dict[str, int]] | None]:
    """The counters under their lower-case names from the values of :func:`counter_reads`: the totals
    over the cores and, on several cores, each core's (None on one core)."""
    if num_cores <= 1:
        return {c.lower(): values[c] for c in COUNTERS if c in values}, None
    per = [{c.lower(): values[f"CORE{k}_{c}"] for c in COUNTERS} for k in range(num_cores)]
    return {c.lower(): sum(p[c.lower()] for p in per) for c in COUNTERS}, per


def status_error(status: int, err_pc: int, num_cores: int) -> dict[str, object]:
    """A RunResult error dict from STATUS and ERR_PC (``core`` too on several cores)."""
    st = decode_status(status)
    where = f"core {st['err_core']} instruction {err_pc}" if num_cores > 1 else f"instruction {err_pc}"
    d: dict[str, object] = {"code": st["err_code"], "name": st["err_name"], "pc": err_pc,
                            "message": f"STATUS=0x{status:08x}: {st['err_name']} at {where}"}
    if num_cores > 1:
        d["core"] = st["err_core"]
    return d
