"""The hardware configuration: one JSON file per accelerator variant, one frozen object.

Every size used by the compiler, golden path, TLM, RTL header and testbench derives
from :class:`HwConfig`. This module imports nothing of the project but the ISA's fixed sizes
(``hw/isa.py``: the instruction and micro-op word) and the CSR map's core limit (``hw/csr.py``),
so every other part can depend on it.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from hw.csr import MAX_CORES
from hw.isa import INSN_BYTES, UOP_BYTES

CONFIG_DIR = Path(__file__).resolve().parent / "configs"

# Buffer indices share one instruction field width; 11 bits (2048 entries) is the
# widest that keeps the GEMM and ALU encodings within one 128-bit word.
MAX_BUFFER_DEPTH = 2048
# The compiler's elementwise tiles need two ping-pong input halves of two operand
# vectors, two ping-pong output halves of one vector and up to two constant vectors
# (8 at one vector per tile), so smaller buffers cannot hold one tile.
MIN_ACC_DEPTH = 8
# GEMM's uop_begin / uop_end fields must fit beside the loop and factor fields; the micro-op buffer's
# depth also sets the shared buffer index width, so 4096 entries (12-bit indices) would make GEMM 133 bits.
MAX_UOP_DEPTH = 2048
# The instruction queues' depths are powers of two up to this; the token queues' counts fit 8 bits.
MAX_INSN_QUEUE_DEPTH = 256
MAX_TOKEN_QUEUE_DEPTH = 255
# INSN_BYTES and UOP_BYTES are the encoding's (hw/isa.py): a micro-op is one 16-byte word in DRAM,
# so a LOAD into the micro-op buffer moves whole beats on every bus width.


class ConfigError(ValueError):
    """A configuration file is missing, malformed or describes impossible hardware."""


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice (``json`` would keep the last value silently)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for files people write by hand: a key given twice is refused, not
    silently replaced by its last value."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"key '{key}' is given twice")
        out[key] = value
    return out


def _is_pow2(v: int) -> bool:
    return v > 0 and (v & (v - 1)) == 0


def clog2(v: int) -> int:
    """Bits needed to index ``v`` entries (at least 1)."""
    return max(1, (v - 1).bit_length())


# Config keys of the DRAM the accelerator is attached to, not of the accelerator: the TLM and the
# simulators' DRAM model take them, no RTL file does, so they are run-time inputs of a simulation.
DRAM_MODEL_KEYS = ("dram_read_latency", "dram_write_latency")

@dataclass(frozen=True)
class HwConfig:
    """A validated accelerator configuration with every derived size as a property."""

    name: str
    description: str
    block: int
    batch: int
    inp_width: int
    wgt_width: int
    acc_width: int
    out_width: int
    acc_depth: int
    inp_depth: int
    wgt_depth: int
    uop_depth: int
    bus_width: int
    dram_bytes: int
    dram_read_latency: int
    dram_write_latency: int
    max_burst: int
    load_queue_depth: int
    compute_queue_depth: int
    store_queue_depth: int
    token_queue_depth: int
    max_regions: int
    num_cores: int
    # read bursts the one AXI port may have in flight at once (AXI IDs per core and client); 1 is
    # one burst at a time on the whole port. Optional in a config file (default 1).
    dram_reads_in_flight: int = 1
    # write bursts the port may have outstanding (B responses pending; AXI IDs per core's STORE); 1
    # is one write at a time, alone on the port. Optional in a config file (default 1).
    dram_writes_in_flight: int = 1
    source: str = ""  # file it was read from; not part of the hardware identity

    # ---- derived sizes -------------------------------------------------------
    @property
    def lanes(self) -> int:
        """Elements in one buffer vector (batch x block)."""
        return self.batch * self.block

    @property
    def bus_bytes(self) -> int:
        return self.bus_width // 8

    @property
    def acc_vec_bytes(self) -> int:
        """Bytes of one accumulator vector in DRAM (what LOAD moves per vector)."""
        return self.lanes * self.acc_width // 8

    @property
    def out_vec_bytes(self) -> int:
        """Bytes of one narrowed output vector in DRAM (what STORE moves per vector)."""
        return self.lanes * self.out_width // 8

    @property
    def inp_vec_bytes(self) -> int:
        return self.lanes * self.inp_width // 8

    @property
    def wgt_block_bytes(self) -> int:
        """Bytes of one weight block in DRAM and in one weight-buffer entry: BLOCK_OUT rows of
        BLOCK_IN int8 weights (row j holds the weights of output lane j: stored transposed)."""
        return self.block * self.block * self.wgt_width // 8

    @property
    def macs_per_cycle(self) -> int:
        """Peak multiply-accumulates per cycle: one BATCH x BLOCK_IN x BLOCK_OUT block."""
        return self.batch * self.block * self.block

    def elem_bytes(self, buf: str) -> int:
        """Bytes of one entry of buffer ``buf`` ("ACC", "INP", "WGT", "UOP") in DRAM: the unit
        LOAD's ``dram_base``, ``x_size`` and ``x_stride`` count in."""
        return {"ACC": self.acc_vec_bytes, "INP": self.inp_vec_bytes, "WGT": self.wgt_block_bytes,
                "UOP": UOP_BYTES}[buf]

    def beats_per_elem(self, buf: str) -> int:
        """Bus beats of one DRAM entry of buffer ``buf`` (a whole number: a config rule)."""
        return self.elem_bytes(buf) // self.bus_bytes

    def depth_of(self, buf: str) -> int:
        """Entries of on-chip buffer ``buf``."""
        return {"ACC": self.acc_depth, "INP": self.inp_depth, "WGT": self.wgt_depth, "UOP": self.uop_depth}[buf]

    @property
    def uop_index_bits(self) -> int:
        """Width of GEMM's ``uop_begin`` field (``uop_end`` has one bit more)."""
        return clog2(self.uop_depth)

    @property
    def inp_index_bits(self) -> int:
        return clog2(self.inp_depth)

    @property
    def wgt_index_bits(self) -> int:
        return clog2(self.wgt_depth)

    @property
    def beats_per_acc_vec(self) -> int:
        return self.acc_vec_bytes // self.bus_bytes

    @property
    def beats_per_out_vec(self) -> int:
        return self.out_vec_bytes // self.bus_bytes

    @property
    def insn_bytes(self) -> int:
        return INSN_BYTES

    @property
    def beats_per_insn(self) -> int:
        return INSN_BYTES // self.bus_bytes

    @property
    def sram_index_bits(self) -> int:
        """Width of every on-chip buffer index field in the ISA."""
        return clog2(max(self.acc_depth, self.inp_depth, self.wgt_depth, self.uop_depth))

    @property
    def acc_index_bits(self) -> int:
        return clog2(self.acc_depth)

    @property
    def dram_addr_bits(self) -> int:
        return clog2(self.dram_bytes)

    @property
    def region_align(self) -> int:
        """Alignment of every DRAM region: a whole entry of every buffer (LOAD's ``dram_base``
        counts entries) and a whole beat."""
        return max(self.acc_vec_bytes, self.inp_vec_bytes, self.wgt_block_bytes, UOP_BYTES, self.bus_bytes,
                   INSN_BYTES)

    @property
    def config_id(self) -> int:
        """32-bit identity of the hardware (CRC32 of the sizes, not of name or text)."""
        return zlib.crc32(json.dumps(self.hardware_dict(), sort_keys=True).encode())

    def hardware_dict(self) -> dict[str, int]:
        """The numeric keys that define the hardware."""
        # an optional key at its default is left out, so the identity of a config without it is unchanged
        return {k: v for k, v in asdict(self).items()
                if k not in ("name", "description", "source") and not (k in OPTIONAL_KEYS and v == OPTIONAL_KEYS[k])}

    def rtl_dict(self) -> dict[str, int]:
        """The numeric keys that shape the RTL: :meth:`hardware_dict` without :data:`DRAM_MODEL_KEYS`
        (the DRAM's timing, which a simulator takes at run time)."""
        return {k: v for k, v in self.hardware_dict().items() if k not in DRAM_MODEL_KEYS}

    @property
    def rtl_id(self) -> int:
        """32-bit identity of the RTL this config makes (CRC32 of :meth:`rtl_dict`): two configs with
        the same ``rtl_id`` differ only in the DRAM's timing and share one simulator build."""
        return zlib.crc32(json.dumps(self.rtl_dict(), sort_keys=True).encode())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        for k, v in OPTIONAL_KEYS.items():
            if d[k] == v:
                del d[k]
        return d


