"""How the TLM's wall time grows: against instructions, against bytes moved, and (flat, ideally)
against cycles per instruction. Linear fits, log-log exponents and one PNG."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np

from hw.config import HwConfig
from hw.program import Program
from cosim import models
from cosim.bench import suite


def _tlm_wall(p: Program, reps: int) -> tuple[float, Any]:
    ws, r = [], None
    for _ in range(reps):
        r = models.tlm(p)
        ws.append(r.wall_s)
    return statistics.median(ws), r


def _fit(x: list[float], y: list[float]) -> dict[str, float]:
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    slope, icpt = np.polyfit(xa, ya, 1)
    pred = slope * xa + icpt
    ss = float(np.sum((ya - ya.mean()) ** 2)) or 1e-30
    r2 = 1 - float(np.sum((ya - pred) ** 2)) / ss
    expo = float(np.polyfit(np.log(xa), np.log(ya), 1)[0]) if len(xa) > 1 and min(xa) > 0 and min(ya) > 0 else None
    return {"slope": float(slope), "intercept": float(icpt), "r2": r2, "loglog_exponent": expo}


def run_growth(cfg: HwConfig, reps: int = 3, quick: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"config": cfg.name}
    pts = []
    for p in suite.growth_insns(cfg, quick):
        w, r = _tlm_wall(p, reps)
        pts.append({"name": p.name, "insns": len(p.insns), "cycles": r.cycles, "wall_s": w})
    out["insns"] = {"points": pts, "fit": _fit([q["insns"] for q in pts], [q["wall_s"] for q in pts])}
    pts = []
    for p in suite.growth_cpi(cfg, quick):
        w, r = _tlm_wall(p, reps)
        pts.append({"name": p.name, "insns": len(p.insns), "cycles": r.cycles,
                    "cycles_per_insn": r.cycles / len(p.insns), "wall_s": w})
    out["cpi"] = {"points": pts, "fit": _fit([q["cycles_per_insn"] for q in pts], [q["wall_s"] for q in pts])}
    pts = []
    for p in suite.growth_bytes(cfg, quick):
        w, r = _tlm_wall(p, reps)
        moved = sum(r.counters.get(c, 0) for c in ("dma_rd_bytes", "dma_wr_bytes"))
        pts.append({"name": p.name, "insns": len(p.insns), "cycles": r.cycles, "bytes": moved, "wall_s": w})
    out["bytes"] = {"points": pts, "fit": _fit([q["bytes"] for q in pts], [q["wall_s"] for q in pts])}
    return out


def summary_lines(g: dict[str, Any]) -> list[str]:
    fi, fc, fb = g["insns"]["fit"], g["cpi"]["fit"], g["bytes"]["fit"]
    cpi = g["cpi"]["points"]
    flat = max(q["wall_s"] for q in cpi) / min(q["wall_s"] for q in cpi) if cpi else None
    return [f"TLM growth ({g['config']}): {fi['slope'] * 1e6:.1f} us per instruction (R^2 {fi['r2']:.3f}, "
            f"log-log exponent {fi['loglog_exponent']:.2f})",
            f"  vs cycles per instruction: {fc['slope'] * 1e9:.1f} ns per extra cycle/insn over 256 insns; "
            f"wall max/min {flat:.2f}x across {cpi[0]['cycles_per_insn']:.0f}..{cpi[-1]['cycles_per_insn']:.0f} "
            f"cycles/insn (log-log exponent {fc['loglog_exponent']:.2f})",
            f"  vs bytes moved: {fb['slope'] * 1e9:.2f} ns per byte (R^2 {fb['r2']:.3f}, "
            f"log-log exponent {fb['loglog_exponent']:.2f})"]


def plot(g: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, key, xkey, xlabel in ((axes[0], "insns", "insns", "instructions"),
                                  (axes[1], "bytes", "bytes", "bytes moved (DMA read + write)"),
                                  (axes[2], "cpi", "cycles_per_insn", "RTL cycles per instruction (256 insns)")):
        pts, fit = g[key]["points"], g[key]["fit"]
        x = np.array([q[xkey] for q in pts], float)
        y = np.array([q["wall_s"] for q in pts], float)
        ax.plot(x, y * 1e3, "o", label="TLM wall (median)")
        xs = np.linspace(0, x.max() * 1.05, 50)
        ax.plot(xs, (fit["slope"] * xs + fit["intercept"]) * 1e3, "-",
                label=f"fit: slope {fit['slope']:.3g} s/unit, R² {fit['r2']:.3f}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("TLM wall time (ms)")
        ax.set_title(f"TLM vs {key} ({g['config']})")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
