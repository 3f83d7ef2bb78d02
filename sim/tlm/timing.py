"""The TLM's timing model: ONE frozen object holding every number the TLM's clock uses.

Time is counted in accelerator clock cycles. **Cycle 0 is the START cycle** (the cycle in
which the AXI4-Lite write of ``CTRL.START`` is applied, ``s`` in docs/microarch.md "RTL
cycle costs (measured)"); ``CYCLES`` (and the RunResult's ``cycles``) is the cycle ``d`` at
whose end ``STATUS.DONE`` rises, i.e. the RTL's ``d - s``. "An event at t" is the cycle in
which it happens (the RTL's combinational decision); its register effect is visible from
``t + 1``. The counters count events in cycles ``1 .. d`` (the cycles in which the RTL is
busy).

Two kinds of parameters:

* **Config parameters** (latencies, beat size, burst length, queue depths) come
  from the hardware config (``hw/configs/<name>.json``) and are never overridden.
* **Overhead constants** are per-transaction costs of the RTL's implementation
  (arbiter grant, FSM states, register stages). Their defaults are the values measured
  on ``hw/rtl`` (Verilator and Icarus agree) with the fast DRAM model, as documented in
  docs/microarch.md "RTL cycle costs (measured)"; ``cosim calibrate`` re-measures them
  with micro-benchmarks (``cosim/calibrate.py``) and writes ``hw/configs/<name>.timing.json``
  beside the config when they differ; that file, when present, overrides the defaults
  (a JSON object ``{field: int}``; keys starting with ``_`` are comments, e.g.
  ``"_measured": "how"``).

How the model uses them (the formulas the tests derive their expectations from;
``Lr``/``Lw`` = read/write latency, ``n`` = beats):

* **Read burst** granted at ``g``: AR at ``g+1``, beats ``g+1+Lr .. g+Lr+n``; the port is
  free (and grants again) at ``g + read_burst_cycles(n) = g + rd_burst_overhead + Lr + n``.
  That free cycle is the burst's *end*: the owner sees its burst done then (FETCH
  dispatches from it, LOAD requests its next burst or leaves EXECUTE at it).
* **Write burst** granted at ``g``: AW and W beats ``g+1 .. g+n``, B at ``g+n+Lw``; the port
  is free at ``g + write_burst_cycles(n) = g + wr_burst_overhead + n + Lw`` (its end); the
  store unit continues ``b_resp_cycles`` after that end.
* **Arbitration**: in a cycle in which the port is free, it is granted to the
  highest-priority client (FETCH > LOAD > STORE) requesting in that cycle; a unit
  requests its next burst in the cycle its previous burst ended, so a unit's bursts run
  back to back unless a higher-priority client requests.
* **Fetch**: checks the instruction window at ``start_check_cycles`` (``ERR_INSN_RANGE``
  raised there), requests its first burst at ``fetch_start_cycles``; a burst holds
  ``min(max_burst // beats_per_insn, remaining, up to the 4 KiB boundary)``
  instructions; instruction k of a burst ending at ``F`` is dispatched at
  ``F + k * dispatch_cycles``, later while its queue is full (a queue is full in cycle
  ``t`` while it holds ``depth`` entries pushed before ``t`` and not popped before
  ``t - queue_latency_cycles + 1``, i.e. a pop frees the slot ``queue_latency_cycles``
  later); the next burst is requested ``dispatch_cycles`` after the last dispatch. A
  dispatch check fails in the cycle the instruction would be dispatched (not waiting
  for room in its queue).
* **Unit** (IDLE -> WAIT -> EXEC -> PUSH): an entry dispatched at ``d`` can be popped from
  ``d + queue_latency_cycles``; popped at ``p`` (IDLE, ``p >= idle_from``), WAIT begins at
  ``w = p + insn_pop_cycles`` (range checks fault at ``w``); the named tokens are taken
  in the first cycle ``tau >= w`` in which all are visible (a token pushed at ``q`` is
  visible from ``q + token_latency_cycles``); EXECUTE runs from
  ``x = tau + token_pop_cycles`` for ``E = max(min_execute_cycles, work)`` cycles; PUSH
  begins at ``x + E``: the tokens are pushed in the first cycle ``u`` in which none of the
  named token queues is full (a take at ``tau'`` frees room from
  ``tau' + token_latency_cycles``); the instruction completes at ``u`` and the unit is
  IDLE again from ``u + token_push_cycles``. So the period of a unit with work queued
  and tokens ready is ``E + insn_pop_cycles + token_pop_cycles + token_push_cycles``
  (= E + 3), and dispatch -> EXECUTE is 3 cycles.
* **EXECUTE work**: LOAD: ``pad_vector_cycles`` per padding vector in tile order,
  interleaved with each data row's read bursts (back to back), ``min_execute_cycles`` for
  an empty tile; STORE: its write bursts (+ ``b_resp_cycles`` each); ALU: until the
  ``alu_setup_cycles + iter_out*iter_in + alu_pipeline_cycles``-th cycle in which the
  accumulator ports it needs are free (LOAD writing a vector holds the write port; STORE
  reading a vector holds the source read port, which only an ALU without immediate needs),
  ``min_execute_cycles`` without iterations; GEMM (N = iter_out * iter_in * micro-ops): until
  the ``N + gemm_pipeline_cycles``-th cycle in which LOAD does not write the accumulator (its
  only shared port), ``min_execute_cycles`` when N = 0; a faulting iteration k raises its error
  in the ``(k + 1 + gemm_check_cycles)``-th such cycle; FINISH: until the first
  cycle ``y`` (>= x) in which the load and store units are IDLE with empty queues and the
  port is free with no request, plus ``finish_cycles - 1`` (PUSH at ``y +
  finish_cycles``; DONE rises at the end of FINISH's PUSH cycle).
* **Counters**: ``*_BUSY`` = EXECUTE cycles (FINISH's drain included), ``*_STALL`` = WAIT
  cycles with a named token missing + PUSH cycles blocked on a full token queue (the
  mandatory WAIT/PUSH cycles are not stalls), ``COMPUTE_WAIT`` = ALU and GEMM EXECUTE cycles
  frozen on an accumulator port (up to an error's cycle), ``GEMM_BUSY`` = GEMM EXECUTE cycles
  (up to and including an error's cycle), ``GEMM_OPS`` = E stages of non-reset GEMMs,
  ``*_INSNS`` counted at the PUSH cycle, DMA byte counters per burst (LOAD's bytes are its
  entries times the buffer's entry size, ``elem_bytes``).
* **Errors**: an error raised in cycle ``e`` (range checks at WAIT entry, dispatch checks at
  the dispatch cycle; the lowest pc wins within a cycle) stops everything from
  ``e + 1``; DONE rises at the end of ``max(e + halt_cycles, end of the burst under way)``.
  The units' states in cycle ``e + 1`` still count in the busy/stall counters (and the
  owner of the burst under way stays in EXECUTE until its burst ends).
* **Deadlock**: when the stuck condition (docs/microarch.md) first holds at ``t`` and
  never changes, the error is raised at ``t + deadlock_cycles - 1`` and DONE rises at
  ``t + deadlock_cycles``.

Measurement status: every overhead default below was measured on ``hw/rtl`` (see each
field's docstring and docs/microarch.md "RTL cycle costs (measured)"), and ``cosim
calibrate`` reproduces them on every shipped config with zero residuals, so no config
ships a ``.timing.json``; the two GEMM constants are the contract's values (docs/microarch.md
"GEMM timing"), to be confirmed on ``hw/rtl/gemm.v`` when it is merged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from hw.config import CONFIG_DIR, HwConfig
from hw.isa import INSN_BYTES

# Fields filled from the hardware config (never from a calibration file).
CONFIG_FIELDS = ("read_latency", "write_latency", "bus_bytes", "max_burst", "acc_vec_bytes", "out_vec_bytes",
                 "inp_vec_bytes", "wgt_block_bytes", "uop_bytes", "load_queue_depth", "compute_queue_depth",
                 "store_queue_depth", "token_queue_depth")


class TimingError(ValueError):
    """A calibration file that is malformed or names unknown / config-derived fields."""


@dataclass(frozen=True)
class Timing:
    """Every parameter of the TLM's clock: config numbers plus named overhead constants."""

    # ---- from the hardware config --------------------------------------------------
    read_latency: int
    """Cycles from the AR handshake to the first R beat (config ``dram_read_latency``)."""
    write_latency: int
    """Cycles from the last W beat to the B response (config ``dram_write_latency``)."""
    bus_bytes: int
    """Bytes per AXI beat (config ``bus_width / 8``)."""
    max_burst: int
    """Longest INCR burst in beats (config ``max_burst``)."""
    acc_vec_bytes: int
    """DRAM bytes of one accumulator vector (what LOAD moves per vector)."""
    out_vec_bytes: int
    """DRAM bytes of one narrowed output vector (what STORE moves per vector)."""
    inp_vec_bytes: int
    """DRAM bytes of one input-buffer entry (LANES int8: what LOAD moves per input vector)."""
    wgt_block_bytes: int
    """DRAM bytes of one weight-buffer entry (BLOCK x BLOCK int8: what LOAD moves per block)."""
    uop_bytes: int
    """DRAM bytes of one micro-op (what LOAD moves per micro-op; ``hw.isa.UOP_BYTES``)."""
    load_queue_depth: int
    """Entries of the load instruction queue."""
    compute_queue_depth: int
    """Entries of the compute instruction queue."""
    store_queue_depth: int
    """Entries of the store instruction queue."""
    token_queue_depth: int
    """Tokens each of the four dependency-token queues holds."""

    # ---- overhead constants (measured on the RTL; calibratable) ------------------------
    start_check_cycles: int = 1
    """Cycle (after START at 0) in which FETCH checks the instruction window
    (``ERR_INSN_RANGE``). RTL: F_CHECK is the state of cycle s+1."""
    fetch_start_cycles: int = 2
    """Cycle in which FETCH requests its first burst (granted then on a free port; AR one
    cycle later). RTL: F_REQ in s+2, first AR handshake at s+3 (START -> first AR = 3)."""
    rd_burst_overhead: int = 1
    """Cycles a read burst holds the port beyond ``read_latency + beats``. RTL: grant at g
    (IDLE), AR at g+1, last beat g+Lr+n, IDLE (grants again) at g+Lr+n+1: occupancy Lr+n+1."""
    wr_burst_overhead: int = 1
    """Cycles a write burst holds the port beyond ``beats + write_latency``. RTL: grant at g,
    AW + W beats g+1..g+n, B at g+n+Lw, IDLE at g+n+Lw+1: occupancy Lw+n+1."""
    b_resp_cycles: int = 0
    """Cycles the store unit spends after each write burst's B (the cycle after it: the burst's end,
    the port already free) before it issues its next burst or leaves EXECUTE. With write bursts in
    flight (``dram_writes_in_flight`` > 1) a nonzero value also ends the posting: each burst then
    waits for its B. RTL: 0 (it requests in the free cycle, or after the last W beat when posting)."""
    dispatch_cycles: int = 1
    """Cycles FETCH spends dispatching one instruction. RTL: one per cycle from the cycle
    after the last beat (= the burst's end); the next burst is requested the cycle after
    the last dispatch."""
    queue_latency_cycles: int = 1
    """Cycles until a queue push (dispatch) is visible to the unit, and until a pop frees
    the slot for FETCH. RTL: insn_queue count is a register (empty/full from the next cycle)."""
    insn_pop_cycles: int = 1
    """Cycles from a unit popping its queue (the IDLE cycle) to entering WAIT. RTL: 1."""
    token_pop_cycles: int = 1
    """Cycles from the WAIT cycle in which the tokens are taken (every instruction has at
    least one WAIT cycle, tokens or not) to EXECUTE. RTL: 1 (WAIT -> EXEC at the edge)."""
    token_latency_cycles: int = 1
    """Cycles until a token push is visible to the consumer, and a take to the producer.
    RTL: token_queue count is a register (push at p, taken at p+1, EXEC from p+2)."""
    token_push_cycles: int = 1
    """Cycles from the PUSH cycle in which the tokens are pushed (every instruction has one
    PUSH cycle, tokens or not) to IDLE. RTL: 1."""
    alu_setup_cycles: int = 0
    """Cycles an ALU instruction spends in EXECUTE before its first vector. RTL: 0."""
    alu_pipeline_cycles: int = 1
    """Free cycles the ALU's pipeline needs after reading its last vector before EXECUTE
    ends. RTL: 1 (registered SRAM read; each vector is written in the cycle after its read)."""
    pad_vector_cycles: int = 1
    """Cycles LOAD spends writing one zero-padding vector. RTL: 1."""
    min_execute_cycles: int = 1
    """EXECUTE lasts at least this many cycles (an empty ALU/LOAD/STORE). RTL: 1."""
    gemm_pipeline_cycles: int = 2
    """Free cycles a GEMM's pipeline needs after the micro-op read (U) of its last iteration
    before EXECUTE ends: its A stage (indices, checks, operand reads) and its E stage (MACs,
    write). So E_gemm = N + gemm_pipeline_cycles + frozen cycles (docs/microarch.md "GEMM
    timing"; the contract value, to be measured on hw/rtl/gemm.v)."""
    gemm_check_cycles: int = 1
    """Free cycles from iteration k's micro-op read (U, its (k+1)-th free cycle of EXECUTE) to
    its checks (A): a faulting iteration k raises its error in the (k + 1 + gemm_check_cycles)-th
    free cycle (the contract value: A stage = free cycle k + 2)."""
    finish_cycles: int = 1
    """FINISH's EXECUTE ends this many cycles after the first drained cycle (inclusive),
    i.e. PUSH (and DONE at its end) at drained + finish_cycles. RTL: 1."""
    halt_cycles: int = 1
    """After an error raised in cycle e, DONE rises at the end of e + halt_cycles (or of
    the burst under way, if later). RTL: 1."""
    deadlock_cycles: int = 2
    """Cycles the stuck condition must hold: raised in the last, DONE at the end of the
    next. RTL: stuck in t and t+1 -> error at t+1, DONE at t+2."""

    # ---- derived -----------------------------------------------------------------------
    @property
    def beats_per_insn(self) -> int:
        return max(1, INSN_BYTES // self.bus_bytes)

    @property
    def insns_per_fetch_burst(self) -> int:
        """Whole instructions one fetch burst carries at most."""
        return max(1, self.max_burst // self.beats_per_insn)

    def elem_bytes(self, buf: str) -> int:
        """DRAM bytes of one entry of buffer ``buf`` ("ACC", "INP", "WGT", "UOP"): LOAD's unit
        (the same as ``HwConfig.elem_bytes``, so ``hw.isa_semantics.dram_span`` takes a Timing)."""
        return {"ACC": self.acc_vec_bytes, "INP": self.inp_vec_bytes, "WGT": self.wgt_block_bytes,
                "UOP": self.uop_bytes}[buf]

    def beats_per_elem(self, buf: str) -> int:
        """Bus beats of one DRAM entry of buffer ``buf`` (whole: a config rule)."""
        return self.elem_bytes(buf) // self.bus_bytes

    def read_burst_cycles(self, beats: int) -> int:
        """Cycles a read burst of ``beats`` holds the port."""
        return self.rd_burst_overhead + self.read_latency + beats

    def write_burst_cycles(self, beats: int) -> int:
        """Cycles a write burst of ``beats`` holds the port."""
        return self.wr_burst_overhead + beats + self.write_latency

    # ---- construction --------------------------------------------------------------------
    @classmethod
    def overhead_fields(cls) -> list[str]:
        """Names of the calibratable overhead constants."""
        return [f.name for f in fields(cls) if f.name not in CONFIG_FIELDS]

    @classmethod
    def from_config(cls, cfg: HwConfig, calibration: str | Path | dict[str, Any] | None | bool = True,
                    **overrides: int) -> "Timing":
        """The timing of ``cfg``.

        ``calibration``: True (default) reads ``<config>.timing.json`` beside the config
        file when it exists; a path or dict reads those values; False/None uses the
        defaults. ``overrides`` set overhead constants last (for experiments and tests).
        """
        t = cls(read_latency=cfg.dram_read_latency, write_latency=cfg.dram_write_latency,
                bus_bytes=cfg.bus_bytes, max_burst=cfg.max_burst, acc_vec_bytes=cfg.acc_vec_bytes,
                out_vec_bytes=cfg.out_vec_bytes, inp_vec_bytes=cfg.inp_vec_bytes,
                wgt_block_bytes=cfg.wgt_block_bytes, uop_bytes=cfg.elem_bytes("UOP"),
                load_queue_depth=cfg.load_queue_depth,
                compute_queue_depth=cfg.compute_queue_depth, store_queue_depth=cfg.store_queue_depth,
                token_queue_depth=cfg.token_queue_depth)
        values: dict[str, Any] = {}
        if calibration is True:
            path = calibration_path(cfg)
            if path.is_file():
                values = _read_json(path)
        elif isinstance(calibration, dict):
            values = dict(calibration)
        elif calibration:
            values = _read_json(Path(calibration))
        return t.with_overheads(values, str(calibration)).with_overheads(overrides, "overrides")

    def with_overheads(self, values: dict[str, Any], source: str = "<dict>") -> "Timing":
        """A copy with some overhead constants replaced (validated: known, non-negative ints)."""
        known = set(self.overhead_fields())
        clean: dict[str, int] = {}
        for k, v in values.items():
            if k.startswith("_"):
                continue
            if k in CONFIG_FIELDS:
                raise TimingError(f"{source}: '{k}' comes from the hardware config and cannot be calibrated")
            if k not in known:
                raise TimingError(f"{source}: unknown timing field '{k}' (known: {', '.join(sorted(known))})")
            if type(v) is not int or v < 0:
                raise TimingError(f"{source}: timing field '{k}' must be a non-negative int, got {v!r}")
            clean[k] = v
        return replace(self, **clean) if clean else self

    def overheads(self) -> dict[str, int]:
        """The overhead constants as a dict (what a calibration file holds)."""
        return {k: getattr(self, k) for k in self.overhead_fields()}


def calibration_path(cfg: HwConfig) -> Path:
    """``<config dir>/<name>.timing.json`` beside the config file (hw/configs by default)."""
    if cfg.source and Path(cfg.source).suffix == ".json":
        src = Path(cfg.source)
        return src.with_name(src.stem + ".timing.json")
    return CONFIG_DIR / f"{cfg.name}.timing.json"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise TimingError(f"{path}: cannot read timing calibration: {e}") from None
    if not isinstance(data, dict):
        raise TimingError(f"{path}: a timing calibration must be a JSON object")
    return data
