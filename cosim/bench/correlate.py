"""TLM vs RTL cycles per Program and config: the table, the plot, and where the error is
largest, the per-unit busy/stall counters of both models side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hw import csr

UNIT_COUNTERS = [c.lower() for c in csr.COUNTERS]  # every counter, as the models report them


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    head = f"{'config':<9}{'program':<18}{'RTL cycles':>12}{'TLM cycles':>12}{'error %':>9}"
    out = [head, "-" * len(head)]
    for r in rows:
        e = r["error_pct"]
        out.append(f"{r['config']:<9}{r['name']:<18}{r['rtl_cycles'] or 0:>12}{r['tlm_cycles'] or 0:>12}"
                   f"{'-' if e is None else format(e, '+.3f'):>9}")
    return out


def worst(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    cand = [r for r in rows if r["error_pct"] is not None]
    return max(cand, key=lambda r: abs(r["error_pct"])) if cand else None


def breakdown_lines(row: dict[str, Any]) -> list[str]:
    """Per-unit counters of TLM and RTL for one Program, side by side."""
    rtl, tlm = row["counters"]["rtl"], row["counters"]["tlm"]
    out = [f"per-unit breakdown of the largest error: {row['name']} on {row['config']} "
           f"(error {row['error_pct']:+.3f} %, RTL {row['rtl_cycles']} / TLM {row['tlm_cycles']} cycles)",
           f"  {'counter':<15}{'RTL':>12}{'TLM':>12}{'TLM-RTL':>10}"]
    for c in UNIT_COUNTERS:
        a, b = rtl.get(c), tlm.get(c)
        d = "" if a is None or b is None else f"{b - a:+d}"
        out.append(f"  {c:<15}{'-' if a is None else a:>12}{'-' if b is None else b:>12}{d:>10}")
    return out


def plot(rows: list[dict[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    configs = sorted({r["config"] for r in rows})
    for c in configs:
        rs = [r for r in rows if r["config"] == c and r["rtl_cycles"] and r["tlm_cycles"]]
        ax.loglog([r["rtl_cycles"] for r in rs], [r["tlm_cycles"] for r in rs], "o", label=c, alpha=0.8)
        ax2.semilogx([r["rtl_cycles"] for r in rs], [r["error_pct"] for r in rs], "o", label=c, alpha=0.8)
    lo = min(r["rtl_cycles"] for r in rows if r["rtl_cycles"])
    hi = max(r["rtl_cycles"] for r in rows if r["rtl_cycles"])
    ax.loglog([lo, hi], [lo, hi], "k--", lw=1, label="TLM = RTL")
    ax.set_xlabel("RTL cycles")
    ax.set_ylabel("TLM cycles")
    ax.set_title("TLM vs RTL cycles per Program")
    ax.legend()
    ax.grid(alpha=0.3, which="both")
    for y in (-3, -1, 1, 3):
        ax2.axhline(y, color="r" if abs(y) == 3 else "orange", lw=0.8, ls=":")
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_xlabel("RTL cycles")
    ax2.set_ylabel("TLM error vs RTL (%)")
    ax2.set_title("cycle error (targets: mean <= 1 %, max <= 3 %)")
    ax2.legend()
    ax2.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
