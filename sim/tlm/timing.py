"""The TLM's timing model: ONE frozen object holding every number the TLM's clock uses.

Time is counted in accelerator clock cycles. Cycle 0 is the first cycle after the
CSR write that sets ``CTRL.START``; ``CYCLES`` (and the RunResult's ``cycles``) is the
cycle at which ``STATUS.DONE`` rises.

Two kinds of parameters:

* **Config parameters** (latencies, beat size, burst length, queue depths) come
  from the hardware config (``hw/configs/<name>.json``) and are never overridden.
* **Overhead constants** are per-transaction costs of the RTL's implementation
  (arbiter grant, FSM state changes, ...). Their defaults are what
  ``docs/microarch.md`` implies; calibrated values, measured on the RTL with
  micro-benchmarks, are read from ``hw/configs/<name>.timing.json`` beside the
  config when that file exists (a JSON object ``{field: int}``; keys starting with
  ``_`` are comments, e.g. ``"_measured": "how"``).

How the model uses them (the formulas the tests derive their expectations from):

* **Read burst** of ``n`` beats granted at cycle ``g``: the AR handshake is at ``g``,
  beats arrive at ``g + read_latency + k`` (k < n), and the port is free again
  at ``g + rd_burst_overhead + read_latency + n`` (the burst's *end*).
* **Write burst** of ``n`` beats granted at ``g``: W beats at ``g .. g+n-1``, B at
  ``g + n - 1 + write_latency``; the port is free at
  ``g + wr_burst_overhead + n + write_latency``; the store unit sees the burst done
  ``b_resp_cycles`` later.
* **Arbitration**: the port is granted, at the cycle it is free, to the
  highest-priority client (FETCH > LOAD > STORE) whose request is pending at that
  cycle; a client requests its next burst at the cycle its previous burst ended, so
  a unit's bursts run back to back unless a higher-priority client asks.
* **Fetch**: requests its first burst at ``fetch_start_cycles``; a burst holds
  ``min(max_burst // beats_per_insn, remaining, up to the 4 KiB boundary)``
  instructions; instruction k of a burst ending at ``e`` is dispatched at
  ``e + k * dispatch_cycles`` (later if its queue is full: then at the cycle the
  unit pops an entry); the next burst is requested ``dispatch_cycles`` after the
  last dispatch.
* **Unit**: an entry dispatched at ``d`` is popped at ``p = max(d, unit idle)``;
  TOKEN_WAIT is entered at ``p + insn_pop_cycles`` (range checks happen here);
  once every popped token is available (``t``), EXECUTE starts at
  ``t + token_pop_cycles`` (0 added if the instruction pops nothing); EXECUTE lasts
  ``max(min_execute_cycles, work)``; then each pushed token is pushed as soon as its
  queue has room, costing ``token_push_cycles`` if anything is pushed; then IDLE.
* **EXECUTE work**: LOAD: ``pad_vector_cycles`` per padding vector in tile order,
  interleaved with the DMA bursts of each row; STORE: its write bursts (+
  ``b_resp_cycles`` each); ALU: ``alu_setup_cycles + iter_out*iter_in +
  alu_pipeline_cycles``; FINISH: waits until load and store are idle with empty
  queues and the port is free, then ``finish_cycles``.
* **Deadlock** is declared ``deadlock_cycles`` after the last state change.
* **Errors**: range checks fault at TOKEN_WAIT entry, dispatch checks at the
  dispatch cycle; CYCLES is then the end of the DRAM burst under way (if any).

Measurement status: no overhead constant has been measured on the RTL yet; every
default is the value the contract implies. Calibration writes the measured values
(and, under ``_measured``, how) to ``hw/configs/<name>.timing.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from hw.config import CONFIG_DIR, INSN_BYTES, HwConfig

# Fields filled from the hardware config (never from a calibration file).
CONFIG_FIELDS = ("read_latency", "write_latency", "bus_bytes", "max_burst", "acc_vec_bytes", "out_vec_bytes",
                 "load_queue_depth", "compute_queue_depth", "store_queue_depth", "token_queue_depth")


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
    load_queue_depth: int
    """Entries of the load instruction queue."""
    compute_queue_depth: int
    """Entries of the compute instruction queue."""
    store_queue_depth: int
    """Entries of the store instruction queue."""
    token_queue_depth: int
    """Tokens each of the four dependency-token queues holds."""

    # ---- overhead constants (calibrated against the RTL) -----------------------------
    fetch_start_cycles: int = 0
    """Cycles from cycle 0 (the one after START) to FETCH's first burst request."""
    rd_burst_overhead: int = 0
    """Extra cycles a read burst holds the port beyond ``read_latency + beats``
    (arbiter grant, AR register stage, last-beat handling)."""
    wr_burst_overhead: int = 0
    """Extra cycles a write burst holds the port beyond ``beats + write_latency``
    (arbiter grant, AW register stage, store-buffer read latency)."""
    b_resp_cycles: int = 0
    """Cycles the store unit spends after a B response (port already free) before it
    issues its next burst or leaves EXECUTE."""
    dispatch_cycles: int = 1
    """Cycles FETCH spends dispatching one instruction (the contract: one per cycle)."""
    insn_pop_cycles: int = 1
    """Cycles from a unit popping its queue to entering TOKEN_WAIT (pop + decode)."""
    token_pop_cycles: int = 0
    """Cycles from the popped tokens being available to EXECUTE (only when the
    instruction pops a token)."""
    token_push_cycles: int = 0
    """Cycles spent in TOKEN_PUSH when the instruction pushes a token and there is room."""
    alu_setup_cycles: int = 0
    """Cycles an ALU instruction spends in EXECUTE before its first vector."""
    alu_pipeline_cycles: int = 0
    """Cycles after the ALU's last vector before EXECUTE ends (pipeline drain; the
    contract's combinational read / edge write gives 0)."""
    pad_vector_cycles: int = 1
    """Cycles LOAD spends writing one zero-padding vector."""
    min_execute_cycles: int = 1
    """EXECUTE lasts at least this many cycles (an FSM state is at least one cycle)."""
    finish_cycles: int = 1
    """Cycles from FINISH's drain condition holding to STATUS.DONE."""
    deadlock_cycles: int = 2
    """Cycles without progress after which a deadlock is declared (the contract: 2)."""

    # ---- derived -----------------------------------------------------------------------
    @property
    def beats_per_insn(self) -> int:
        return max(1, INSN_BYTES // self.bus_bytes)

    @property
    def insns_per_fetch_burst(self) -> int:
        """Whole instructions one fetch burst carries at most."""
        return max(1, self.max_burst // self.beats_per_insn)

    def read_burst_cycles(self, beats: int) -> int:
        """Cycles a read burst of ``beats`` holds the port."""
        return self.rd_burst_overhead + self.read_latency + beats

    def write_burst_cycles(self, beats: int) -> int:
        """Cycles a write burst of ``beats`` holds the port."""
        return self.wr_burst_overhead + beats + self.write_latency

    def queue_depth(self, unit: str) -> int:
        return {"load": self.load_queue_depth, "compute": self.compute_queue_depth,
                "store": self.store_queue_depth}[unit]

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
                out_vec_bytes=cfg.out_vec_bytes, load_queue_depth=cfg.load_queue_depth,
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
