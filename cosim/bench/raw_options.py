"""What each Verilator / C++ option buys the raw harness, and the fastest build the benchmark then uses.

Every step of :data:`testbench.raw.options.LADDER` (plus g++ PGO on the fastest step) is built in its
own folder and runs the same >= 1 M-cycle Programs: ``reps`` runs each, steps alternated, the median
wall time kept. A step counts only when its outputs, CYCLES and every counter equal the first step's
(bit-identical results); the fastest such step is the raw build the TLM ratios of ``cosim bench`` are
measured against. PGO trains on Programs other than the measured ones (a short ALU loop, a short DMA
stream, the vadd example), so its gain is not a replay of the measured run.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from cosim.models import raw_build_options
from hw.config import HwConfig
from hw.program import Program

_OPTIONS = raw_build_options()
DEFAULT, LADDER, with_pgo = _OPTIONS.DEFAULT, _OPTIONS.LADDER, _OPTIONS.with_pgo
RawOptions = Any  # testbench.raw.options.RawOptions, reached through the model registry


# A step whose first runs take this many times the fastest step's wall time runs only once.
SLOW_FACTOR = 3.0
# A run is stopped after RUN_BOUND times the fastest run of its Program (at least MIN_BOUND_S seconds).
RUN_BOUND = 20.0
MIN_BOUND_S = 10.0


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def training_programs(cfg: HwConfig) -> list[Program]:
    """The PGO training runs: a short ALU loop, a short DMA stream and the vadd example (a few 10 k
    cycles in all; none of them is a measured Program)."""
    from compiler.examples import make_case
    from cosim.bench import suite

    return [suite.alu_loop(cfg, 60, None, "pgo_alu_loop"), suite.dma_stream(cfg, 3000, name="pgo_dma_stream"),
            make_case("vadd", cfg).program]


def _signature(r: Any) -> tuple[Any, ...]:
    """What must not change between builds: error, CYCLES, counters, every output byte."""
    outs = tuple(sorted((k, v.tobytes()) for k, v in (r.outputs or {}).items()))
    return (None if r.error is None else r.error.get("name"), r.cycles, tuple(sorted(r.counters.items())), outs)


def _measure(steps: list[RawOptions], cfg: HwConfig, programs: list[Program], reps: int,
             rows: dict[str, dict[str, Any]]) -> None:
    from cosim.models import raw as run, raw_timeout

    RawTimeout = raw_timeout()

    walls: dict[str, dict[str, list[float]]] = {o.name: {p.name: [] for p in programs} for o in steps}
    slow: set[str] = set()
    for rep in range(reps):
        order = steps if rep % 2 == 0 else steps[::-1]
        for p in programs:
            # a run may take at most RUN_BOUND times the fastest run of this Program so far (a thread build
            # spinning on cores other processes share can take many minutes); beyond it the step is out
            for o in order:
                if o.name in slow:
                    continue
                done = [w[p.name][0] for w in walls.values() if w[p.name]]
                bound = max(MIN_BOUND_S, RUN_BOUND * min(done)) if done else None
                try:
                    r = run(p, cfg, options=o, timeout_s=bound)
                except RawTimeout:
                    _log(f"[raw options] '{o.name}' on {p.name}: over {bound:.0f} s, left out")
                    slow.add(o.name)
                    rows[o.name]["timed_out_s"] = bound
                    continue
                walls[o.name][p.name].append(r.wall_s)
                row = rows[o.name]
                row["cycles"][p.name] = r.cycles
                row["signature"][p.name] = _signature(r)
        if rep == 0:  # a step several times slower than the fastest keeps its one run
            speed = {o.name: _geo([walls[o.name][q.name][0] for q in programs]) for o in steps if o.name not in slow}
            best = min(speed.values())
            slow |= {n for n, w in speed.items() if w > SLOW_FACTOR * best}
    for o in steps:
        row = rows[o.name]
        row["runs"] = len(walls[o.name][programs[0].name])
        if rows[o.name].get("timed_out_s"):
            row["wall_s"] = row["cycles_per_s"] = None
            continue
        row["wall_s"] = {p.name: statistics.median(walls[o.name][p.name]) for p in programs}
        row["cycles_per_s"] = {p.name: row["cycles"][p.name] / row["wall_s"][p.name] for p in programs}


def measure_raw_options(cfg: HwConfig, programs: list[Program], reps: int = 3, pgo: bool = True) -> dict[str, Any]:
    """Build every step (cached), run ``programs`` on each; returns the rows (one per step: flags, build
    seconds, cycles per second per Program, speed-up over the first step and over the step before,
    whether results equal the first step's) and ``fastest``, the options to measure the TLM against."""
    from cosim.models import raw_build as build, raw_build_dir as build_dir_for

    rows: dict[str, dict[str, Any]] = {}

    def add(o: RawOptions, train: list[Program] = ()) -> None:  # type: ignore[assignment]
        _log(f"[raw options] building '{o.name}' ({o.what})")
        exe = build(cfg, options=o, train=train)
        bt = (exe.parent / "build_time_s")
        rows[o.name] = {"name": o.name, "what": o.what, "verilator": list(o.verilator_flags()), "cxx": o.cxx,
                        "threads": o.threads, "pgo": o.pgo, "build_dir": build_dir_for(cfg, options=o).name,
                        "build_s": float(bt.read_text()) if bt.is_file() else None, "cycles": {},
                        "signature": {}}

    steps = list(LADDER)
    for o in steps:
        add(o)
    _log(f"[raw options] running {', '.join(p.name for p in programs)} on {len(steps)} builds x {reps}")
    _measure(steps, cfg, programs, reps, rows)
    if pgo:
        best = _fastest([rows[o.name] for o in steps], programs, rows[steps[0].name])
        po = with_pgo(next(o for o in steps if o.name == best))
        add(po, training_programs(cfg))
        steps.append(po)
        _log(f"[raw options] running on '{po.name}' x {reps} (with '{best}' again, alternated)")
        again = next(o for o in steps if o.name == best)
        _measure([again, po], cfg, programs, reps, rows)
    ref = rows[steps[0].name]
    prev = None
    for o in steps:
        row = rows[o.name]
        if row["cycles_per_s"] is None:  # timed out: no speed, no verdict on its results
            row["same_results"] = row["speedup_vs_plain"] = row["speedup_vs_previous"] = None
            continue
        row["same_results"] = row["signature"] == ref["signature"]
        row["speedup_vs_plain"] = _geo([row["cycles_per_s"][p.name] / ref["cycles_per_s"][p.name] for p in programs])
        base = rows[prev] if prev is not None else row
        if o.pgo:
            base = rows[o.name.split("+")[0]]
        row["speedup_vs_previous"] = _geo([row["cycles_per_s"][p.name] / base["cycles_per_s"][p.name]
                                           for p in programs])
        prev = o.name
    for row in rows.values():
        del row["signature"]  # bytes: not for the JSON
    fastest = _fastest([rows[o.name] for o in steps], programs, None)
    return {"config": cfg.name, "programs": [p.name for p in programs], "reps": reps,
            "rows": [rows[o.name] for o in steps], "fastest": fastest, "default": DEFAULT.name}


def _geo(xs: list[float]) -> float:
    p = 1.0
    for x in xs:
        p *= x
    return p ** (1 / len(xs))


def _fastest(rows: list[dict[str, Any]], programs: list[Program], ref: dict[str, Any] | None) -> str:
    """The step with the highest geometric-mean speed among those with the first step's results."""
    ok = [r for r in rows if r["cycles_per_s"] is not None
          and r.get("same_results", ref is None or r["signature"] == ref["signature"])]
    return max(ok, key=lambda r: _geo([r["cycles_per_s"][p.name] for p in programs]))["name"]


def options_by_name(name: str) -> RawOptions:
    """The options of a step :func:`measure_raw_options` reported (its PGO step included)."""
    for o in LADDER:
        if o.name == name:
            return o
        if with_pgo(o).name == name:
            return with_pgo(o)
    raise ValueError(f"unknown raw harness options '{name}'")


def table_lines(res: dict[str, Any]) -> list[str]:
    """The option table: one row per step."""
    if not res:
        return []
    progs = res["programs"]
    head = (f"raw harness options on {res['config']} ({', '.join(progs)}; median of {res['reps']} runs, one for a "
            f"step {SLOW_FACTOR:g}x slower than the fastest):")
    cols = "  ".join(f"{p[:14]:>14}" for p in progs)
    out = [head, f"  {'build':<16} {'build s':>8}  {cols}  {'x plain':>8} {'x prev':>7}  same  what"]
    for r in res["rows"]:
        bs = "-" if r["build_s"] is None else f"{r['build_s']:.0f}"
        if r["cycles_per_s"] is None:
            out.append(f"  {r['name']:<16} {bs:>8}  timed out: a run took over {r.get('timed_out_s') or 0:.0f} s  "
                       f"{r['what']}")
            continue
        speeds = "  ".join(f"{r['cycles_per_s'][p] / 1e6:>9.2f} Mc/s" for p in progs)
        mark = " <- fastest" if r["name"] == res["fastest"] else ""
        out.append(f"  {r['name']:<16} {bs:>8}  {speeds}  {r['speedup_vs_plain']:>7.2f}x "
                   f"{r['speedup_vs_previous']:>6.2f}x  {'yes' if r['same_results'] else 'NO':<4}  {r['what']}{mark}")
    return out
