"""Calibrating the TLM's timing overheads against RTL micro-benchmarks (docs/microarch.md, the timing model).

Three steps, each usable on its own:

* :func:`micro_benchmarks` builds small hand-made Programs for a config, each isolating
  a few costs: a DMA size sweep (LOAD and STORE of 1 vector up to several MAX_BURSTs,
  4 KiB crossings, several rows, padding), an ALU length sweep (single instructions and
  back-to-back chains), token hand-offs (latency, a full token queue), load/store
  contention on the port, FETCH (many bursts, full queues) and the error paths (START
  check, misaligned INSN_ADDR, a range fault with a burst under way, a deadlock).
* :func:`observe` turns a RunResult into the observation vector the fit matches:
  ``cycles`` plus every counter (busy and stall counters separate EXECUTE lengths from
  the per-instruction overheads).
* :func:`fit` finds the overhead constants (``Timing.overhead_fields()``) that make the
  TLM reproduce the RTL's observations: integer Gauss-Newton on the TLM itself (the
  Jacobian by +1 finite differences, a minimum-norm least-squares step, rounded), then
  a +-1 coordinate search, starting from the defaults. When the TLM's structure
  matches the RTL (as it does today) the fit returns the defaults with zero residuals;
  constants the benchmarks cannot tell apart (e.g. ``insn_pop_cycles`` vs
  ``token_pop_cycles``, which only ever appear as a sum in CYCLES) are kept at their
  defaults by the minimum-norm step.

``cosim calibrate --config NAME [--write]`` runs all three and prints the residuals;
``--write`` stores ``hw/configs/<name>.timing.json`` beside the config (read by the TLM
by default) only when the fitted values differ from the defaults.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from hw import csr
from hw.assembler import Assembler, Tensor, with_regs
from hw.config import HwConfig
from hw.isa import ALU_OPS, Alu, Finish, Instruction, Load, Store
from hw.program import Program
from hw.result import RunResult
from cosim.models import Timing, calibration_path

COUNTERS = tuple(c.lower() for c in csr.COUNTERS)  # every counter, as the models report them
OBSERVED = ("cycles",) + COUNTERS


@dataclass
class Bench:
    """One micro-benchmark: a Program and the group of costs it measures."""

    name: str
    group: str
    program: Program


# ---- micro-benchmarks ---------------------------------------------------------------------------
def _input_vectors(cfg: HwConfig) -> int:
    """Vectors of the input and output tensors: room for several max bursts per row and rows
    crossing 4 KiB pages."""
    return max(64, 3 * 4096 // cfg.acc_vec_bytes + 16)


def _bench_asm(cfg: HwConfig, name: str) -> tuple[Assembler, Tensor, Tensor]:
    """An assembler with the benchmarks' input ``a`` (int32 vectors) and output ``out``."""
    nvec = _input_vectors(cfg)
    a_data = (np.arange(nvec * cfg.lanes, dtype=np.int64) % 1000 - 500).astype(np.int32).reshape(nvec, cfg.lanes)
    asm = Assembler(cfg, f"cal-{name}")
    a = asm.input("a", a_data)
    out = asm.output("out", (nvec, cfg.lanes))
    return asm, a, out


def _bench_program(cfg: HwConfig, name: str, insns: list[Instruction]) -> Program:
    """A benchmark Program: every LOAD reads relative to ``a``, every STORE writes relative to ``out``
    (their ``dram_base`` is an offset in vectors)."""
    asm, a, out = _bench_asm(cfg, name)
    for i in insns:
        asm.add(i, base=a if isinstance(i, Load) else out if isinstance(i, Store) else None)
    return asm.program()


def _load(x: int, y: int = 1, off: int = 0, stride: int | None = None, sram: int = 0, **kw: Any) -> Load:
    """A LOAD ``off`` vectors into the input (see :func:`_bench_program`)."""
    return Load(sram_base=sram, dram_base=off, y_size=y, x_size=x, x_stride=x if stride is None else stride, **kw)


def _store(x: int, y: int = 1, off: int = 0, stride: int | None = None, sram: int = 0, **kw: Any) -> Store:
    """A STORE ``off`` vectors into the output (see :func:`_bench_program`)."""
    return Store(sram_base=sram, dram_base=off, y_size=y, x_size=x, x_stride=x if stride is None else stride, **kw)


