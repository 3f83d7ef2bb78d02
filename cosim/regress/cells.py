"""The cocotb regression's cells as engine tasks.

A cell is one testcase of ``tests/test_rtl_regression.py``: the examples of one (config,
back-end, seed, simulator) in one simulator process (``test_examples[small-fast-0-verilator]``),
or the unit cases of tests/units/ on one (config, back-end) (``test_unit_cases[small-fast]``).
What a cell checks is defined once, in that test module (``check_examples``,
``check_unit_cases``, ``example_matrix``, ``unit_matrix``): pytest runs its quick slice,
``cosim regress`` the full matrix as tasks, with the same testcase names in the JUnit XML.
So ``cosim regress`` needs the repository's ``tests/`` folder (a checkout, not a wheel); it
is imported by name, next to the ``cosim`` package.

With ``examples_per_task`` a cell's examples are split over several tasks (several simulator
processes, spread over the cluster); their outcomes are joined into the one testcase.
"""

from __future__ import annotations

import importlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import cosim
from hw.toolchain import icarus_available
from cosim.cluster import Task
from cosim.models import design_digest, rtl_available

REPO = Path(cosim.__file__).resolve().parent.parent
REGRESSION_MODULE = "tests.test_rtl_regression"
CLASSNAME = REGRESSION_MODULE  # what pytest's JUnit XML puts in classname


def regression_module() -> ModuleType:
    """``tests/test_rtl_regression.py`` of this checkout (imported with the repository on ``sys.path``)."""
    if not (REPO / "tests" / "test_rtl_regression.py").is_file():
        raise FileNotFoundError(f"{REPO / 'tests' / 'test_rtl_regression.py'}: missing; cosim regress runs the "
                                f"repository's regression, so run it from a checkout")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module(REGRESSION_MODULE)


@dataclass(frozen=True)
class Cell:
    """One testcase of the regression (or, with ``part``, one task's share of its examples)."""

    kind: str                      # "examples" or "units"
    config: str
    mem: str
    seed: int = 0
    sim: str = "verilator"
    names: tuple[str, ...] = ()    # the examples of this task (examples cells)
    part: int | None = None        # which share of the testcase's examples (None: all it runs here)
    selected: bool = False         # names is a selection (--examples), not every example the cell runs
    design: str = ""               # the RTL's digest and the config's hardware hash: what a result is of

    @property
    def testcase(self) -> str:
        """The pytest test id, as in the JUnit XML of ``pytest tests/test_rtl_regression.py``."""
        if self.kind == "units":
            return f"test_unit_cases[{self.config}-{self.mem}]"
        return f"test_examples[{self.config}-{self.mem}-{self.seed}-{self.sim}]"

    @property
    def key(self) -> str:
        """The task's key in a results file: the testcase, which examples when not all of them (a file
        resumed with another selection does not take these records for the whole testcase), and the design
        (nor is a result of the RTL or the config before an edit one of them after)."""
        rtl = f" rtl={self.design}" if self.design else ""
        if self.part is None and not self.selected:
            return self.testcase + rtl
        return f"{self.testcase} {'part ' + str(self.part) + ' ' if self.part else ''}{'+'.join(self.names)}{rtl}"

    def task(self) -> Task:
        return Task(self.key, "cosim.regress.cells:run_cell",
                    {"kind": self.kind, "config": self.config, "mem": self.mem, "seed": self.seed, "sim": self.sim,
                     "names": list(self.names)})


def regression_cells(configs: Sequence[str], mems: Sequence[str], seeds: int, simulators: Sequence[str],
                     examples: Sequence[str] | None = None, units: bool = True,
                     examples_per_task: int = 0) -> list[Cell]:
    """Every cell of the full regression over these axes, in the order pytest would list them: the example
    cells (``example_matrix``), then the unit-case cells (Verilator only). ``examples`` keeps only those
    examples (a cell left with none is dropped); ``examples_per_task`` > 0 splits each cell's examples."""
    mod = regression_module()
    design = {c: design_digest([c]) for c in configs}  # once: every cell of a config names the same design
    out: list[Cell] = []
    for cfg, mem, seed, sim in mod.example_matrix(configs, mems, range(seeds), simulators):
        every = mod.example_names(mem, sim)
        names = [n for n in every if examples is None or n in examples]
        if not names:
            continue
        selected = names != every
        if examples_per_task <= 0 or examples_per_task >= len(names):
            out.append(Cell("examples", cfg, mem, seed, sim, tuple(names), selected=selected, design=design[cfg]))
            continue
        for k in range(0, len(names), examples_per_task):
            out.append(Cell("examples", cfg, mem, seed, sim, tuple(names[k:k + examples_per_task]),
                            part=k // examples_per_task + 1, selected=selected, design=design[cfg]))
    if units and "verilator" in simulators:
        out += [Cell("units", cfg, mem, design=design[cfg]) for cfg, mem in mod.unit_matrix(configs, mems)]
    return out


def run_cell(args: dict[str, Any]) -> dict[str, Any]:
    """Engine task: one cell. ``{"outcome": "passed" | "failed" | "skipped", "message", "detail", "time"}``;
    a failed check is an outcome (its message names every failure); anything else raises (a JUnit error)."""
    t0 = time.perf_counter()
    why_not = rtl_available()
    if why_not is None and args["sim"] == "icarus" and not icarus_available():
        why_not = "Icarus Verilog (iverilog) is not installed"
    if why_not is not None:
        return {"outcome": "skipped", "message": why_not, "detail": None, "time": 0.0}
    mod = regression_module()
    try:
        if args["kind"] == "units":
            detail = mod.check_unit_cases(args["config"], args["mem"])
        else:
            detail = mod.check_examples(args["config"], args["mem"], args["seed"], args["sim"], args["names"])
    except AssertionError as e:
        return {"outcome": "failed", "message": f"AssertionError: {e}", "detail": None,
                "time": round(time.perf_counter() - t0, 3)}
    return {"outcome": "passed", "message": None, "detail": detail, "time": round(time.perf_counter() - t0, 3)}
