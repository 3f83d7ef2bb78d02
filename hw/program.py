"""The Program: what the hardware is given, and the folder format every model reads.

A Program is the instruction stream, the DRAM layout (named regions), the register
config (the ordered CSR writes that point the accelerator at its instructions and
data and start it) and the config's identity. Optional ``inputs`` (and golden
``expected`` outputs) make a folder self-contained, so a Program made once runs on
any model, on any machine.

Folder files: ``insn.bin``, ``regs.json``, ``regs.h``, ``layout.json``,
``program.lst`` and, when inputs are attached, ``inputs.npz``, ``dram.bin`` (the
initial DRAM image from address 0 to the end of the layout) and ``expected.npz``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from hw import csr
from hw.analysis import balance_problem
from hw.config import ConfigError, HwConfig, load_config
from hw.isa import INSN_BYTES, Instruction, Isa, IsaError

ROLES = ("insn", "input", "output", "scratch")
DTYPES = ("int8", "int16", "int32")
ROLE_ATTR = {"insn": csr.ATTR_READ, "input": csr.ATTR_READ, "output": csr.ATTR_WRITE,
             "scratch": csr.ATTR_READ | csr.ATTR_WRITE}
FILES = ("insn.bin", "regs.json", "regs.h", "layout.json", "program.lst")


class ProgramError(ValueError):
    """A Program or Program folder that is malformed, inconsistent or made for other hardware."""


@dataclass(frozen=True)
class Region:
    """A named DRAM region: byte address, tensor shape and dtype, role."""

    name: str
    role: str
    addr: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def end(self) -> int:
        return self.addr + self.nbytes

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "addr": self.addr, "shape": list(self.shape),
                "dtype": self.dtype, "bytes": self.nbytes}


def align_up(v: int, a: int) -> int:
    return (v + a - 1) // a * a


def plan_layout(cfg: HwConfig, tensors: Iterable[tuple[str, str, tuple[int, ...], str]],
                insn_count: int, base: int = 0) -> list[Region]:
    """Place the instruction stream, then each (name, role, shape, dtype) tensor, aligned and disjoint."""
    regions = [Region("insn", "insn", base, (insn_count * INSN_BYTES,), "int8")]
    addr = align_up(regions[0].end, cfg.region_align)
    for name, role, shape, dtype in tensors:
        r = Region(name, role, addr, tuple(int(s) for s in shape), dtype)
        regions.append(r)
        addr = align_up(r.end, cfg.region_align)
    check_layout(cfg, regions, "layout")
    return regions


def check_layout(cfg: HwConfig, regions: list[Region], where: str) -> None:
    """Raise ProgramError (naming ``where``) unless the regions fit the config's DRAM and rules."""
    names = set()
    for r in regions:
        if r.name in names:
            raise ProgramError(f"{where}: region name '{r.name}' is used twice")
        names.add(r.name)
        if r.role not in ROLES:
            raise ProgramError(f"{where}: region '{r.name}' has unknown role '{r.role}' (roles: {', '.join(ROLES)})")
        if r.dtype not in DTYPES:
            raise ProgramError(f"{where}: region '{r.name}' has unsupported dtype '{r.dtype}'")
        if r.addr % cfg.region_align:
            raise ProgramError(f"{where}: region '{r.name}' at 0x{r.addr:x} is not aligned to "
                               f"{cfg.region_align} bytes")
        if r.addr < 0 or r.end > cfg.dram_bytes:
            raise ProgramError(f"{where}: region '{r.name}' [0x{r.addr:x}, 0x{r.end:x}) is outside the "
                               f"{cfg.dram_bytes}-byte DRAM")
        if r.nbytes == 0:
            raise ProgramError(f"{where}: region '{r.name}' is empty")
    ordered = sorted(regions, key=lambda r: r.addr)
    for a, b in zip(ordered, ordered[1:]):
        if b.addr < a.end:
            raise ProgramError(f"{where}: regions '{a.name}' [0x{a.addr:x}, 0x{a.end:x}) and '{b.name}' "
                               f"[0x{b.addr:x}, 0x{b.end:x}) overlap")
    insn = [r for r in regions if r.role == "insn"]
    if len(insn) != 1:
        raise ProgramError(f"{where}: needs exactly one region with role 'insn', found {len(insn)}")
    if len(regions) > cfg.max_regions:
        raise ProgramError(f"{where}: {len(regions)} regions, but config '{cfg.name}' has "
                           f"{cfg.max_regions} region slots")


