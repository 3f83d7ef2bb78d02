"""`cosim rtl check`: the RTL agrees with hw/config.py, hw/isa.py and hw/csr.py.

Four checks, each a list of :class:`Finding`:

* **header**: every ``define`` of ``<rtl>/gen/<config>/accel_params.vh`` equals what
  :func:`hw.gen_header.header_text` makes from the Python definitions (a stale or
  hand-edited header fails), and every macro the RTL uses is defined by it.
* **ports**: the top's ports have the directions and widths the config implies (AXI
  data = bus width, CSR address = CSR_ADDR_BITS, the dbg_* probes as the TLM writes them).
* **constants**: no opcode, ALU op or buffer code is typed as a number where the RTL
  compares an instruction field. The sources are preprocessed a second time with a
  *tagged* header in which those macros (and the field offsets) expand to marker
  identifiers (``__M_OP_LOAD``); in the parsed AST a comparison or case item against
  a field is then either a marker of the right family, or a hard-coded literal.
  A literal equal to a defined code is an error; a literal outside the defined codes
  (e.g. "buffer 3 is invalid") is a warning: it still breaks when the ISA grows.
* **csr**: the CSR decoder (the modules with an AXI4-Lite address port) uses the header's
  macro of every register and field of hw/csr.py's map, and types no number where it
  decodes an address: preprocessed with every macro tagged, a literal left in an address's
  bit positions (above 1), or compared with, added to or subtracted from an address or a net
  computed from one (above 0; a product's factors are a register size), or in a case item on
  one, is an error.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hw import csr
from hw.config import HwConfig
from hw.gen_header import CSR_ADDR_BITS, HEADER_NAME, header_text
from hw.isa import ALU_OPS, BUFFERS, OPCODES
from hw.introspect.parse import (RTL_DIR, TOP, Design, build_design, config_header_dir, expr_text, int_const,
                                      parse_text, preprocess, source_files, walk)

_DEFINE_RE = re.compile(r"^\s*`define\s+(\w+)\s*(.*?)\s*(?://.*)?$", re.MULTILINE)
_USE_RE = re.compile(r"`(\w+)")
_DIRECTIVES = {"include", "define", "ifdef", "ifndef", "else", "elsif", "endif", "timescale", "undef",
               "default_nettype", "resetall", "celldefine", "endcelldefine", "line"}

# Instruction fields whose values are enumerations, and the macro family of their values.
FIELD_FAMILY = {"F_HDR_OPCODE_LO": "OP", "F_ALU_ALU_OP_LO": "ALU", "F_MEM_BUF_LO": "BUF"}
FAMILY_VALUES = {"OP": OPCODES, "ALU": ALU_OPS, "BUF": BUFFERS}
FAMILY_FIELD = {"OP": "opcode", "ALU": "ALU op", "BUF": "buffer"}
TAG = "__M_"


@dataclass
class Finding:
    """One result of a check: severity "error" fails it, "warning" is reported only."""

    check: str  # header, ports, constants
    severity: str
    where: str  # file, module or port
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.severity}: [{self.check}] {self.where}: {self.message}"


def defines(text: str) -> dict[str, str]:
    """``define`` name -> value text (comments and extra blanks removed)."""
    return {m.group(1): " ".join(m.group(2).split()) for m in _DEFINE_RE.finditer(text)}


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", text)


def macros_used(files: list[Path]) -> dict[str, list[str]]:
    """Macro name -> files using it (directives and macros the sources define excluded)."""
    own: set[str] = set()
    used: dict[str, list[str]] = {}
    for f in files:
        text = _strip_comments(f.read_text())
        own |= set(defines(text))
        for name in _USE_RE.findall(text):
            if name not in _DIRECTIVES:
                used.setdefault(name, [])
                if f.name not in used[name]:
                    used[name].append(f.name)
    return {k: v for k, v in used.items() if k not in own}


# ---- header ------------------------------------------------------------------------------
def check_header(cfg: HwConfig, inc: Path, rtl_dir: Path, files: list[Path]) -> list[Finding]:
    path = inc / HEADER_NAME
    have, want = defines(path.read_text()), defines(header_text(cfg))
    used = macros_used(files)
    out = []
    where = str(path.relative_to(rtl_dir.parent)) if rtl_dir.parent in path.parents else str(path)
    for name in sorted(set(have) | set(want)):
        a, b = have.get(name), want.get(name)
        if a == b:
            continue
        users = f" (used by {', '.join(used[name])})" if name in used else " (unused by the RTL)"
        if a is None:
            msg = f"`{name} is missing; the Python definitions give {b}"
        elif b is None:
            msg = f"`{name} = {a} is not generated from the Python definitions"
        else:
            # name the Python source of the mismatch, so the fix is obvious
            src = "hw/isa.py" if name.startswith(("OP_", "ALU_", "BUF_", "F_", "INSN_", "MEM_", "GEMM_", "HDR_")) \
                else "hw/csr.py" if name.startswith(("CSR_", "CTRL_", "STATUS_", "ATTR_", "ERR_")) \
                else f"config '{cfg.name}'"
            msg = f"`{name} is {a} but {src} says {b}"
        out.append(Finding("header", "error", where, msg + users + "; run `make gen`"))
    for name, users in sorted(used.items()):
        if name not in want:
            out.append(Finding("header", "error", ", ".join(users),
                               f"uses `{name}, which the generated header does not define"))
    return out


# ---- ports -------------------------------------------------------------------------------
def expected_top_ports(cfg: HwConfig) -> dict[str, tuple[str, int]]:
    """Port name -> (direction, width) the top must have for ``cfg``."""
    p: dict[str, tuple[str, int]] = {"clk": ("input", 1), "rst": ("input", 1), "irq": ("output", 1)}
    for ch in ("aw", "ar"):
        p[f"s_axil_{ch}addr"] = ("input", CSR_ADDR_BITS)
        p[f"s_axil_{ch}valid"] = ("input", 1)
        p[f"s_axil_{ch}ready"] = ("output", 1)
        p[f"m_axi_{ch}addr"] = ("output", 32)
        p[f"m_axi_{ch}len"] = ("output", 8)
        p[f"m_axi_{ch}size"] = ("output", 3)
        p[f"m_axi_{ch}burst"] = ("output", 2)
        p[f"m_axi_{ch}valid"] = ("output", 1)
        p[f"m_axi_{ch}ready"] = ("input", 1)
    p.update({"s_axil_wdata": ("input", 32), "s_axil_wstrb": ("input", 4), "s_axil_rdata": ("output", 32),
              "s_axil_bresp": ("output", 2), "s_axil_rresp": ("output", 2),
              "m_axi_wdata": ("output", cfg.bus_width), "m_axi_wstrb": ("output", cfg.bus_bytes),
              "m_axi_wlast": ("output", 1), "m_axi_rdata": ("input", cfg.bus_width),
              "m_axi_rlast": ("input", 1), "m_axi_bresp": ("input", 2), "m_axi_rresp": ("input", 2)})
    for u in ("load", "compute", "store"):
        p[f"dbg_{u}_busy"] = ("output", 1)
        p[f"dbg_{u}_pc"] = ("output", 32)
        p[f"dbg_{u}_q"] = ("output", 16)
    p.update({"dbg_gemm_busy": ("output", 1), "dbg_dma_rd": ("output", 1), "dbg_dma_wr": ("output", 1),
              "dbg_cycles": ("output", 64)})
    return p


def check_ports(cfg: HwConfig, design: Design, top: str = TOP) -> list[Finding]:
    m = design.modules.get(top)
    if m is None:
        return [Finding("ports", "error", top, f"no module '{top}' in {design.rtl_dir}")]
    out = []
    for name, (direction, width) in expected_top_ports(cfg).items():
        p = m.port(name)
        if p is None:
            out.append(Finding("ports", "error", f"{top}.{name}", f"missing ({direction}, {width} bits expected)"))
        elif p.direction != direction:
            out.append(Finding("ports", "error", f"{top}.{name}", f"is an {p.direction}, expected an {direction}"))
        elif p.width != width:
            out.append(Finding("ports", "error", f"{top}.{name}",
                               f"is {p.width if p.width is not None else '?'} bits [{p.msb}:{p.lsb}], "
                               f"config '{cfg.name}' needs {width}"))
    top_addr = max(c.addr for c in csr.csr_map(cfg.max_regions))
    if top_addr >= 1 << CSR_ADDR_BITS:
        out.append(Finding("ports", "error", f"{top}.s_axil_awaddr",
                           f"CSR address 0x{top_addr:x} does not fit {CSR_ADDR_BITS} bits"))
    return out


# ---- hard-coded constants -------------------------------------------------------------------
def tagged_header(text: str) -> str:
    """The header with the enumerations and enum-field offsets replaced by marker names."""
    tagged = set(FIELD_FAMILY) | {k.replace("_LO", "_W") for k in FIELD_FAMILY}
    tagged |= {f"OP_{n}" for n in OPCODES} | {f"ALU_{n}" for n in ALU_OPS} | {f"BUF_{n}" for n in BUFFERS}
    tagged.add("ALU_OP_LAST")  # the highest ALU op, a bound of the family (fetch's dispatch check)

    def sub(m: re.Match) -> str:
        return f"`define {m.group(1)} {TAG}{m.group(1)}" if m.group(1) in tagged else m.group(0)

    return re.sub(r"^\s*`define\s+(\w+)[^\n]*", sub, text, flags=re.MULTILINE)


def _family_of_marker(name: str) -> str | None:
    if not name.startswith(TAG):
        return None
    base = name[len(TAG):]
    if base in FIELD_FAMILY:
        return None
    return base.split("_", 1)[0] if base.split("_", 1)[0] in FAMILY_VALUES else None


def _field_family(expr: Any, names: dict[str, str]) -> str | None:
    """The enum family of an expression that selects an instruction field (or a net
    assigned from one), else None."""
    from pyverilog.vparser import ast as A

    if isinstance(expr, A.Rvalue):
        expr = expr.var
    if isinstance(expr, A.Identifier):
        return names.get(expr.name)
    if isinstance(expr, (A.Partselect, A.Pointer)):
        idx = [expr.msb, expr.lsb] if isinstance(expr, A.Partselect) else [expr.ptr]
        for part in idx:
            for n in walk(part):
                if isinstance(n, A.Identifier) and n.name[len(TAG):] in FIELD_FAMILY:
                    return FIELD_FAMILY[n.name[len(TAG):]]
    return None


def _literal_findings(expr: Any, fam: str, mod: str, params: dict[str, Any], ctx: str,
                      depth: int = 0) -> list[Finding]:
    """Findings for the value side of a comparison with a field of family ``fam``."""
    from pyverilog.vparser import ast as A

    out = []
    for n in walk(expr):
        if isinstance(n, A.Identifier):
            other = _family_of_marker(n.name)
            if other is not None and other != fam:
                out.append(Finding("constants", "error", mod,
                                   f"{ctx}: compares the {FAMILY_FIELD[fam]} field with `{n.name[len(TAG):]}"))
            elif n.name in params and depth < 4:  # a parameter: look at what it is set to
                out += _literal_findings(params[n.name], fam, mod, params, f"{ctx} (via {n.name})", depth + 1)
        elif isinstance(n, A.IntConst):
            v = int_const(n.value)
            names = [k for k, c in FAMILY_VALUES[fam].items() if c == v]
            if names:
                out.append(Finding("constants", "error", mod,
                                   f"{ctx}: hard-coded {FAMILY_FIELD[fam]} {n.value}; use `{fam}_{names[0]}"))
            else:
                out.append(Finding("constants", "warning", mod,
                                   f"{ctx}: hard-coded {FAMILY_FIELD[fam]} value {n.value} (no code has it; "
                                   f"compare against the `{fam}_* macros so a new code cannot slip through)"))
    return out


def hardcoded_constants(ast: Any) -> list[Finding]:
    """Literals compared with the opcode, ALU-op or buffer fields, per module (tagged AST)."""
    from pyverilog.vparser import ast as A

    cmp_types = (A.Eq, A.NotEq, A.Eql, A.NotEql, A.LessThan, A.GreaterThan, A.LessEq, A.GreaterEq)
    out: list[Finding] = []
    for d in ast.description.definitions:
        if not isinstance(d, A.ModuleDef):
            continue
        params = {n.name: n.value for n in walk(d) if isinstance(n, A.Parameter) and n.value is not None}
        names: dict[str, str] = {}
        for _ in range(3):  # nets assigned from a field, or from such a net (short chains)
            for n in walk(d):
                if isinstance(n, (A.Assign, A.Substitution)) and isinstance(n.left, A.Lvalue) \
                        and isinstance(n.left.var, A.Identifier):
                    fam = _field_family(n.right, names)
                    if fam:
                        names[n.left.var.name] = fam
        for n in walk(d):
            if isinstance(n, cmp_types):
                for fld, val in ((n.left, n.right), (n.right, n.left)):
                    fam = _field_family(fld, names)
                    if fam:
                        ctx = f"'{expr_text(n).replace(TAG, '`')}'"
                        out += _literal_findings(val, fam, d.name, params, ctx)
            elif isinstance(n, A.CaseStatement):
                fam = _field_family(n.comp, names)
                if fam:
                    for item in n.caselist:
                        for cond in item.cond or ():
                            ctx = f"case ({expr_text(n.comp).replace(TAG, '`')}) item {expr_text(cond)}"
                            out += _literal_findings(cond, fam, d.name, params, ctx)
    return out


def check_constants(inc: Path, rtl_dir: Path, files: list[Path], tmp: Path) -> list[Finding]:
    header = inc / HEADER_NAME
    tdir = tmp / "tagged"
    tdir.mkdir(parents=True, exist_ok=True)
    (tdir / HEADER_NAME).write_text(tagged_header(header.read_text()))
    return hardcoded_constants(parse_text(preprocess(files, [tdir, rtl_dir])))


# ---- the CSR decoder -----------------------------------------------------------------------------
ADDR_PORTS = ("s_axil_awaddr", "s_axil_araddr")


def all_tagged_header(text: str) -> str:
    """The header with every ``define`` that has a value replaced by a marker name, so that a
    number left in the preprocessed RTL was typed in the source, not expanded from a macro."""
    return re.sub(r"^(\s*`define\s+)(\w+)[ \t]+\S[^\n]*", lambda m: f"{m.group(1)}{m.group(2)} {TAG}{m.group(2)}",
                  text, flags=re.MULTILINE)


def decoded_macros() -> list[str]:
    """The macros a CSR decoder must use: every fixed register, a region's and a bank's
    registers, the counters and the CTRL / STATUS fields of hw/csr.py."""
    names = [f"CSR_{c.name}" for c in csr.csr_map(0)]
    names += [f"REGION_{c.name.split('_', 1)[1]}_OFF" for c in csr.region_csrs(1)]
    names += [f"BANK_{n}" for n, _, _ in csr.BANK_FIXED] + ["BANK_COUNTERS", "CSR_NUM_COUNTERS"]
    names += ["CSR_REGION_PAGE", "CSR_REGION_PAGE_LO", "CSR_REGION_IDX_LO", "CSR_BANK_SEL_BIT",
              "CSR_BANK_CORE_LO", "CSR_FIXED_COUNTERS", "CSR_FIXED_CTR_DELTA", "CSR_FIXED_INSN_DELTA",
              "CTRL_START_BIT", "CTRL_SOFT_RESET_BIT", "STATUS_BUSY_BIT", "STATUS_DONE_BIT", "STATUS_ERROR_BIT",
              "STATUS_ERR_CODE_LO", "STATUS_ERR_CORE_LO"]
    return names


def _values(expr: Any) -> list[Any]:
    """The nodes of ``expr`` that give its value: not bit/part-select bounds, not the factors of
    a product (a register's size times an index), not a condition (a comparison's operands are
    looked at where it is a comparison)."""
    from pyverilog.vparser import ast as A

    out, stack = [], [expr]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        out.append(n)
        if isinstance(n, (A.Partselect, A.Pointer)):
            stack.append(n.var)
        elif isinstance(n, A.Cond):
            stack += [n.true_value, n.false_value]
        elif isinstance(n, A.Times):
            continue
        elif isinstance(n, (A.Eq, A.NotEq, A.Eql, A.NotEql, A.LessThan, A.GreaterThan, A.LessEq, A.GreaterEq)):
            continue
        else:
            stack += list(n.children())
    return out


def _literals(expr: Any, above: int) -> list[int]:
    """The numbers above ``above`` typed in ``expr``'s value, each once."""
    from pyverilog.vparser import ast as A

    return sorted({v for n in _values(expr) if isinstance(n, A.IntConst)
                   for v in [int_const(n.value)] if v is not None and v > above})


