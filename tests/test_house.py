"""The shape of the house (the README's layout: floors and one name per unit), checked on the import graph of the source.

* Floors: ``hw`` imports nothing of the project above it; ``compiler``, ``sim`` and
  ``testbench`` import only ``hw``; ``cosim`` stands on top.
* No model imports another model: ``sim.iss``, ``sim.tlm`` and ``testbench`` are apart.
* The tools in ``cosim`` reach a model only through the registry ``cosim.models``.
* The ISA and config modules import nothing of the project.
* No import cycle between modules, counting imports inside functions too (a lazy import
  hides a cycle from Python, not from a reader).
* No private name (``_x``) of one package is imported by another.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("hw", "compiler", "sim", "testbench", "cosim")
FLOOR = {"hw": 1, "compiler": 2, "sim": 2, "testbench": 2, "cosim": 3}
MODELS = ("sim.iss", "sim.tlm", "testbench")
REGISTRY = "cosim.models"
STANDALONE = ("hw.isa", "hw.config")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in sorted((REPO / pkg).rglob("*.py")):
            out[_module_name(p)] = p
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module an import names (longest known prefix), or None if external."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        cand = ".".join(parts[:k])
        if cand in MODULES:
            return cand
    return None


def _imports(mod: str) -> list[tuple[str, int, list[str]]]:
    """(imported project module, line, imported names) for every import in ``mod``."""
    path = MODULES[mod]
    tree = ast.parse(path.read_text(), str(path))
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                r = _resolve(a.name)
                if r:
                    out.append((r, node.lineno, []))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [a.name for a in node.names]
            subs = [_resolve(f"{base}.{n}") for n in names]
            hit = [s for s in subs if s and s != _resolve(base)]
            if hit:
                out += [(s, node.lineno, []) for s in hit]
            r = _resolve(base)
            if r:
                out.append((r, node.lineno, [n for n, s in zip(names, subs) if not s or s == r]))
    return out


GRAPH = {m: _imports(m) for m in MODULES}


def _top(mod: str) -> str:
    return mod.split(".")[0]


def _model_of(mod: str) -> str | None:
    return next((m for m in MODELS if mod == m or mod.startswith(m + ".")), None)


def test_floors() -> None:
    bad = [f"{m}:{line} imports {dep}" for m, deps in GRAPH.items() for dep, line, _ in deps
           if _top(dep) != _top(m) and FLOOR[_top(dep)] >= FLOOR[_top(m)]]
    assert not bad, "imports against the floors:\n" + "\n".join(bad)


def test_no_model_imports_another_model() -> None:
    bad = [f"{m}:{line} imports {dep}" for m, deps in GRAPH.items() for dep, line, _ in deps
           if _model_of(m) and _model_of(dep) and _model_of(m) != _model_of(dep)]
    assert not bad, "\n".join(bad)


def test_tools_reach_models_only_through_the_registry() -> None:
    bad = [f"{m}:{line} imports {dep}" for m, deps in GRAPH.items() for dep, line, _ in deps
           if _top(m) == "cosim" and m != REGISTRY and _model_of(dep)]
    assert not bad, "tools importing a model directly (use cosim.models):\n" + "\n".join(bad)


@pytest.mark.parametrize("mod", STANDALONE)
def test_isa_and_config_import_nothing_of_the_project(mod: str) -> None:
    deps = [f"{dep} (line {line})" for dep, line, _ in GRAPH[mod] if dep != mod]
    assert not deps, f"{mod} imports {deps}"


def test_no_private_names_across_packages() -> None:
    bad = [f"{m}:{line} imports {', '.join(n for n in names if n.startswith('_'))} from {dep}"
           for m, deps in GRAPH.items() for dep, line, names in deps
           if _top(dep) != _top(m) and any(n.startswith("_") and not n.startswith("__") for n in names)]
    assert not bad, "\n".join(bad)


def test_no_import_cycle() -> None:
    """Tarjan's strongly connected components over every import (package __init__ re-exports
    of their own submodules excepted: a package importing its children is no cycle)."""
    edges = {m: sorted({d for d, _, _ in deps if d != m and not d.startswith(m + ".")})
             for m, deps in GRAPH.items()}
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
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


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