_KEYS = {f.name: f.type for f in fields(HwConfig) if f.name != "source"}
_STR_KEYS = {"name", "description"}
# keys a config file may leave out, with their default
OPTIONAL_KEYS = {"dram_reads_in_flight": 1, "dram_writes_in_flight": 1}
# read bursts in flight: the port's read IDs are a core and a client (FETCH or LOAD) in 4 bits, and
# the DRAM models answer up to 8 outstanding bursts
MAX_READS_IN_FLIGHT = 8
# write bursts in flight: the DRAM models take up to 8 outstanding write bursts
MAX_WRITES_IN_FLIGHT = 8

# key -> (rule text, predicate)
_RULES: list[tuple[str, str, Any]] = [
    ("block", "must be a power of two", _is_pow2),
    ("batch", "must be 1 (batched vectors are not modelled yet)", lambda v: v == 1),
    ("inp_width", "must be 8", lambda v: v == 8),
    ("wgt_width", "must be 8", lambda v: v == 8),
    ("acc_width", "must be 32 (every model wraps accumulators at 32 bits)", lambda v: v == 32),
    ("out_width", "must be 8 or 16", lambda v: v in (8, 16)),
    ("acc_depth", "must be a power of two", _is_pow2),
    ("inp_depth", "must be a power of two", _is_pow2),
    ("wgt_depth", "must be a power of two", _is_pow2),
    ("acc_depth", f"must be at least {MIN_ACC_DEPTH} vectors (ping-pong input and output halves and constants)",
     lambda v: v >= MIN_ACC_DEPTH),
    ("acc_depth", f"must be at most {MAX_BUFFER_DEPTH} (buffer index fields must fit a 128-bit instruction)",
     lambda v: v <= MAX_BUFFER_DEPTH),
    ("inp_depth", f"must be at most {MAX_BUFFER_DEPTH}", lambda v: v <= MAX_BUFFER_DEPTH),
    ("wgt_depth", f"must be at most {MAX_BUFFER_DEPTH}", lambda v: v <= MAX_BUFFER_DEPTH),
    ("uop_depth", f"must be a power of two between 1 and {MAX_UOP_DEPTH}",
     lambda v: _is_pow2(v) and v <= MAX_UOP_DEPTH),
    # A 16-byte instruction must be whole beats, which caps the bus at 128 bits.
    ("bus_width", "must be one of 32, 64, 128", lambda v: v in (32, 64, 128)),
    ("dram_bytes", "must be a power of two", _is_pow2),
    ("dram_bytes", "must be between 64 KiB and 4 GiB", lambda v: 65536 <= v <= 1 << 32),
    ("dram_read_latency", "must be between 1 and 1024 cycles", lambda v: 1 <= v <= 1024),
    ("dram_write_latency", "must be between 1 and 1024 cycles", lambda v: 1 <= v <= 1024),
    ("max_burst", "must be a power of two between 1 and 256 beats (AXI4 INCR)",
     lambda v: _is_pow2(v) and v <= 256),
    ("load_queue_depth", f"must be a power of two between 2 and {MAX_INSN_QUEUE_DEPTH}",
     lambda v: _is_pow2(v) and 2 <= v <= MAX_INSN_QUEUE_DEPTH),
    ("compute_queue_depth", f"must be a power of two between 2 and {MAX_INSN_QUEUE_DEPTH}",
     lambda v: _is_pow2(v) and 2 <= v <= MAX_INSN_QUEUE_DEPTH),
    ("store_queue_depth", f"must be a power of two between 2 and {MAX_INSN_QUEUE_DEPTH}",
     lambda v: _is_pow2(v) and 2 <= v <= MAX_INSN_QUEUE_DEPTH),
    ("token_queue_depth", f"must be between 1 and {MAX_TOKEN_QUEUE_DEPTH}", lambda v: 1 <= v <= MAX_TOKEN_QUEUE_DEPTH),
    ("max_regions", "must be a power of two between 2 and 16", lambda v: _is_pow2(v) and 2 <= v <= 16),
    ("num_cores", f"must be between 1 and {MAX_CORES}", lambda v: 1 <= v <= MAX_CORES),  # the CSR map's banks
    ("dram_reads_in_flight", f"must be between 1 and {MAX_READS_IN_FLIGHT}",
     lambda v: 1 <= v <= MAX_READS_IN_FLIGHT),
    ("dram_writes_in_flight", f"must be between 1 and {MAX_WRITES_IN_FLIGHT}",
     lambda v: 1 <= v <= MAX_WRITES_IN_FLIGHT),
]


