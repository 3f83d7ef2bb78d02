"""The model registry: run one Program (or one example kernel) on each model and compare.

This is the only place in ``cosim/`` that imports a model: the golden path (through
the compiler's examples), the instruction-set simulator (``sim.iss``), the TLM
(``sim.tlm``) and the RTL (``testbench``: the cocotb back-ends and the raw C++
harness). Every tool (CLI, fuzz, bench, waves, calibrate) calls the models through
the functions here; the models never import each other, they meet here through the
Program.

Program-level entry points (what the tools use): :func:`iss`, :func:`tlm`,
:func:`rtl`, :func:`rtl_build`, :func:`rtl_available`,
:func:`raw`, :func:`raw_build`. Job-level ones (an example kernel with its golden
outputs): :func:`make_job`, :func:`run_golden`, :func:`run_iss`, :func:`run_tlm`,
:func:`run_rtl`, :func:`judge`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hw.config import HwConfig, load_config
from hw.program import Program
from hw.result import RunResult
from sim.tlm.timing import Timing, TimingError, calibration_path  # noqa: F401 - the TLM's timing, for calibrate

MODELS = ("golden", "iss", "tlm", "rtl")


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
    reference_in_user_shapes: bool = False  # a user kernel's reference: only the user's elements are compared
    golden_wall_s: float = 0.0
    compile_wall_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    # for a Program folder: why golden could not be re-run ("" when it was, or for a kernel)
    golden_not_rerun: str = ""

    @property
    def expected(self) -> dict[str, np.ndarray]:
        return self.golden if self.golden is not None else self.program.expected


def is_program_folder(kernel: str) -> bool:
    """Whether ``kernel`` names a Program folder rather than an example: a folder, unless it is a bare name
    (no slash) of a registered example, which wins (run a folder of that name as ``./NAME``)."""
    if not Path(kernel).is_dir():
        return False
    if "/" in kernel or "\\" in kernel:
        return True
    from compiler.examples import EXAMPLES

    return kernel not in EXAMPLES


def make_job(kernel: str, cfg: HwConfig | None, params: dict[str, Any] | list[str] | None = None,
             seed: int = 0) -> Job:
    """A Job from an example name, a ``path.py:function`` kernel, or a saved Program folder.

    ``cfg`` None means the default config, or for a Program folder the config it was made for.
    ``params`` are the kernel's parameters, already typed (a dict) or as the ``KEY=VALUE`` text of
    ``-p`` (parsed by ``compiler.examples.parse_params``, the one parser every command uses).
    """
    if is_program_folder(kernel):
        if params:
            raise ValueError(f"{kernel}: a Program folder takes no -p parameters (they were fixed when it "
                             f"was compiled)")
        from compiler.onnx_import.folder import is_imported_folder

        if is_imported_folder(kernel):
            return imported_job(kernel, cfg)
        prog = Program.load(kernel, cfg)
        missing = prog.missing_inputs()
        if missing:
            what = "no inputs.npz" if not (Path(kernel) / "inputs.npz").exists() else "inputs.npz lacks them"
            raise ValueError(f"{kernel}: no data for input region(s) {', '.join(repr(m) for m in missing)} "
                             f"({what}), so it cannot be run")
        from compiler.examples import rederive_golden

        t0 = time.perf_counter()
        golden, why = rederive_golden(prog) if prog.expected else (None, "")
        return Job(kernel=prog.name, config=prog.config, program=prog, golden=golden,
                   golden_wall_s=time.perf_counter() - t0, golden_not_rerun=why)
    if cfg is None:
        cfg = load_config("default")
    from compiler.examples import make_case, parse_params  # the compiler is only needed to build a Program

    if isinstance(params, list):
        params = parse_params(kernel, params)
    t0 = time.perf_counter()
    case = make_case(kernel, cfg, params, seed)
    t1 = time.perf_counter()
    golden = case.golden()
    t2 = time.perf_counter()
    return Job(kernel=kernel, config=cfg, program=case.program, golden=golden, reference=case.reference(),
               reference_in_user_shapes=case.reference_in_user_shapes, golden_wall_s=t2 - t1, compile_wall_s=t1 - t0)


def imported_job(folder: str, cfg: HwConfig | None) -> Job:
    """The Job of a Program folder written by ``cosim import``: its input regions made by the host steps
    from ``inputs.npz`` (ONNX names), golden re-run from its ``model.onnx``, and ``expected.npz`` (ONNX
    names and dtypes) checked against that re-run after the host's output steps."""
    from compiler.onnx_import.folder import compare_outputs, load_folder

    f = load_folder(folder, cfg)
    t0 = time.perf_counter()
    golden = f.imported.golden_regions(f.inputs)
    wall = time.perf_counter() - t0
    check = ""
    if f.expected:
        gin = f.imported.graph_inputs(f.inputs)
        onnx_out = f.imported.outputs_from_regions(golden, gin)
        lsb = {n: f.imported.output_lsb(n) for n in onnx_out}
        mm = compare_outputs(f.expected, onnx_out, lsb)
        check = f"expected.npz differs from the golden re-run: {mm}" if mm else ""
    return Job(kernel=f.program.name, config=f.program.config, program=f.program, golden=golden, golden_wall_s=wall,
               meta={"onnx_expected_check": check or None})


