"""Greedy generation with charlm's decode-step Program (`cosim generate charlm`): prefill and decode
on the models, one Job per step, the one compiled artifact specialised per step by its driver.

Each model runs its own chain: the step's Program at ``t`` tokens gets the token and the model's own
cache image (the host appends the k and v rows each step leaves in the output region), and the
argmax of its logits is the next token. The RTL runs the steps in one simulator process (a soft
reset between steps, as a host would): its Programs are the golden chain's, and each step's output
must equal golden's, which makes the chain the RTL's own (a step's inputs are a function of the
outputs before it). Prefill is the prompt's steps one by one; its last step gives the first new
character, and each further character costs one decode step.

Cycles are the TLM's (cycle-exact to the RTL, checked step by step when the RTL runs); tokens per
second are at :data:`CLOCK_MHZ`. A step's DRAM bytes are its DMA reads and writes (instructions,
parameters, the cache, the activations), without the host's writes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compiler.networks import charlm as C
from compiler.networks import charlm_decode as D
from compiler.networks import charlm_int8 as Q
from cosim import models
from cosim.section_report import section_report
from hw.config import load_config
from compiler.errors import CompileError
from hw.isa import BUFFERS, Load, Store
from hw.program import Program

CLOCK_MHZ = 200            # the clock tokens/s are quoted at (the RTL's target is 100 MHz or more)
GEN_MODELS = ("golden", "iss", "tlm", "rtl")
WEIGHT_REGIONS = ("W", "bias")   # the parameters the step streams from DRAM
CACHE_REGION = "kv"


class GenerateError(ValueError):
    """A prompt or a count the model cannot take (one line)."""


def check_prompt(prompt: str, max_new: int) -> np.ndarray:
    """The prompt's tokens; one GenerateError line for an empty prompt, a character outside the
    vocabulary or a prompt and continuation longer than the context."""
    if not prompt:
        raise GenerateError("the prompt is empty: give at least one character")
    try:
        toks = C.encode(prompt)
    except ValueError as e:
        raise GenerateError(str(e)) from None
    if len(toks) + max_new - 1 > C.CONTEXT:  # the last new character is predicted, never fed back
        raise GenerateError(f"a prompt of {len(toks)} characters and {max_new} new ones need "
                            f"{len(toks) + max_new - 1} positions, more than the context of {C.CONTEXT}")
    return toks


def _region_of(prog: Program, insn: Load | Store) -> str | None:
    addr = insn.dram_base * _elem_bytes(prog, insn)
    return next((r.name for r in prog.regions if r.addr <= addr < r.end and r.role != "insn"), None)


def step_split(prog: Program, timeline: models.TlmTimeline) -> dict[str, int]:
    """Where a traced step's time goes: load-unit cycles streaming parameters (``weights``), load and
    store cycles on the cache (``kv``), compute-unit cycles (``compute``: GEMM and ALU), each unit's
    EXECUTE cycles (the units overlap, so the three do not add up to the total), with the DMA bytes of
    each kind."""
    out = {"weights": 0, "kv": 0, "compute": 0, "weights_bytes": 0, "kv_bytes": 0}
    insns = prog.insns
    for unit, pc, _insn, _t_pop, t_exec, t_end in timeline.tracer.insns:
        if pc is None or not 0 <= pc < len(insns):
            continue
        insn = insns[pc]
        busy = t_end - t_exec
        if unit == "compute":
            out["compute"] += busy
            continue
        if not isinstance(insn, (Load, Store)):
            continue
        region = _region_of(prog, insn)
        nbytes = _bytes(prog, insn)
        if region in WEIGHT_REGIONS:
            out["weights"] += busy
            out["weights_bytes"] += nbytes
        elif region == CACHE_REGION:
            out["kv"] += busy
            out["kv_bytes"] += nbytes
    return out


def _elem_bytes(prog: Program, insn: Load | Store) -> int:
    """Bytes of one DRAM entry of a LOAD (its buffer's unit) or a STORE (an output vector)."""
    cfg = prog.config
    if isinstance(insn, Store):
        return cfg.out_vec_bytes
    return cfg.elem_bytes(next(b for b, code in BUFFERS.items() if code == insn.buf))


def _bytes(prog: Program, insn: Load | Store) -> int:
    return insn.y_size * insn.x_size * _elem_bytes(prog, insn)


class _Chain:
    """One model's generation: its tokens, cache image and per-step records."""

    def __init__(self, step: D.DecodeStep, prompt: np.ndarray, max_new: int) -> None:
        self.step, self.prompt, self.max_new = step, prompt, max_new
        self.kv = step.empty_cache()
        self.new: list[int] = []
        self.records: list[dict[str, Any]] = []
        self.outs: list[np.ndarray] = []

    def steps(self) -> int:
        """Steps the generation takes: the prompt's, then one per new character after the first."""
        return len(self.prompt) + self.max_new - 1

    def token_at(self, i: int) -> int:
        return int(self.prompt[i]) if i < len(self.prompt) else self.new[i - len(self.prompt)]

    def advance(self, i: int, out: np.ndarray) -> None:
        """Take step ``i``'s output region: the cache grows, and past the prompt a new token is chosen."""
        t = i + 1
        self.outs.append(out)
        self.kv = self.step.append(self.kv, t, out)
        if t >= len(self.prompt):
            self.new.append(int(np.argmax(self.step.logits(out))))

    def text(self) -> str:
        return C.decode(np.array(self.new, dtype=np.int64))


def _phase(t: int, prompt_len: int) -> str:
    return "prefill" if t <= prompt_len else "decode"


def generate(prompt: str, max_new: int, chosen: list[str], config: str = "default", trace: str | Path | None = None,
             mem: str = "fast", simulator: str = "verilator",
             on_start: Callable[[], None] | None = None) -> dict[str, Any]:
    """Generate ``max_new`` characters after ``prompt`` on the ``chosen`` models; the report (JSON-ready).
    ``on_start`` is called once the step has compiled for the config, before the models run (a progress
    line then follows every refusal of the arguments, never precedes one)."""
    toks = check_prompt(prompt, max_new)
    cfg = load_config(config)
    bad = [m for m in chosen if m not in GEN_MODELS]
    if bad:
        raise GenerateError(f"unknown model {bad[0]!r} (models: {', '.join(GEN_MODELS)})")
    if "rtl" in chosen:
        why = models.rtl_available()
        if why:
            raise GenerateError(f"the RTL cannot run here: {why}")
    t0 = time.perf_counter()
    try:
        step = D.decode_step_program(cfg.name) if config == cfg.name else D.compile_decode(cfg)
    except CompileError as e:  # a config the step cannot take: one line
        raise GenerateError(str(e)) from None
    if on_start is not None:
        on_start()
    rep: dict[str, Any] = {"network": C.NAME, "config": cfg.name, "prompt": prompt, "max_new": max_new,
                           "prompt_tokens": len(toks), "compile_wall_s": time.perf_counter() - t0,
                           "pieces": [[p.lo, p.hi] for p in step.dynamic.pieces], "clock_mhz": CLOCK_MHZ,
                           "text": {}, "wall_s": {}, "mismatch": {}}
    rep["text"]["reference"] = Q.generate(Q.load(), prompt, max_new)
    need_golden = "golden" in chosen or "rtl" in chosen
    want_tlm = "tlm" in chosen or "rtl" in chosen or trace is not None
    chains: dict[str, _Chain] = {}
    tlm_steps: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    if need_golden:
        ch = chains["golden"] = _Chain(step, toks, max_new)
        t1 = time.perf_counter()
        for i in range(ch.steps()):
            ch.advance(i, step.run_golden(i + 1, ch.token_at(i), ch.kv))
        rep["wall_s"]["golden"] = time.perf_counter() - t1
    for m in [x for x in ("iss", "tlm") if x in chosen or (x == "tlm" and want_tlm)]:
        ch = chains[m] = _Chain(step, toks, max_new)
        t1 = time.perf_counter()
        at = 0
        for i in range(ch.steps()):
            t = i + 1
            prog = D.step_program(step, t, ch.token_at(i), ch.kv)
            if m == "iss":
                res = models.iss(prog)
            else:
                tl = models.tlm_traced(prog)
                res = tl.result
                split = step_split(prog, tl)
                sr = section_report(prog, tl)
                layers = [{"name": r.name, "start": r.start, "end": r.end} for r in sr.rows]
                tlm_steps.append({"t": t, "phase": _phase(t, len(toks)), "token": C.decode(np.array([ch.token_at(i)])),
                                  "cycles": res.cycles, "dma_rd_bytes": res.counters.get("dma_rd_bytes", 0),
                                  "dma_wr_bytes": res.counters.get("dma_wr_bytes", 0), "split": split,
                                  "layers": [{"name": r["name"], "cycles": r["end"] - r["start"]} for r in layers]})
                events.append({"name": f"{_phase(t, len(toks))} t={t}", "ph": "X", "pid": 1, "tid": 0, "ts": at,
                               "dur": res.cycles, "args": {"token": tlm_steps[-1]["token"], "tokens": t}})
                for r in layers:
                    events.append({"name": r["name"], "ph": "X", "pid": 1, "tid": 1, "ts": at + r["start"],
                                   "dur": r["end"] - r["start"], "args": {"tokens": t}})
                at += res.cycles
            if res.error is not None:
                rep["mismatch"][m] = f"step t={t} failed: {res.error.get('name')}"
                break
            ch.advance(i, res.outputs["out"].reshape(-1, cfg.block))
        rep["wall_s"][m] = time.perf_counter() - t1
    if "rtl" in chosen:
        g = chains["golden"]
        progs = [D.step_program(step, i + 1, g.token_at(i), _cache_before(g, i)) for i in range(g.steps())]
        t1 = time.perf_counter()
        results = models.rtl(progs, cfg, between="soft", mem=mem, sim=simulator)
        rep["wall_s"]["rtl"] = time.perf_counter() - t1
        ch = chains["rtl"] = _Chain(step, toks, max_new)
        rtl_cycles = []
        for i, res in enumerate(results):
            if res.error is not None or not np.array_equal(res.outputs["out"].reshape(-1, cfg.block), g.outs[i]):
                rep["mismatch"]["rtl"] = f"step t={i + 1} " + ("failed" if res.error else "differs from golden")
                break
            ch.advance(i, g.outs[i])
            rtl_cycles.append(res.cycles)
        rep["cycles_rtl"] = rtl_cycles
        if tlm_steps and mem == "protocol":
            rep["timing_note"] = models.PROTOCOL_NOTE
        elif tlm_steps:
            rep["tlm_equals_rtl"] = rtl_cycles == [s["cycles"] for s in tlm_steps[:len(rtl_cycles)]] \
                and len(rtl_cycles) == len(tlm_steps)
    for m, ch in chains.items():
        if m in chosen:
            rep["text"][m] = ch.text()
            if ch.text() != rep["text"]["reference"] and m not in rep["mismatch"]:
                rep["mismatch"][m] = "the text differs from the int8 reference's"
    if "golden" in chains:
        for m in ("iss", "tlm"):
            if m in chosen and m in chains and m not in rep["mismatch"]:
                bad_at = next((i for i, (a, b) in enumerate(zip(chains[m].outs, chains["golden"].outs))
                               if not np.array_equal(a, b)), None)
                if bad_at is not None:
                    rep["mismatch"][m] = f"step t={bad_at + 1} differs from golden"
    if tlm_steps:
        pre = [s for s in tlm_steps if s["phase"] == "prefill"]
        dec = [s for s in tlm_steps if s["phase"] == "decode"]
        rep["steps"] = tlm_steps
        rep["cycles"] = {"prefill": sum(s["cycles"] for s in pre), "per_token": [s["cycles"] for s in dec],
                         "total": sum(s["cycles"] for s in tlm_steps)}
        if dec:
            mean = sum(s["cycles"] for s in dec) / len(dec)
            rep["cycles"]["mean_per_token"] = mean
            rep["tokens_per_s"] = CLOCK_MHZ * 1e6 / mean
            rep["dram_bytes_per_token"] = sum(s["dma_rd_bytes"] + s["dma_wr_bytes"] for s in dec) / len(dec)
    if trace is not None:
        p = Path(trace)
        p.parent.mkdir(parents=True, exist_ok=True)
        meta = [{"name": "thread_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "steps"}},
                {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "layers"}},
                {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": f"{C.NAME} generate (TLM cycles)"}}]
        p.write_text(json.dumps({"traceEvents": meta + events, "displayTimeUnit": "ns",
                                 "otherData": {"model": "tlm", "time_unit": "cycle"}}))
        rep["trace"] = str(p.resolve())
    rep["match"] = not rep["mismatch"] and rep.get("tlm_equals_rtl", True)
    return rep


def _cache_before(ch: _Chain, i: int) -> np.ndarray:
    """The cache image step ``i`` of a finished chain started from (its outputs before ``i`` appended)."""
    kv = ch.step.empty_cache()
    for j in range(i):
        kv = ch.step.append(kv, j + 1, ch.outs[j])
    return kv
