"""The coverage regression: the regression's cells, the raw harness, RTL fuzz and the directed coverage
Programs, run on coverage builds as engine tasks, each run writing its own ``coverage.dat``; and, on
FSM coverage builds of the raw harness (Verilator builds line and FSM coverage only apart, see
``testbench.rtl_model.FSM_COVERAGE_FLAGS``), every example once more per config for the FSM points.

Every task sets env ``COSIM_COVERAGE_DIR`` (see ``testbench.rtl_model``) for its duration, so the
cells of ``tests/test_rtl_regression.py`` run exactly as ``cosim regress`` runs them, on the
coverage builds, each simulator process writing a fresh file into the campaign's ``dat/`` folder.
A failed check is a recorded outcome (its coverage still counts); anything else is a task failure.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from cosim.cluster import Task

BACKENDS = ("fast", "protocol", "raw")
FN = "cosim.coverage.campaign:run_task"


# The env that makes every RTL run of a process use the coverage build and write a coverage file into
# that folder (read by testbench.rtl_model and testbench.raw.harness, reached through cosim.models).
COVERAGE_DIR_ENV = "COSIM_COVERAGE_DIR"
# The env that makes those coverage builds FSM builds (read by testbench.rtl_model.coverage_kind).
COVERAGE_KIND_ENV = "COSIM_COVERAGE_KIND"


@contextlib.contextmanager
def coverage_env(folder: str, kind: str = "code") -> Iterator[None]:
    """Env ``COSIM_COVERAGE_DIR=folder`` and ``COSIM_COVERAGE_KIND=kind`` for the block (restored after)."""
    new = {COVERAGE_DIR_ENV: folder, COVERAGE_KIND_ENV: kind}
    old = {k: os.environ.get(k) for k in new}
    os.environ.update(new)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass(frozen=True)
class Plan:
    """What a coverage run runs."""

    configs: tuple[str, ...]
    backends: tuple[str, ...]
    examples: tuple[str, ...] | None = None   # None: every example a cell runs
    examples_on: bool = True                  # False: no example at all
    units: bool = True
    fuzz: int = 0                             # RTL fuzz Programs per config (fast back-end)
    fuzz_seed: int = 1
    directed: bool = True
    examples_per_task: int = 0
    fsm: bool = True                          # the examples on an FSM build of the raw harness
    long_log2: int | None = None              # the directed long-counter GEMM's log2 length (None: its default)


def plan_tasks(plan: Plan, dat_dir: Path) -> list[Task]:
    """The engine tasks of a plan (each writes its coverage files into ``dat_dir``)."""
    from compiler.examples import list_examples
    from cosim.regress.cells import regression_module

    mod = regression_module()
    base = {"dat_dir": str(dat_dir)}
    tasks: list[Task] = []
    mems = [m for m in plan.backends if m != "raw"]
    for cfg in plan.configs:
        for mem in mems if plan.examples_on else []:
            names = [n for n in mod.example_names(mem, "verilator") if plan.examples is None or n in plan.examples]
            step = plan.examples_per_task if plan.examples_per_task > 0 else max(len(names), 1)
            for k in range(0, len(names), step):
                part = names[k:k + step]
                tasks.append(Task(f"examples {cfg} {mem} {'+'.join(part)}", FN,
                                  {**base, "kind": "examples", "config": cfg, "mem": mem, "names": part}))
        if "raw" in plan.backends and plan.examples_on:
            names = [n for n in list_examples() if plan.examples is None or n in plan.examples]
            if names:
                tasks.append(Task(f"raw {cfg} {'+'.join(names)}", FN,
                                  {**base, "kind": "raw", "config": cfg, "names": names, "directed": plan.directed}))
        if plan.fsm and plan.examples_on:
            names = [n for n in list_examples() if plan.examples is None or n in plan.examples]
            if names:
                tasks.append(Task(f"fsm {cfg} {'+'.join(names)}", FN,
                                  {**base, "kind": "fsm", "config": cfg, "names": names}))
        if plan.units:
            for c, mem in mod.unit_matrix([cfg], mems):
                tasks.append(Task(f"units {c} {mem}", FN, {**base, "kind": "units", "config": c, "mem": mem}))
        if plan.fuzz > 0 and "fast" in mems:
            tasks.append(Task(f"fuzz {cfg} seed {plan.fuzz_seed} x{plan.fuzz}", FN,
                              {**base, "kind": "fuzz", "config": cfg, "count": plan.fuzz, "seed": plan.fuzz_seed,
                               "mems": mems}))
    if plan.directed:
        from cosim.coverage.directed import directed_tasks
        tasks += directed_tasks(plan.configs, mems, base if plan.long_log2 is None else {**base, "long_log2": plan.long_log2})
    from cosim.models import design_digest

    design = design_digest(plan.configs)  # a resumed record is of this RTL and these configs' hardware
    return [Task(f"{t.key} rtl={design}", t.fn, t.args) for t in tasks]


def run_task(args: dict[str, Any]) -> dict[str, Any]:
    """Engine task: one piece of the coverage regression. ``{"outcome": "passed" | "failed", "message",
    "detail", "time"}``; the coverage files land in ``args["dat_dir"]``."""
    import shutil

    from cosim.coverage.coverage_data import read_all

    t0 = time.perf_counter()
    message, detail = None, None
    # the task's runs write into a folder of its own, merged into one file per task at the end (a run's
    # file is megabytes: one per simulator process of a whole campaign would be gigabytes)
    dat_dir = Path(args["dat_dir"])
    own = Path(tempfile.mkdtemp(prefix=".task-", dir=dat_dir))
    try:
        with coverage_env(str(own), "fsm" if args["kind"] == "fsm" else "code"):
            try:
                detail = _run(args)
            except AssertionError as e:
                message = f"AssertionError: {str(e)[:2000]}"
        runs = sorted(own.glob("*.dat"))
        merged = None
        if runs:
            fd, name = tempfile.mkstemp(prefix=f"{_safe(args['kind'] + '-' + args.get('config', ''))}-",
                                        suffix=".dat", dir=dat_dir)
            os.close(fd)
            merged = str(read_all(runs).write(name))
    finally:
        shutil.rmtree(own, ignore_errors=True)
    return {"outcome": "failed" if message else "passed", "message": message, "detail": detail,
            "coverage_file": merged, "runs": len(runs), "time": round(time.perf_counter() - t0, 3)}


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)[:60]


def _run(args: dict[str, Any]) -> Any:
    from cosim.regress.cells import regression_module

    kind = args["kind"]
    if kind == "examples":
        return regression_module().check_examples(args["config"], args["mem"], 0, "verilator", args["names"])
    if kind == "units":
        return regression_module().check_unit_cases(args["config"], args["mem"])
    if kind in ("raw", "fsm"):  # the same runs; "fsm" on the FSM build (see run_task)
        return _run_raw(args["config"], args["names"], directed=kind == "raw" and args.get("directed", False))
    if kind == "fuzz":
        return _run_fuzz(args["config"], args["count"], args["seed"], args["mems"])
    if kind == "directed":
        from cosim.coverage.directed import run_directed
        return run_directed(args)
    raise ValueError(f"unknown coverage task kind {kind!r}")


def _run_raw(cfg_name: str, names: Sequence[str], directed: bool = False) -> dict[str, Any]:
    """Every example on the raw C++ harness (one process each), outputs checked against golden; with
    ``directed`` also the directed raw-harness cases (``directed.raw_harness_cases``)."""
    from compiler import examples
    from cosim import models
    from hw.config import load_config

    cfg = load_config(cfg_name)
    bad, cycles = [], {}
    for n in names:
        case = examples.make_case(n, cfg, seed=0)
        r = models.raw(case.program, cfg)
        cycles[n] = r.cycles
        if r.error is not None:
            bad.append(f"{n}: {r.error}")
            continue
        for k, want in case.expected.items():
            got = r.outputs.get(k)
            if got is None or got.shape != want.shape or (got != want).any():
                bad.append(f"{n}: output {k} differs from golden")
    if directed:
        from cosim.coverage.directed import raw_harness_cases

        bad += raw_harness_cases(cfg)
    assert not bad, "\n".join(bad)
    return cycles


def _run_fuzz(cfg_name: str, count: int, seed: int, mems: Sequence[str]) -> dict[str, Any]:
    """``count`` fuzz Programs of ``cfg`` against the TLM on the RTL (the campaign's back-end choice, or fast)."""
    from cosim.fuzz.campaign import make_case, run_cases
    from hw.config import load_config

    cfg = load_config(cfg_name)
    cases = [make_case(cfg, seed, i) for i in range(count)]
    for c in cases:
        if c.mem not in mems:
            c.mem = "fast"
    run_cases(cases, rtl=True)
    bad = [f"{c.program.name}: {'; '.join(c.problems)}" for c in cases if c.problems]
    assert not bad, f"{len(bad)} fuzz case(s) disagree:\n" + "\n".join(bad[:20])
    return {"cases": count}
