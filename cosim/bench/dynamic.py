"""The cost of dynamic shapes: compile time against the maximum, and the host driver's time per value.

For ``mvm_token`` and ``vadd_rows`` at several maxima: the one dynamic compile (seconds, pieces, static
compiles it took) against one static compile of the maximum. For each shipped dynamic example: the Python
driver's and the C driver's (``driver.c`` built by the system's C compiler, ``-O2``) microseconds per value
(instruction words, constants and CSR writes of one value), against a static compile of the same value.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from compiler.build import build
from compiler.dynamic import bind_args, compile_dynamic, save_dynamic
from compiler.dynamic_examples import DYNAMIC_EXAMPLES, DynamicExample
from compiler.errors import ConfigFitError
from compiler.symbolic import var
from compiler.tensor import TensorSpec
from hw.config import HwConfig
from hw.dynamic_driver import Driver

MAXIMA = {"mvm_token": (256, 1024, 2048), "vadd_rows": (64, 256)}
C_REPS = 2000  # driver calls per value in the C timing loop (each call is microseconds)

_C_MAIN = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "driver.h"
static uint8_t insn[ACCEL_DYN_MAX_INSNS * 16], cst[ACCEL_DYN_CONST_BYTES + 16];
static accel_dyn_reg_write regs[ACCEL_DYN_REG_WRITES];
int main(int argc, char **argv) {
    long reps = atol(argv[1]), r;
    int a;
    for (a = 2; a < argc; a++) {
        size_t n, m, c;
        uint32_t ca;
        struct timespec t0, t1;
        long long v = atoll(argv[a]);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (r = 0; r < reps; r++)
            if (accel_dyn_driver(v, insn, sizeof insn, &n, regs, ACCEL_DYN_REG_WRITES, &m, cst, sizeof cst, &c, &ca))
                return 1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("%lld %.6f\n", v, ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / reps);
    }
    return 0;
}
"""


def _with_max(ex: DynamicExample, cfg: HwConfig, maximum: int) -> dict[str, Any]:
    """The example's argument template with its variable's maximum replaced (shapes that are the variable)."""
    v = var(ex.var.name, max=maximum)
    return {n: TensorSpec(tuple(v if d is ex.var else d for d in a.shape), a.dtype) if isinstance(a, TensorSpec)
            else a for n, a in ex.args(cfg).items()}


def compile_vs_max(cfg: HwConfig, name: str, maxima: tuple[int, ...]) -> list[dict[str, Any]]:
    """One dynamic compile per maximum (seconds, pieces, static compiles) next to a static compile of it."""
    ex = DYNAMIC_EXAMPLES[name]
    assert isinstance(ex, DynamicExample)
    rows = []
    for m in maxima:
        args = _with_max(ex, cfg, m)
        t0 = time.perf_counter()
        try:
            dp = compile_dynamic(ex.kernel, args, var(ex.var.name, max=m), cfg, name=name)
        except ConfigFitError as e:  # e.g. more pieces than a driver takes on a config of small buffers
            rows.append({"example": name, "max": m, "skipped": str(e)})
            continue
        t1 = time.perf_counter()
        build(ex.kernel, bind_args(args, {ex.var.name: m}), cfg, name=name)
        rows.append({"example": name, "max": m, "dynamic_compile_s": round(t1 - t0, 3),
                     "static_compile_at_max_s": round(time.perf_counter() - t1, 3), "pieces": len(dp.pieces),
                     "traces": dp.traces})
    return rows


def _c_times(folder: Path, values: list[int]) -> dict[int, float] | None:
    cc = shutil.which("cc")
    if cc is None:
        return None
    main = folder / "bench_main.c"
    main.write_text(_C_MAIN)
    exe = folder / "bench_driver"
    subprocess.run([cc, "-std=c99", "-O2", f"-I{folder}", str(main), str(folder / "driver.c"), "-o", str(exe)],
                   check=True, timeout=120, capture_output=True)
    out = subprocess.run([str(exe), str(C_REPS), *map(str, values)], check=True, timeout=120, capture_output=True,
                         text=True).stdout
    return {int(v): float(t) for v, t in (line.split() for line in out.splitlines())}


def driver_cost(cfg: HwConfig, name: str, reps: int = 200) -> dict[str, Any]:
    """Microseconds per value of the Python and C drivers of example ``name`` (median over values 1, a
    middle one and the maximum) against a static compile of the same values."""
    ex = DYNAMIC_EXAMPLES[name]
    try:
        dp = ex.compile(cfg)
    except ConfigFitError as e:
        return {"example": name, "skipped": str(e)}
    with tempfile.TemporaryDirectory(prefix="cosim_dyn_bench_") as tmp:
        folder = save_dynamic(dp, Path(tmp) / name)
        drv = Driver.load(folder)
        values = sorted({1, (drv.lo + drv.hi) // 2, drv.hi})
        py = []
        for v in values:
            t0 = time.perf_counter()
            for _ in range(reps):
                drv.writes(v)
            py.append((time.perf_counter() - t0) / reps * 1e6)
        c = _c_times(folder, values)
    static = []
    for v in values:
        t0 = time.perf_counter()
        ex.static(cfg, v)
        static.append((time.perf_counter() - t0) * 1e6)
    return {"example": name, "var": drv.name, "max": drv.hi, "values": values, "pieces": len(dp.pieces),
            "python_us": round(statistics.median(py), 1),
            "c_us": None if c is None else round(statistics.median(c.values()), 2),
            "static_compile_us": round(statistics.median(static), 0)}


def measure_dynamic(cfg: HwConfig, quick: bool = False) -> dict[str, Any]:
    """The dynamic-shape section of ``cosim bench``: compile against the maximum, driver cost per value
    (``quick``: the two smallest maxima of each example)."""
    maxima = {k: v[:2] if quick else v for k, v in MAXIMA.items()}
    compiles = [r for name, ms in maxima.items() for r in compile_vs_max(cfg, name, ms)]
    return {"config": cfg.name, "compile_vs_max": compiles,
            "driver": [driver_cost(cfg, name) for name in DYNAMIC_EXAMPLES]}


def table_lines(res: dict[str, Any]) -> list[str]:
    """The section as two printed tables."""
    if not res:
        return []
    out = [f"dynamic shapes ({res['config']}): one compile for every value, against a static compile",
           f"{'example':<14}{'max':>6}{'pieces':>8}{'traces':>8}{'dynamic s':>11}{'static@max s':>14}"]
    for r in res["compile_vs_max"]:
        if "skipped" in r:
            out.append(f"{r['example']:<14}{r['max']:>6}  skipped: {r['skipped']}")
            continue
        out.append(f"{r['example']:<14}{r['max']:>6}{r['pieces']:>8}{r['traces']:>8}{r['dynamic_compile_s']:>11.2f}"
                   f"{r['static_compile_at_max_s']:>14.2f}")
    out += ["", f"{'example':<14}{'variable':>12}{'pieces':>8}{'python us/value':>17}{'C us/value':>12}"
                f"{'static compile us':>19}"]
    for r in res["driver"]:
        if "skipped" in r:
            out.append(f"{r['example']:<14}  skipped: {r['skipped']}")
            continue
        c = "-" if r["c_us"] is None else f"{r['c_us']:.2f}"
        out.append(f"{r['example']:<14}{r['var'] + '<=' + str(r['max']):>12}{r['pieces']:>8}{r['python_us']:>17.1f}"
                   f"{c:>12}{r['static_compile_us']:>19.0f}")
    return out