def run_golden(job: Job) -> RunResult:
    """The golden result: the kernel run on numpy, checked against the plain numpy reference."""
    outs = job.expected
    res = RunResult("golden", outs, wall_s=job.golden_wall_s)
    if job.reference is not None:
        if job.reference_in_user_shapes:  # the padding lanes are the kernel's business: not compared
            from compiler.tensor import unpad

            ref = job.reference
            outs = {n: unpad(a, np.shape(ref[n])) if n in ref and np.size(ref[n]) <= a.size else a
                    for n, a in outs.items()}
        mm = first_mismatch(job.reference, outs)
        res.extra["mismatch"] = str(mm) if mm else None
    else:  # a Program folder: its expected.npz against the golden re-run
        res.extra["mismatch"] = stale_expected(job)
    return res


def stale_expected(job: Job) -> str | None:
    """How a Program folder's expected.npz differs from the golden re-run the other models are checked
    against (its inputs changed since it was written, say); None when it does not, or when nothing was
    re-run."""
    if "onnx_expected_check" in job.meta:  # an imported folder: its ONNX-level expected.npz against the re-run
        return job.meta["onnx_expected_check"]
    if job.golden is not None and job.program.expected and job.golden is not job.program.expected:
        mm = first_mismatch(job.golden, job.program.expected)
        return f"expected.npz differs from the golden re-run: {mm}" if mm else None
    return None


def run_iss(job: Job) -> RunResult:
    """The instruction-set simulator's result (outputs, counters, errors; no cycles)."""
    return iss(job.program)


def run_tlm(job: Job, vcd: str | Path | None = None, trace: str | Path | None = None) -> RunResult:
    return tlm(job.program, vcd=vcd, trace=trace)


def run_rtl(jobs: list[Job], mem: str = "fast", simulator: str = "verilator", waves: bool = False,
            vcd: str | Path | None = None, **kw: Any) -> list[RunResult]:
    """Run several Jobs of one config in one simulator process (``kw``: see ``testbench.rtl_model.run_programs``,
    e.g. ``watchdog``, ``waves_window``, ``waves_max_bytes``)."""
    if not jobs:
        return []
    return rtl([j.program for j in jobs], jobs[0].config, mem=mem, sim=simulator, waves=waves, vcd_path=vcd, **kw)


# ---- Program-level entry points: the only way the tools reach a model ---------------------------
def iss(program: Program, check_tokens: bool = True) -> RunResult:
    """Run ``program`` on the instruction-set simulator (the plain sequential oracle)."""
    from sim.iss import run_reference

    return run_reference(program, check_tokens=check_tokens)


def tlm(program: Program, *, vcd: str | Path | None = None, trace: str | Path | None = None,
        timing: Any = None, raise_on_error: bool = False, observe_ports: bool = False) -> RunResult:
    """Run ``program`` on the TLM; a fault is in ``result.error`` unless ``raise_on_error``.
    ``observe_ports`` adds ``extra["acc_ports"]``: who held the accumulator's ports during the ALU's
    and GEMM's EXECUTE cycles (an observation for functional coverage; the run is unchanged)."""
    from sim.tlm import run_program

    return run_program(program, vcd=vcd, trace=trace, timing=timing, raise_on_error=raise_on_error,
                       observe_ports=observe_ports)


