"""Run the cocotb bench of one small RTL block (``hw/rtl/<block>.v`` alone) from pytest.

As ``tests/test_dram_model.py`` does for the DRAM model, in the style of alexforencich's
verilog-axi (a cocotb test module per block, run by cocotb's runner): the block is built
by Verilator with the config's generated header (``accel_params.vh``) and optional
Verilog parameters into ``<build root>/rtl/units/``, then the cocotb module
``testbench/units/test_<block>.py`` runs against it. The bench reads the config, the
parameters and its random seed from the environment (see :func:`bench_env`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hw.config import HwConfig
from testbench.rtl_model import build_lock, build_root, cocotb_runner, include_dir, rtl_dir, simulator_sys_path


def bench_env(cfg: HwConfig, parameters: dict[str, int], seed: int) -> dict[str, str]:
    """What a block bench reads: UNIT_BENCH_CONFIG (the config as JSON), UNIT_BENCH_PARAMS, UNIT_BENCH_SEED."""
    return {"UNIT_BENCH_CONFIG": json.dumps(cfg.to_dict()), "UNIT_BENCH_PARAMS": json.dumps(parameters),
            "UNIT_BENCH_SEED": str(seed), "PYTHONWARNINGS": "default"}


def run_block_bench(block: str, test_module: str, cfg: HwConfig, parameters: dict[str, int] | None = None,
                    seed: int = 1, build_args: list[str] | None = None) -> None:
    """Build ``hw/rtl/<block>.v`` for ``cfg`` (with Verilator's ``build_args``) and run every cocotb
    test of ``test_module`` on it; raise AssertionError with the simulator log's tail unless all pass."""
    from cocotb_tools.runner import get_results

    prm = dict(parameters or {})
    tag = "-".join([block, cfg.name, f"{cfg.config_id:08x}"] + [f"{k}{v}" for k, v in sorted(prm.items())])
    bdir = build_root() / "rtl" / "units" / tag
    runner = cocotb_runner("verilator")
    with build_lock(bdir.parent / f"{tag}.lock"):
        bdir.mkdir(parents=True, exist_ok=True)
        inc = include_dir(cfg, bdir)
        runner.build(sources=[str(rtl_dir() / f"{block}.v")], hdl_toplevel=block, build_dir=str(bdir),
                     includes=[str(inc)], parameters=prm, build_args=list(build_args or []),
                     timescale=("1ns", "1ps"), log_file=str(bdir / "build.log"))
        results = bdir / "results.xml"
        results.unlink(missing_ok=True)
        log = bdir / "sim.log"
        failure: Any = None
        with simulator_sys_path():
            try:
                runner.test(hdl_toplevel=block, hdl_toplevel_lang="verilog", test_module=test_module,
                            build_dir=str(bdir), test_dir=str(bdir), extra_env=bench_env(cfg, prm, seed),
                            results_xml=str(results), timescale=("1ns", "1ps"), log_file=str(log))
            except SystemExit as e:  # a failed cocotb test under pytest, or a simulator crash
                failure = e.code
        tail = log.read_text()[-5000:] if log.is_file() else "(no simulator log)"
        total, failed = get_results(Path(results)) if results.is_file() else (0, 1)
    assert failure is None and total >= 1 and failed == 0, \
        f"{block} bench on config '{cfg.name}' {prm}: {failed} of {total} cocotb test(s) failed\n{tail}"
