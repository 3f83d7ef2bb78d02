"""The sweep driver: the spec's points and configs as engine tasks, then the table, fronts, plots.

Phase 1 (one engine run): a TLM task per valid point (config x workload) and an area task per
valid config whose area is not cached yet. Phase 2, when the spec asks for the RTL: one task per
RTL (the configs of one ``HwConfig.rtl_id``, which differ only in the DRAM's timing and share one
Verilator build) holding its configs' chosen points (all the valid ones, or a seeded random sample
of them), one simulator process per config; the report counts the builds against the points. Every
record goes to the results file (JSON lines) as it arrives, so a sweep that is stopped resumes where
it stopped when run again with the same file; invalid
configs need no task (hw/config.py rejects them here, each with its reason).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from cosim.sweep import area as area_mod
from cosim.cluster import Task, run_tasks
from cosim.models import rtl_digest
from cosim.sweep.plots import plot_fronts
from cosim.sweep.spec import ConfigPoint, RtlChoice, SpecError, SweepSpec
from cosim.sweep.tasks import point_result_problem
from cosim.sweep.table import best_points, make_row, mark_fronts, point_key, text_lines, write_csv, write_json

REPO = Path(__file__).resolve().parents[2]
AREA_MODES = ("synth", "cached", "none")
# Headroom of an area task over its synthesis bound (yosys' own timeout stops it first).
AREA_TASK_MARGIN_S = 120.0


def default_out_dir(spec: SweepSpec) -> Path:
    return REPO / "build" / "sweep" / spec.name


# Written in the output folder when a sweep starts: the folder is a sweep's (its files may be replaced).
MARKER = ".cosim-sweep"


def claim_out_dir(out_dir: Path) -> None:
    """Refuse (SpecError) an ``out_dir`` holding files of a sweep's names that no sweep wrote (they would be
    replaced): a folder is a sweep's by its marker or a sweep report in its sweep.json."""
    if (out_dir / MARKER).is_file() or _old_report(out_dir) is not None or is_sweep_results(out_dir / "results.jsonl"):
        return
    clash = [n for n in ("sweep.json", "sweep.csv", "results.jsonl", "configs") if (out_dir / n).exists()]
    if clash:
        raise SpecError(f"--out {out_dir}: {', '.join(clash)} {'is' if len(clash) == 1 else 'are'} there and the "
                        f"folder is not a sweep's (they would be replaced); choose another --out")


SWEEP_KEYS = ("tlm/", "area/", "rtl/")  # the task keys of a sweep (cosim.sweep.table.point_key, run_sweep)


def is_sweep_results(path: Path) -> bool:
    """Whether ``path`` is a sweep's results file: records, each with a sweep's key (a stopped sweep's folder,
    before the marker was written, or one given to --fresh)."""
    from cosim.cluster.results_file import ResultsFile

    try:
        recs = ResultsFile(path).load() if path.is_file() else {}
    except (OSError, ValueError):
        return False
    return sweep_keys(recs)


def sweep_keys(keys: Any) -> bool:
    """Whether ``keys`` (of a results file's records) are some, and all a sweep's."""
    keys = list(keys)
    return bool(keys) and all(k.startswith(SWEEP_KEYS) for k in keys)