def _alu(n: int, dst: int = 0, **kw: Any) -> Alu:
    io, ii = (1, n) if n <= 64 else (n // 64, 64)
    return Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, iter_out=io if n else 0, iter_in=ii if n else 0,
               dst_base=dst, dst_factor_out=0, dst_factor_in=0, **kw)


def micro_benchmarks(cfg: HwConfig) -> list[Bench]:
    """The micro-benchmark Programs of ``cfg`` (deterministic; about 40 small Programs)."""
    depth = cfg.acc_depth
    bpa = max(1, cfg.acc_vec_bytes // cfg.bus_bytes)     # beats per accumulator vector
    bpo = max(1, cfg.out_vec_bytes // cfg.bus_bytes)     # beats per output vector
    vmax = max(1, cfg.max_burst // bpa)                  # vectors per max read burst
    omax = max(1, cfg.max_burst // bpo)
    nvec = _input_vectors(cfg)
    cap = min(depth, nvec)
    out: list[Bench] = []

    def add(name: str, group: str, insns: list[Instruction]) -> None:
        out.append(Bench(name, group, _bench_program(cfg, name, insns + [Finish()])))

    # DMA size sweep: LOAD and STORE of growing rows (one burst, max bursts, a tail)
    for x in sorted({1, 2, 3, vmax, vmax + 1, 2 * vmax + 3, min(cap, 5 * vmax + 1)}):
        if x <= cap:
            add(f"load-x{x}", "dma", [_load(x)])
    for x in sorted({1, 2, 3, omax, omax + 1, 2 * omax + 3, min(cap, 5 * omax + 1)}):
        if x <= cap:
            add(f"store-x{x}", "dma", [_store(x)])
    page_vecs = 4096 // cfg.acc_vec_bytes
    probe, a, _ = _bench_asm(cfg, "probe")
    va = probe.address(a, insn_count=2) // cfg.acc_vec_bytes
    cross = (va // page_vecs + 1) * page_vecs - 1 - va         # last vector before a 4 KiB boundary
    x = min(cap // 2, 2 * vmax + 1)
    if 0 <= cross and cross + 2 * x + page_vecs // 2 < nvec:
        add("load-4k-rows", "dma", [_load(x, 2, off=cross, stride=x + page_vecs // 2)])
    add("load-rows", "dma", [_load(2, 3, stride=5)])
    add("store-rows", "dma", [_store(2, 3, stride=5)])
    # padding: one cycle per pad vector, in tile order between the rows' bursts
    add("load-pad", "dma", [_load(2, 2, stride=4, y_pad_0=1, y_pad_1=1, x_pad_0=2, x_pad_1=1)])
    add("load-pad-only", "dma", [_load(0, 0, y_pad_0=2, x_pad_0=3)])
    add("load-empty", "dma", [_load(0, 0)])
    add("store-empty", "dma", [_store(0, 0)])

    # ALU length sweep and back-to-back chains (period E + overheads)
    for n in (0, 1, 2, 7, 64, 200):
        add(f"alu-n{n}", "alu", [_alu(n)])
    for n, k in ((1, 4), (5, 6), (30, 3)):
        add(f"alu-chain-n{n}-k{k}", "alu", [_alu(n) for _ in range(k)])

    # tokens: producer -> consumer latency, both directions, and a full token queue
    add("tok-l2c", "tokens", [_load(1, push_next=True), _alu(3, pop_prev=True)])
    add("tok-c2s-s2c", "tokens", [_alu(2, push_next=True), _store(1, pop_prev=True, push_prev=True),
                                  _alu(2, pop_next=True)])
    add("tok-c2l", "tokens", [_alu(5, push_prev=True), _load(1, pop_next=True)])
    d = cfg.token_queue_depth
    add("tok-full", "tokens", [_load(0, 0, push_next=True) for _ in range(d + 2)]
        + [_alu(20, pop_prev=True) for _ in range(d + 2)])
    # compute waits for the store, the store for compute (a ping-pong)
    add("tok-pingpong", "tokens", sum(([_alu(4, push_next=True, pop_next=k > 0),
                                        _store(1, pop_prev=True, push_prev=True)] for k in range(3)), [])
        + [_alu(1, pop_next=True)])

    # port contention: a long store chain cut by a load, a long load chain delaying a store
    xs, xl = min(cap, 4 * omax), min(cap, 4 * vmax)
    add("contend-store-load", "contention", [_store(xs), _load(2, sram=cap // 2)])
    add("contend-load-store", "contention", [_load(xl), _store(2, sram=cap // 2)])
    add("contend-three", "contention", [_store(xs), _load(xl), _store(3, off=xs, sram=1)])

    # FETCH: many bursts, a full compute queue, instructions for all three queues
    k = max(2, cfg.max_burst // max(1, 16 // cfg.bus_bytes))
    add("fetch-many", "fetch", [_alu(1) for _ in range(3 * k + 1)])
    add("fetch-full-queue", "fetch", [_alu(40) for _ in range(cfg.compute_queue_depth + 3)])
    add("fetch-mixed", "fetch", [_load(1), _alu(2), _store(1), _load(1), _store(1), _alu(1)] * 2)

    # errors: START check, misaligned INSN_ADDR, a range fault while a burst is under way, deadlock
    out.append(Bench("err-start-check", "errors",
                     with_regs(_bench_program(cfg, "start-check", [Finish()]), INSN_COUNT=0)))
    out.append(Bench("err-insn-misaligned", "errors", with_regs(
        _bench_program(cfg, "insn-misaligned", [Finish(), Finish()]), INSN_ADDR_LO=lambda v: v + 8)))
    add("err-range-in-burst", "errors", [_store(xs), Alu(alu_op=ALU_OPS["ADD"], use_imm=True, iter_out=1,
                                                          iter_in=2, dst_base=depth - 1, dst_factor_in=1)])
    add("err-deadlock", "errors", [_alu(3, pop_prev=True)])
    add("err-deadlock-push", "errors", [_load(0, 0, push_next=True) for _ in range(d + 1)])
    return out


# ---- observations -------------------------------------------------------------------------------
def observe(res: RunResult) -> np.ndarray:
    """``cycles`` and every counter of a run, as one integer vector (order: :data:`OBSERVED`)."""
    return np.array([res.cycles or 0] + [int(res.counters.get(k, 0)) for k in COUNTERS], dtype=np.int64)


def run_rtl(benches: Sequence[Bench], cfg: HwConfig) -> list[RunResult]:
    """Every benchmark on the RTL (Verilator, fast DRAM model), in one simulator process."""
    from cosim import models

    return models.rtl([bm.program for bm in benches], cfg, mem="fast")


def run_tlm(benches: Sequence[Bench], timing: Timing) -> list[RunResult]:
    from cosim import models

    return [models.tlm(bm.program, timing=timing) for bm in benches]


# ---- the fit ------------------------------------------------------------------------------------
@dataclass
class FitResult:
    """What :func:`fit` found."""

    config: str
    values: dict[str, int]                       # the fitted overhead constants
    defaults: dict[str, int]                     # the Timing defaults (the starting point)
    names: list[str]                             # benchmark names
    rtl: np.ndarray                              # (benchmarks, OBSERVED) RTL observations
    tlm: np.ndarray                              # the TLM's with the fitted values
    rank: int = 0                                # rank of the Jacobian at the solution
    identifiable: list[str] = field(default_factory=list)  # constants some observation depends on
    iterations: int = 0
    wall_s: float = 0.0

    @property
    def residuals(self) -> np.ndarray:
        return self.tlm - self.rtl

    @property
    def exact(self) -> bool:
        return not self.residuals.any()

    @property
    def changed(self) -> dict[str, int]:
        return {k: v for k, v in self.values.items() if v != self.defaults[k]}

    def cycle_errors_pct(self) -> np.ndarray:
        r = self.rtl[:, 0].astype(float)
        return 100.0 * (self.tlm[:, 0] - r) / np.where(r == 0, 1, r)

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "values": self.values, "changed": self.changed, "exact": self.exact,
                "rank": self.rank, "identifiable": self.identifiable, "iterations": self.iterations,
                "observed": list(OBSERVED),
                "benchmarks": [{"name": n, "rtl": r.tolist(), "tlm": t.tolist()}
                               for n, r, t in zip(self.names, self.rtl, self.tlm)]}


def fit(cfg: HwConfig, benches: Sequence[Bench], rtl: Sequence[RunResult], start: dict[str, int] | None = None,
        fields: Sequence[str] | None = None, max_iter: int = 8,
        log: Callable[[str], None] | None = None) -> FitResult:
    """Fit the overhead constants ``fields`` (default: all) so the TLM reproduces ``rtl``.

    Integer Gauss-Newton: at the current point p, the Jacobian J[:, k] = obs(p + e_k) -
    obs(p) (the TLM is piecewise linear in its constants), the step is the minimum-norm
    least-squares solution of J d = rtl - obs(p), rounded; when that does not lower the
    squared residual a +-1 coordinate search does; stop when neither improves.
    """
    t0 = time.perf_counter()
    base = Timing.from_config(cfg, calibration=False)
    defaults = base.overheads()
    names = list(fields or Timing.overhead_fields())
    p = dict(defaults)
    p.update(start or {})
    target = np.stack([observe(r) for r in rtl]).astype(np.int64)

    cache: dict[tuple[int, ...], np.ndarray] = {}

    def obs(vals: dict[str, int]) -> np.ndarray:
        key = tuple(vals[k] for k in names)
        if key not in cache:
            T = base.with_overheads({k: vals[k] for k in names}, "fit")
            cache[key] = np.stack([observe(r) for r in run_tlm(benches, T)]).astype(np.int64)
        return cache[key]

    def sse(vals: dict[str, int]) -> int:
        return int(((obs(vals) - target) ** 2).sum())

    def jacobian(vals: dict[str, int]) -> np.ndarray:
        y0 = obs(vals).ravel()
        cols = []
        for k in names:
            v = dict(vals)
            v[k] += 1
            cols.append(obs(v).ravel() - y0)
        return np.stack(cols, axis=1).astype(float)

    it = 0
    cur = sse(p)
    while cur and it < max_iter:
        it += 1
        J = jacobian(p)
        r = (target - obs(p)).ravel().astype(float)
        d, *_ = np.linalg.lstsq(J, r, rcond=None)
        cand = {k: max(0, int(round(p[k] + dk))) for k, dk in zip(names, d)}
        c = sse(cand)
        if c < cur:
            p, cur = cand, c
            if log:
                log(f"  step {it}: least squares -> squared residual {cur}")
            continue
        best = None
        for k in names:
            for s in (-1, 1):
                v = dict(p)
                v[k] = max(0, v[k] + s)
                c = sse(v)
                if c < cur and (best is None or c < best[0]):
                    best = (c, v)
        if best is None:
            break
        cur, p = best
        if log:
            log(f"  step {it}: coordinate search -> squared residual {cur}")
    J = jacobian(p)
    ident = [k for k, col in zip(names, J.T) if col.any()]
    return FitResult(cfg.name, {k: p[k] for k in names}, {k: defaults[k] for k in names},
                     [bm.name for bm in benches], target, obs(p), int(np.linalg.matrix_rank(J)), ident, it,
                     time.perf_counter() - t0)


def calibrate(cfg: HwConfig, log: Callable[[str], None] | None = None) -> FitResult:
    """Micro-benchmarks of ``cfg`` on the RTL, then the fit."""
    benches = micro_benchmarks(cfg)
    if log:
        log(f"{cfg.name}: {len(benches)} micro-benchmarks on the RTL (Verilator, fast DRAM model)")
    rtl = run_rtl(benches, cfg)
    bad = [(bm.name, r.extra.get("failure")) for bm, r in zip(benches, rtl) if r.cycles is None]
    if bad:
        raise RuntimeError(f"RTL runs without a cycle count: {bad}")
    if log:
        log(f"{cfg.name}: fitting {len(Timing.overhead_fields())} overhead constants")
    return fit(cfg, benches, rtl, log=log)


def write_timing(cfg: HwConfig, res: FitResult, path: str | Path | None = None) -> Path | None:
    """Write the fitted constants that differ from the defaults to ``<config>.timing.json``.

    Returns None (and writes nothing) when the fit reproduces the defaults: a file that
    restates them would only hide a later change of the defaults. An existing file is then
    left alone too (the caller reports it).
    """
    if not res.changed:
        return None
    p = Path(path) if path else calibration_path(cfg)
    data: dict[str, Any] = {"_measured": f"cosim calibrate --config {cfg.name}: {len(res.names)} RTL "
                                         f"micro-benchmarks (cosim/calibrate.py), Verilator, fast DRAM model; "
                                         f"residuals: {'none' if res.exact else int(abs(res.residuals).sum())}"}
    data.update(res.changed)
    p.write_text(json.dumps(data, indent=2) + "\n")
    return p
