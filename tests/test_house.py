"""The shape of the house (the README's layout: floors, one name per unit), checked on the import graph.

* Floors: ``hw`` imports nothing of the project above it; ``compiler``, ``sim`` and
  ``testbench`` import only ``hw``; ``cosim`` stands on top.
* No model imports another model: ``sim.iss``, ``sim.tlm`` and ``testbench`` are apart.
* The tools in ``cosim`` reach a model only through the registry ``cosim.models`` (importing a
  package that holds a model, such as a bare ``import sim``, counts as reaching it).
* The ISA and CSR-map modules import nothing of the project; the config module only those two (the
  word sizes, the core limit).
* No import cycle between modules, counting imports inside functions too (a lazy import
  hides a cycle from Python, not from a reader) and a package's imports of its own children.
* Imports by a string (``importlib.import_module("sim.tlm")``, ``__import__``) count as imports.
* Each rule is shown to fail: a test plants each kind of break in a copy of the source.
* No private name (``_x``) of one package is imported by another.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Collection

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("hw", "compiler", "sim", "testbench", "cosim")
FLOOR = {"hw": 1, "compiler": 2, "sim": 2, "testbench": 2, "cosim": 3}
MODELS = ("sim.iss", "sim.tlm", "testbench")
REGISTRY = "cosim.models"
# the spec's base: what each may import of the project (the ISA and CSR map nothing, the config their
# word sizes and core limit)
STANDALONE = {"hw.isa": (), "hw.csr": (), "hw.config": ("hw.isa", "hw.csr")}
# Calls that import a module named by a string (``importlib.import_module("sim.tlm")``).
DYNAMIC_IMPORTS = ("import_module", "__import__")

Graph = dict[str, list[tuple[str, int, list[str]]]]  # module -> (imported module, line, names)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_of(root: Path) -> dict[str, Path]:
    """Every module of the project's packages under ``root``: dotted name -> file."""
    out = {}
    for pkg in PACKAGES:
        for p in sorted((root / pkg).rglob("*.py")):
            out[_module_name(root, p)] = p
    return out


def _resolve(modules: Collection[str], name: str) -> str | None:
    """The project module an import names (longest known prefix), or None if external."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        cand = ".".join(parts[:k])
        if cand in modules:
            return cand
    return None


def _imports(modules: dict[str, Path], mod: str) -> list[tuple[str, int, list[str]]]:
    """(imported project module, line, imported names) for every import in ``mod``: import statements
    anywhere (inside functions too) and calls of importlib.import_module / __import__ with a string."""
    path = modules[mod]
    known = frozenset(modules)
    return [(dep, line, list(names)) for dep, line, names in
            _imports_of_source(known, mod, path.name == "__init__.py", path.read_text())]


# The planted-break tests rebuild the graph of a whole copy of the source in which one file differs:
# a module's imports are a function of its text and of the set of module names, so each is parsed once.
@functools.lru_cache(maxsize=None)
def _imports_of_source(modules: frozenset[str], mod: str, is_package: bool,
                       text: str) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    tree = ast.parse(text, mod)
    pkg = mod if is_package else mod.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                r = _resolve(modules, a.name)
                if r:
                    out.append((r, node.lineno, ()))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [a.name for a in node.names]
            subs = [_resolve(modules, f"{base}.{n}") for n in names]
            hit = [s for s in subs if s and s != _resolve(modules, base)]
            if hit:
                out += [(s, node.lineno, ()) for s in hit]
            r = _resolve(modules, base)
            own = [n for n, s in zip(names, subs) if not s or s == r]  # names the package itself defines
            if r and (own or not hit):  # ``from pkg import submodule`` reaches the submodule, not pkg's names
                out.append((r, node.lineno, tuple(own)))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if called in DYNAMIC_IMPORTS:
                r = _resolve(modules, node.args[0].value)
                if r:
                    out.append((r, node.lineno, ()))
    return tuple(out)


def import_graph(root: Path) -> Graph:
    """The import graph of the project's source under ``root``."""
    modules = modules_of(root)
    return {m: _imports(modules, m) for m in modules}


GRAPH = import_graph(REPO)


def _top(mod: str) -> str:
    return mod.split(".")[0]


def _model_of(mod: str) -> str | None:
    return next((m for m in MODELS if mod == m or mod.startswith(m + ".")), None)


def _reaches_model(dep: str) -> bool:
    """Whether importing ``dep`` reaches a model: a model's module, or a package holding one (``import
    sim`` hands over ``sim.tlm`` once anything has imported it)."""
    return _model_of(dep) is not None or any(m.startswith(dep + ".") for m in MODELS)


def floor_problems(graph: Graph) -> list[str]:
    return [f"{m}:{line} imports {dep}" for m, deps in graph.items() for dep, line, _ in deps
            if _top(dep) != _top(m) and FLOOR[_top(dep)] >= FLOOR[_top(m)]]


