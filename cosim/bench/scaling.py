"""The benchmark's multi-core rows: how cycles scale with cores until DRAM bandwidth stops them.

Three workloads, each compiled for 1, 2 and 4 cores of the same core (the first benched config with
``num_cores`` replaced): the ResNet-18 layer (compute-bound: 115.6 M MACs for 0.7 MB; each core takes
its share of the output channels), a 256^3 GEMM (between the two) and a DRAM-bound elementwise add
(the one shared AXI port is the limit). Per point: TLM cycles, the RTL's cycles on the raw harness
(they must be equal), the outputs checked against the golden path, and the DRAM bound: the cycles the
one port is busy with the run's bursts (each burst holds it for latency + beats + 1 cycles, one burst
at a time), which no number of cores can go below. The plot draws cycles against cores with the ideal
``T1 / n`` line and that bound.

Also the golden path's wall time on 4 cores, one thread per core vs ``COSIM_SINGLE_THREAD=1``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hw.config import HwConfig, parse_config
from hw.result import RunResult
from cosim import models
from cosim.sweep.workloads import Workload, build_workload

CORES = (1, 2, 4)
# (label, what bounds it, workload): sizes chosen so that the bound is clear on the default config
WORKLOADS = [
    ("resnet_layer", "compute", Workload("resnet_layer", "example", "conv2d_resnet")),
    ("gemm_256", "mixed", Workload("gemm_256", "operator", "matmul", {"M": 256, "K": 256, "N": 256})),
    ("vadd_128k", "DRAM", Workload("vadd_128k", "example", "vadd_large")),
]


def with_cores(cfg: HwConfig, n: int) -> HwConfig:
    """``cfg`` with ``n`` cores (named ``<name>x<n>``; ``cfg`` itself for its own core count).

    Several cores get at least one read burst in flight per core on the one DRAM port and at least two
    write bursts (as the shipped ``quad`` and ``small2`` do): with one burst at a time the port, not the
    cores, sets the scaling. (Two writes in flight already let the STOREs post back to back on every
    workload here: four gave no fewer cycles on ``quad``.)
    """
    if n == cfg.num_cores:
        return cfg
    reads = max(cfg.dram_reads_in_flight, n) if n > 1 else cfg.dram_reads_in_flight
    writes = max(cfg.dram_writes_in_flight, 2) if n > 1 else cfg.dram_writes_in_flight
    return derived_config(cfg, f"{cfg.name}x{n}", f"{cfg.name} with {n} cores", num_cores=n,
                          dram_reads_in_flight=reads, dram_writes_in_flight=writes)


def derived_config(cfg: HwConfig, name: str, description: str, **fields: Any) -> HwConfig:
    """``cfg`` with ``fields`` changed, under a new name, checked as a config file is."""
    data = {k: v for k, v in asdict(cfg).items() if k != "source"}
    return parse_config({**data, **fields, "name": name, "description": description})


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure_scaling(cfg: HwConfig, rtl: bool = True) -> dict[str, Any]:
    """The rows (one per workload x core count) and the golden threading comparison."""
    rows = []
    for label, bound, w in WORKLOADS:
        for n in CORES:
            c = with_cores(cfg, n)
            _log(f"[scaling] {label} on {n} core(s): compile, TLM" + (", RTL (raw harness)" if rtl else ""))
            built = build_workload(w, c, 0)
            tlm, port_busy = _traced_tlm(built.program)
            raw = models.raw(built.program, c) if rtl else None
            problems = []
            for side, res in (("tlm", tlm), ("rtl", raw)):
                if res is None:
                    continue
                why = f"{res.error.get('name')}: {res.error.get('message')}" if res.error else \
                    built.check(res.outputs)
                if why:
                    problems.append(f"{side}: {why}")
            if raw is not None and raw.cycles != tlm.cycles:
                problems.append(f"TLM {tlm.cycles} cycles, RTL {raw.cycles}")
            k = tlm.counters
            beats = (k["dma_rd_bytes"] + k["dma_wr_bytes"] + k["fetch_bytes"]) // cfg.bus_bytes
            rows.append({"workload": label, "bound": bound, "cores": n, "config": c.name,
                         "tlm_cycles": tlm.cycles, "rtl_cycles": None if raw is None else raw.cycles,
                         "dram_beats": beats, "port_busy": port_busy, "macs": built.macs,
                         "agree": not problems, "problems": problems})
        base = next(r["tlm_cycles"] for r in rows if r["workload"] == label and r["cores"] == 1)
        for r in rows:
            if r["workload"] == label:
                r["speedup"] = base / r["tlm_cycles"] if r["tlm_cycles"] else None
    return {"rows": rows, "golden_threads": golden_threads(cfg)}


def _traced_tlm(program: Any) -> tuple[RunResult, int]:
    """The TLM's result of ``program`` and the cycles its bursts held the port (from the trace)."""
    tl = models.tlm_traced(program)
    busy, upto = 0, 0
    for s, e in sorted((s, e) for _, _, s, e, _ in tl.tracer.bursts()):  # bursts in flight overlap: the union
        busy += max(0, e - max(s, upto))
        upto = max(upto, e)
    return tl.result, busy


