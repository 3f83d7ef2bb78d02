"""PNG plots of a sweep (matplotlib, Agg): per workload, every valid point's cycles against its
area, with the Pareto front drawn as a staircase and its points labelled by their config values."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _label(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def plot_workload(label: str, rows: list[dict[str, Any]], front: list[dict[str, Any]], metric: str,
                  path: Path) -> Path:
    """One workload's cycles vs area scatter with its front; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in rows if r["status"] == "ok" and r.get("area") is not None and r["tlm_cycles"]]
    others = [r for r in pts if not r.get("on_front")]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    try:
        ax.scatter([r["area"] for r in others], [r["tlm_cycles"] for r in others], s=22, color="0.6",
                   label="dominated", zorder=2)
        fx = [r["area"] for r in front]
        fy = [r["tlm_cycles"] for r in front]
        ax.scatter(fx, fy, s=40, color="tab:red", label="Pareto front", zorder=3)
        if front:
            ax.step(fx, fy, where="post", color="tab:red", linewidth=1.2, zorder=1)
        for r in front:
            ax.annotate(_label(r["params"]), (r["area"], r["tlm_cycles"]), textcoords="offset points",
                        xytext=(5, 4), fontsize=7)
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
        ax.set_ylabel("TLM cycles (= RTL cycles)")
        ax.grid(True, alpha=0.3)
        if pts:
            ax.legend(loc="upper right")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return path


def plot_fronts(rows: list[dict[str, Any]], fronts: dict[str, list[dict[str, Any]]], metric: str,
                out_dir: Path) -> list[Path]:
    """``pareto-<workload>.png`` in ``out_dir`` for every workload; returns their paths."""
    return [plot_workload(label, [r for r in rows if r["workload"] == label], front, metric,
                          out_dir / f"pareto-{label}.png") for label, front in fronts.items()]