def model_problems(graph: Graph) -> list[str]:
    return [f"{m}:{line} imports {dep}" for m, deps in graph.items() for dep, line, _ in deps
            if _model_of(m) and _model_of(dep) and _model_of(m) != _model_of(dep)]


def registry_problems(graph: Graph) -> list[str]:
    return [f"{m}:{line} imports {dep}" for m, deps in graph.items() for dep, line, _ in deps
            if _top(m) == "cosim" and m != REGISTRY and _reaches_model(dep)]


def private_name_problems(graph: Graph) -> list[str]:
    return [f"{m}:{line} imports {', '.join(n for n in names if n.startswith('_'))} from {dep}"
            for m, deps in graph.items() for dep, line, names in deps
            if _top(dep) != _top(m) and any(n.startswith("_") and not n.startswith("__") for n in names)]


def import_cycles(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components over every import, a package's imports of its own
    submodules included (a child importing its package while the package imports the child is a cycle)."""
    edges = {m: sorted({d for d, _, _ in deps if d != m}) for m, deps in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in edges:
        if m not in index:
            visit(m)
    return cycles


def test_floors() -> None:
    bad = floor_problems(GRAPH)
    assert not bad, "imports against the floors:\n" + "\n".join(bad)


def test_no_model_imports_another_model() -> None:
    bad = model_problems(GRAPH)
    assert not bad, "\n".join(bad)


def test_tools_reach_models_only_through_the_registry() -> None:
    bad = registry_problems(GRAPH)
    assert not bad, "tools importing a model directly (use cosim.models):\n" + "\n".join(bad)


@pytest.mark.parametrize("mod", STANDALONE)
def test_isa_csr_and_config_import_only_their_base(mod: str) -> None:
    deps = [f"{dep} (line {line})" for dep, line, _ in GRAPH[mod] if dep != mod and dep not in STANDALONE[mod]]
    assert not deps, f"{mod} imports {deps}"


def test_no_private_names_across_packages() -> None:
    bad = private_name_problems(GRAPH)
    assert not bad, "\n".join(bad)


def test_no_import_cycle() -> None:
    cycles = import_cycles(GRAPH)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


# Each break planted in a copy of the source: (module, line appended, the check that must see it).
PLANTED = [
    ("cosim/soak.py", "import sim", registry_problems),
    ("cosim/soak.py", "import importlib\nimportlib.import_module('sim.tlm')", registry_problems),
    ("cosim/soak.py", "from sim import tlm", registry_problems),
    ("sim/tlm/dram.py", "__import__('sim.iss')", model_problems),
    ("hw/csr.py", "from compiler import dsl", floor_problems),
    ("compiler/dsl.py", "def f():\n    from cosim import cli", floor_problems),
    ("compiler/ops.py", "from hw.alu_numpy import _shr", private_name_problems),
    ("compiler/__init__.py", "import compiler.errors", None),  # a package importing its child: no cycle
    ("compiler/errors.py", "import compiler", import_cycles),   # ... until the child imports the package
]


@pytest.mark.parametrize("path,line,check", PLANTED, ids=[f"{p}:{ln.splitlines()[-1]}" for p, ln, _ in PLANTED])
def test_each_planted_break_is_seen(tmp_path: Path, path: str, line: str, check) -> None:
    for pkg in PACKAGES:
        for src in (REPO / pkg).rglob("*.py"):
            dst = tmp_path / src.relative_to(REPO)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(src.read_text())
    target = tmp_path / path
    target.write_text(target.read_text() + "\n" + line + "\n")
    if path == "compiler/errors.py":  # the package must import the child for the cycle
        init = tmp_path / "compiler" / "__init__.py"
        init.write_text(init.read_text() + "\nimport compiler.errors\n")
    graph = import_graph(tmp_path)
    checks = [floor_problems, model_problems, registry_problems, private_name_problems, import_cycles]
    if check is None:
        assert not any(c(graph) for c in checks)
    else:
        assert check(graph), f"{check.__name__} missed: {line!r} in {path}"
        assert not check(GRAPH)


def test_every_environment_variable_is_in_the_readme() -> None:
    """Each ``COSIM_*`` name the sources read or define appears in the README's table (or its note on
    the internal ones), so no switch is known only to whoever wrote it."""
    import re

    pattern = re.compile(r"\bCOSIM_[A-Z][A-Z0-9_]*\b")
    found: dict[str, str] = {}
    for folder in ("hw", "compiler", "sim", "testbench", "cosim", "tests"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix in (".py", ".cpp", ".v", ".vh", ".h") and "__pycache__" not in path.parts:
                for name in pattern.findall(path.read_text(errors="replace")):
                    found.setdefault(name, str(path.relative_to(REPO)))
    for name in pattern.findall((REPO / "Makefile").read_text()):
        found.setdefault(name, "Makefile")
    readme = set(pattern.findall((REPO / "README.md").read_text()))
    missing = {n: where for n, where in found.items() if n not in readme}
    assert not missing, f"not in the README's environment variables: {missing}"
