"""Run one Program (or one example kernel) on each model and compare the results.

This is the only place that knows every model: the golden path (through the
compiler's examples), the TLM (``sim.tlm``) and the RTL (``testbench``). The models
themselves never import each other; they meet here, through the Program.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hw.config import HwConfig, load_config
from hw.program import Program
from hw.result import RunResult

MODELS = ("golden", "tlm", "rtl")


@dataclass
class Mismatch:
    """The first output element where a model differs from the reference."""

    output: str
    index: tuple[int, ...]
    expected: int
    got: int
    count: int

    def __str__(self) -> str:
        return (f"output '{self.output}'{list(self.index)}: expected {self.expected}, got {self.got} "
                f"({self.count} element(s) differ)")


def first_mismatch(expected: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> Mismatch | None:
    """None when every output is equal (shape, dtype and values), else the first difference."""
    for name, exp in expected.items():
        g = got.get(name)
        if g is None:
            return Mismatch(name, (), 0, 0, int(np.asarray(exp).size))
        exp, g = np.asarray(exp), np.asarray(g)
        if exp.shape != g.shape:
            return Mismatch(name, (), int(np.prod(exp.shape)), int(np.prod(g.shape)), max(exp.size, g.size))
        diff = np.argwhere(exp.astype(np.int64) != g.astype(np.int64))
        if len(diff):
            idx = tuple(int(i) for i in diff[0])
            return Mismatch(name, idx, int(exp[idx]), int(g[idx]), len(diff))
    return None


@dataclass
class Job:
    """What to run: a Program with its golden outputs, and where it came from."""

    kernel: str
    config: HwConfig
    program: Program
    golden: dict[str, np.ndarray] | None = None      # outputs of the golden path (None: use program.expected)
    reference: dict[str, np.ndarray] | None = None   # plain numpy expression of the operator
    golden_wall_s: float = 0.0
    compile_wall_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def expected(self) -> dict[str, np.ndarray]:
        return self.golden if self.golden is not None else self.program.expected


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """``["n=64", "shape=1,64,1,16"]`` -> ``{"n": 64, "shape": (1, 64, 1, 16)}``."""
    out: dict[str, Any] = {}
    for it in items or []:
        if "=" not in it:
            raise ValueError(f"parameter '{it}' is not key=value")
        k, v = it.split("=", 1)
        parts = [p for p in v.split(",") if p != ""]
        try:
            nums = [int(p, 0) for p in parts]
            out[k] = tuple(nums) if ("," in v) else nums[0]
        except ValueError:
            out[k] = v
    return out


def make_job(kernel: str, cfg: HwConfig | None, params: dict[str, Any] | None = None, seed: int = 0) -> Job:
    """A Job from an example name, a ``path.py:function`` kernel, or a saved Program folder.

    ``cfg`` None means the default config, or for a Program folder the config it was made for.
    """
    if Path(kernel).is_dir():
        prog = Program.load(kernel, cfg)
        if not prog.inputs:
            raise ValueError(f"{kernel}: the Program folder has no inputs.npz, so it cannot be run")
        return Job(kernel=prog.name, config=prog.config, program=prog)
    if cfg is None:
        cfg = load_config("default")
    from compiler.examples import make_case  # the compiler is only needed to build a Program

    t0 = time.perf_counter()
    case = make_case(kernel, cfg, params, seed)
    t1 = time.perf_counter()
    golden = case.golden()
    t2 = time.perf_counter()
    return Job(kernel=kernel, config=cfg, program=case.program, golden=golden, reference=case.reference(),
               golden_wall_s=t2 - t1, compile_wall_s=t1 - t0)


def run_golden(job: Job) -> RunResult:
    """The golden result: the kernel run on numpy, checked against the plain numpy reference."""
    outs = job.expected
    res = RunResult("golden", outs, wall_s=job.golden_wall_s)
    if job.reference is not None:
        mm = first_mismatch(job.reference, outs)
        res.extra["mismatch"] = str(mm) if mm else None
    return res


def run_tlm(job: Job, vcd: str | Path | None = None, trace: str | Path | None = None) -> RunResult:
    from sim.tlm import run_program

    return run_program(job.program, vcd=vcd, trace=trace, raise_on_error=False)


def run_rtl(jobs: list[Job], mem: str = "fast", simulator: str = "verilator", waves: bool = False,
            vcd: str | Path | None = None) -> list[RunResult]:
    """Run several Jobs of one config in one simulator process."""
    from testbench.runner import run_programs

    if not jobs:
        return []
    return run_programs([j.program for j in jobs], jobs[0].config, mem=mem, sim=simulator, waves=waves,
                        vcd_path=vcd)


def judge(job: Job, res: RunResult) -> dict[str, Any]:
    """The JSON report of one model's run, with ``match`` against golden (or the reference)."""
    d: dict[str, Any] = {"kernel": job.kernel, "config": job.config.name}
    d.update(res.to_json())
    if res.model == "golden":
        d["match"] = d.pop("mismatch", None) is None
        if not d["match"]:
            d["mismatch"] = res.extra.get("mismatch")
        return d
    if res.error:
        d["match"] = False
        return d
    mm = first_mismatch(job.expected, res.outputs)
    d["match"] = mm is None
    if mm:
        from sim.mismatch import last_writers

        d["mismatch"] = f"{mm}; {last_writers(job.program, mm.output, mm.index)}" if mm.index else str(mm)
    return d


def cycle_error_pct(tlm_cycles: int | None, rtl_cycles: int | None) -> float | None:
    """(TLM - RTL) / RTL in percent."""
    if not tlm_cycles or not rtl_cycles:
        return None
    return 100.0 * (tlm_cycles - rtl_cycles) / rtl_cycles
