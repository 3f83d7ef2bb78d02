"""Run the cocotb bench of one Verilog module on its own (a small RTL block, the DRAM model).

In the style of alexforencich's verilog-axi (a cocotb test module per block, run by
cocotb's runner): the module is built (Verilator, or Icarus) with the config's generated
header (``accel_params.vh``) when a config is given and with its Verilog parameters, into
``<build root>/rtl/units/<tag>`` under a file lock, then every cocotb test of the bench
module (``testbench/units/<block>_bench.py``, ``testbench/dram_model_bench.py``) runs
against it. A block bench reads the config, the parameters and its random seed from the
environment (see :func:`bench_env`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from hw.config import HwConfig
from testbench.build_cache import build_lock, lock_path
from testbench.rtl_model import (build_root, cocotb_runner, include_dir, rtl_dir,
                                 simulator_sys_path, verilator_makeflags)


def bench_env(cfg: HwConfig, parameters: dict[str, int], seed: int) -> dict[str, str]:
    """What a block bench reads: UNIT_BENCH_CONFIG (the config as JSON), UNIT_BENCH_PARAMS, UNIT_BENCH_SEED."""
    return {"UNIT_BENCH_CONFIG": json.dumps(cfg.to_dict()), "UNIT_BENCH_PARAMS": json.dumps(parameters),
            "UNIT_BENCH_SEED": str(seed), "PYTHONWARNINGS": "default"}


def run_block_bench(block: str, test_module: str, cfg: HwConfig, parameters: dict[str, int] | None = None,
                    seed: int = 1, build_args: list[str] | None = None, sim: str = "verilator",
                    submodules: tuple[str, ...] = ()) -> None:
    """Build ``hw/rtl/<block>.v`` (with the ``hw/rtl/<name>.v`` of the ``submodules`` it instantiates)
    for ``cfg`` and run every cocotb test of ``test_module`` on it; raise AssertionError with the
    simulator log's tail unless all pass."""
    prm = dict(parameters or {})
    tag = "-".join([block, cfg.name, f"{cfg.config_id:08x}"] + [f"{k}{v}" for k, v in sorted(prm.items())])
    run_module_bench([rtl_dir() / f"{m}.v" for m in (block, *submodules)], block, test_module, tag,
                     parameters=prm, cfg=cfg, env=bench_env(cfg, prm, seed), build_args=build_args, sim=sim)


def run_module_bench(source: Path | list[Path], toplevel: str, test_module: str, tag: str,
                     parameters: dict[str, int] | None = None, cfg: HwConfig | None = None,
                     env: dict[str, str] | None = None, build_args: list[str] | None = None,
                     sim: str = "verilator", min_tests: int = 1, plusargs: list[str] | None = None) -> None:
    """Build the Verilog ``source`` (a file or several; top ``toplevel``; with ``cfg``'s header on the include path
    when given) into ``<build root>/rtl/units/<tag>-<sim>`` and run the cocotb ``test_module``
    on it with ``env`` (and the simulator's ``plusargs``); raise AssertionError with the simulator log's tail unless at least
    ``min_tests`` ran and all passed."""
    from cocotb_tools.runner import get_results

    prm = dict(parameters or {})
    bdir = build_root() / "rtl" / "units" / f"{tag}-{sim}"
    runner = cocotb_runner(sim)
    with build_lock(lock_path(bdir)):
        bdir.mkdir(parents=True, exist_ok=True)
        includes = [str(include_dir(cfg, bdir))] if cfg is not None else []
        sources = [str(p) for p in (source if isinstance(source, list) else [source])]
        stamped = sources + [str(Path(i) / "accel_params.vh") for i in includes]
        changed = _sources_changed(bdir, stamped)
        with verilator_makeflags(sim):  # a block as big as a core uses a precompiled header
            runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=str(bdir), includes=includes,
                         parameters=prm, build_args=list(build_args or []) if sim == "verilator" else [],
                         timescale=("1ns", "1ps"), log_file=str(bdir / "build.log"), always=changed)
        (bdir / "sources.stamp").write_text(_sources_key(stamped))
        results = bdir / "results.xml"
        results.unlink(missing_ok=True)
        log = bdir / "sim.log"
        failure: Any = None
        with simulator_sys_path():
            try:
                runner.test(hdl_toplevel=toplevel, hdl_toplevel_lang="verilog", test_module=test_module,
                            build_dir=str(bdir), test_dir=str(bdir),
                            extra_env={"PYTHONWARNINGS": "default", **(env or {})},
                            plusargs=list(plusargs or []), results_xml=str(results), timescale=("1ns", "1ps"), log_file=str(log))
            except SystemExit as e:  # a failed cocotb test under pytest, or a simulator crash
                failure = e.code
        tail = log.read_text()[-5000:] if log.is_file() else "(no simulator log)"
        total, failed = get_results(Path(results)) if results.is_file() else (0, 1)
    assert failure is None and total >= min_tests and failed == 0, \
        f"{toplevel} bench ({tag}, {sim}): {failed} of {total} cocotb test(s) failed\n{tail}"


def _sources_key(paths: list[str]) -> str:
    """The paths and contents of a build's sources."""
    h = hashlib.sha256()
    for p in paths:
        f = Path(p)
        h.update(p.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"") + b"\0")
    return h.hexdigest()


def _sources_changed(bdir: Path, paths: list[str]) -> bool:
    """Whether ``bdir`` was last built from other sources (another checkout sharing the build folder, a
    moved tree, an edit). The runner's own check compares times only, and make's dependency lists would
    name the other checkout's files, so the objects and dependency lists are dropped and the build forced."""
    stamp = bdir / "sources.stamp"
    if stamp.is_file() and stamp.read_text() == _sources_key(paths):
        return False
    for stale in [*bdir.glob("*.d"), *bdir.glob("*.o")]:
        stale.unlink(missing_ok=True)
    return True


def run_planted_bench(block: str, good: str, bad: str, test_module: str, cfg: HwConfig, work: Path,
                      parameters: dict[str, int] | None = None, submodules: tuple[str, ...] = ()) -> None:
    """Run ``test_module`` on a copy of ``hw/rtl/<block>.v`` (written into ``work``) whose one line
    ``good`` is replaced by ``bad``: a bench that can fail raises AssertionError here. ``good`` must occur
    exactly once (else ValueError: the planted break would no longer be planted)."""
    src = (rtl_dir() / f"{block}.v").read_text()
    if src.count(good) != 1:
        raise ValueError(f"{block}.v: the text to break occurs {src.count(good)} times, not once: {good!r}")
    (work / f"{block}.v").write_text(src.replace(good, bad))
    prm = dict(parameters or {})
    run_module_bench([work / f"{block}.v"] + [rtl_dir() / f"{m}.v" for m in submodules], block, test_module,
                     f"{block}-planted-{cfg.config_id:08x}", parameters=prm, cfg=cfg, env=bench_env(cfg, prm, 1))
