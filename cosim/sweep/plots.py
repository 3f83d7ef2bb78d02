"""PNG plots of a sweep (matplotlib, Agg): per workload, every valid point's cycles against its
area, with the Pareto front drawn as a staircase and its points labelled by their config values."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

# Front points listed beside the axes (three lines each); the rest are numbered only.
MAX_LISTED = 14


def _label(params: dict[str, Any], keys: list[str]) -> str:
    return ", ".join(f"{k}={params[k]}" for k in keys if k in params)


def varying_keys(rows: list[dict[str, Any]]) -> list[str]:
    """The config keys whose value differs between the rows (the others say nothing on a plot)."""
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r["params"] if k not in keys]
    return [k for k in keys if len({repr(r["params"].get(k)) for r in rows}) > 1]


def plot_workload(label: str, rows: list[dict[str, Any]], front: list[dict[str, Any]], metric: str,
                  path: Path) -> Path:
    """One workload's cycles vs area scatter with its front (points numbered, their configs listed
    beside the axes); returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in rows if r["status"] == "ok" and r.get("area") is not None and r["tlm_cycles"]]
    others = [r for r in pts if not r.get("on_front")]
    keys = varying_keys(rows)
    fig = plt.figure(figsize=(12, 6))
    ax = fig.add_axes((0.08, 0.1, 0.5, 0.8))
    try:
        ax.scatter([r["area"] for r in others], [r["tlm_cycles"] for r in others], s=22, color="0.6",
                   label="dominated", zorder=2)
        fx = [r["area"] for r in front]
        fy = [r["tlm_cycles"] for r in front]
        ax.scatter(fx, fy, s=40, color="tab:red", label="Pareto front", zorder=3)
        if front:
            ax.step(fx, fy, where="post", color="tab:red", linewidth=1.2, zorder=1)
        lines = []
        for k, r in enumerate(front, 1):
            ax.annotate(str(k), (r["area"], r["tlm_cycles"]), textcoords="offset points", xytext=(5, 4), fontsize=8)
            if k > MAX_LISTED:
                continue
            lines.append(f"{k}: {r['tlm_cycles']:,} cycles, area {r['area']:,.0f}")
            lines.append(textwrap.fill(_label(r["params"], keys), 58, initial_indent="   ", subsequent_indent="   "))
        ys = [r["tlm_cycles"] for r in pts]
        if ys and max(ys) > 20 * min(ys):
            ax.set_yscale("log")
        invalid = sum(1 for r in rows if r["status"] == "invalid")
        failed = sum(1 for r in rows if r["status"] == "failed")
        missing = sum(1 for r in rows if r["status"] == "ok" and r.get("area") is None)
        notes = [f"{len(pts)} points"] + [f"{n} {w}" for n, w in ((invalid, "invalid"), (failed, "failed"),
                                                                  (missing, "without area")) if n]
        ax.set_title(f"{label}: cycles vs area ({', '.join(notes)})")
        ax.set_xlabel(f"area: {metric}")
        ax.set_ylabel("TLM cycles")
        ax.grid(True, alpha=0.3)
        if pts:
            ax.legend(loc="upper right")
        if len(front) > MAX_LISTED:
            lines.append(f"... and {len(front) - MAX_LISTED} more (sweep.json)")
        fig.text(0.61, 0.9, "Pareto front (by area):\n" + "\n".join(lines), va="top", fontsize=8, family="monospace")
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path


def plot_fronts(rows: list[dict[str, Any]], fronts: dict[str, list[dict[str, Any]]], metric: str,
                out_dir: Path) -> list[Path]:
    """``pareto-<workload>.png`` in ``out_dir`` for every workload with a front (a point with an area);
    returns their paths."""
    return [plot_workload(label, [r for r in rows if r["workload"] == label], front, metric,
                          out_dir / f"pareto-{label}.png") for label, front in fronts.items() if front]