def _old_report(out_dir: Path) -> dict[str, Any] | None:
    """The sweep report in ``out_dir`` (its sweep.json), or None when there is none (or it is not one)."""
    try:
        doc = json.loads((out_dir / "sweep.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and {"sweep", "rows", "files"} <= set(doc) else None


def _remove_old_plots(out_dir: Path) -> None:
    """Remove the plots the last sweep report in ``out_dir`` lists (this run writes its own, or none)."""
    old = _old_report(out_dir)
    plots = (old or {}).get("files", {}).get("plots") if isinstance((old or {}).get("files"), dict) else None
    for p in plots if isinstance(plots, list) else []:
        f = out_dir / Path(str(p)).name
        if f.name.startswith("pareto-") and f.suffix == ".png":
            f.unlink(missing_ok=True)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _rtl_choice(points: list[tuple[ConfigPoint, str]], choice: RtlChoice) -> list[tuple[ConfigPoint, str]]:
    if choice.mode == "all":
        return points
    if choice.mode == "sample":
        picked = set(random.Random(choice.seed).sample(range(len(points)), min(choice.count, len(points))))
        return [p for k, p in enumerate(points) if k in picked]
    return []


def run_sweep(spec: SweepSpec, out_dir: Path, results: Path | None = None, scheduler: str | None = None,
              workers: int | None = None, area_mode: str = "synth", rtl: RtlChoice | None = None,
              task_timeout: float | None = None, progress: bool = True) -> dict[str, Any]:
    """Run the sweep and write ``out_dir``/sweep.csv, sweep.json and pareto-<workload>.png; returns
    the report (what sweep.json holds). ``area_mode``: ``synth`` (synthesize the configs not
    cached), ``cached`` (only what the cache has), ``none``; ``rtl`` overrides the spec's choice;
    ``task_timeout`` the spec's time limit of a point (a synthesis task gets its own bound plus a
    margin). ``scheduler`` and ``workers``: :func:`cosim.cluster.run_tasks`."""
    t_start = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MARKER).touch()
    results = results or out_dir / "results.jsonl"
    rtl = rtl or spec.rtl
    use_area = spec.area.enabled and area_mode != "none"
    configs = spec.configs()
    valid = [cp for cp in configs if cp.config is not None]
    wl = {w.label: w for w in spec.workloads}
    target = spec.area.target

    # ---- phase 1: TLM points and areas ----
    areas: dict[str, dict[str, Any]] = {}
    akeys: dict[str, str] = {}
    tasks: list[Task] = []
    if use_area:
        for cp in valid:
            assert cp.config is not None
            akeys[cp.key] = area_mod.area_key(cp.config, target)
            hit = area_mod.cached_area(akeys[cp.key], target)
            if hit is not None:
                areas[cp.key] = {**hit, "source": "cached"}
            elif area_mode == "synth":
                # the limit is in the key: an area absent under a shorter one is synthesized again
                tasks.append(Task(f"area/{target}/{spec.area.timeout:g}s/{akeys[cp.key]}", "cosim.sweep.area:area_task",
                                  {"config": cp.config.to_dict(), "target": target, "timeout": spec.area.timeout,
                                   "key": akeys[cp.key]}))
            else:
                areas[cp.key] = {"status": "not synthesized (--area cached: not in the cache)"}
    tlm_keys: dict[str, tuple[str, str]] = {}
    for cp in valid:
        assert cp.config is not None
        for w in spec.workloads:
            # a network's inputs are its own images: the seed does not change them
            key = point_key(w.label, w.digest, cp.key, spec.seed if w.kind != "network" else 0)
            tlm_keys[key] = (w.label, cp.key)
            tasks.append(Task(key, "cosim.sweep.tasks:point_task",
                              {"config": cp.config.to_dict(), "workload": w.to_dict(), "seed": spec.seed}))
    n_area = sum(1 for t in tasks if t.key.startswith("area/"))
    _log(f"sweep {spec.name}: {len(configs)} configs ({len(configs) - len(valid)} invalid) x {len(wl)} workloads; "
         f"{len(tasks) - n_area} TLM tasks, {n_area} synthesis task(s); results in {results}")
    point_timeout = task_timeout or spec.timeout
    timeout = max(point_timeout, spec.area.timeout + AREA_TASK_MARGIN_S if n_area else 0.0)
    tlm_recs: dict[tuple[str, str], dict[str, Any]] = {}
    area_by_akey = {v: k for k, v in akeys.items()}
    for rec in run_tasks(tasks, results=results, scheduler=scheduler, workers=workers, progress=progress,
                         desc=f"sweep {spec.name}", timeout_s=timeout):
        key = rec["key"]
        if key in tlm_keys:
            bad = point_result_problem(rec.get("result")) if rec.get("ok") else None
            if bad:  # a record resumed from the file: the sweep would publish (or trip over) it
                raise SpecError(f"{results}: the record of {key} is not a sweep point's result ({bad}): delete its "
                                f"line (or the file) to run the point again")
            tlm_recs[tlm_keys[key]] = rec
        elif key.startswith("area/"):
            ak = key.rsplit("/", 1)[1]
            if rec.get("ok") and rec.get("result"):
                a = rec["result"]
                area_mod.store_area(ak, target, {k: v for k, v in a.items() if k != "source"})
            else:
                a = {"status": f"absent: the synthesis task failed: {rec.get('error')}"}
            if ak in area_by_akey:  # one config per key: the key hashes its hardware numbers
                areas[area_by_akey[ak]] = a

    # ---- phase 2: RTL on request or on a sample of the valid points ----
    by_cp = {cp.key: cp for cp in valid}
    ok_points = [(by_cp[ck], label) for (label, ck), rec in sorted(tlm_recs.items(), key=lambda kv: kv[0][::-1])
                 if rec.get("ok") and rec["result"]["status"] == "ok"]
    chosen = _rtl_choice(ok_points, rtl)
    rtl_rows: dict[tuple[str, str], dict[str, Any]] = {}
    rtl_builds: dict[str, bool] = {}  # build folder -> compiled by this sweep (False: reused)
    per_cfg: dict[str, list[str]] = {}
    if chosen:
        for cp, label in chosen:
            per_cfg.setdefault(cp.key, []).append(label)
        per_rtl: dict[int, list[str]] = {}  # configs of one RTL: one task, one build
        design = rtl_digest()  # a result of the RTL before an edit is not one of the RTL after
        for ck in per_cfg:
            cfg = by_cp[ck].config
            assert cfg is not None
            per_rtl.setdefault(cfg.rtl_id, []).append(ck)
        rtasks = []
        for rid, cks in per_rtl.items():
            runs = [{"key": ck, "config": by_cp[ck].config.to_dict(),  # type: ignore[union-attr]
                     "workloads": [wl[lb].to_dict() for lb in per_cfg[ck]]} for ck in cks]
            digest = hashlib.sha256("|".join(f"{ck}:{lb}-{wl[lb].digest}" for ck in cks
                                             for lb in per_cfg[ck]).encode()).hexdigest()[:8]
            rtasks.append(Task(f"rtl/{rid:08x}/{digest}/s{spec.seed}/{design}", "cosim.sweep.tasks:rtl_task",
                               {"runs": runs, "seed": spec.seed}))
        _log(f"sweep {spec.name}: RTL on {len(chosen)} point(s) of {len(per_cfg)} config(s), "
             f"{len(per_rtl)} distinct RTL build(s)")
        want = {t.key: [(r["key"], [w["label"] for w in r["workloads"]]) for r in t.args["runs"]] for t in rtasks}
        for rec in run_tasks(rtasks, results=results, scheduler=scheduler, workers=workers, progress=progress,
                             desc=f"sweep {spec.name} RTL",
                             # a task runs its configs one after another: each gets a point's bound
                             timeout_s=point_timeout * max(len(cks) for cks in per_rtl.values())):
            if rec["key"] not in want:
                continue
            if rec.get("ok"):
                for b in rec["result"].get("builds", []):
                    rtl_builds[b["dir"]] = rtl_builds.get(b["dir"], False) or bool(b["compiled"])
            for ck, labels in want[rec["key"]]:
                for label in labels:
                    if rec.get("ok"):
                        rtl_rows[(label, ck)] = rec["result"]["points"][ck][label]
                    else:
                        rtl_rows[(label, ck)] = {"status": "failed",
                                                 "reason": f"RTL task failed: {rec.get('error')}"}

    # ---- the table, the fronts, the files ----
    rows = [make_row(spec, cp, w.label, tlm_recs.get((w.label, cp.key)), rtl_rows.get((w.label, cp.key)),
                     areas.get(cp.key) if use_area else None)
            for cp in configs for w in spec.workloads]
    labels = list(wl)
    fronts = mark_fronts(rows, labels) if use_area else {}
    counts = {"configs": len(configs), "invalid_configs": len(configs) - len(valid), "points": len(rows),
              **{s: sum(1 for r in rows if r["status"] == s) for s in ("ok", "invalid", "failed")},
              "rtl_points": sum(1 for r in rows if r.get("rtl_cycles") is not None),
              "tlm_differs_from_rtl": sum(1 for r in rows if r.get("tlm_equals_rtl") is False)}
    errs = [abs(r["error_pct"]) for r in rows if r.get("error_pct") is not None]
    report: dict[str, Any] = {
        "sweep": spec.name, "spec": str(spec.path), "base": spec.base.name, "seed": spec.seed,
        "parameters": spec.parameters, "sample": spec.sample, "workloads": labels,
        "workload_specs": [w.to_dict() for w in spec.workloads],
        "area_target": target if use_area else None, "area_metric": spec.area.metric_label if use_area else None,
        "area_sources": {s: sum(1 for a in areas.values() if a.get("source") == s) for s in ("cached", "synthesized")},
        "rtl": {"mode": rtl.mode, "count": rtl.count, "seed": rtl.seed,
                "max_abs_error_pct": max(errs) if errs else None,
                "points": len(chosen), "configs": len(per_cfg), "builds": len(rtl_builds),
                "builds_compiled": sum(rtl_builds.values()), "build_dirs": sorted(rtl_builds)},
        "counts": counts,
        "fronts": {k: [{"config": r["config"], "params": r["params"], "tlm_cycles": r["tlm_cycles"],
                        "area": r["area"]} for r in v] for k, v in fronts.items()},
        "best": best_points(rows, labels) if use_area else {},
        "rows": rows,
    }
    files: dict[str, Any] = {"csv": out_dir / "sweep.csv", "json": out_dir / "sweep.json", "results": results,
                             "configs": write_configs(valid, out_dir / "configs")}
    _remove_old_plots(out_dir)
    write_csv(rows, files["csv"])
    if fronts:
        files["plots"] = plot_fronts(rows, fronts, spec.area.metric_label, out_dir)
    report["files"] = {k: ([str(p) for p in v] if isinstance(v, list) else str(v)) for k, v in files.items()}
    report["wall_s"] = round(time.perf_counter() - t_start, 2)
    write_json(report, files["json"])
    return report


def write_configs(points: list[ConfigPoint], folder: Path) -> Path:
    """Each valid point's config as ``<folder>/<name>.json``, so any command takes it:
    ``cosim run vadd --config <folder>/<name>.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    for cp in points:
        assert cp.config is not None
        (folder / f"{cp.name}.json").write_text(json.dumps(cp.config.to_dict(), indent=1) + "\n")
    return folder


def all_agree(report: dict[str, Any]) -> bool:
    """No point failed (a model disagreed with the golden path or stopped) and, where the RTL ran,
    its cycles and counters equal the TLM's."""
    return report["counts"]["failed"] == 0 and report["counts"]["tlm_differs_from_rtl"] == 0


def print_report(report: dict[str, Any]) -> None:
    print("\n".join(text_lines(report)))
