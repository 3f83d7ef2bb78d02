"""The whole benchmark: suite x configs on every model, growth, correlation, profiles, golden
vs numpy, area per config; prints one table and writes ``bench/results.json`` and the PNGs."""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from hw.config import load_config
from cosim.bench import (area, clock, correlate, decode, dynamic, growth, measure, networks, profiler, quad_vs_one,
                         raw_options, report, resnet18, scaling, suite)

REPO = Path(__file__).resolve().parents[2]
OUT_DIR = REPO / "bench"
# Repetitions of the golden-vs-numpy rows (milliseconds each: enough for a median on a busy machine).
GOLDEN_REPS = 21


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _raw_variants(cfg: Any, item: suite.Item, reps: int) -> dict[str, Any]:
    """Raw harness memory variants (Verilog dram_model vs C++ model) on one Program, alternated."""
    from cosim.models import raw as run, raw_mems

    MEMS = raw_mems()

    walls: dict[str, list[float]] = {m: [] for m in MEMS}
    cycles = {}
    for rep in range(reps):
        for m in (MEMS if rep % 2 == 0 else MEMS[::-1]):
            r = run(item.program, cfg, mem=m)
            walls[m].append(r.wall_s)
            cycles[m] = r.cycles
    med = {m: sorted(w)[len(w) // 2] for m, w in walls.items()}
    return {"program": item.name, "config": cfg.name, "cycles": cycles,
            "cycles_per_s": {m: cycles[m] / med[m] for m in MEMS}, "wall_s": med}


def run_bench(configs: list[str], quick: bool = False, reps: int = 3, protocol_max_cycles: int = 40_000,
              out_dir: Path = OUT_DIR, profile: bool = True, synth: bool = True,
              fmax_timeout: float = area.FMAX_TIMEOUT_S, cluster: dict[str, Any] | None = None,
              resnet: bool = True, raw_ladder: bool = True) -> dict[str, Any]:
    """``raw_ladder``: first measure what each raw harness build option buys on the first config's two
    >= 1 M-cycle Programs (:mod:`cosim.bench.raw_options`) and run every raw measurement on the fastest
    build (else the test suite's build); ``resnet``: the ResNet-18 section (:mod:`cosim.bench.resnet18`; with ``quick`` the TLM on one core
    only); ``synth``: the area columns (:mod:`cosim.bench.area`; with ``quick`` only what is
    cached); ``fmax_timeout``: the place and route budget of the Fmax estimate. The speed
    measurements run here, one at a time (two never share a CPU); only the area's syntheses and
    place and route, which measure no speed, run as engine tasks (``cluster``: the keyword
    arguments of :func:`cosim.cluster.run_tasks`), after every speed measurement is done."""
    from cosim.models import raw_build, rtl_build

    t_start = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    builds: dict[str, Any] = {}
    variants = None
    ladder: dict[str, Any] = {}
    raw_opts = raw_options.DEFAULT
    if raw_ladder:
        cfg0 = load_config(configs[0])
        _log(f"[{cfg0.name}] raw harness build options: what each buys (cached builds)")
        ladder = raw_options.measure_raw_options(cfg0, suite.long_programs(cfg0), reps)
        raw_opts = raw_options.options_by_name(ladder["fastest"])
        _log(f"[{cfg0.name}] the raw harness measurements run on the fastest build, '{raw_opts.name}'")
    for name in configs:
        cfg = load_config(name)
        _log(f"[{name}] building the raw harness and the cocotb back-ends (cached when unchanged)")
        t0 = time.perf_counter()
        raw_build(cfg, options=raw_opts, train=raw_options.training_programs(cfg) if raw_opts.pgo else ())
        rtl_build(cfg, "fast")
        rtl_build(cfg, "protocol")
        builds[name] = round(time.perf_counter() - t0, 2)
        _log(f"[{name}] compiling the suite")
        items = suite.build_suite(cfg, quick)
        rows += measure.measure_config(cfg, items, reps, protocol_max_cycles, raw_opts)
        if variants is None:
            long_item = next((it for it in items if it.name == "alu_loop_1M"), items[-1])
            _log(f"[{name}] raw harness: Verilog vs C++ DRAM model on {long_item.name}")
            variants = _raw_variants(cfg, long_item, reps)
    cfg0 = load_config(configs[0])
    _log("golden vs numpy (1 M elements)")
    gvn = measure.golden_vs_numpy(cfg0, 1 << 20, reps=max(GOLDEN_REPS, reps))
    _log("TLM growth")
    gr = growth.run_growth(cfg0, reps=reps, quick=quick)
    growth_png = growth.plot(gr, out_dir / "tlm_growth.png")
    corr_png = correlate.plot(rows, out_dir / "correlation.png")
    prof: dict[str, Any] = {}
    if profile:
        _log("profiles (cProfile): TLM and cocotb fast back-end")
        p = suite.alu_loop(cfg0, 300 if quick else 1000, min(cfg0.acc_depth, 1024), "profile_alu_loop")
        prof["tlm"] = profiler.profile_tlm(p, out_dir)
        prof["cocotb_fast"] = profiler.profile_cocotb_fast(p, out_dir)
    nets = networks.measure_networks(cfg0, reps)
    scal = scaling.measure_scaling(cfg0)
    _log("several cores: every example on quad against one core, the digits small batch")
    qvo = quad_vs_one.measure_quad_vs_one()
    r18 = None
    if resnet:
        from compiler.networks.resnet18_onnx import network as resnet18_network

        r18 = resnet18.measure_resnet18(resnet18_network(), base=configs[0], several=None if quick else "quad",
                                        rtl=not quick)
    _log("dynamic shapes: compile against the maximum, driver cost per value")
    dyn = dynamic.measure_dynamic(cfg0, quick) if cfg0.num_cores == 1 else {}  # dynamic shapes: one core
    _log("charlm decode step: cycles per token against context length")
    dec = decode.measure_decode(cfg0, quick)
    dec_port = [d for d in [decode.measure_decode(decode.port_variant(cfg0), quick)] if d] if dec else []
    decode_png = decode.plot(dec, out_dir / "decode.png", dec_port)
    scaling_png = scaling.plot(scal, out_dir / "scaling.png")
    summary = report.summarize(rows)
    summary["all_agree"] = summary["all_agree"] and all(n["agree"] for n in nets) and \
        all(r["agree"] for r in scal["rows"]) and qvo["agree"] and (r18 is None or r18["agree"]) and dec.get("agree", True) and \
        all(d["agree"] for d in dec_port)
    summary["golden_vs_numpy"] = gvn["vadd"]["ratio"]
    _log("golden matmul vs numpy")
    gmm = measure.golden_matmul_vs_numpy(cfg0, reps=max(GOLDEN_REPS, reps))
    gvn["matmul"] = gmm
    summary["golden_matmul_vs_numpy"] = gmm["ratio"]
    small = measure.golden_small_matmul_cost(cfg0)
    summary["golden_small_matmul_call_ms"] = small["golden_call_s"] * 1e3
    # The area last, after every speed measurement: its syntheses run as engine tasks, side by side.
    areas: dict[str, Any] = {}
    if synth:
        _log("area: synthesis per config" + (" (--quick: cached results only)" if quick else ""))
        areas = area.measure_area([load_config(n) for n in configs], quick, fmax_timeout, cluster)
    worst = correlate.worst(rows)
    res: dict[str, Any] = {
        **summary,
        "golden_vs_numpy_by_operator": gvn,
        "golden_small_matmul": small,
        "targets": {**report.verdicts(summary), **resnet18.verdicts(r18), **quad_vs_one.verdicts(qvo),
                    **clock.verdicts(areas)},
        "raw_memory_variants": variants,
        "raw_options": ladder,
        "raw_build": raw_opts.name,
        "growth": gr,
        "profile": prof,
        "area": areas,
        "resnet_layer_clock": clock.resnet_layer_rates(rows, areas),
        "worst_error": None if worst is None else {"config": worst["config"], "program": worst["name"],
                                                   "error_pct": worst["error_pct"], "counters": worst["counters"]},
        "programs": rows,
        "networks": nets,
        "scaling": scal,
        "quad_vs_one": qvo,
        "resnet18": r18,
        "dynamic": dyn,
        "decode": dec,
        "decode_port": dec_port,
        "settings": {"configs": configs, "quick": quick, "reps": reps, "protocol_max_cycles": protocol_max_cycles,
                     "synth": synth, "fmax_timeout_s": fmax_timeout, "resnet18": resnet,
                     "python": platform.python_version(), "machine": platform.machine(),
                     "build_s": builds, "bench_wall_s": round(time.perf_counter() - t_start, 1),
                     "out_dir": str(out_dir)},
        "plots": [str(growth_png), str(corr_png), str(scaling_png)] + ([str(decode_png)] if decode_png else []),
    }
    (out_dir / "results.json").write_text(json.dumps(res, indent=1, default=float) + "\n")
    return res


def print_report(res: dict[str, Any]) -> None:
    rows = res["programs"]
    print("\n".join(report.table_lines(rows)))
    print()
    gl = report.gemm_lines(rows)
    if gl:
        print("\n".join(gl))
        print()
    nl = networks.table_lines(res.get("networks") or [])
    if nl:
        print("\n".join(nl))
        print()
    rl = resnet18.table_lines(res.get("resnet18"))
    if rl:
        print("\n".join(rl))
        print()
    sl = scaling.table_lines(res.get("scaling") or {})
    if sl:
        print("\n".join(sl))
        print()
    ql = quad_vs_one.table_lines(res.get("quad_vs_one"))
    if ql:
        print("\n".join(ql))
        print()
    dl = dynamic.table_lines(res.get("dynamic") or {})
    if dl:
        print("\n".join(dl))
        print()
    cl = decode.table_lines(res.get("decode") or {}, res.get("decode_port") or [])
    if cl:
        print("\n".join(cl))
        print()
    print("\n".join(correlate.table_lines(rows)))
    w = correlate.worst(rows)
    if w is not None:
        print()
        print("\n".join(correlate.breakdown_lines(w)))
    print()
    print("\n".join(growth.summary_lines(res["growth"])))
    ol = raw_options.table_lines(res.get("raw_options") or {})
    if ol:
        print("\n".join(ol))
        print()
    v = res.get("raw_memory_variants")
    if v:
        cps = v["cycles_per_s"]
        print(f"raw harness memory model on {v['config']}/{v['program']}: Verilog dram_model "
              f"{cps['verilog'] / 1e6:.2f} Mc/s, C++ model {cps['cpp'] / 1e6:.2f} Mc/s (cycles {v['cycles']})")
    for k, g in res["golden_vs_numpy_by_operator"].items():
        size = f"{g['elements']} elements" if "elements" in g else "x".join(map(str, g["shape"]))
        print(f"golden vs numpy, {k} ({g['operator']}, {size}): golden {g['golden_s'] * 1e3:.1f} ms, "
              f"numpy {g['numpy_s'] * 1e3:.1f} ms, ratio {g['ratio']:.2f}"
              + (f" (CPU {g['cpu_ratio']:.2f}; call by call {g['call_by_call_ratio']:.2f}, CPU "
                 f"{g['call_by_call_cpu_ratio']:.2f})" if "cpu_ratio" in g else "")
              + f", equal {g['outputs_equal']}"
              + (f", {g['per_tile_us']:.1f} us per tile" if "per_tile_us" in g else ""))
    small = res.get("golden_small_matmul")
    if small:
        print(f"golden fixed cost of one small matmul call (16x16x16): {small['golden_call_s'] * 1e3:.3f} ms "
              + (f"(CPU {small['golden_call_cpu_s'] * 1e3:.3f} ms) " if "golden_call_cpu_s" in small else "")
              + f"(numpy {small['numpy_s'] * 1e6:.0f} us)")
    print(f"compile: {res['compile_s_total']:.2f} s for the suite's examples, "
          f"{res['compile_insns_per_s'] or 0:.0f} insns/s; TLM {res['tlm_insns_per_s']:.0f} insns/s")
    for side in ("tlm", "cocotb_fast"):
        p = res["profile"].get(side)
        if p:
            top = ", ".join(f"{t['function']} {t['tottime_s']:.3f}s" for t in p["top_tottime"][:4])
            extra = (f"; run {p['run_wall_s']:.2f} s of which Python {p['python_profiled_s']:.2f} s, "
                     f"process {p['process_wall_s']:.2f} s") if side == "cocotb_fast" else ""
            print(f"profile {side} ({p['program']}, {p['cycles']} cycles{extra}): {top}  [{p['file']}]")
    print()
    prot = res.get("cocotb_protocol_programs") or []
    print(f"cocotb protocol back-end ran only the Programs <= {res['settings']['protocol_max_cycles']} RTL cycles "
          f"({len(prot)}: {', '.join(prot)})")
    by_cfg = res.get("tlm_vs_raw_speedup_by_config") or {}
    mins = res.get("tlm_vs_raw_speedup_min_by_config") or {}
    if by_cfg:
        print(f"TLM / raw harness (build '{res.get('raw_build', raw_options.DEFAULT.name)}') on >= 1 M-cycle "
              "Programs, median (min) per config: "
              + ", ".join(f"{c} {v:.1f}x ({mins.get(c) or 0:.1f}x)" for c, v in by_cfg.items() if v is not None))
    print("targets:")
    for k, t in res["targets"].items():
        v = t["value"]
        val = "-" if v is None else (f"{v:,}" if isinstance(v, int) else f"{v:.3f}")
        mark = "n/a" if t["met"] is None else ("MET" if t["met"] else "NOT MET")
        print(f"  {k:<30} {val:>10}  (target {t['target']:<7}) {mark:<8} {t['what']}")
    if res.get("area"):
        print()
        print("\n".join(area.table_lines(res["area"])))
        print("\n".join(clock.table_lines(res.get("resnet_layer_clock") or {})))
    results = Path(res["settings"].get("out_dir", "bench")) / "results.json"
    print(f"all models agree: {'yes' if res['all_agree'] else 'NO'}; results: {results}, "
          f"plots: {', '.join(Path(p).name for p in res['plots'])}; {res['settings']['bench_wall_s']} s")
    for r in rows:
        for pr in r["problems"]:
            print(f"  {r['config']}/{r['name']}: {pr}")