def hardcoded_csr_decode(ast: Any, fixed: dict[int, str]) -> list[Finding]:
    """Numbers typed where a module decodes a CSR address: in the bit positions it selects of
    an address, in what it compares an address (or a net computed from one) with, in what it
    adds to or subtracts from one, and in the items of a case on one (fully tagged AST)."""
    from pyverilog.vparser import ast as A

    cmp_types = (A.Eq, A.NotEq, A.Eql, A.NotEql, A.LessThan, A.GreaterThan, A.LessEq, A.GreaterEq)
    out: list[Finding] = []
    for d in ast.description.definitions:
        if not isinstance(d, A.ModuleDef):
            continue
        addr = {n.name for n in walk(d) if isinstance(n, (A.Input, A.Output, A.Inout)) and n.name in ADDR_PORTS}
        if not addr:
            continue
        for _ in range(4):  # nets whose value is an address or part of one (short chains)
            for n in walk(d):
                if isinstance(n, (A.Assign, A.Substitution)) and isinstance(n.left, A.Lvalue) \
                        and isinstance(n.left.var, A.Identifier) \
                        and any(isinstance(v, A.Identifier) and v.name in addr for v in _values(n.right)):
                    addr.add(n.left.var.name)

        def is_addr(e: Any) -> bool:
            return any(isinstance(v, A.Identifier) and v.name in addr for v in _values(e))

        def report(ctx: str, values: list[int], what: str) -> None:
            for v in values:
                shown = f"{v:#x}" + (f" (the address of {fixed[v]})" if v in fixed else "") if what == "value" else str(v)
                out.append(Finding("csr", "error", d.name, f"{ctx}: the {what} {shown} is typed in the "
                                                           f"CSR decoder; use the header's CSR_/BANK_/REGION_ macros"))

        for n in walk(d):
            if isinstance(n, (A.Partselect, A.Pointer)) and isinstance(n.var, A.Identifier) and n.var.name in addr:
                bounds = [n.msb, n.lsb] if isinstance(n, A.Partselect) else [n.ptr]
                # 0 and 1 only end a range or adjust a macro's bound (`X-1:0`)
                report(f"'{expr_text(n).replace(TAG, '`')}'", sorted({v for b in bounds for v in _literals(b, 1)}),
                       "bit position")
            elif isinstance(n, cmp_types + (A.Plus, A.Minus)):
                for a, b in ((n.left, n.right), (n.right, n.left)):
                    if is_addr(a):
                        report(f"'{expr_text(n).replace(TAG, '`')}'", _literals(b, 0), "value")
            elif isinstance(n, A.CaseStatement) and is_addr(n.comp):
                for item in n.caselist:
                    for cond in item.cond or ():
                        report(f"case ({expr_text(n.comp)}) item {expr_text(cond)}", _literals(cond, 0), "value")
    return out