def make_regs(cfg: HwConfig, regions: list[Region], insn_count: int) -> list[tuple[str, int]]:
    """The register config: region windows, instruction address and count, then START."""
    writes: list[tuple[str, int]] = []
    for i, r in enumerate(regions):
        writes += [(f"REGION{i}_BASE", r.addr), (f"REGION{i}_SIZE", r.nbytes), (f"REGION{i}_ATTR", ROLE_ATTR[r.role])]
    insn = next(r for r in regions if r.role == "insn")
    writes += [("INSN_ADDR_LO", insn.addr & 0xFFFFFFFF), ("INSN_ADDR_HI", insn.addr >> 32),
               ("INSN_COUNT", insn_count), ("CTRL", csr.CTRL_START)]
    return writes


@dataclass
class Program:
    """Instructions + DRAM layout + register config for one hardware config."""

    config: HwConfig
    insns: list[Instruction]
    regions: list[Region]
    regs: list[tuple[str, int]]
    name: str = "program"
    meta: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    expected: dict[str, np.ndarray] = field(default_factory=dict)

    # ---- construction ----------------------------------------------------------
    @classmethod
    def create(cls, cfg: HwConfig, insns: list[Instruction], regions: list[Region], name: str = "program",
               meta: dict[str, Any] | None = None, inputs: dict[str, np.ndarray] | None = None,
               expected: dict[str, np.ndarray] | None = None) -> "Program":
        """Check the layout and instructions, derive the register config."""
        check_layout(cfg, regions, name)
        isa = Isa(cfg)
        for k, i in enumerate(insns):
            isa.encode(i)  # raises naming the field that does not fit
            isa.check(i, k)
        insn_region = next(r for r in regions if r.role == "insn")
        if insn_region.nbytes != len(insns) * INSN_BYTES:
            raise ProgramError(f"{name}: instruction region holds {insn_region.nbytes} bytes, "
                               f"{len(insns)} instructions need {len(insns) * INSN_BYTES}")
        p = cls(cfg, list(insns), list(regions), make_regs(cfg, regions, len(insns)), name, dict(meta or {}),
                {}, {})
        for k, v in (inputs or {}).items():
            p.set_input(k, v)
        p.expected = {k: np.asarray(v) for k, v in (expected or {}).items()}
        return p

    def region(self, name: str) -> Region:
        for r in self.regions:
            if r.name == name:
                return r
        raise ProgramError(f"{self.name}: no region named '{name}' (regions: {', '.join(r.name for r in self.regions)})")

    def set_input(self, name: str, value: np.ndarray) -> None:
        r = self.region(name)
        if r.role not in ("input", "scratch"):
            raise ProgramError(f"{self.name}: region '{name}' is an {r.role} region, not an input")
        a = np.asarray(value)
        if tuple(a.shape) != r.shape:
            raise ProgramError(f"{self.name}: input '{name}' has shape {tuple(a.shape)}, the layout says {r.shape}")
        if a.dtype != np.dtype(r.dtype):
            if not np.can_cast(a.dtype, r.dtype, "same_kind") or (np.any(a < np.iinfo(r.dtype).min) or
                                                                   np.any(a > np.iinfo(r.dtype).max)):
                raise ProgramError(f"{self.name}: input '{name}' of dtype {a.dtype} does not fit {r.dtype}")
            a = a.astype(r.dtype)
        self.inputs[name] = a

    @property
    def isa(self) -> Isa:
        return Isa(self.config)

    @property
    def insn_bytes(self) -> bytes:
        return self.isa.encode_stream(self.insns)

    @property
    def dram_end(self) -> int:
        return max(r.end for r in self.regions)

    def outputs(self) -> list[Region]:
        return [r for r in self.regions if r.role == "output"]

    def dram_image(self, inputs: dict[str, np.ndarray] | None = None) -> bytearray:
        """Initial DRAM bytes from address 0 to the end of the layout: instructions and inputs."""
        img = bytearray(align_up(self.dram_end, self.config.region_align))
        ins = self.region_by_role("insn")
        img[ins.addr:ins.end] = self.insn_bytes
        for name, a in (self.inputs if inputs is None else inputs).items():
            r = self.region(name)
            img[r.addr:r.end] = np.ascontiguousarray(a, dtype=np.dtype(r.dtype).newbyteorder("<")).tobytes()
        return img

    def read_outputs(self, dram: bytes | bytearray | np.ndarray) -> dict[str, np.ndarray]:
        """Cut each output region out of a DRAM image (any buffer indexed from address 0)."""
        buf = bytes(dram[:self.dram_end]) if not isinstance(dram, np.ndarray) else dram[:self.dram_end].tobytes()
        out = {}
        for r in self.outputs():
            out[r.name] = np.frombuffer(buf[r.addr:r.end], dtype=np.dtype(r.dtype).newbyteorder("<")) \
                .astype(r.dtype).reshape(r.shape)
        return out

    def region_by_role(self, role: str) -> Region:
        return next(r for r in self.regions if r.role == role)

    # ---- folder format ---------------------------------------------------------
    def regs_json(self) -> dict[str, Any]:
        by_name = csr.csr_by_name(self.config.max_regions)
        return {"config": self.config.name, "config_id": f"0x{self.config.config_id:08x}",
                "writes": [{"csr": n, "addr": by_name[n].addr, "value": v} for n, v in self.regs]}

    def regs_header(self) -> str:
        by_name = csr.csr_by_name(self.config.max_regions)
        guard = "COSIM_PROGRAM_REGS_H"
        lines = [f"/* Register config of Program '{self.name}' for config '{self.config.name}'.",
                 " * Generated by cosim: write these in order to the accelerator's CSRs. */",
                 f"#ifndef {guard}", f"#define {guard}", "#include <stdint.h>", "",
                 f"#define COSIM_CONFIG_ID 0x{self.config.config_id:08x}u",
                 f"#define COSIM_REG_WRITES {len(self.regs)}", "",
                 "static const struct { uint32_t addr; uint32_t value; } cosim_reg_writes[] = {"]
        for n, v in self.regs:
            lines.append(f"    {{0x{by_name[n].addr:03x}u, 0x{v:08x}u}},  /* {n} */")
        lines += ["};", "", f"#endif /* {guard} */", ""]
        return "\n".join(lines)

    def layout_json(self) -> dict[str, Any]:
        return {"program": self.name, "meta": self.meta, "config": self.config.name,
                "config_id": f"0x{self.config.config_id:08x}", "regions": [r.to_json() for r in self.regions]}

    def save(self, folder: str | Path) -> Path:
        """Write the Program folder and return its path."""
        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        (d / "insn.bin").write_bytes(self.insn_bytes)
        (d / "regs.json").write_text(json.dumps(self.regs_json(), indent=1) + "\n")
        (d / "regs.h").write_text(self.regs_header())
        (d / "layout.json").write_text(json.dumps(self.layout_json(), indent=1) + "\n")
        (d / "program.lst").write_text(self.isa.disasm_stream(self.insns) + "\n")
        for stale in ("inputs.npz", "expected.npz", "dram.bin"):
            (d / stale).unlink(missing_ok=True)
        if self.inputs:
            np.savez(d / "inputs.npz", **self.inputs)
            (d / "dram.bin").write_bytes(bytes(self.dram_image()))
        if self.expected:
            np.savez(d / "expected.npz", **self.expected)
        return d

    @classmethod
    def load(cls, folder: str | Path, cfg: HwConfig | None = None) -> "Program":
        """Read a Program folder; with ``cfg``, refuse a Program made for other hardware."""
        d = Path(folder)
        if not d.is_dir():
            raise ProgramError(f"{d}: no such Program folder")
        for f in ("insn.bin", "regs.json", "layout.json"):
            if not (d / f).is_file():
                raise ProgramError(f"{d / f}: missing (a Program folder needs insn.bin, regs.json, layout.json)")
        layout = _read_json(d / "layout.json")
        try:
            stored_id = int(str(layout.get("config_id", "")), 16)
            cfg_name = layout["config"]
            region_list = layout["regions"]
        except (KeyError, ValueError, TypeError):
            raise ProgramError(f"{d / 'layout.json'}: needs 'config', 'config_id' (hex) and 'regions'") from None
        if cfg is None:
            try:
                cfg = load_config(cfg_name)
            except ConfigError as e:
                raise ProgramError(f"{d / 'layout.json'}: made for config '{cfg_name}', which cannot be loaded: {e}")
        if stored_id != cfg.config_id:
            raise ProgramError(f"{d / 'layout.json'}: Program made for config '{cfg_name}' (id 0x{stored_id:08x}), "
                               f"but this run uses config '{cfg.name}' (id 0x{cfg.config_id:08x})")
        try:
            regions = [Region(str(r["name"]), str(r["role"]), int(r["addr"]), tuple(int(s) for s in r["shape"]),
                              str(r["dtype"])) for r in region_list]
        except (KeyError, ValueError, TypeError) as e:
            raise ProgramError(f"{d / 'layout.json'}: malformed region entry ({e})") from None
        check_layout(cfg, regions, str(d / "layout.json"))
        data = (d / "insn.bin").read_bytes()
        try:
            insns = Isa(cfg).decode_stream(data)
        except IsaError as e:
            raise ProgramError(f"{d / 'insn.bin'}: {e}") from None
        check_token_balance(insns, str(d / "insn.bin"))
        insn_region = next(r for r in regions if r.role == "insn")
        if insn_region.nbytes != len(data):
            raise ProgramError(f"{d / 'insn.bin'}: {len(data)} bytes, but the layout's instruction region holds "
                               f"{insn_region.nbytes}")
        regs = _read_regs(d / "regs.json", cfg)
        p = cls(cfg, insns, regions, regs, str(layout.get("program", d.name)), dict(layout.get("meta", {})))
        if (d / "inputs.npz").is_file():
            with np.load(d / "inputs.npz") as z:
                for k in z.files:
                    p.set_input(k, z[k])
        if (d / "expected.npz").is_file():
            with np.load(d / "expected.npz") as z:
                p.expected = {k: z[k] for k in z.files}
        return p


