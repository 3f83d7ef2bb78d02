"""The sweep's engine tasks (``fn(args) -> dict``, JSON in and out, run on any worker).

* :func:`point_task`: one point, a config x a workload: compile, run on the TLM, check the outputs
  against the golden path (or the network's reference logits). A workload that cannot be compiled
  for the config (its tiles do not fit the buffers, its tensors the DRAM) is returned as
  ``status: invalid`` with the compiler's one-line reason: a result, not a failure.
* :func:`rtl_task`: the RTL runs of the sampled points of the configs that share one RTL (one
  ``HwConfig.rtl_id``: they differ only in the DRAM's timing), one simulator process per config, all
  on ONE Verilator build (testbench.rtl_model caches it per RTL under a file lock; CONFIG_ID and the
  latencies are run-time inputs), which the task reports as compiled or reused.

The area task is :func:`cosim.sweep.area.area_task`.
"""

from __future__ import annotations

import time
from typing import Any

from hw.config import HwConfig, parse_config
from cosim import models
from cosim.sweep.workloads import BuiltWorkload, Workload, build_workload


def _config(d: dict[str, Any]) -> HwConfig:
    return parse_config(d, d["name"])


def _compile(w: Workload, cfg: HwConfig, seed: int) -> tuple[BuiltWorkload | None, str | None, float]:
    """The compiled workload, or None and why it does not fit ``cfg`` (a ValueError of the compiler)."""
    t0 = time.perf_counter()
    try:
        built = build_workload(w, cfg, seed)
    except ValueError as e:  # CompileError, ParamError, ...: this workload does not fit this config
        return None, str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__, time.perf_counter() - t0
    return built, None, time.perf_counter() - t0


def point_task(args: dict[str, Any]) -> dict[str, Any]:
    """One point on the TLM (``args``: ``config`` JSON object, ``workload`` dict, ``seed``)."""
    cfg = _config(args["config"])
    w = Workload.from_dict(args["workload"])
    built, why, compile_s = _compile(w, cfg, int(args.get("seed", 0)))
    if built is None:
        return {"status": "invalid", "reason": f"workload: {why}", "compile_s": round(compile_s, 3)}
    res = models.tlm(built.program)
    out: dict[str, Any] = {"status": "ok", "reason": None, "tlm_cycles": res.cycles, "counters": dict(res.counters),
                           "macs": built.macs, "peak_macs_per_cycle": cfg.macs_per_cycle * cfg.num_cores,
                           "insns": len(built.program.insns), "compile_s": round(compile_s, 3),
                           "tlm_s": round(res.wall_s, 3), "params": built.params}
    if res.error:
        out["status"] = "failed"
        out["reason"] = f"TLM error {res.error.get('name')}: {res.error.get('message')}"
        return out
    mm = built.check(res.outputs)
    if mm:
        out["status"] = "failed"
        out["reason"] = f"TLM outputs differ from the golden path: {mm}"
    return out


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def point_result_problem(res: Any) -> str | None:
    """None when ``res`` has the shape :func:`point_task` returns (a record read back from a results file
    to resume a sweep), else what is wrong with it, in a few words."""
    if not isinstance(res, dict):
        return f"the result is a {type(res).__name__}, not an object"
    if res.get("status") not in ("ok", "invalid", "failed"):
        return f"status {res.get('status')!r} (ok, invalid or failed)"
    if not isinstance(res.get("reason"), (str, type(None))):
        return "its reason is not a string"
    if "tlm_cycles" in res:
        if not _count(res["tlm_cycles"]):
            return f"tlm_cycles {res['tlm_cycles']!r} is not a count"
        c = res.get("counters")
        if not isinstance(c, dict) or not all(isinstance(k, str) and _count(v) for k, v in c.items()):
            return "its counters are not a map of counts"
        for k in ("macs", "insns", "peak_macs_per_cycle"):
            if res.get(k) is not None and not _count(res[k]):
                return f"{k} {res[k]!r} is not a count"
    elif res["status"] == "ok":
        return "status ok without tlm_cycles"
    return None


def rtl_task(args: dict[str, Any]) -> dict[str, Any]:
    """The RTL runs of the configs of one RTL (``args``: ``runs`` [{``key``, ``config``,
    ``workloads`` [dict]}], ``seed``): per config key and workload label, cycles, counters and the
    output check; ``builds``: each simulator build used, and whether this task compiled it."""
    why = models.rtl_available()
    if why:
        raise RuntimeError(f"the RTL cannot run here: {why}")
    points: dict[str, Any] = {}
    builds: dict[str, bool] = {}
    t0 = time.perf_counter()
    for run in args["runs"]:
        out, build = _rtl_config(_config(run["config"]), run["workloads"], int(args.get("seed", 0)))
        points[run["key"]] = out
        if build is not None:
            builds[build["dir"]] = builds.get(build["dir"], False) or bool(build["compiled"])
    return {"points": points, "builds": [{"dir": d, "compiled": c} for d, c in sorted(builds.items())],
            "rtl_s": round(time.perf_counter() - t0, 2)}


def _rtl_config(cfg: HwConfig, workloads: list[dict[str, Any]],
                seed: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One config's points in one simulator process: the rows by label, and the build it ran on."""
    built: dict[str, BuiltWorkload] = {}
    out: dict[str, Any] = {}
    for d in workloads:
        w = Workload.from_dict(d)
        b, reason, _ = _compile(w, cfg, seed)
        if b is None:
            out[w.label] = {"status": "invalid", "reason": f"workload: {reason}"}
        else:
            built[w.label] = b
    results = models.rtl([b.program for b in built.values()], cfg) if built else []
    for (label, b), r in zip(built.items(), results):
        row: dict[str, Any] = {"status": "ok", "reason": None, "rtl_cycles": r.cycles, "counters": dict(r.counters)}
        if r.error:
            row["status"], row["reason"] = "failed", f"RTL error {r.error.get('name')}: {r.error.get('message')}"
        else:
            mm = b.check(r.outputs)
            if mm:
                row["status"], row["reason"] = "failed", f"RTL outputs differ from the golden path: {mm}"
        out[label] = row
    return out, (results[0].extra.get("build") if results else None)