def _cross_rules(c: HwConfig) -> list[tuple[str, str]]:
    """Rules between keys: (key, message) for every violation."""
    bad = []
    if c.out_vec_bytes % c.bus_bytes:
        bad.append(("bus_width", f"an output vector ({c.out_vec_bytes} bytes) must be a whole number of "
                                 f"{c.bus_bytes}-byte bus beats"))
    for buf in ("INP", "WGT"):
        if c.elem_bytes(buf) % c.bus_bytes:
            bad.append(("bus_width", f"a {buf} entry ({c.elem_bytes(buf)} bytes) must be a whole number of "
                                     f"{c.bus_bytes}-byte bus beats"))
    if c.max_burst * c.bus_bytes < INSN_BYTES:
        bad.append(("max_burst", f"{c.max_burst} beat(s) of {c.bus_bytes} bytes cannot carry one {INSN_BYTES}-byte "
                                 f"instruction: FETCH reads whole instructions in one burst (need at least "
                                 f"{INSN_BYTES // c.bus_bytes})"))
    if c.dram_reads_in_flight > 1 and c.num_cores > 8:
        bad.append(("dram_reads_in_flight", f"more than 1 needs at most 8 cores (a 4-bit AXI ID names a core and "
                                            f"a read client), got {c.num_cores} cores"))
    if c.dram_writes_in_flight > 1 and c.num_cores > 8:
        bad.append(("dram_writes_in_flight", f"more than 1 needs at most 8 cores (the AXI write ID names a core's "
                                             f"STORE), got {c.num_cores} cores"))
    if not (c.name.isascii() and c.name.replace("_", "").replace("-", "").isalnum()):
        bad.append(("name", "must be ASCII letters, digits, '-' or '_' (it names files and build folders)"))
    return bad