def check_csr(inc: Path, rtl_dir: Path, cfg: HwConfig, files: list[Path], tmp: Path) -> list[Finding]:
    """The CSR decoder follows hw/csr.py: it names every register and field by its macro (the
    header check proves the macros equal the map) and types no address or field position."""
    decoders = [f for f in files if any(p in f.read_text() for p in ADDR_PORTS)]
    if not decoders:  # no AXI4-Lite slave here (the ports check asks the top for one)
        return []
    used = macros_used(files)
    out = [Finding("csr", "error", "hw/rtl", f"no source uses `{m}: the decoder of hw/csr.py's map needs it")
           for m in decoded_macros() if m not in used]
    header = inc / HEADER_NAME
    tdir = tmp / "all-tagged"
    tdir.mkdir(parents=True, exist_ok=True)
    (tdir / HEADER_NAME).write_text(all_tagged_header(header.read_text()))
    fixed = {c.addr: c.name for c in csr.csr_map(cfg.max_regions, cfg.num_cores)}
    return out + hardcoded_csr_decode(parse_text(preprocess(decoders, [tdir, rtl_dir])), fixed)


# ---- all ---------------------------------------------------------------------------------------
def run_checks(cfg: HwConfig, rtl_dir: str | Path = RTL_DIR) -> dict[str, Any]:
    """Every check for ``cfg`` on ``rtl_dir``; ``ok`` is False when any finding is an error."""
    import tempfile

    rtl_dir = Path(rtl_dir).resolve()
    files = source_files(rtl_dir)
    with config_header_dir(cfg, rtl_dir) as inc, tempfile.TemporaryDirectory(prefix="cosim-rtl-check-") as tmp:
        findings = check_header(cfg, inc, rtl_dir, files)
        design = build_design(parse_text(preprocess(files, [inc, rtl_dir])), rtl_dir, cfg.name, files)
        findings += check_ports(cfg, design)
        findings += check_constants(inc, rtl_dir, files, Path(tmp))
        findings += check_csr(inc, rtl_dir, cfg, files, Path(tmp))
    return {"config": cfg.name, "rtl_dir": str(rtl_dir), "modules": len(design.modules),
            "ok": not any(f.severity == "error" for f in findings),
            "errors": sum(f.severity == "error" for f in findings),
            "warnings": sum(f.severity == "warning" for f in findings),
            "findings": [f.to_dict() for f in findings]}