def check_token_balance(insns: Iterable[Instruction], where: str) -> None:
    """Raise ProgramError unless every dependency-token queue gets as many pushes as pops.

    DESIGN.md: a Program with unbalanced tokens is rejected before it runs (a surplus
    push would otherwise run silently, a surplus pop deadlocks). Program.load applies it;
    the count is :func:`hw.analysis.balance_problem`.
    """
    problem = balance_problem(list(insns))
    if problem:
        raise ProgramError(f"{where}: {problem}")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ProgramError(f"{path}: not valid JSON: {e.msg} at line {e.lineno}") from None


def _read_regs(path: Path, cfg: HwConfig) -> list[tuple[str, int]]:
    data = _read_json(path)
    writes = data.get("writes") if isinstance(data, dict) else None
    if not isinstance(writes, list):
        raise ProgramError(f"{path}: needs a 'writes' list")
    by_name = csr.csr_by_name(cfg.max_regions)
    out = []
    for i, w in enumerate(writes):
        if not isinstance(w, dict) or "csr" not in w or "value" not in w:
            raise ProgramError(f"{path}: write {i} needs 'csr' and 'value'")
        name, value = w["csr"], w["value"]
        if name not in by_name:
            raise ProgramError(f"{path}: write {i} names unknown CSR '{name}'")
        reg = by_name[name]
        if "addr" in w and w["addr"] != reg.addr:
            raise ProgramError(f"{path}: write {i} to {name} gives address 0x{w['addr']:x}, the map says 0x{reg.addr:x}")
        if reg.access == "ro":
            raise ProgramError(f"{path}: write {i} targets read-only CSR {name}")
        if type(value) is not int or not 0 <= value <= 0xFFFFFFFF:
            raise ProgramError(f"{path}: write {i} to {name}: value {value!r} is not a 32-bit unsigned integer")
        out.append((name, value))
    return out