def parse_config(data: Any, source: str = "<dict>") -> HwConfig:
    """Validate a decoded JSON object and return the frozen config.

    Raises ConfigError with one line: the source, the key and the rule broken.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a JSON object, got {type(data).__name__}")
    missing = [k for k in _KEYS if k not in data and k not in OPTIONAL_KEYS]
    if missing:
        raise ConfigError(f"{source}: missing key '{missing[0]}'" +
                          (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise ConfigError(f"{source}: unknown key '{unknown[0]}' (known keys: {', '.join(_KEYS)})")
    for k, v in data.items():
        want = str if k in _STR_KEYS else int
        if type(v) is not want:  # bool is an int subclass; refuse it explicitly
            raise ConfigError(f"{source}: key '{k}' must be {want.__name__}, got {type(v).__name__} {v!r}")
    data = {**OPTIONAL_KEYS, **data}
    for key, rule, ok in _RULES:
        if not ok(data[key]):
            raise ConfigError(f"{source}: key '{key}' {rule} (got {data[key]})")
    cfg = HwConfig(**data, source=source)
    for key, msg in _cross_rules(cfg):
        raise ConfigError(f"{source}: key '{key}': {msg}")
    return cfg


def list_configs() -> list[str]:
    """Names of the configs shipped in hw/configs."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def config_path(name_or_path: str | Path) -> Path:
    """Resolve a config name (from hw/configs) or a path to a JSON file."""
    s = str(name_or_path)
    if s.endswith(".json") or "/" in s or "\\" in s:
        return Path(s)
    return CONFIG_DIR / f"{s}.json"


def load_config(name_or_path: str | Path = "default") -> HwConfig:
    """Load and validate a config by name (``default``, ``small``, ``wide``) or path."""
    path = config_path(name_or_path)
    if not path.is_file():
        known = ", ".join(list_configs())
        if path.parent == CONFIG_DIR and Path(name_or_path).is_file():  # a file of the user's, named bare
            raise ConfigError(f"{name_or_path}: no shipped config of that name (shipped configs: {known}); a config "
                              f"file is given by a path ending in .json or naming its folder (./{name_or_path})")
        what = "a folder, not a config file" if path.is_dir() else "no such config file"
        raise ConfigError(f"{path}: {what} (shipped configs: {known})")
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"), object_pairs_hook=unique_keys)  # a BOM is fine
    except DuplicateKeyError as e:
        raise ConfigError(f"{path}: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a config file (not UTF-8 text: byte 0x{e.object[e.start]:02x} at offset "
                          f"{e.start})") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not a config file (JSON nested too deep)") from None
    except ValueError as e:  # an integer of more digits than Python converts (no config value has so many)
        raise ConfigError(f"{path}: not a config file ({str(e).split(';')[0]})") from None
    return parse_config(data, str(path))