@dataclass
class TlmTimeline:
    """A traced TLM run: the result, the model's timeline (``sim.tlm.trace.Tracer``: instructions
    with their pop/execute/end/completion cycles, GEMM executions, section spans) and its timing
    constants (``sim.tlm.Timing``), for reports that split the run (``cosim.section_report``)."""

    result: RunResult
    tracer: Any
    timing: Any


def tlm_traced(program: Program, *, trace: str | Path | None = None,
               vcd: str | Path | None = None) -> TlmTimeline:
    """Run ``program`` on the TLM with its timeline recorded (no fast-forward: tracing sees every
    transaction; the same cycles and outputs); ``trace``/``vcd`` also write the Perfetto JSON (with
    one span per section of ``program.meta["sections"]``) and the VCD. A fault is in
    ``result.error``."""
    from sim.tlm import result_of, simulate

    m, wall = simulate(program, trace=True)
    if trace is not None:
        m.write_trace(trace, program.meta.get("sections"))
    if vcd is not None:
        m.write_vcd(vcd)
    return TlmTimeline(result_of(m, program, wall), m.tracer, m.timing)


def rtl(programs: list[Program], cfg: HwConfig | None = None, **kw: Any) -> list[RunResult]:
    """Run Programs of one config on the RTL through cocotb (``testbench.rtl_model.run_programs``)."""
    from testbench.rtl_model import run_programs

    return run_programs(list(programs), cfg, **kw)


def rtl_build(cfg: HwConfig, *args: Any, **kw: Any) -> Any:
    """Build (or reuse) the cocotb Verilator model of ``cfg``."""
    from testbench.rtl_model import build

    return build(cfg, *args, **kw)


def rtl_available() -> str | None:
    """None when the RTL model can be used, else why not."""
    try:
        from testbench.rtl_model import rtl_available as have_rtl
    except Exception as e:  # noqa: BLE001 - any import problem means "no RTL"
        return f"testbench.rtl_model cannot be imported ({type(e).__name__}: {e})"
    return None if have_rtl() else "hw/rtl/sources.txt is missing (the RTL has not landed)"


def rtl_digest() -> str:
    """A short hash of the RTL's sources (their contents, in compile order), or "none" without an RTL: a
    result of one design is not a result of another."""
    import hashlib

    try:
        from testbench.rtl_model import rtl_sources

        files = rtl_sources()
    except Exception:  # noqa: BLE001 - no RTL here, or a list naming missing files (the run says why)
        return "none"
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:10]


def design_digest(configs: Sequence[str]) -> str:
    """:func:`rtl_digest` and a hash of ``configs``' hardware (names or paths): what a result of the RTL is of."""
    import hashlib

    hw = json.dumps([load_config(c).hardware_dict() for c in configs], sort_keys=True)
    return f"{rtl_digest()}-{hashlib.sha256(hw.encode()).hexdigest()[:8]}"


def model_failure_types() -> tuple[type[BaseException], ...]:
    """The models' own exceptions that report a problem of this machine or of the input rather
    than a bug (the RTL could not be built, or its simulator died: the log says why)."""
    try:
        from testbench.rtl_model import RtlError
    except Exception:  # noqa: BLE001 - no RTL model here: nothing of its to recognise
        return ()
    return (RtlError,)


def raw(program: Program, cfg: HwConfig | None = None, **kw: Any) -> RunResult:
    """Run ``program`` on the raw C++ Verilator harness (no cocotb, no Python per cycle)."""
    from testbench.raw.harness import run

    return run(program, cfg, **kw)


def raw_build(cfg: HwConfig, *args: Any, **kw: Any) -> Any:
    """Build (or reuse) the raw harness of ``cfg``."""
    from testbench.raw.harness import build

    return build(cfg, *args, **kw)


def raw_build_options() -> Any:
    """The raw harness's build option sets (``testbench.raw.options``: ``LADDER``, ``DEFAULT``, ``with_pgo``)."""
    from testbench.raw import options

    return options


