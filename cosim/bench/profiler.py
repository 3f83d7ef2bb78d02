"""cProfile of the TLM and of the cocotb fast back-end on one long Program: what dominates.

The cocotb side is profiled inside the simulator process (the RTL model's
``profile_out`` option runs the testbench's job under cProfile); the parent process only
waits for it.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from pathlib import Path
from typing import Any

from cosim import models
from hw.program import Program


def _top(stats: pstats.Stats, n: int, key: str) -> tuple[str, list[dict[str, Any]]]:
    s = io.StringIO()
    stats.stream = s  # type: ignore[attr-defined]
    stats.sort_stats(key).print_stats(n)
    rows = []
    for (f, line, fn), (cc, nc, tt, ct, _) in sorted(stats.stats.items(),  # type: ignore[attr-defined]
                                                     key=lambda kv: -kv[1][2 if key == "tottime" else 3])[:n]:
        rows.append({"function": f"{Path(f).name}:{line}({fn})", "calls": nc, "tottime_s": round(tt, 4),
                     "cumtime_s": round(ct, 4)})
    return s.getvalue(), rows


def profile_tlm(program: Program, out_dir: Path, n: int = 15) -> dict[str, Any]:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    r = models.tlm(program)
    prof.disable()
    wall = time.perf_counter() - t0
    st = pstats.Stats(prof)
    text, rows = _top(st, n, "tottime")
    (out_dir / "profile_tlm.txt").write_text(text)
    return {"program": program.name, "cycles": r.cycles, "insns": len(program.insns),
            "profiled_wall_s": round(wall, 4), "top_tottime": rows, "file": str(out_dir / "profile_tlm.txt")}


def profile_cocotb_fast(program: Program, out_dir: Path, n: int = 15) -> dict[str, Any]:
    prof_path = (out_dir / "profile_cocotb_fast.prof").resolve()
    t0 = time.perf_counter()
    r = models.rtl([program], mem="fast", profile_out=prof_path)[0]
    proc_wall = time.perf_counter() - t0
    st = pstats.Stats(str(prof_path))
    text, rows = _top(st, n, "tottime")
    total = sum(v[2] for v in st.stats.values())  # type: ignore[attr-defined]
    (out_dir / "profile_cocotb_fast.txt").write_text(text)
    return {"program": program.name, "cycles": r.cycles, "process_wall_s": round(proc_wall, 3),
            "run_wall_s": r.extra.get("run_wall_s"), "python_profiled_s": round(total, 4),
            "top_tottime": rows, "file": str(out_dir / "profile_cocotb_fast.txt")}
