"""Timing runs of one config's suite on every model, sides alternated, medians kept.

For each repetition: the cocotb fast back-end runs the whole suite in one simulator
process (startup paid once, per-Program ``run_wall_s`` = register config to irq), then
every Program runs on the TLM and on the raw harness, alternating. The cocotb protocol
back-end (random backpressure, ~30 k cycles/s) runs only the Programs below
``protocol_max_cycles``. Speeds are simulated cycles per wall second of each model's
run (register config + run to DONE), so ratios between models of the same Program
compare like with like.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Callable

from hw.config import HwConfig
from cosim.bench.suite import Item
from cosim.models import cycle_error_pct, first_mismatch


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def measure_config(cfg: HwConfig, items: list[Item], reps: int, protocol_max_cycles: int,
                   raw_options: Any = None) -> list[dict[str, Any]]:
    """One row per Program: cycles of each model, median wall times, speeds, agreement. ``raw_options``:
    the raw harness build to run (``testbench.raw.options``; None: the test suite's)."""
    from cosim.models import raw as raw_run, rtl as run_programs, tlm as tlm_run

    raw_kw = {} if raw_options is None else {"options": raw_options}

    progs = [it.program for it in items]
    walls: dict[str, list[list[float]]] = {m: [[] for _ in items] for m in ("tlm", "raw", "fast", "protocol")}
    last: dict[str, list[Any]] = {m: [None] * len(items) for m in walls}
    for rep in range(reps):
        _log(f"  [{cfg.name}] rep {rep + 1}/{reps}: cocotb fast ({len(progs)} Programs, one process)")
        for k, r in enumerate(run_programs(progs, cfg, mem="fast")):
            walls["fast"][k].append(float(r.extra.get("run_wall_s", r.wall_s)))
            last["fast"][k] = r
        _log(f"  [{cfg.name}] rep {rep + 1}/{reps}: TLM and raw harness, alternating")
        for k, p in enumerate(progs):
            order = ("tlm", "raw") if (rep + k) % 2 == 0 else ("raw", "tlm")
            for m in order:
                r = tlm_run(p) if m == "tlm" else raw_run(p, cfg, **raw_kw)
                walls[m][k].append(r.wall_s)
                last[m][k] = r
    small = [k for k, r in enumerate(last["raw"]) if r.cycles and r.cycles <= protocol_max_cycles]
    if small:
        for rep in range(reps):
            _log(f"  [{cfg.name}] rep {rep + 1}/{reps}: cocotb protocol ({len(small)} Programs <= "
                 f"{protocol_max_cycles} cycles)")
            for k, r in zip(small, run_programs([progs[k] for k in small], cfg, mem="protocol", seed=rep)):
                walls["protocol"][k].append(float(r.extra.get("run_wall_s", r.wall_s)))
                last["protocol"][k] = r
    rows = []
    for k, it in enumerate(items):
        raw, tlm, fast, prot = (last[m][k] for m in ("raw", "tlm", "fast", "protocol"))
        rtl_cycles = raw.cycles
        w = {m: _med(walls[m][k]) for m in walls}
        row: dict[str, Any] = {
            "name": it.name, "config": cfg.name, "kind": it.kind, "insns": it.insns,
            "rtl_cycles": rtl_cycles, "tlm_cycles": tlm.cycles, "cocotb_fast_cycles": fast.cycles,
            "cocotb_protocol_cycles": prot.cycles if prot else None,
            "error_pct": cycle_error_pct(tlm.cycles, rtl_cycles),
            "bytes_moved": int(sum(raw.counters.get(c, 0) for c in ("dma_rd_bytes", "dma_wr_bytes", "fetch_bytes"))),
            "wall_s": {"tlm": w["tlm"], "raw": w["raw"], "cocotb_fast": w["fast"], "cocotb_protocol": w["protocol"],
                       "compile": it.compile_s, "golden": it.golden_s},
            "cycles_per_s": {}, "agree": True, "problems": [],
            "counters": {"rtl": dict(raw.counters), "tlm": dict(tlm.counters)},
        }
        row["mac_utilization"] = mac_utilization(cfg, raw.counters, rtl_cycles, tlm.counters, tlm.cycles)
        for m, key, cyc in (("tlm", "tlm", rtl_cycles), ("raw", "raw", rtl_cycles), ("fast", "cocotb_fast", rtl_cycles),
                            ("protocol", "cocotb_protocol", prot.cycles if prot else None)):
            row["cycles_per_s"][key] = (cyc / w[m]) if (cyc and w[m]) else None
        for m, r in (("raw", raw), ("tlm", tlm), ("cocotb_fast", fast), ("cocotb_protocol", prot)):
            if r is None:
                continue
            if r.error:
                row["agree"] = False
                row["problems"].append(f"{m}: {r.error.get('name')}: {r.error.get('message')}")
                continue
            mm = first_mismatch(it.expected, r.outputs)
            if mm:
                row["agree"] = False
                row["problems"].append(f"{m}: {mm}")
        if fast.cycles != rtl_cycles:
            row["agree"] = False
            row["problems"].append(f"cocotb fast CYCLES {fast.cycles} != raw CYCLES {rtl_cycles}")
        rows.append(row)
    return rows


def alternated(first: Callable[[], Any], second: Callable[[], Any], reps: int) -> tuple[tuple[Any, float], ...]:
    """Run two sides ``reps`` times each, alternating which goes first: ((result, median s), ...) per side.
    Each side runs once untimed first (the steady state is measured: caches, buffers kept across runs)."""
    return tuple((out, wall) for out, wall, _ in alternated_sides([first, second], reps))


def alternated_sides(sides: list[Callable[[], Any]], reps: int) -> list[tuple[Any, float, float]]:
    """Run every side ``reps`` times, the order rotating each repetition: ``(result, median wall s, median
    CPU s)`` per side. The CPU time is the thread's (``time.thread_time``): on a loaded machine the wall
    time also counts the waits for a core, which grow with a run's length (a run longer than the
    scheduler's slice waits more often), so the CPU ratio is the steadier one. Each side runs once
    untimed first (the steady state: caches, buffers kept across runs)."""
    walls: list[list[float]] = [[] for _ in sides]
    cpus: list[list[float]] = [[] for _ in sides]
    out: list[Any] = [side() for side in sides]
    for rep in range(reps):
        for j in range(len(sides)):
            k = (rep + j) % len(sides)
            t0, c0 = time.perf_counter(), time.thread_time()
            out[k] = sides[k]()
            cpus[k].append(time.thread_time() - c0)
            walls[k].append(time.perf_counter() - t0)
    return [(out[k], statistics.median(walls[k]), statistics.median(cpus[k])) for k in range(len(sides))]


def mac_utilization(cfg: HwConfig, rtl_counters: dict[str, int], rtl_cycles: int | None,
                    tlm_counters: dict[str, int], tlm_cycles: int | None) -> dict[str, Any] | None:
    """MACs per cycle against the peak (``cfg.macs_per_cycle``: one BATCH x BLOCK x BLOCK block per
    cycle) from GEMM_OPS and CYCLES, on RTL and TLM (equal when the TLM is cycle-exact); None for a
    Program without GEMM."""
    ops = rtl_counters.get("gemm_ops", 0)
    if not ops or not rtl_cycles:
        return None
    peak = cfg.macs_per_cycle
    out: dict[str, Any] = {"macs": ops * peak, "peak_macs_per_cycle": peak}
    for side, cnt, cyc in (("rtl", rtl_counters, rtl_cycles), ("tlm", tlm_counters, tlm_cycles)):
        got = cnt.get("gemm_ops", 0) * peak / cyc if cyc else None
        out[side] = {"macs_per_cycle": got, "utilization": None if got is None else got / peak}
    return out


def golden_matmul_vs_numpy(cfg: HwConfig, shape: tuple[int, int, int] = (256, 512, 256),
                           reps: int = 5) -> dict[str, Any]:
    """The golden path of the ``matmul`` operator (packing, PySim through S.gemm, unpacking) against
    plain numpy ``int8(A @ B)`` in int64, alternated, medians."""
    import numpy as np

    from compiler.gemm_ops import matmul

    m, k, n = shape
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    out_dt = f"int{cfg.out_width}"
    (g, mg), (r, mn) = alternated(lambda: matmul(a, b, config=cfg),
                                  lambda: (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32).astype(out_dt),
                                  reps)
    return {"operator": "matmul", "shape": list(shape), "golden_s": mg, "numpy_s": mn, "ratio": mg / mn,
            "outputs_equal": bool(g is not None and np.array_equal(g, r))}


def golden_vs_numpy(cfg: HwConfig, n: int = 1 << 20, reps: int = 5) -> dict[str, Any]:
    """Golden path vs plain numpy for elementwise operators on ``n`` elements, alternated, medians.

    The golden path is the kernel called on numpy arrays through the intrinsics' Python
    halves (``Kernel.run_golden``, what ``Case.golden`` runs), without compiling a Program.
    ``vadd`` keeps the example's 16-vector tiles (sized for its own 64 vectors: 4,096 tiles here, so
    ``per_tile_us`` is the fixed cost of a tile's intrinsic calls); ``vadd_big_tiles`` lets the
    operator tile as it does by default (the largest tile that fits the accumulator). A third side runs
    the golden path call by call (``GoldenContext.DEFER`` off: no fused tile expressions,
    ``compiler/deferred_acc.py``), so the row shows what deferring buys in the same run; each side has
    its wall and CPU medians (``ratio`` is the wall one).
    """
    import numpy as np

    from compiler.context import GoldenContext
    from compiler.examples import EXAMPLES
    from compiler.ops import OPERATORS
    from compiler.tensor import pad_to_vectors, tensor

    out: dict[str, Any] = {}
    rng = np.random.default_rng(0)
    for row in ("vadd", "fused", "requant", "vadd_big_tiles"):
        ex_name = row.split("_big")[0]
        ex = EXAMPLES[ex_name]
        op = OPERATORS[ex.operator]
        shape = (n,)
        inputs = {k: rng.integers(*ex.ranges.get(k, (-1000, 1000)), size=shape, dtype=np.int64).astype(np.int32)
                  for k in op.inputs}
        drop = ("shape", "tile") if row.endswith("_big_tiles") else ("shape",)
        consts = {**{k: v for k, v in ex.params_for(cfg).items() if k not in drop}, **op.fixed}
        args = {**inputs, op.output: tensor(shape, f"int{cfg.out_width}"), **consts}
        ref_consts = {k: v for k, v in consts.items() if k not in ("tile", "op")}
        out_dt = f"int{cfg.out_width}"

        def golden() -> Any:
            return op.kernel.run_golden(cfg, args)[op.output].data

        def golden_calls() -> Any:
            was = GoldenContext.DEFER  # put back as found (a caller may have switched it off itself)
            GoldenContext.DEFER = False
            try:
                return op.kernel.run_golden(cfg, args)[op.output].data
            finally:
                GoldenContext.DEFER = was

        def numpy_ref() -> Any:
            padded = {k: pad_to_vectors(a, cfg.lanes, np.int32).reshape(-1) for k, a in inputs.items()}
            return op.reference(**padded, **ref_consts).astype(out_dt)

        (g, mg, cg), (r, mn, cn), (gc, mc, cc) = alternated_sides([golden, numpy_ref, golden_calls], reps)
        same = all(np.array_equal(np.asarray(x).reshape(-1), np.asarray(r).reshape(-1)) for x in (g, gc))
        out[row] = {"operator": ex.operator, "elements": n, "golden_s": mg, "numpy_s": mn, "ratio": mg / mn,
                    "golden_cpu_s": cg, "numpy_cpu_s": cn, "cpu_ratio": cg / cn,
                    "call_by_call_s": mc, "call_by_call_ratio": mc / mn, "call_by_call_cpu_ratio": cc / cn,
                    "outputs_equal": bool(same)}
        if consts.get("tile"):
            vectors = -(-n // cfg.lanes)
            tiles = -(-vectors // int(consts["tile"]))
            out[row]["per_tile_us"] = (mg - mn) / tiles * 1e6
    return out


def golden_small_matmul_cost(cfg: HwConfig, reps: int = 21) -> dict[str, Any]:
    """The fixed cost of one golden ``matmul`` operator call (a 16x16 by 16x16 int8 product: one block,
    so nearly all of it is the call's packing, kernel set-up and intrinsic calls), median over
    ``reps`` calls (wall and thread CPU), next to plain numpy's."""
    import numpy as np

    from compiler.gemm_ops import matmul

    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    b = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    sides = [lambda: matmul(a, b, config=cfg),  # plans and tables are cached after the first call
             lambda: (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32).astype(np.int8)]
    (_, g, gc), (_, nw, _) = alternated_sides(sides, reps)
    return {"operator": "matmul", "shape": [16, 16, 16], "golden_call_s": g, "golden_call_cpu_s": gc,
            "numpy_s": nw}
