"""cocotb test module: the job of :mod:`testbench.cocotb_job`, run under cProfile inside the simulator.

``testbench.rtl_model.run_programs(..., profile_out=PATH)`` runs this module instead of
``cocotb_job``; the pstats file goes to the job's ``profile_out``.
"""

from __future__ import annotations

import cProfile
import json
import os
from pathlib import Path
from typing import Any

import cocotb

from testbench.cocotb_job import execute_job


@cocotb.test()
async def run_job_profiled(dut: Any) -> None:
    out = json.loads(Path(os.environ["COSIM_JOB"]).read_text()).get("profile_out", "cocotb.prof")
    prof = cProfile.Profile()
    prof.enable()
    try:
        await execute_job(dut)
    finally:
        prof.disable()
        prof.dump_stats(out)
