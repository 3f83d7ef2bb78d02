"""The sweep's table: one row per point (config x workload) from the task records, the Pareto
front of cycles vs area per workload, and the CSV / JSON files.

A row's ``status``: ``ok``; ``invalid`` (the config is rejected by hw/config.py, or the workload
does not fit it: ``reason`` says which, in one line); ``failed`` (a model disagrees with the
golden path, a model stopped with an error, or the task itself failed: ``reason``). Utilization
is each unit's busy cycles over the run's cycles (the hardware counters, ``hw.csr.COUNTERS``);
``macs_per_cycle`` the workload's useful MACs (its definition) per cycle, ``mac_utilization`` that
over the config's peak (one BLOCK x BLOCK block per cycle), ``array_utilization`` the MAC array's
busy share (GEMM micro-ops x peak, padding included).
"""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path
from typing import Any

from cosim.sweep.pareto import pareto_front
from cosim.sweep.spec import AREA_COLUMNS, ConfigPoint, SweepSpec

UNITS = ("load", "compute", "store", "gemm")
DMA = ("dma_rd_bytes", "dma_wr_bytes", "fetch_bytes")


def point_key(label: str, digest: str, cfg_key: str, seed: int) -> str:
    """The engine's key of a point's TLM task (the resume key: another seed gives other inputs)."""
    return f"tlm/{label}-{digest}/{cfg_key}/s{seed}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def make_row(spec: SweepSpec, cp: ConfigPoint, label: str, record: dict[str, Any] | None,
             rtl: dict[str, Any] | None, area: dict[str, Any] | None) -> dict[str, Any]:
    """One point's row from its TLM task record, its RTL result (or None) and its config's area."""
    from cosim.sweep.area import metric_value

    row: dict[str, Any] = {"workload": label, "config": cp.name, "params": dict(cp.overrides), "status": "ok",
                           "reason": None, "tlm_cycles": None, "rtl_cycles": None, "error_pct": None}
    if cp.config is None:
        row.update(status="invalid", reason=cp.reason)
        return row
    if record is None:
        row.update(status="failed", reason="no result (the run stopped before this point)")
        return row
    row.update(worker=record.get("worker"), wall_s=record.get("wall_s"))
    if not record.get("ok"):
        row.update(status="failed", reason=f"task failed: {record.get('error')}")
        return row
    res = record["result"]
    row.update(status=res["status"], reason=res.get("reason"), compile_s=res.get("compile_s"),
               run_params=res.get("params"))
    if "tlm_cycles" not in res:
        return row
    cycles = res["tlm_cycles"]
    c = res["counters"]
    unit_cycles = cycles * cp.config.num_cores  # the counters sum the cores: a fraction of every core's cycles
    row.update(tlm_cycles=cycles, insns=res.get("insns"), tlm_s=res.get("tlm_s"),
               utilization={u: _ratio(c.get(f"{u}_busy"), unit_cycles) for u in UNITS},
               **{k: c.get(k) for k in DMA})
    macs, peak = res.get("macs"), res.get("peak_macs_per_cycle")
    gemm_ops = c.get("gemm_ops", 0)
    if macs or gemm_ops:
        mpc = _ratio(macs, cycles)
        row.update(macs=macs, macs_per_cycle=mpc, peak_macs_per_cycle=peak, mac_utilization=_ratio(mpc, peak),
                   array_utilization=_ratio(gemm_ops, unit_cycles))
    if rtl is not None:
        row["rtl_status"] = rtl["status"]
        if rtl.get("rtl_cycles") is not None:
            row["rtl_cycles"] = rtl["rtl_cycles"]
            row["error_pct"] = (100.0 * (cycles - rtl["rtl_cycles"]) / rtl["rtl_cycles"]
                                if rtl["rtl_cycles"] else None)
            differ = sorted(k for k, v in rtl.get("counters", {}).items() if c.get(k) != v)
            row["tlm_equals_rtl"] = cycles == rtl["rtl_cycles"] and not differ
            if differ:
                row["counters_differ"] = differ
        if rtl["status"] != "ok" and row["status"] == "ok":
            row.update(status="failed", reason=rtl.get("reason"))
    if spec.area.enabled:
        row["area"] = metric_value(area, spec.area.metric)
        row["area_status"] = (area or {}).get("status", "not synthesized")
        row["area_detail"] = {k: (area or {}).get(k) for k in AREA_COLUMNS if (area or {}).get(k) is not None}
    return row


