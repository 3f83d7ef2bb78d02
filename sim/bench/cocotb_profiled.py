"""cocotb test module: testbench.test_accel's job, run under cProfile inside the simulator.

Used by :mod:`sim.bench.profiler` (which points the runner at this module for one run);
the job file is the one ``testbench.runner`` writes. The profile goes to the path in env
``COSIM_PROFILE_OUT`` (pstats format). Nothing in ``testbench/`` changes.
"""

from __future__ import annotations

import cProfile
import json
import os
from pathlib import Path
from typing import Any

import cocotb

from testbench.test_accel import Bench


@cocotb.test()
async def run_job_profiled(dut: Any) -> None:
    job = json.loads(Path(os.environ["COSIM_JOB"]).read_text())
    prof = cProfile.Profile()
    prof.enable()
    try:
        bench = Bench(dut, job)
        await bench.start()
        results = [await bench.run(entry, k == 0) for k, entry in enumerate(job["programs"])]
    finally:
        prof.disable()
        prof.dump_stats(os.environ.get("COSIM_PROFILE_OUT", "cocotb.prof"))
    Path(job["result"]).write_text(json.dumps({"results": results, "done": True}, indent=1))
