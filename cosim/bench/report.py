"""The benchmark's summary numbers, its table and the targets it reports against."""

from __future__ import annotations

import statistics
from typing import Any

LONG = 1_000_000  # "long" Programs: at least this many RTL cycles

TARGETS = {
    "tlm_vs_raw_speedup": (">=", 10.0, "TLM >= 10x raw harness (simulated cycles/s) on >= 1 M-cycle Programs"),
    "cocotb_fast_vs_raw": (">=", 0.5, "cocotb fast back-end >= 0.5x raw harness on >= 1 M-cycle Programs"),
    "cycle_error_mean_pct": ("<=", 1.0, "TLM cycle error mean <= 1 %"),
    "cycle_error_max_pct": ("<=", 3.0, "TLM cycle error max <= 3 %"),
    "golden_vs_numpy": ("<=", 2.0, "golden path <= 2x plain numpy (1 M elements)"),
    "golden_matmul_vs_numpy": ("<=", 2.0, "golden matmul operator <= 2x plain numpy int8(A @ B)"),
    "gemm_utilization": (">=", 0.8, "ResNet-18 layer on default: MACs per cycle >= 80 % of the peak"),
    "tlm_vs_raw_speedup_min": (">=", 10.0, "TLM >= 10x raw harness on EVERY >= 1 M-cycle Program, every config"),
}


def _ratio(rows: list[dict[str, Any]], num: str, den: str) -> list[float]:
    out = []
    for r in rows:
        a, b = r["cycles_per_s"].get(num), r["cycles_per_s"].get(den)
        if a and b:
            out.append(a / b)
    return out


def _med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    long_rows = [r for r in rows if (r["rtl_cycles"] or 0) >= LONG]
    errs = [abs(r["error_pct"]) for r in rows if r["error_pct"] is not None]
    s: dict[str, Any] = {
        "long_programs": [f"{r['config']}/{r['name']}" for r in long_rows],
        "tlm_vs_raw_speedup": _med(_ratio(long_rows, "tlm", "raw")),
        "tlm_vs_raw_speedup_min": min(_ratio(long_rows, "tlm", "raw"), default=None),
        "tlm_vs_raw_speedup_all_programs": _med(_ratio(rows, "tlm", "raw")),
        # The TLM's cost is per instruction, the raw harness's per cycle: the ratio follows the
        # cycles per instruction, which each config's buffer depth bounds, so it is shown per config.
        "tlm_vs_raw_speedup_by_config": {c: _med(_ratio([r for r in long_rows if r["config"] == c], "tlm", "raw"))
                                         for c in dict.fromkeys(r["config"] for r in long_rows)},
        "cocotb_fast_vs_raw": _med(_ratio(long_rows, "cocotb_fast", "raw")),
        "cocotb_fast_vs_raw_all_programs": _med(_ratio(rows, "cocotb_fast", "raw")),
        # the protocol back-end only runs the short Programs (it is ~100x slower)
        "cocotb_protocol_vs_raw": _med(_ratio(rows, "cocotb_protocol", "raw")),
        "cocotb_protocol_programs": [f"{r['config']}/{r['name']}" for r in rows if r["cycles_per_s"].get("cocotb_protocol")],
        "cycle_error_mean_pct": statistics.fmean(errs) if errs else None,
        "cycle_error_max_pct": max(errs) if errs else None,
        "raw_cycles_per_s_median": _med([r["cycles_per_s"]["raw"] for r in rows if r["cycles_per_s"].get("raw")]),
        "tlm_cycles_per_s_median": _med([r["cycles_per_s"]["tlm"] for r in rows if r["cycles_per_s"].get("tlm")]),
        "all_agree": all(r["agree"] for r in rows),
        # per config, per GEMM Program: MACs per cycle / peak on RTL (the TLM's is in the rows)
        "gemm_utilization_by_config": {c: {r["name"]: r["mac_utilization"]["rtl"]["utilization"]
                                           for r in rows if r["config"] == c and r.get("mac_utilization")}
                                       for c in dict.fromkeys(r["config"] for r in rows)},
        "tlm_vs_raw_speedup_min_by_config": {c: min(_ratio([r for r in long_rows if r["config"] == c], "tlm", "raw"),
                                                    default=None)
                                             for c in dict.fromkeys(r["config"] for r in long_rows)},
    }
    res = next((r for r in rows if r["config"] == "default" and r["name"] == "conv2d_resnet"
                and r.get("mac_utilization")), None)
    s["gemm_utilization"] = res["mac_utilization"]["rtl"]["utilization"] if res else None
    s["gemm_utilization_resnet_layer"] = None if res is None else {
        "config": "default", "program": res["name"], "rtl_cycles": res["rtl_cycles"], "tlm_cycles": res["tlm_cycles"],
        "macs": res["mac_utilization"]["macs"], "peak_macs_per_cycle": res["mac_utilization"]["peak_macs_per_cycle"],
        "rtl_utilization": res["mac_utilization"]["rtl"]["utilization"],
        "tlm_utilization": res["mac_utilization"]["tlm"]["utilization"]}
    comp = [r for r in rows if r["wall_s"].get("compile")]
    s["compile_s_total"] = sum(r["wall_s"]["compile"] for r in comp)
    s["compile_insns_per_s"] = (sum(r["insns"] for r in comp) / s["compile_s_total"]) if s["compile_s_total"] else None
    tl = [(r["insns"], r["wall_s"]["tlm"]) for r in rows if r["wall_s"].get("tlm")]
    s["tlm_insns_per_s"] = sum(i for i, _ in tl) / sum(w for _, w in tl) if tl else None
    return s


