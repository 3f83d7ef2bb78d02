"""The CSR map of the accelerator's AXI4-Lite slave: addresses, bits and error codes.

The RTL's constants come from the header generated from this module, the TLM's CSR
interface uses the same addresses, and a Program's register config is a list of
writes to these names. Imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass

VERSION = 0xACC0_0200  # magic 0xACC0, major 2 (GEMM core), minor 0

# CTRL bits (write 1; both self-clear)
CTRL_START = 1 << 0
CTRL_SOFT_RESET = 1 << 1
# STATUS bits
STATUS_BUSY = 1 << 0
STATUS_DONE = 1 << 1
STATUS_ERROR = 1 << 2
STATUS_ERR_CODE_SHIFT = 8
STATUS_ERR_CODE_MASK = 0xFF
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

ERROR_NAMES = {
    ERR_NONE: "NONE", ERR_BAD_OPCODE: "BAD_OPCODE", ERR_BAD_FIELD: "BAD_FIELD",
    ERR_DRAM_RANGE: "DRAM_RANGE", ERR_SRAM_RANGE: "SRAM_RANGE", ERR_DEADLOCK: "DEADLOCK",
    ERR_UNSUPPORTED: "UNSUPPORTED", ERR_AXI_RESP: "AXI_RESP", ERR_INSN_RANGE: "INSN_RANGE",
    ERR_UNLOADED: "UNLOADED",
}

REGION_BASE_ADDR = 0x100  # REGIONn_{BASE,SIZE,ATTR} at 0x100 + 16*n + {0,4,8}
REGION_STRIDE = 0x10


@dataclass(frozen=True)
class Csr:
    """One 32-bit register."""

    name: str
    addr: int
    access: str  # "rw", "ro" or "wo"
    doc: str


_FIXED = [
    Csr("CTRL", 0x000, "wo", "bit0 START, bit1 SOFT_RESET (write 1, self-clearing)"),
    Csr("STATUS", 0x004, "ro", "bit0 BUSY, bit1 DONE, bit2 ERROR, bits[15:8] error code"),
    Csr("VERSION", 0x008, "ro", "0xACC0_MMmm: magic, major, minor"),
    Csr("CONFIG_ID", 0x00C, "ro", "CRC32 of the hardware config this RTL was built for"),
    Csr("INSN_ADDR_LO", 0x010, "rw", "byte address of the instruction stream, low word"),
    Csr("INSN_ADDR_HI", 0x014, "rw", "byte address of the instruction stream, high word (must be 0)"),
    Csr("INSN_COUNT", 0x018, "rw", "number of 16-byte instructions"),
    Csr("ERR_PC", 0x01C, "ro", "index of the faulting instruction"),
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


def csr_map(max_regions: int) -> list[Csr]:
    """Every register of a config with ``max_regions`` DRAM region slots, by address."""
    return _FIXED + region_csrs(max_regions)


def csr_by_name(max_regions: int) -> dict[str, Csr]:
    return {c.name: c for c in csr_map(max_regions)}


def csr_by_addr(max_regions: int) -> dict[int, Csr]:
    return {c.addr: c for c in csr_map(max_regions)}


def decode_status(status: int) -> dict[str, object]:
    """STATUS as a dict: busy, done, error, err_code, err_name."""
    code = (status >> STATUS_ERR_CODE_SHIFT) & STATUS_ERR_CODE_MASK
    return {"busy": bool(status & STATUS_BUSY), "done": bool(status & STATUS_DONE),
            "error": bool(status & STATUS_ERROR), "err_code": code, "err_name": ERROR_NAMES.get(code, "?")}