def raw_build_dir(cfg: HwConfig, **kw: Any) -> Any:
    """The folder of a raw harness build (``testbench.raw.harness.build_dir_for``)."""
    from testbench.raw.harness import build_dir_for

    return build_dir_for(cfg, **kw)


def raw_timeout() -> type[Exception]:
    """The exception of a raw harness run past its wall-time bound (``run(..., timeout_s=)``)."""
    from testbench.raw.harness import RawTimeout

    return RawTimeout


# Why TLM and RTL cycles of a protocol back-end run are not compared (docs/microarch.md: the timing contract
# is the fast back-end's).
PROTOCOL_NOTE = ("the TLM's cycles model the fast DRAM back-end; the RTL cycles here come from the protocol "
                 "back-end (cocotbext-axi, its own latencies and backpressure), so the two are not comparable")


def build_root() -> Path:
    """The build folder of every simulator build and cache: env ``COSIM_BUILD_DIR`` (empty: unset), else
    ``<repo>/build`` (``testbench.build_cache``)."""
    from testbench.build_cache import build_root as root

    return root()


def pin_build_root() -> None:
    """Make a relative ``COSIM_BUILD_DIR`` absolute for the processes this one starts (they run elsewhere)."""
    from testbench.build_cache import pin_build_root as pin

    pin()


def cached_builds() -> list[Any]:
    """The simulator builds under the build folder, most recently used first (``testbench.build_cache``)."""
    from testbench.build_cache import builds

    return builds(build_root())


def remove_build(b: Any) -> bool:
    """Delete one of :func:`cached_builds` (under its build lock); False when it was used since it was listed
    (then it stays)."""
    from testbench.build_cache import remove

    return remove(b)


def prune_build_runs(b: Any, dry_run: bool = False) -> int:
    """Remove the run folders left in one of :func:`cached_builds` (not while it runs); the bytes freed
    (``dry_run``: removes nothing, the bytes it would free)."""
    from testbench.build_cache import prune_runs, run_folders_bytes

    return run_folders_bytes(b) if dry_run else prune_runs(b)


def raw_mems() -> tuple[str, ...]:
    """The raw harness's DRAM model variants."""
    from testbench.raw.harness import MEMS

    return tuple(MEMS)


NOTHING_COMPARED = "nothing: the Program has no expected outputs (expected.npz)"


def judge(job: Job, res: RunResult) -> dict[str, Any]:
    """The JSON report of one model's run, with ``match`` against golden (or the reference): true or false,
    or None (with ``compared``) when there was nothing to compare (a Program folder without expected.npz)."""
    d: dict[str, Any] = {"kernel": job.kernel, "config": job.config.name}
    d.update(res.to_json())
    if res.model == "golden" and not job.expected:
        d["match"] = None
        d["compared"] = NOTHING_COMPARED
        return d
    if res.model == "golden" and job.golden_not_rerun:
        # nothing ran: golden is what expected.npz says, so it cannot disagree with itself
        d["match"] = None
        d["golden"] = f"expected.npz (not re-run: {job.golden_not_rerun})"
        return d
    if res.model == "golden":
        d["match"] = d.pop("mismatch", None) is None
        if not d["match"]:
            d["mismatch"] = res.extra.get("mismatch")
        return d
    if res.error:
        d["match"] = False
        return d
    if not job.expected:  # no output to compare, so no verdict
        d["match"] = None
        d["compared"] = NOTHING_COMPARED
        return d
    mm = first_mismatch(job.expected, res.outputs)
    d["match"] = mm is None
    if mm:
        from cosim.mismatch import last_writers
        from hw.program import make_regs

        p = job.program
        # the blame reads the Program's own stream: only where its register config fetches that stream
        own = [w for w in p.regs if w[0].startswith(("INSN_", "CORE"))] == \
            [w for w in make_regs(p.config, p.regions, p.windows) if w[0].startswith(("INSN_", "CORE"))]
        d["mismatch"] = f"{mm}; {last_writers(p, mm.output, mm.index)}" if mm.index and own else str(mm)
    return d


def cycle_error_pct(tlm_cycles: int | None, rtl_cycles: int | None) -> float | None:
    """(TLM - RTL) / RTL in percent."""
    if not tlm_cycles or not rtl_cycles:
        return None
    return 100.0 * (tlm_cycles - rtl_cycles) / rtl_cycles
