"""The raw RTL harness: the accelerator verilated as plain C++ with a C++ clock and DRAM model.

No cocotb, no tracing, no Python on the simulation path: the speed baseline of the
RTL for the benchmarks (``cosim bench``), and a cross-check of the cocotb fast
back-end's cycle counts.

::

    from testbench.raw.harness import build, run
    exe = build("default")          # cached under build/raw/<config>-<id>/
    res = run(program)              # RunResult(model="raw", ...)
    res.extra["cycles_per_s"]       # simulated cycles per wall second of the run loop

Memory variants (``mem``): ``"verilog"`` (default) verilates ``tb_fast.v`` (accel_top +
``testbench/hdl/dram_model.v``) and only toggles the clock and plays AXI4-Lite from C++;
``"cpp"`` verilates ``accel_top`` alone with a C++ translation of dram_model.v evaluated
each cycle, the AXI handshakes in C++. Both give the same cycle counts. The Verilog model
is the faster one (1.3-2.4x, measured by ``cosim bench``): Verilator 5 re-runs the whole
input-combinational ("ico") region of the top on every ``eval()``, and with the AXI4
master's inputs at the top that region is most of accel_top's datapath, evaluated twice
per cycle; with the memory inside the model, only the AXI4-Lite inputs are top inputs.

Code coverage: ``build(cfg, coverage=True)`` adds ``testbench.rtl_model.coverage_flags()`` in
its own folder (``...-cov``, or ``...-fsm`` for an FSM build: env ``COSIM_COVERAGE_KIND``);
``run(program, coverage_file=PATH)`` runs that build and writes
Verilator's ``coverage.dat`` to PATH (env ``COSIM_COVERAGE_DIR`` does it for every run, as in
``testbench.rtl_model``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Iterator, Sequence

from hw import csr
from hw.config import HwConfig, load_config
from hw.program import Program, check_starts
from hw.result import RunResult
from hw.toolchain import verilator_bin, verilator_env, verilator_root
from testbench.build_cache import build_lock, lock_path, log_problem, mark_used, space_problem
from testbench.raw.options import DEFAULT, RawOptions
from testbench.rtl_model import (MAX_MODEL_BYTES, build_root, coverage_dir_from_env, coverage_flags,
                                  coverage_suffix, fresh_coverage_file, verilator_make_variables)

RAW_DIR = Path(__file__).resolve().parent
HARNESS_CPP = RAW_DIR / "harness.cpp"
DRAM_MODEL_H = RAW_DIR / "dram_model.h"  # the C++ DRAM model, included by the harness
MEMS = ("verilog", "cpp")
DEFAULT_MEM = "verilog"
EXE = "raw_sim"
# Bound of one build (verilate, compile, link): minutes on a loaded 2-core machine; past it the build is an error.
BUILD_TIMEOUT_S = 3600


class RawError(RuntimeError):
    """The raw harness could not be built or did not produce a result."""


class RawTimeout(RawError):
    """A raw harness run took longer than its wall-time bound (the process was killed)."""


def _cfg(cfg: HwConfig | str | Path) -> HwConfig:
    return cfg if isinstance(cfg, HwConfig) else load_config(cfg)


def build_dir_for(cfg: HwConfig, mem: str = DEFAULT_MEM, rtl: Path | None = None, coverage: bool = False,
                  options: RawOptions = DEFAULT) -> Path:
    """The build folder; an alternative RTL folder (``rtl``) gets its own, named by its path, and so do
    a coverage build and a build with other options than :data:`testbench.raw.options.DEFAULT`."""
    alt = "" if rtl is None else "-rtl" + hashlib.sha256(str(Path(rtl).resolve()).encode()).hexdigest()[:8]
    return build_root() / "raw" / (f"{cfg.name}-{cfg.config_id:08x}-{mem}{alt}{coverage_suffix() if coverage else ''}"
                                   f"{options.folder_suffix}")


def _sources(cfg: HwConfig, mem: str, bdir: Path, rtl: Path | None = None) -> tuple[list[Path], Path, str]:
    from hw.introspect.parse import source_files
    from testbench.rtl_model import HDL_DIR, include_dir, rtl_sources

    srcs = rtl_sources() if rtl is None else [p.resolve() for p in source_files(Path(rtl))]
    top = "accel_top"
    if mem == "verilog":
        srcs += [HDL_DIR / "dram_model.v", HDL_DIR / "tb_fast.v"]
        top = "tb_fast"
    return srcs, include_dir(cfg, bdir), top


def _defines(cfg: HwConfig, mem: str) -> list[str]:
    d = [f"-DRAW_BUS_BYTES={cfg.bus_bytes}", f"-DRAW_RD_LAT={cfg.dram_read_latency}",
         f"-DRAW_WR_LAT={cfg.dram_write_latency}", f"-DRAW_MEM_BYTES={model_bytes(cfg)}u",
         f"-DRAW_MAX_BURST={cfg.max_burst}"]
    if mem == "verilog":
        d.append("-DRAW_MEM_VERILOG=1")
    return d


def model_bytes(cfg: HwConfig) -> int:
    return min(cfg.dram_bytes, MAX_MODEL_BYTES)


def build(cfg: HwConfig | str | Path = "default", mem: str = DEFAULT_MEM, verbose: bool = False,
          rtl: Path | None = None, coverage: bool = False, options: RawOptions = DEFAULT,
          train: Sequence[Program] = ()) -> Path:
    """Build (or reuse) the raw harness of ``cfg``; return the executable's path.

    Rebuilt only when an RTL file, the config header, the harness source, the flags or the
    Verilator install change (a stamp of all of them sits next to the executable). ``rtl`` is
    another RTL folder (with its ``sources.txt``) to build instead of hw/rtl, e.g. a mutant schemata.
    ``coverage`` adds the coverage flags, in a folder of its own. ``options``: the Verilator and C++
    options (:mod:`testbench.raw.options`); one with ``pgo`` is built instrumented, run on the
    ``train`` Programs, and rebuilt with their profile (``build_time_s`` counts all three steps).
    """
    if mem not in MEMS:
        raise ValueError(f"unknown raw memory variant '{mem}' (choose from {', '.join(MEMS)})")
    if options.pgo and not train:
        raise ValueError(f"raw harness options '{options.name}' need training Programs (train=...)")
    c = _cfg(cfg)
    bdir = build_dir_for(c, mem, rtl, coverage, options)
    if space_problem(bdir):
        raise RawError(space_problem(bdir))
    with build_lock(lock_path(bdir)):
        bdir.mkdir(parents=True, exist_ok=True)
        srcs, inc, top = _sources(c, mem, bdir, rtl)
        cmd_flags = options.verilator_flags() + ["-CFLAGS", " ".join([options.cxx] + _defines(c, mem))]
        if coverage:
            cmd_flags += list(coverage_flags())
        h = hashlib.sha256()
        for p in srcs + [inc / "accel_params.vh", HARNESS_CPP, DRAM_MODEL_H]:
            h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
        h.update(json.dumps([top, cmd_flags, str(verilator_root())]).encode())
        if options.pgo:
            for p in train:
                h.update(p.name.encode() + b"\0" + hashlib.sha256(bytes(p.dram_image())).digest())
        stamp = bdir / "build.stamp"
        exe = bdir / EXE
        if stamp.is_file() and stamp.read_text() == h.hexdigest() and exe.is_file():
            mark_used(bdir)
            return exe
        stamp.unlink(missing_ok=True)
        obj = bdir / "obj"
        shutil.rmtree(obj, ignore_errors=True)
        log = bdir / "build.log"
        log.unlink(missing_ok=True)
        t0 = time.perf_counter()
        if options.pgo:
            _make(c, mem, top, inc, srcs, obj, exe, options,
                  cmd_flags + ["-CFLAGS", "-fprofile-generate", "-LDFLAGS", "-fprofile-generate"], log)
            for p in train:  # each run adds to the .gcda files next to the objects
                r = run(p, c, mem, rtl=rtl, _exe=exe)
                if r.error is not None:
                    raise RawError(f"the PGO training run of '{p.name}' failed: {r.error}")
            for o in obj.glob("*.o"):  # recompile everything with the profile (the .gcda files stay)
                o.unlink()
            exe.unlink()
            cmd_flags = cmd_flags + ["-CFLAGS", "-fprofile-use -fprofile-correction -Wno-missing-profile"]
        _make(c, mem, top, inc, srcs, obj, exe, options, cmd_flags, log)
        if verbose:
            print(log.read_text())
        (bdir / "build_time_s").write_text(f"{time.perf_counter() - t0:.3f}\n")
        stamp.write_text(h.hexdigest())
        mark_used(bdir)
        return exe


def _make(c: HwConfig, mem: str, top: str, inc: Path, srcs: list[Path], obj: Path, exe: Path, options: RawOptions,
          cmd_flags: list[str], log: Path) -> None:
    """One Verilator run (verilate, compile, link) of the harness into ``exe``; its output appended to ``log``."""
    cmd = [str(verilator_bin() / "verilator"), "--cc", "--exe", "--build", "-j", str(os.cpu_count() or 2),
           "--top-module", top, "--prefix", "Vtop", "-Mdir", str(obj), f"-I{inc}", *cmd_flags,
           "-o", str(exe), *[str(s) for s in srcs], str(HARNESS_CPP)]
    env = verilator_env()
    # As in testbench.rtl_model: the precompiled-header fix and the shared runtime objects.
    cxx = options.cxx.replace(" ", "\\ ")  # a space inside a MAKEFLAGS variable is escaped, else it splits
    mf = verilator_make_variables() + [f"OPT_FAST={cxx}", f"OPT_SLOW={cxx}", f"OPT_GLOBAL={cxx}"]
    env["MAKEFLAGS"] = " ".join(filter(None, [env.get("MAKEFLAGS", "")] + mf))
    with open(log, "a") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        # in the caller's process group, so a task runner's kill of its group still reaches the compilers
        proc = subprocess.Popen(cmd, cwd=log.parent, env=env, stdout=f, stderr=subprocess.STDOUT)
        try:
            code = proc.wait(timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            raise RawError(f"building the raw harness for config '{c.name}' did not finish within "
                           f"{BUILD_TIMEOUT_S} s; see {log}") from None
        except BaseException:  # an interrupt: no compiler is left running
            _kill_tree(proc)
            raise
    if code != 0 or not exe.is_file():
        why = log_problem(log)
        raise RawError(f"building the raw harness for config '{c.name}' ({mem}, options {options.name}) failed "
                       f"(exit {code}){': ' + why if why else ''}; see {log}\n"
                       f"{log.read_text(errors='replace')[-4000:]}")


def _kill_tree(proc: subprocess.Popen) -> None:
    """Stop a build and every process under it (make, the compilers)."""
    import psutil  # a dependency of distributed

    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        children = []
    for child in [*children, proc]:
        try:
            child.kill()
        except (psutil.Error, ProcessLookupError):
            pass
    proc.wait()
    psutil.wait_procs(children, timeout=30)  # the compilers are gone (reaped by init) before the error is raised


def _built(c: HwConfig, mem: str, rtl: Path | None, coverage: bool, options: RawOptions) -> Path:
    """The executable :func:`run` uses: built now unless it is a PGO build, which only its builder
    (given the training Programs) can make."""
    if not options.pgo:
        return build(c, mem, rtl=rtl, coverage=coverage, options=options)
    exe = build_dir_for(c, mem, rtl, coverage, options) / EXE
    if not exe.is_file():
        raise RawError(f"the raw harness build '{options.name}' is not built: build(..., options=, train=) first")
    return exe


@contextmanager
def _held(get_exe: Callable[[], Path]) -> Iterator[Path]:
    """The executable ``get_exe`` builds, its build's lock held shared for the block, so that ``cosim clean``
    or a rebuild of the folder waits for the run; built again if it was removed between its build and the
    lock."""
    for _ in range(3):
        exe = get_exe()
        with build_lock(lock_path(exe.parent), shared=True):
            if exe.is_file():
                yield exe
                return
    raise RawError(f"the raw harness {exe} was removed before each of 3 runs (another process cleaning "
                   f"{exe.parent.parent})")


def _reads(cfg: HwConfig) -> list[tuple[str, int]]:
    by = csr.csrs_of(cfg)
    names = ["VERSION", "CONFIG_ID", "STATUS", "ERR_PC", "CYCLES_LO", "CYCLES_HI"] + csr.counter_reads(cfg.num_cores)
    return [(n, by[n].addr) for n in names]


def _error_of(d: dict, regs: dict[str, int], cfg: HwConfig, limit: int) -> dict | None:
    if d.get("tb_error"):
        return {"code": None, "name": "TESTBENCH", "pc": None, "message": d["tb_error"]}
    if d.get("timeout"):
        return {"code": None, "name": "TIMEOUT", "pc": None, "message": f"no DONE (irq) within {limit} cycles"}
    if d.get("proto_err"):
        return {"code": None, "name": "AXI_PROTOCOL", "pc": None,
                "message": "the RTL broke the AXI4 protocol towards the DRAM model (see stderr)"}
    if regs.get("CONFIG_ID") != cfg.config_id or regs.get("VERSION") != csr.VERSION:
        return {"code": None, "name": "IDENTITY", "pc": None,
                "message": f"VERSION 0x{regs.get('VERSION', 0):08x} / CONFIG_ID 0x{regs.get('CONFIG_ID', 0):08x}"}
    st = csr.decode_status(regs["STATUS"])
    if st["error"]:
        return csr.status_error(regs["STATUS"], regs["ERR_PC"], cfg.num_cores)
    if not st["done"] or st["busy"]:
        return {"code": None, "name": "STATUS", "pc": None,
                "message": f"irq rose but STATUS=0x{regs['STATUS']:08x} (expected done=1, busy=0)"}
    return None


def run(program: Program, cfg: HwConfig | str | Path | None = None, mem: str = DEFAULT_MEM, limit: int | None = None,
        keep: bool = False, rtl: Path | None = None, plusargs: Sequence[str] = (), reads: Sequence[str] = (),
        pre_reads: Sequence[str] = (), addr_reads: Sequence[int] = (), coverage_file: str | Path | None = None,
        csr_mode: tuple[int, int, int, int] | None = None,
        dram_mode: tuple[int, int, int, int] | None = None, options: RawOptions = DEFAULT,
        timeout_s: float | None = None, _exe: Path | None = None) -> RunResult:
    """Run one Program on the raw harness and return RunResult(model="raw").

    ``wall_s`` is the wall time of the register config plus the run to DONE (as the cocotb
    back-end's ``run_wall_s``); ``extra`` has ``sim_cycles`` (clock cycles from START to irq),
    ``cycles_per_s`` (sim_cycles / wall_s), ``process_wall_s`` and ``status``. ``limit`` is
    the cycle watchdog (default: ``testbench.memimg.watchdog_cycles``). ``rtl``: another RTL
    folder (see :func:`build`); ``plusargs``: extra ``+NAME=VALUE`` arguments of the simulation;
    ``reads``: more CSR names to read after the run, their values in ``extra["csrs"]``;
    ``pre_reads``: CSR names to read after reset, before the Program's writes (``extra["csrs_before"]``).
    ``addr_reads``: CSR addresses to read after the run, by address (also outside the config's map, e.g.
    a one-core config's bank), their values in ``extra["csrs_at"]`` keyed by the hex address. A register
    write of the Program may name its address (an int) instead of a CSR (a write outside the map).
    ``coverage_file``: run the coverage build and write its ``coverage.dat`` there (else env
    ``COSIM_COVERAGE_DIR``, if set). ``csr_mode`` = (AW delay, W delay, BREADY delay, split): the
    AXI4-Lite bus pattern of every write (cycles into the write before AWVALID / WVALID rise, cycles
    BVALID waits for BREADY; ``split``: 1 (or True) every write but CTRL's goes as two half-word-strobed
    writes of its value, 2 those two writes outstanding together: the second's W offered right after the
    first's W handshake, before the first's B); default: AW and W together, BREADY held, WSTRB 0xF. ``extra["csr_resp"]`` is the
    OR of every BRESP and RRESP the slave answered ([write, read], 0 = always OKAY).
    ``dram_mode`` = (stall seed, error response, read burst, write burst), ``mem="cpp"`` only: the C++
    DRAM model drops ARREADY/AWREADY/WREADY on cycles drawn from the seed (0: never), and answers the
    error response (2 SLVERR, 3 DECERR; 0: none) on that read burst's beats and that write burst's B
    (0-based numbers from reset, -1: none); with a stall seed it also drives junk on RDATA and SLVERR on
    RRESP and BRESP while RVALID / BVALID is low (AXI gives them no meaning then). ``extra["axi_ids"]``
    (``cpp``): the OR of every ARID/AWID; ``extra["axi_attrs"]``: the OR of the {LOCK, CACHE, PROT}
    offered with ARVALID (bits 0-7) and AWVALID (bits 8-15). ``options``: which build
    (:mod:`testbench.raw.options`; a PGO one must have been built already, with its training Programs).
    ``timeout_s``: a wall-time bound on the process (:class:`RawTimeout` beyond it; default: none, the
    cycle watchdog ends a run).
    """
    from testbench.memimg import from_hex_words, to_hex_words, watchdog_cycles

    c = _cfg(cfg) if cfg is not None else program.config
    if program.config.config_id != c.config_id:
        raise ValueError(f"Program '{program.name}' was made for config '{program.config.name}', not '{c.name}'")
    check_starts(program.regs, f"Program '{program.name}'")  # else the harness would only time out
    if program.dram_end > model_bytes(c):
        raise ValueError(f"Program '{program.name}' uses DRAM up to 0x{program.dram_end:x}, beyond the "
                         f"{model_bytes(c)}-byte DRAM model")
    cov_dir = coverage_dir_from_env() if coverage_file is None else None
    cov_path = Path(coverage_file).resolve() if coverage_file is not None else \
        fresh_coverage_file(cov_dir, f"{program.name}-raw") if cov_dir is not None else None
    # a PGO build's training runs (``_exe``) run inside their builder's exclusive lock
    held = _held(lambda: _built(c, mem, rtl, cov_path is not None, options)) if _exe is None else nullcontext(_exe)
    with held as exe:
        limit = int(limit or watchdog_cycles(program, "fast"))
        by = csr.csrs_of(c)
        runs = exe.parent / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        rdir = Path(tempfile.mkdtemp(prefix=f"{program.name[:40]}-", dir=runs))
        img = bytes(program.dram_image())
        dump_bytes = program.dram_end
        args = [str(exe), str(rdir / "job.txt")]
        if mem == "cpp":
            dram_in, dram_out = rdir / "dram_in.bin", rdir / "dram_out.bin"
            dram_in.write_bytes(img)
        else:
            dram_in, dram_out = rdir / "dram_in.hex", rdir / "dram_out.hex"
            dram_in.write_text(to_hex_words(img, c.bus_bytes))
            args += [f"+DRAM_IN={dram_in}", f"+DRAM_OUT={dram_out}"]
        args += list(plusargs)
        if cov_path is not None:
            cov_path.parent.mkdir(parents=True, exist_ok=True)
            args.append(f"+verilator+coverage+file+{cov_path}")
        lines = [f"dram_in {dram_in}", f"dram_out {dram_out}", f"dump_bytes {dump_bytes}", f"limit {limit}"]
        if csr_mode is not None:
            aw, w, b, split = csr_mode
            if min(aw, w, b) < 0 or max(aw, w, b) > 64:
                raise ValueError(f"csr_mode delays must be 0..64 cycles, got {csr_mode}")
            if int(split) not in (0, 1, 2):
                raise ValueError(f"csr_mode split must be 0, 1 or 2, got {csr_mode}")
            lines.append(f"csr_mode {aw} {w} {b} {int(split)} {by['CTRL'].addr}")
        if dram_mode is not None:
            if mem != "cpp":
                raise ValueError("dram_mode needs the C++ DRAM model (mem='cpp')")
            seed, resp, er, ew = dram_mode
            if not 0 <= seed < 2 ** 32 or resp not in (0, 2, 3):
                raise ValueError(f"dram_mode: seed must be 0..2**32-1 and the response 0, 2 or 3, got {dram_mode}")
            lines.append(f"dram_mode {seed} {resp} {er} {ew}")
        lines += [f"w {n if isinstance(n, int) else by[n].addr} {v}" for n, v in program.regs]
        lines += [f"r {n} {a}" for n, a in _reads(c)]
        lines += [f"r x_{n} {by[n].addr}" for n in reads]
        lines += [f"p p_{n} {by[n].addr}" for n in pre_reads]
        lines += [f"r a_{a:x} {a}" for a in addr_reads]
        (rdir / "job.txt").write_text("\n".join(lines) + "\n")
        t0 = time.perf_counter()
        try:
            p = subprocess.run(args, cwd=rdir, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            shutil.rmtree(rdir, ignore_errors=True)
            raise RawTimeout(f"raw harness run of '{program.name}' ({options.name}) took over {timeout_s:g} s") \
                from None
        proc_wall = time.perf_counter() - t0
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RAW ")), None)
        if line is None:
            raise RawError(f"raw harness run in {rdir} gave no result (exit {p.returncode})\n"
                           f"{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
        d = json.loads(line[4:])
        regs = d.get("regs", {})
        err = _error_of(d, regs, c, limit)
        if mem == "cpp":
            dram = dram_out.read_bytes() if dram_out.is_file() else bytes(dump_bytes)
        else:
            dram = from_hex_words(dram_out.read_text(), c.bus_bytes)[0] if dram_out.is_file() else bytes(dump_bytes)
        dram = dram.ljust(dump_bytes, b"\0")
        counters, per_core = csr.counters_of(regs, c.num_cores)
        cycles = (regs["CYCLES_LO"] | (regs["CYCLES_HI"] << 32)) if "CYCLES_LO" in regs else None
        wall = float(d.get("run_wall_s", proc_wall))
        sim_cycles = int(d.get("sim_cycles", 0))
        extra = {"mem": mem, "sim_cycles": sim_cycles, "cycles_per_s": sim_cycles / wall if wall > 0 else None,
                 "process_wall_s": round(proc_wall, 6), "status": regs.get("STATUS"), "run_dir": str(rdir),
                 "csr_resp": [int(d.get("csr_bresp", 0)), int(d.get("csr_rresp", 0))]}
        if mem == "cpp":
            extra["axi_ids"] = int(d.get("axi_ids", 0))
            extra["axi_attrs"] = int(d.get("axi_attrs", 0))
        if cov_path is not None:
            extra["coverage_file"] = str(cov_path)
        if per_core is not None:
            extra["cores"] = per_core
        if reads:
            extra["csrs"] = {n: regs.get(f"x_{n}") for n in reads}
        if addr_reads:
            extra["csrs_at"] = {f"0x{a:x}": regs.get(f"a_{a:x}") for a in addr_reads}
        if pre_reads:
            extra["csrs_before"] = {n: regs.get(f"p_{n}") for n in pre_reads}
        if p.stderr.strip():
            extra["stderr"] = p.stderr[-2000:]
        res = RunResult(model="raw", outputs=program.read_outputs(dram), cycles=cycles, counters=counters, error=err,
                        wall_s=wall, extra=extra)
        if not keep and (err is None or err.get("code") is not None):
            shutil.rmtree(rdir, ignore_errors=True)
            del extra["run_dir"]
        return res