def golden_threads(cfg: HwConfig, reps: int = 3) -> dict[str, Any]:
    """The golden path of the GEMM workload on 4 cores: wall time with one thread per core and with
    ``COSIM_SINGLE_THREAD=1`` (median of ``reps``, alternated), outputs equal."""
    from compiler.examples import make_case

    c = with_cores(cfg, 4)
    w = WORKLOADS[0][2]
    case = make_case(w.name, c, w.params, seed=0)
    walls: dict[str, list[float]] = {"threads": [], "one_thread": []}
    outs: dict[str, Any] = {}
    old = os.environ.get("COSIM_SINGLE_THREAD")
    try:
        for rep in range(reps):
            for mode in (("threads", "one_thread") if rep % 2 == 0 else ("one_thread", "threads")):
                os.environ["COSIM_SINGLE_THREAD"] = "1" if mode == "one_thread" else "0"
                t0 = time.perf_counter()
                outs[mode] = case.golden()
                walls[mode].append(time.perf_counter() - t0)
    finally:
        if old is None:
            os.environ.pop("COSIM_SINGLE_THREAD", None)
        else:
            os.environ["COSIM_SINGLE_THREAD"] = old
    med = {m: statistics.median(v) for m, v in walls.items()}
    equal = all((outs["threads"][k] == outs["one_thread"][k]).all() for k in outs["threads"])
    return {"workload": w.label, "cores": 4, "threads_s": med["threads"], "one_thread_s": med["one_thread"],
            "ratio": med["threads"] / med["one_thread"], "outputs_equal": bool(equal)}


def table_lines(res: dict[str, Any]) -> list[str]:
    """The scaling rows for people."""
    rows = res.get("rows") or []
    if not rows:
        return []
    head = (f"{'workload':<13}{'bound':<9}{'cores':>6}{'TLM cycles':>12}{'RTL cycles':>12}{'speedup':>9}"
            f"{'DRAM beats':>12}{'beats/cyc':>10}{'port busy':>11}{'port %':>8}{'ok':>4}")
    out = ["several cores: cycles on 1, 2, 4 cores (DRAM bound = cycles the one port is busy with the bursts; "
           "beats/cyc = the port's data beats per cycle)",
           head, "-" * len(head)]
    for r in rows:
        rtl = "-" if r["rtl_cycles"] is None else str(r["rtl_cycles"])
        out.append(f"{r['workload']:<13}{r['bound']:<9}{r['cores']:>6}{r['tlm_cycles'] or 0:>12}{rtl:>12}"
                   f"{r['speedup'] or 0:>8.2f}x{r['dram_beats']:>12}{r['dram_beats'] / (r['tlm_cycles'] or 1):>10.3f}"
                   f"{r['port_busy']:>11}"
                   f"{100 * r['port_busy'] / (r['tlm_cycles'] or 1):>7.1f}%{'yes' if r['agree'] else 'NO':>4}")
        out += [f"  {p}" for p in r["problems"]]
    g = res.get("golden_threads")
    if g:
        out.append(f"golden path, {g['workload']} on {g['cores']} cores: one thread per core {g['threads_s']:.3f} s, "
                   f"COSIM_SINGLE_THREAD=1 {g['one_thread_s']:.3f} s (ratio {g['ratio']:.2f}), "
                   f"outputs equal {g['outputs_equal']}")
    return out


def plot(res: dict[str, Any], path: Path) -> Path:
    """Cycles against cores per workload, with the ideal ``T1 / n`` and the DRAM bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    labels = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(1, len(labels), figsize=(6 * len(labels), 4.2), squeeze=False)
    for ax, label in zip(axes[0], labels):
        rs = [r for r in rows if r["workload"] == label]
        n = [r["cores"] for r in rs]
        cyc = [r["tlm_cycles"] for r in rs]
        ax.plot(n, cyc, "o-", label="TLM = RTL cycles")
        ax.plot(n, [cyc[0] / k for k in n], "--", color="grey", label="ideal T1 / n")
        bound = max(r["port_busy"] for r in rs)
        ax.axhline(bound, color="red", linestyle=":", label=f"DRAM bound (port busy {bound} cycles)")
        ax.set_xticks(n)
        ax.set_xlabel("cores")
        ax.set_ylabel("cycles")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{label} ({rs[0]['bound']}-bound)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