def mark_fronts(rows: list[dict[str, Any]], workloads: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Set ``on_front`` on every row and return, per workload, its front (by increasing area):
    the ``ok`` points with an area that no other beats (:func:`cosim.sweep.pareto.pareto_front`: two equal in
    both numbers are both on it)."""
    fronts: dict[str, list[dict[str, Any]]] = {}
    for label in workloads:
        rows_w = [r for r in rows if r["workload"] == label]
        cand = [r for r in rows_w if r["status"] == "ok" and r.get("area") is not None and r["tlm_cycles"]]
        keys = set(pareto_front([(r["config"], float(r["area"]), float(r["tlm_cycles"])) for r in cand]))
        for r in rows_w:
            r["on_front"] = r["config"] in keys
        fronts[label] = sorted((r for r in cand if r["config"] in keys), key=lambda r: (r["area"], r["tlm_cycles"]))
    return fronts


def best_points(rows: list[dict[str, Any]], workloads: list[str]) -> dict[str, dict[str, Any]]:
    """Per workload: the fastest point, the smallest, and the smallest cycles x area product."""
    out: dict[str, dict[str, Any]] = {}
    for label in workloads:
        ok = [r for r in rows if r["workload"] == label and r["status"] == "ok" and r["tlm_cycles"]]
        with_area = [r for r in ok if r.get("area") is not None]
        pick: dict[str, Any] = {}
        if ok:
            pick["fastest"] = _brief(min(ok, key=lambda r: (r["tlm_cycles"], r.get("area") or 0)))
        if with_area:
            pick["smallest"] = _brief(min(with_area, key=lambda r: (r["area"], r["tlm_cycles"])))
            pick["best_cycles_x_area"] = _brief(min(with_area, key=lambda r: r["area"] * r["tlm_cycles"]))
        out[label] = pick
    return out


def _brief(r: dict[str, Any]) -> dict[str, Any]:
    return {"config": r["config"], "params": r["params"], "tlm_cycles": r["tlm_cycles"], "area": r.get("area")}


def csv_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The CSV's columns: the point, each swept config key, then the measurements."""
    keys: list[str] = []
    for r in rows:
        for k in r["params"]:
            if k not in keys:
                keys.append(k)
    area_cols = [f"area_{k}" for k in AREA_COLUMNS if any(k in r.get("area_detail", {}) for r in rows)]
    return (["workload", "config", *keys, "status", "reason", "tlm_cycles", "rtl_cycles", "error_pct"]
            + [f"util_{u}" for u in UNITS] + list(DMA)
            + ["macs", "macs_per_cycle", "mac_utilization", "array_utilization", "area", "area_status",
               *area_cols, "on_front", "insns", "compile_s", "tlm_s", "wall_s", "worker"])


def csv_record(r: dict[str, Any]) -> dict[str, Any]:
    flat = {**r, **r["params"], **{f"util_{u}": v for u, v in (r.get("utilization") or {}).items()},
            **{f"area_{k}": v for k, v in (r.get("area_detail") or {}).items()}}
    return {k: ("" if v is None else v) for k, v in flat.items()}


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """The table as CSV (one row per point; blank cells where a number does not apply)."""
    cols = csv_columns(rows)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(csv_record(r))


def write_json(report: dict[str, Any], path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    tmp.replace(path)


def text_lines(report: dict[str, Any]) -> list[str]:
    """The report for the terminal: per workload its points by cycles (``*`` on the front), then
    the invalid and failed points with their reasons."""
    rows = report["rows"]
    out: list[str] = [f"sweep {report['sweep']}: {report['counts']['configs']} configs x "
                      f"{len(report['workloads'])} workloads = {report['counts']['points']} points "
                      f"(ok {report['counts']['ok']}, invalid {report['counts']['invalid']}, "
                      f"failed {report['counts']['failed']}); base config {report['base']}"]
    metric = report.get("area_metric")
    keys = [c for c in csv_columns(rows) if any(c in r["params"] for r in rows)]
    for label in report["workloads"]:
        ok = sorted((r for r in rows if r["workload"] == label and r["status"] == "ok"),
                    key=lambda r: (r["tlm_cycles"], r.get("area") or 0))
        out += ["", f"{label}: {len(ok)} valid point(s)" + (f"; area = {metric} ({report['area_target']})"
                                                               if metric else "")]
        if not ok:
            continue
        widths = {k: max(len(k), 6) + 2 for k in keys}
        head = (f"  {'':1}{'config':<17}" + "".join(f"{k:>{widths[k]}}" for k in keys)
                + f"{'TLM cycles':>12}{'RTL err %':>10}{'area':>10}{'load':>6}{'comp':>6}{'store':>6}{'gemm':>6}"
                + f"{'MAC/cyc':>9}{'DMA bytes':>11}")
        out += [head, "  " + "-" * (len(head) - 2)]
        for r in ok:
            u = r.get("utilization") or {}
            err = "-" if r.get("error_pct") is None else f"{r['error_pct']:+.2f}"
            area = "-" if r.get("area") is None else f"{r['area']:.0f}"
            mpc = "-" if r.get("macs_per_cycle") is None else f"{r['macs_per_cycle']:.1f}"
            dma = (r.get("dma_rd_bytes") or 0) + (r.get("dma_wr_bytes") or 0)
            out.append(f"  {'*' if r.get('on_front') else ' '}{r['config']:<17}"
                       + "".join(f"{_cell(r['params'].get(k)):>{widths[k]}}" for k in keys)
                       + f"{r['tlm_cycles']:>12}{err:>10}{area:>10}"
                       + "".join(f"{'-' if u.get(x) is None else f'{100 * u[x]:.0f}%':>6}" for x in UNITS)
                       + f"{mpc:>9}{dma:>11}")
    bad = [r for r in rows if r["status"] != "ok"]
    if bad:
        out += ["", "invalid and failed points:"]
        for r in bad:
            out.append(f"  {r['status']:<8}{r['workload']} @ {r['config']} "
                       f"({', '.join(f'{k}={v}' for k, v in r['params'].items())}): {r['reason']}")
    r = report.get("rtl") or {}
    if r.get("points"):
        out += ["", f"RTL: {r['points']} point(s) of {r['configs']} config(s) on {r['builds']} simulator build(s) "
                    f"({r['builds_compiled']} compiled, {r['builds'] - r['builds_compiled']} reused): configs that "
                    f"differ only in the DRAM's timing share one build"]
    files = report.get("files", {})
    absent: dict[str, set[str]] = {}  # why a config has no area -> the configs
    for r in rows:
        if metric and r["status"] == "ok" and r.get("area") is None:
            absent.setdefault(str(r.get("area_status")), set()).add(r["config"])
    out += [""] + [f"no area on {len(cs)} config(s): {why}" for why, cs in absent.items()]
    on_front = any(r.get("on_front") for r in rows)
    out += ["* on the Pareto front of cycles vs area" if on_front else
            "area: not measured (no front)" if not metric else "no front (no point has an area)",
            "files: " + ", ".join(str(v) for k, v in files.items() if k not in ("plots", "configs"))]
    if files.get("configs"):
        out.append(f"configs: {files['configs']}/<config>.json; a point by hand (its every param given), e.g.:")
        for w in report.get("workload_specs", []):
            r = next((r for r in rows if r["workload"] == w["label"] and r["status"] == "ok"), None)
            if r is not None:
                conf = str(Path(files["configs"]) / f"{r['config']}.json")
                out.append(f"  {hand_command(w, r.get('run_params'), conf, report.get('seed', 0))}")
    if files.get("plots"):
        out.append("plots: " + ", ".join(str(p) for p in files["plots"]))
    return out


def hand_command(w: dict[str, Any], params: dict[str, Any] | None, config: str, seed: int) -> str:
    """The command that runs workload ``w`` (:meth:`Workload.to_dict`) on the TLM as a sweep point did, on
    ``config``: an example with ``params``, the point's every param (none left to follow the config)."""
    if w["kind"] == "network":  # its images are the network's own (no seed)
        args = ["cosim", "net", w["name"], "--images", str(w.get("images") or 1)]
    else:
        from compiler.params import param_text
        from cosim.sweep.workloads import operator_example

        args = ["cosim", "run", operator_example(w["name"]) if w["kind"] == "operator" else w["name"]]
        args += [a for k, v in (params or w["params"]).items() for a in ("-p", f"{k}={param_text(v)}")]
        args += ["--seed", str(seed)] if seed else []
    return shlex.join(args + ["--config", config, "--model", "tlm"])


def _cell(v: Any) -> str:
    return "-" if v is None else str(v)