def verdict(op: str, bound: float, value: float | None, what: str) -> dict[str, Any]:
    """One target's row: ``value`` against ``op bound`` (``met`` None when there is no value)."""
    met = None if value is None else (value >= bound if op == ">=" else value <= bound)
    return {"value": value, "target": f"{op} {bound}", "met": met, "what": what}


def verdicts(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {key: verdict(op, bound, summary.get(key), text) for key, (op, bound, text) in TARGETS.items()}


def _f(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def gemm_lines(rows: list[dict[str, Any]]) -> list[str]:
    """MACs per cycle of every GEMM Program on RTL and TLM against the config's peak."""
    g = [r for r in rows if r.get("mac_utilization")]
    if not g:
        return []
    head = f"{'config':<8}{'GEMM program':<16}{'MACs':>12}{'cycles':>10}{'peak/cyc':>9}{'RTL MAC/cyc':>12}" \
           f"{'TLM MAC/cyc':>12}{'util %':>8}"
    out = [head, "-" * len(head)]
    for r in g:
        u = r["mac_utilization"]
        out.append(f"{r['config']:<8}{r['name']:<16}{u['macs']:>12}{r['rtl_cycles'] or 0:>10}"
                   f"{u['peak_macs_per_cycle']:>9}{_f(u['rtl']['macs_per_cycle'], '.1f'):>12}"
                   f"{_f(u['tlm']['macs_per_cycle'], '.1f'):>12}{_f(u['rtl']['utilization'] and 100 * u['rtl']['utilization'], '.1f'):>8}")
    return out


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    head = (f"{'config':<8}{'program':<17}{'insns':>6}{'RTL cyc':>10}{'TLM cyc':>10}{'err %':>7}"
            f"{'TLM s':>8}{'raw s':>8}{'fast s':>8}{'prot s':>8}{'TLM Mc/s':>9}{'raw Mc/s':>9}{'TLM/raw':>8}"
            f"{'fast/raw':>9}{'ok':>4}")
    out = [head, "-" * len(head)]
    for r in rows:
        w, c = r["wall_s"], r["cycles_per_s"]
        tr = (c["tlm"] / c["raw"]) if c.get("tlm") and c.get("raw") else None
        fr = (c["cocotb_fast"] / c["raw"]) if c.get("cocotb_fast") and c.get("raw") else None
        out.append(f"{r['config']:<8}{r['name']:<17}{r['insns']:>6}{r['rtl_cycles'] or 0:>10}{r['tlm_cycles'] or 0:>10}"
                   f"{_f(r['error_pct'], '+.2f'):>7}{_f(w['tlm'], '.3f'):>8}{_f(w['raw'], '.3f'):>8}"
                   f"{_f(w['cocotb_fast'], '.2f'):>8}{_f(w['cocotb_protocol'], '.2f'):>8}"
                   f"{_f(c.get('tlm') and c['tlm'] / 1e6, '.2f'):>9}{_f(c.get('raw') and c['raw'] / 1e6, '.2f'):>9}"
                   f"{_f(tr, '.2f'):>8}{_f(fr, '.3f'):>9}{'yes' if r['agree'] else 'NO':>4}")
    return out
