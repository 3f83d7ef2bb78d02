"""The decode step's cost against context length: charlm's one decode Program at ``t`` tokens, 1..128,
on the traced TLM (cycle-exact to the RTL).

For each ``t`` the step runs with the int8 reference's cache of the training text's first ``t - 1``
characters and its ``t``-th as the token, and its logits are checked against the reference. The
cycles are split as :func:`cosim.generate_run.step_split` splits them: the load unit streaming the
parameters (weights), the load and store units on the KV cache, the compute unit (GEMM and ALU);
the units overlap, so the three are each unit's share, not a partition of the total.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from compiler.errors import CompileError
from compiler.networks import charlm as C
from compiler.networks import charlm_decode as D
from compiler.networks import charlm_int8 as Q
from cosim import models
from cosim.bench.scaling import derived_config
from cosim.generate_run import CLOCK_MHZ, step_split
from hw.config import HwConfig

QUICK_CONTEXTS = (1, 2, 16, 17, 32, 48, 64, 96, 112, 128)
PORT_READS = 4   # read bursts in flight of the port variant (as ``quad``'s port)


def port_variant(cfg: HwConfig) -> HwConfig:
    """``cfg`` with :data:`PORT_READS` read bursts in flight on its one DRAM port (still one core): how
    the curve moves with the port's bursts in flight. The step itself takes one core only."""
    reads = max(cfg.dram_reads_in_flight, PORT_READS)
    return derived_config(cfg, f"{cfg.name}_r{reads}", f"{cfg.name} with {reads} read bursts in flight",
                          dram_reads_in_flight=reads)


def measure_decode(cfg: HwConfig, quick: bool = False) -> dict[str, Any]:
    """Rows per context length (every one of 1..128; ``quick``: :data:`QUICK_CONTEXTS`); ``{}`` on a
    config the step cannot take (it needs one core and a block of 16)."""
    try:
        step = D.compile_decode(cfg) if cfg.name != "default" else D.decode_step_program("default")
    except CompileError:  # a config the decode step cannot take has no rows
        return {}
    print(f"[{cfg.name}] charlm decode step: cycles against context length on the traced TLM", file=sys.stderr,
          flush=True)
    q = Q.load()
    toks = C.encode(C.split()[0][:C.CONTEXT])
    ref = Q.int8_forward(q, toks)
    cache, _ = Q.prefill(q, toks)
    rows = []
    for t in (QUICK_CONTEXTS if quick else range(1, C.CONTEXT + 1)):
        kv = step.empty_cache()
        for h in range(C.HEADS):   # the reference's rows 0..t-2 of each head's K and V
            kv[h * C.CONTEXT:h * C.CONTEXT + t - 1] = cache.k[:t - 1, h * cfg.block:(h + 1) * cfg.block]
            kv[(C.HEADS + h) * C.CONTEXT:(C.HEADS + h) * C.CONTEXT + t - 1] = \
                cache.v[:t - 1, h * cfg.block:(h + 1) * cfg.block]
        prog = D.step_program(step, t, int(toks[t - 1]), kv)
        tl = models.tlm_traced(prog)
        res = tl.result
        agree = res.error is None and np.array_equal(step.logits(res.outputs["out"]), ref[t - 1])
        split = step_split(prog, tl)
        rows.append({"t": t, "cycles": res.cycles, "dma_rd_bytes": res.counters.get("dma_rd_bytes", 0),
                     "dma_wr_bytes": res.counters.get("dma_wr_bytes", 0), **split, "agree": agree})
    cyc = [r["cycles"] for r in rows]
    return {"config": cfg.name, "clock_mhz": CLOCK_MHZ, "pieces": [[p.lo, p.hi] for p in step.dynamic.pieces],
            "rows": rows, "agree": all(r["agree"] for r in rows),
            "cycles_per_context_token": (cyc[-1] - cyc[0]) / max(1, rows[-1]["t"] - rows[0]["t"]),
            "tokens_per_s_at_max": CLOCK_MHZ * 1e6 / cyc[-1]}


def table_lines(res: dict[str, Any], variants: list[dict[str, Any]] = ()) -> list[str]:
    """The section as a printed table (every 16th context length and the ends, when all were run), and a
    line per ``variants`` result (the same step on a derived config) comparing its cycles."""
    if not res:
        return []
    rows = res["rows"]
    shown = [r for r in rows if len(rows) <= 16 or r["t"] in (1, 2, C.CONTEXT) or r["t"] % 16 == 0]
    out = [f"charlm decode step ({res['config']}, TLM = RTL cycles): cycles per token against context length; "
           f"units overlap, so weights + KV + compute exceed the total",
           f"{'context':>8}{'cycles':>9}{'tok/s@' + str(res['clock_mhz']) + 'MHz':>14}{'weights cyc':>13}"
           f"{'KV cyc':>9}{'compute cyc':>13}{'weight B':>10}{'KV B':>8}{'DRAM B':>9}{'agree':>7}"]
    for r in shown:
        out.append(f"{r['t']:>8}{r['cycles']:>9,}{res['clock_mhz'] * 1e6 / r['cycles']:>14,.0f}{r['weights']:>13,}"
                   f"{r['kv']:>9,}{r['compute']:>13,}{r['weights_bytes']:>10,}{r['kv_bytes']:>8,}"
                   f"{r['dma_rd_bytes'] + r['dma_wr_bytes']:>9,}{'yes' if r['agree'] else 'NO':>7}")
    out.append(f"  {res['cycles_per_context_token']:.1f} more cycles per token of context; "
               f"{res['tokens_per_s_at_max']:,.0f} tokens/s at the full context of {C.CONTEXT}")
    for v in variants:
        by_t = {r["t"]: r["cycles"] for r in v["rows"]}
        pairs = [(r["t"], r["cycles"], by_t[r["t"]]) for r in shown if r["t"] in by_t]
        out.append(f"  on {v['config']}: " + ", ".join(f"{a:,} -> {b:,} ({a / b:.2f}x) at {t}" for t, a, b in pairs
                                                   if t in (1, C.CONTEXT // 2, C.CONTEXT) or len(pairs) <= 3)
                   + f"; {v['cycles_per_context_token']:.1f} more cycles per token of context"
                   + ("" if v["agree"] else "; logits DIFFER from the reference"))
    return out


def plot(res: dict[str, Any], path: Path, variants: list[dict[str, Any]] = ()) -> Path | None:
    """Cycles per token against context length, with the three units' shares, and the totals of
    ``variants`` (the same step on derived configs)."""
    if not res:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    t = [r["t"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(t, [r["cycles"] for r in rows], "o-", ms=3, label="cycles per token (TLM = RTL)")
    for key, label in (("weights", "load unit: weights"), ("kv", "load + store: KV cache"),
                       ("compute", "compute unit: GEMM + ALU")):
        ax.plot(t, [r[key] for r in rows], "--", label=label)
    for v in variants:
        ax.plot([r["t"] for r in v["rows"]], [r["cycles"] for r in v["rows"]], "s-", ms=2,
                label=f"cycles per token on {v['config']}")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("cycles")
    ax.set_ylim(bottom=0)
    ax.set_title(f"charlm decode step on {res['config']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
