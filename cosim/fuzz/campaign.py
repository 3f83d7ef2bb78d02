"""Differential fuzzing campaigns: generate, run on every model, compare, shrink, save.

One campaign case = one generated Program (``cosim.fuzz.generator``; on a config of several
cores one stream per core with BARRIER phases, ``cosim.fuzz.multicore``) for one config,
valid or (for ``fault_rate`` of the cases) with one injected fault
(``cosim.fuzz.faults``; on several cores in one core, or a skipped BARRIER). A share
(``REINTERLEAVE_RATE``) of the valid one-core cases has its units' instructions re-interleaved
(``cosim.fuzz.interleave``): the same tokens, so the same results, in another fetch order, pops
often fetched before the pushes they take. Oracles:

* valid Programs: the reference interpreter (``sim.iss``) vs the TLM, and
  with ``rtl`` the TLM vs the RTL: outputs bit-exact, no error, and equal count-type
  counters (``COMPARED_COUNTERS``, and each core's on several cores; the ISS has no time);
* faulty Programs: every model reports the reference's error code, pc and core;
* timing, valid or faulty, on the RTL's fast back-end (the one the TLM's timing contract
  is written for; the protocol back-end adds backpressure): the TLM's CYCLES and every
  counter (every core's) equal the RTL's.

A failing case is shrunk (instructions deleted with their token partners, fields
simplified, on several cores one core's stream at a time, each candidate re-validated by
``check_program`` (and the DRAM race check on several cores) and the reference) while
it fails the same way (a re-interleaved case is kept whole: the check judges program-order
streams), then saved as Program folders ``orig/`` and ``min/`` (with the
reference outputs as ``expected.npz``, so ``cosim run DIR --model tlm --config CFG``
re-runs it) plus ``fuzz.json`` describing the failure.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from hw.analysis import token_matches
from hw.assembler import PatchedProgram, with_insns
from hw.config import HwConfig, list_configs, load_config
from hw.isa import unit_of
from hw.isa_semantics import QUEUE_ENDS
from hw.program import Program
from hw.result import RunResult
from cosim.cluster.progress import ProgressBar
from cosim.fuzz import bins as coverage_bins
from cosim.fuzz.faults import FAULT_KINDS, inject
from cosim.fuzz.generator import Steer, check_program, generate
from cosim.fuzz.interleave import reinterleave
from cosim.fuzz.multicore import (MULTICORE_FAULT_KINDS, check_multicore, expand_configs, fuzz_config,
                                  generate_multicore, inject_multicore, per_core)
from cosim import models
from cosim.models import first_mismatch, iss as run_reference

COMPARED_COUNTERS = ("load_insns", "compute_insns", "store_insns", "dma_rd_bytes", "dma_wr_bytes", "fetch_bytes")
PROTOCOL_EVERY = 5  # one RTL Program in this many runs on the protocol (backpressure) back-end
REINTERLEAVE_RATE = 0.25  # valid one-core cases fetched in another order (swaps: 3 per instruction)


@dataclass
class Case:
    """One fuzz case: the Program and what is expected of it."""

    index: int
    seed: int
    config: HwConfig
    program: Program
    kind: str = "valid"            # "valid" or a fault kind
    mem: str = "fast"              # RTL back-end for this case
    results: dict[str, RunResult] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    crashed: bool = False          # a model raised instead of reporting (counts as an error)

    @property
    def ok(self) -> bool:
        return not self.problems


# Failures one chunk shrinks and saves at most (each costs up to thousands of runs and a folder); the
# rest are counted and listed with their generator seeds.
MAX_SAVED_PER_CHUNK = 10


def case_seed(seed: int, index: int) -> int:
    """The generator seed of case ``index`` of a campaign seeded ``seed`` (printed for reproduction)."""
    return seed * 1_000_003 + index


def make_case(cfg: HwConfig, seed: int, index: int, fault_rate: float = 0.2,
              steer: dict[str, Any] | None = None) -> Case:
    """Case ``index`` of the campaign ``seed`` on ``cfg``: deterministic. ``steer`` (coverage steering:
    ``cosim.fuzz.bins.steer_weights``) biases the generator and the fault kind toward empty bins."""
    s = case_seed(seed, index)
    many = cfg.num_cores > 1  # several cores: one stream per core, faults in any core (cosim.fuzz.multicore)
    name = f"fuzz-{cfg.name}-s{seed}-{index}"
    # steering biases the one-core generator; several cores compose unsteered one-core streams
    prog = generate_multicore(cfg, s, name=name) if many else generate(cfg, s, name=name, steer=Steer.from_json(steer))
    rng = np.random.default_rng([s, 7])
    mem = "protocol" if index % PROTOCOL_EVERY == PROTOCOL_EVERY - 1 else "fast"
    if rng.random() < fault_rate:
        kind = str(rng.choice(MULTICORE_FAULT_KINDS if many else FAULT_KINDS))
        aim = coverage_bins.steered_fault(steer, np.random.default_rng([s, 7, 0x57EE])) if steer and not many else None
        unit = None
        if aim is not None:
            kind, unit = aim
        if many:
            got = inject_multicore(prog, kind, rng)
        else:
            got = inject(prog, kind, rng, unit) if unit is not None else inject(prog, kind, rng)
        if got is not None:
            fp = got[0]
            fp.name, fp.meta = prog.name + f"-{kind}", dict(prog.meta, fault=kind)
            if many:
                fp.meta["fault_core"] = got[2]
            return Case(index, s, cfg, fp, kind, mem)
    mix = np.random.default_rng([s, 11])  # its own stream: the other choices stay those of the seed
    if not many and mix.random() < REINTERLEAVE_RATE:
        prog = reinterleave(prog, mix, 3 * len(prog.insns))
    return Case(index, s, cfg, prog, "valid", mem)


def compare(a: RunResult, b: RunResult, faulty: bool) -> list[str]:
    """Differences between two models' results (empty when they agree)."""
    out = []
    tag = f"{a.model} vs {b.model}"
    if faulty or a.error or b.error:
        # the core at fault too (several cores; a one-core error has core 0 or no "core")
        ea = a.error and (a.error["code"], a.error["pc"], a.error.get("core", 0))
        eb = b.error and (b.error["code"], b.error["pc"], b.error.get("core", 0))
        if ea != eb:
            def fmt(e: dict[str, Any] | None) -> str:
                return f"{e['name']}@{e['pc']}" + (f" core {e['core']}" if "core" in e else "") if e else "no error"
            out.append(f"{tag}: error {fmt(a.error)} != {fmt(b.error)}")
        return out
    mm = first_mismatch(a.outputs, b.outputs)
    if mm:
        out.append(f"{tag}: {mm}")
    for k in COMPARED_COUNTERS:
        if a.counters.get(k) != b.counters.get(k):
            out.append(f"{tag}: counter {k} {a.counters.get(k)} != {b.counters.get(k)}")
    return out + _per_core_counters(a, b, COMPARED_COUNTERS)


def _per_core_counters(a: RunResult, b: RunResult, names: Sequence[str] | None) -> list[str]:
    """Differences of each core's counters (``extra["cores"]``, several cores): ``names``, or all with None."""
    ca, cb = a.extra.get("cores"), b.extra.get("cores")
    if ca is None and cb is None:
        return []
    tag = f"{a.model} vs {b.model}"
    if ca is None or cb is None or len(ca) != len(cb):
        return [f"{tag}: counter cores {len(ca or [])} != {len(cb or [])}"]
    out = []
    for k, (x, y) in enumerate(zip(ca, cb)):
        for n in names if names is not None else sorted(set(x) | set(y)):
            if x.get(n) != y.get(n):
                out.append(f"{tag}: counter core{k}.{n} {x.get(n)} != {y.get(n)}")
    return out


def _tlm(p: Program) -> RunResult:
    # the port observation feeds the coverage bins; it changes nothing in the run
    return models.tlm(p, observe_ports=True)


def _rtl_batch(programs: Sequence[Program], cfg: HwConfig, mem: str, seed: int = 0) -> list[RunResult]:
    return models.rtl(list(programs), cfg, mem=mem, seed=seed)


rtl_available = models.rtl_available


def judge(case: Case) -> None:
    """Fill ``case.problems`` from ``case.results`` (ref, tlm and maybe rtl)."""
    faulty = case.kind != "valid"
    r = case.results
    probs: list[str] = []
    if faulty and (r["ref"].error is None):
        probs.append(f"generator: the injected {case.kind} fault is not a fault for the reference")
    if "tlm" in r:
        probs += compare(r["ref"], r["tlm"], faulty)
    if "rtl" in r:
        probs += compare(r["tlm"] if "tlm" in r else r["ref"], r["rtl"], faulty)
        # the ISS's result's model name is "iss": tags read "iss vs tlm"
        if "tlm" in r and probs and not any(p.startswith(f"{r['ref'].model} vs tlm") for p in probs):
            probs += compare(r["ref"], r["rtl"], faulty)  # tells which of TLM and RTL is wrong
        if "tlm" in r and case.mem == "fast" and not probs:
            probs += compare_timing(r["tlm"], r["rtl"])
    case.problems = probs


def compare_timing(tlm: RunResult, rtl: RunResult) -> list[str]:
    """The TLM's CYCLES and counters against the RTL's (fast back-end): empty when equal."""
    out = [] if tlm.cycles == rtl.cycles else [f"tlm vs rtl: cycles {tlm.cycles} != {rtl.cycles}"]
    for k in sorted(set(tlm.counters) | set(rtl.counters)):
        if tlm.counters.get(k) != rtl.counters.get(k):
            out.append(f"tlm vs rtl: counter {k} {tlm.counters.get(k)} != {rtl.counters.get(k)}")
    return out + _per_core_counters(tlm, rtl, None)


def run_cases(cases: list[Case], rtl: bool, batch: int = 64) -> None:
    """Run every case on the reference and the TLM (and the RTL, in batches per config and back-end)."""
    for c in cases:
        c.results["ref"] = run_reference(c.program)
        try:
            c.results["tlm"] = _tlm(c.program)
        except Exception as e:  # noqa: BLE001 - a crash of the model under test is a finding, not our crash
            c.crashed = True
            c.problems = [f"tlm raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]
    if rtl:
        groups: dict[tuple[str, str], list[Case]] = {}
        for c in cases:
            if not c.crashed:
                groups.setdefault((c.config.name, c.mem), []).append(c)
        for (_, mem), cs in groups.items():
            for k in range(0, len(cs), batch):
                part = cs[k:k + batch]
                try:
                    res = _rtl_batch([c.program for c in part], part[0].config, mem, seed=part[0].index)
                except Exception as e:  # noqa: BLE001
                    for c in part:
                        c.crashed = True
                        c.problems = [f"rtl run raised {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]
                    continue
                for c, rr in zip(part, res):
                    c.results["rtl"] = rr
    for c in cases:
        if not c.crashed:
            judge(c)


# ---- shrinking ---------------------------------------------------------------------------------
def _delete(p: Program, gone: set[int], transfer: bool) -> Program | None:
    """``p`` without the instructions ``gone``. Their token partners lose the matching flag, or with
    ``transfer`` the flag moves to the neighbour of the same unit (previous one for a push, next one for
    a pop), which keeps the ordering the deleted instruction provided. None if it cannot be built."""
    patches = getattr(p, "patches", {})
    if gone & set(patches) or len(p.insns) - 1 in gone:
        return None  # keep the patched (faulty) words and FINISH
    insns = list(p.insns)
    units = [unit_of(i) for i in insns]

    def neighbour(k: int, step: int) -> int | None:
        j = k + step
        while 0 <= j < len(insns) and (units[j] != units[k] or j in gone):
            j += step
        return j if 0 <= j < len(insns) else None

    for q, a, b in token_matches(p.insns):
        pf, cf = QUEUE_ENDS[q].push_flag, QUEUE_ENDS[q].pop_flag
        if a in gone and b not in gone:
            j = neighbour(a, -1) if transfer else None
            if j is not None and not getattr(insns[j], pf) and j < b:
                insns[j] = dataclasses.replace(insns[j], **{pf: True})
            else:
                insns[b] = dataclasses.replace(insns[b], **{cf: False})
        elif b in gone and a not in gone:
            j = neighbour(b, +1) if transfer else None
            if j is not None and not getattr(insns[j], cf):
                insns[j] = dataclasses.replace(insns[j], **{cf: True})
            else:
                insns[a] = dataclasses.replace(insns[a], **{pf: False})
    keep = [i for k, i in enumerate(insns) if k not in gone]
    pt = {j - sum(1 for g in gone if g < j): w for j, w in patches.items()}
    try:
        return with_insns(p, keep, patches=pt)
    except Exception:  # noqa: BLE001 - a candidate that cannot be built is skipped
        return None


def _deletions(p: Program):
    """Candidates with instructions deleted: halves, quarters, ... then single instructions."""
    n = len(p.insns) - 1
    size = n // 2
    while size >= 1:
        for start in range(0, n, size):
            gone = set(range(start, min(n, start + size)))
            for transfer in (True, False):
                c = _delete(p, gone, transfer)
                if c is not None:
                    yield c
        size //= 2


_SIMPLER: dict[str, list[dict[str, Any]]] = {
    "LOAD": [dict(y_size=1), dict(x_size=1), dict(y_pad_0=0, y_pad_1=0, x_pad_0=0, x_pad_1=0)],
    "STORE": [dict(y_size=1), dict(x_size=1)],
    "ALU": [dict(iter_out=1), dict(iter_in=1), dict(imm=0), dict(imm=1)],
}


def _simplifications(p: Program):
    """Candidates with one field made simpler, or one matched token pair removed."""
    patches = getattr(p, "patches", {})
    for q, a, b in token_matches(p.insns):
        insns = list(p.insns)
        insns[a] = dataclasses.replace(insns[a], **{QUEUE_ENDS[q].push_flag: False})
        insns[b] = dataclasses.replace(insns[b], **{QUEUE_ENDS[q].pop_flag: False})
        try:
            yield with_insns(p, insns, patches=dict(patches))
        except Exception:  # noqa: BLE001
            pass
    for k, i in enumerate(p.insns):
        if k in patches:
            continue
        halves = [{f: getattr(i, f) // 2} for f in ("y_size", "x_size", "iter_out", "iter_in")
                  if getattr(i, f, 0) > 1]
        for ch in halves + _SIMPLER.get(i.MNEMONIC, []):
            if all(getattr(i, f) == v for f, v in ch.items()):
                continue
            insns = list(p.insns)
            insns[k] = dataclasses.replace(i, **ch)
            try:
                yield with_insns(p, insns, patches=dict(patches))
            except Exception:  # noqa: BLE001
                continue


def _valid_candidate(c: Program, kind: str, code: int | None) -> bool:
    if kind == "valid":
        problem = check_multicore(c) if c.num_cores > 1 else check_program(c.insns, c.config, dram=c.dram_image())
        return problem is None and run_reference(c).error is None
    e = run_reference(c).error
    return e is not None and e["code"] == code


def shrink(case: Case, fails: Callable[[list[Program]], list[bool]], chunk: int = 8,
           max_evals: int = 2000) -> Program:
    """The smallest Program found that still ``fails``: greedy, deletions before simplifications.

    Candidates are validated first (``check_program`` and the reference), then evaluated
    ``chunk`` at a time (one RTL process per chunk), taking the first that fails.
    """
    best = case.program
    if case.kind == "insn_range":
        return best  # the fault is in the register config; instructions do not matter
    if best.meta.get("reinterleaved"):
        return best  # check_program judges program-order streams: its candidates would all be refused
    ref = case.results.get("ref")
    code = ref.error["code"] if ref is not None and ref.error else None
    evals = 0
    while evals < max_evals:
        hit = None
        gens = (_deletions, _simplifications)
        if best.num_cores > 1:  # one core's stream at a time
            gens = (per_core(_deletions), per_core(_simplifications))
        for gen in gens:
            pending: list[Program] = []
            for c in gen(best):
                if not _valid_candidate(c, case.kind, code):
                    continue
                pending.append(c)
                if len(pending) == chunk:
                    evals += len(pending)
                    hit = next((x for x, v in zip(pending, fails(pending)) if v), None)
                    pending = []
                    if hit is not None or evals >= max_evals:
                        break
            if hit is None and pending:
                evals += len(pending)
                hit = next((x for x, v in zip(pending, fails(pending)) if v), None)
            if hit is not None:
                break
        if hit is None:
            break
        best = hit
    return best


def failure_predicate(case: Case, rtl: bool) -> Callable[[list[Program]], list[bool]]:
    """Candidates fail "the same way": the same pair of models disagrees on the same aspect."""
    def sig(probs: list[str]) -> set[str]:
        return {p.split(":")[0] + ":" + p.split(":")[1].split()[0] if ":" in p else p for p in probs}

    want = sig(case.problems)

    def fails(programs: list[Program]) -> list[bool]:
        cs = [Case(case.index, case.seed, case.config, p, case.kind, case.mem) for p in programs]
        run_cases(cs, rtl and any("rtl" in w for w in want))
        return [bool(sig(c.problems) & want) or (case.crashed and c.crashed) for c in cs]

    return fails


def save_failure(case: Case, shrunk: Program | None, root: Path, campaign_seed: int, fault_rate: float = 0.2,
                 rtl: bool = False, steer: dict[str, Any] | None = None) -> Path:
    """Write ``orig/`` and ``min/`` Program folders and ``fuzz.json``; returns the case folder.

    ``fuzz.json`` holds what regenerates the case (config, campaign seed, index, fault rate) and what the
    reference expects of each Program (``expect``: its error name, code and pc, or None); its ``rerun``
    is ``cosim fuzz --replay DIR`` (:func:`replay_failure`), which regenerates the case (a folder with
    patched raw words does not load) and checks both."""
    base = root / f"{case.config.name}-s{campaign_seed}-{case.index}"
    d, n = base, 1
    while d.exists():  # an earlier campaign's case of that number (other options): never overwritten
        n += 1
        d = base.with_name(f"{base.name}-{n}")
    d.mkdir(parents=True)
    info: dict[str, Any] = {"config": case.config.name, "campaign_seed": campaign_seed, "index": case.index,
                            "generator_seed": case.seed, "kind": case.kind, "rtl_mem": case.mem,
                            "fault_rate": fault_rate, "rtl": rtl, "problems": case.problems,
                            "rerun": f"cosim fuzz --replay {d}"}
    if steer is not None:
        info["steer"] = steer  # the case was generated with these coverage weights
    for sub, p in (("orig", case.program), ("min", shrunk)):
        if p is None:
            continue
        ref = run_reference(p)
        p.expected = ref.outputs if ref.error is None else {}
        p.save(d / sub)
        expect = None if ref.error is None else {k: ref.error.get(k) for k in ("name", "code", "pc")}
        info[sub] = {"insns": len(p.insns), "reference_error": ref.error, "expect": expect}
        if isinstance(p, PatchedProgram):
            info[sub]["note"] = ("raw instruction words are patched in: the loader refuses this folder by design; "
                                 "`cosim fuzz --replay` regenerates it")
    (d / "fuzz.json").write_text(json.dumps(info, indent=1, default=str) + "\n")
    return d


def replay_failure(folder: str | Path) -> dict[str, Any]:
    """Replay a case saved by :func:`save_failure`: regenerate it from ``fuzz.json`` (config, campaign seed,
    index, fault rate), check it is the same case and that the reference still expects what was recorded,
    run it on the models again (the RTL when the campaign used it and it is available) and report
    ``{"still_fails": bool, "problems": [...], "expect": ..., "got": ...}``. Raises ValueError (one line
    naming fuzz.json) for a folder it cannot replay."""
    d = Path(folder)
    f = d / "fuzz.json"
    if d.exists() and not d.is_dir():
        raise ValueError(f"{d}: not a folder (give the folder `cosim fuzz --save-dir` wrote)")
    if not f.is_file():
        raise ValueError(f"{f}: missing (not a folder saved by `cosim fuzz --save-dir`)")
    try:
        info = json.loads(f.read_bytes().decode("utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{f}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    except (UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"{f}: not valid JSON ({type(e).__name__})") from None
    if not isinstance(info, dict):
        raise ValueError(f"{f}: must be a JSON object")
    want = {"config": str, "campaign_seed": int, "index": int, "generator_seed": int, "kind": str}
    for k, t in want.items():
        if type(info.get(k)) is not t or (t is int and info[k] < 0):
            raise ValueError(f"{f}: needs '{k}' ({'a non-negative integer' if t is int else 'a string'})")
    rate = info.get("fault_rate", 0.2)
    if type(rate) not in (int, float) or not 0 <= rate <= 1:
        raise ValueError(f"{f}: 'fault_rate' must be a number in [0, 1]")
    if type(info.get("rtl", False)) is not bool:
        raise ValueError(f"{f}: 'rtl' must be true or false")
    if "rtl_mem" in info and info["rtl_mem"] not in ("fast", "protocol"):
        raise ValueError(f"{f}: 'rtl_mem' must be \"fast\" or \"protocol\"")
    cfg = fuzz_config(info["config"])
    steer = info.get("steer")
    if steer is not None and not (isinstance(steer, dict) and isinstance(steer.get("empty"), list)
                                  and all(isinstance(b, str) for b in steer["empty"])):
        raise ValueError(f"{f}: 'steer' must be an object with an 'empty' list of bin names")
    if not isinstance(info.get("orig", {}), dict) or not isinstance((info.get("orig") or {}).get("expect"),
                                                                       (dict, type(None))):
        raise ValueError(f"{f}: 'orig' must be an object whose 'expect' is an object or null")
    case = make_case(cfg, info["campaign_seed"], info["index"], float(rate), steer)
    if case.seed != info["generator_seed"] or case.kind != info["kind"]:
        raise ValueError(f"{f}: regenerates a different case (generator seed {case.seed}, {case.kind}; saved "
                         f"{info['generator_seed']}, {info['kind']}): the generator changed since it was saved")
    if info.get("rtl_mem", case.mem) != case.mem:
        raise ValueError(f"{f}: regenerates a case for the RTL's {case.mem} back-end; saved for {info['rtl_mem']}: "
                         "the campaign changed since it was saved")
    rtl = info.get("rtl", False) and rtl_available() is None
    run_cases([case], rtl)
    ref = case.results.get("ref")
    got = None if ref is None or ref.error is None else {k: ref.error.get(k) for k in ("name", "code", "pc")}
    expect = (info.get("orig") or {}).get("expect")
    problems = list(case.problems)
    if "orig" in info and got != expect:
        problems.insert(0, f"reference: expected {expect or 'no error'}, got {got or 'no error'}")
    return {"still_fails": bool(problems), "problems": problems, "expect": expect, "got": got, "rtl": rtl,
            "kind": case.kind}


def chunk_problem(chunk: Any, cases: int) -> str | None:
    """What makes ``chunk`` no outcome of :func:`run_chunk` over ``cases`` cases (a results file read back to
    resume may hold anything), or None."""
    if not isinstance(chunk, dict):
        return f"{str(chunk)[:60]!r} is not a chunk's outcome"
    for k in ("cases", "faulty", "mismatches", "errors"):
        if not (isinstance(chunk.get(k), int) and not isinstance(chunk.get(k), bool) and chunk[k] >= 0):
            return f"'{k}' is {str(chunk.get(k))[:40]!r}, not a count"
    if chunk["cases"] != cases:
        return f"'cases' is {chunk['cases']}, the chunk has {cases}"
    by_kind, failures = chunk.get("by_kind"), chunk.get("failures")
    if not (isinstance(by_kind, dict) and all(isinstance(n, int) for n in by_kind.values())):
        return f"'by_kind' is {str(by_kind)[:40]!r}, not counts by kind"
    if not (isinstance(failures, list) and all(isinstance(f, dict) and isinstance(f.get("index"), int)
                                               for f in failures)):
        return f"'failures' is {str(failures)[:40]!r}, not a list of failed cases"
    if "coverage" in chunk and not isinstance(chunk["coverage"], dict):
        return "'coverage' is not bin counts"
    return None


# ---- the campaign --------------------------------------------------------------------------------
@dataclass
class Summary:
    count: int
    seed: int
    config: str
    rtl: bool
    mismatches: int = 0
    errors: int = 0
    faulty: int = 0
    not_run: int = 0  # cases of tasks that failed (counted among the errors too)
    by_kind: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    coverage: dict[str, int] | None = None      # bin hits (``cosim.fuzz.bins``) when coverage is collected
    coverage_configs: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        cov, names = d.pop("coverage"), d.pop("coverage_configs")
        if cov is not None:
            d["coverage"] = self.coverage_report()
        return d

    def coverage_report(self) -> dict[str, Any]:
        """``{"bins", "empty", "unreachable"}`` of the campaign (``cosim.fuzz.bins.coverage_json``)."""
        return coverage_bins.coverage_json(self.coverage or {}, [load_config(n) for n in self.coverage_configs])

    def add(self, chunk: dict[str, Any]) -> None:
        """Count the outcome of one chunk of cases (:func:`run_chunk`; read back from a results file, see
        :func:`chunk_problem`)."""
        self.faulty += chunk["faulty"]
        for k, n in chunk["by_kind"].items():
            self.by_kind[k] = self.by_kind.get(k, 0) + n
        self.mismatches += chunk["mismatches"]
        self.errors += chunk["errors"]
        self.failures += chunk["failures"]
        if "coverage" in chunk:
            self.coverage = coverage_bins.merge(self.coverage or {}, chunk["coverage"])

    def line(self) -> str:
        oracle = "ref vs tlm" + (" vs rtl" if self.rtl else "")
        ran = f"{self.count - self.not_run} run, {self.not_run} did not run, " if self.not_run else ""
        return (f"fuzz: {self.count} Programs (config {self.config}, seed {self.seed}, {oracle}, {ran}"
                f"{self.faulty} with an injected fault): {self.mismatches} mismatches, {self.errors} errors "
                f"in {self.wall_s:.1f} s")


def run_chunk(cfgs: Sequence[HwConfig], seed: int, start: int, stop: int, rtl: bool = False,
              fault_rate: float = 0.2, save_dir: str | Path | None = None, do_shrink: bool = True,
              batch: int = 50, coverage: bool = False, steer: dict[str, Any] | None = None) -> dict[str, Any]:
    """Cases ``start`` to ``stop - 1`` of the campaign ``seed`` (round-robin over ``cfgs``): run, judge,
    and shrink and save each failure here, where it was found. What the campaign's summary adds up:
    ``{"cases", "faulty", "by_kind", "mismatches", "errors", "failures"}`` (JSON-able), with ``coverage``
    the bin hits of the chunk (``cosim.fuzz.bins.observe``); ``steer`` steers its generation."""
    cases = [make_case(cfgs[i % len(cfgs)], seed, i, fault_rate, steer) for i in range(start, stop)]
    run_cases(cases, rtl, batch)
    out: dict[str, Any] = {"cases": len(cases), "faulty": 0, "by_kind": {}, "mismatches": 0, "errors": 0,
                           "failures": []}
    if coverage:
        hits: dict[str, int] = {}
        for c in cases:
            hits = coverage_bins.merge(hits, coverage_bins.observe(c.program, c.results.get("ref"),
                                                                   c.results.get("tlm")))
        out["coverage"] = hits
    for c in cases:
        out["faulty"] += c.kind != "valid"
        out["by_kind"][c.kind] = out["by_kind"].get(c.kind, 0) + 1
        if c.ok:
            continue
        out["errors" if c.crashed else "mismatches"] += 1
        entry: dict[str, Any] = {"index": c.index, "config": c.config.name, "generator_seed": c.seed,
                                 "kind": c.kind, "problems": c.problems}
        if save_dir is not None and sum("saved" in f for f in out["failures"]) >= MAX_SAVED_PER_CHUNK:
            entry["not_saved"] = f"over the {MAX_SAVED_PER_CHUNK} failures a chunk shrinks and saves"
        elif save_dir is not None:
            shrunk = None
            if do_shrink:
                try:
                    shrunk = shrink(c, failure_predicate(c, rtl))
                except Exception as e:  # noqa: BLE001 - keep the original reproducer at least
                    entry["shrink_error"] = f"{type(e).__name__}: {e}"
            entry["saved"] = str(save_failure(c, shrunk, Path(save_dir), seed, fault_rate, rtl, steer))
            if shrunk is not None:
                entry["min_insns"] = len(shrunk.insns)
        out["failures"].append(entry)
    return out


def fuzz_configs(configs: Sequence[str] | None) -> list[str]:
    """The configs a campaign runs on: ``configs`` (default: every shipped one-core config), each a shipped
    name, a JSON path, ``<shipped>-x<n>`` (that config with n cores) or ``multicore`` (every config of 2..4
    cores derived from default and small: ``cosim.fuzz.multicore.expand_configs``). A bad name fails here
    in one line."""
    if configs:
        return expand_configs(list(configs))
    return [n for n in list_configs() if load_config(n).num_cores == 1]


def run_campaign(count: int, seed: int, configs: Sequence[str] | None = None, rtl: bool = False,
                 fault_rate: float = 0.2, save_dir: str | Path | None = None, do_shrink: bool = True,
                 batch: int = 50, progress: bool = True, coverage: bool = False, steer: bool = False) -> Summary:
    """Run ``count`` cases round-robin over ``configs`` (default: every shipped one-core config), in this
    process (``cosim.fuzz.distributed.run_distributed_campaign`` spreads the same chunks over a Dask cluster).
    ``coverage`` collects the functional coverage bins; ``steer`` (with coverage) steers each chunk toward
    the bins the chunks before it left empty."""
    t0 = time.perf_counter()
    names = fuzz_configs(configs)
    cfgs = [fuzz_config(n) for n in names]
    label = names[0] if len(names) == 1 else (configs[0] if configs and len(configs) == 1 else "all")  # "multicore"
    summ = Summary(count, seed, label, rtl)
    if coverage or steer:
        summ.coverage, summ.coverage_configs = {}, list(names)
    bar = ProgressBar(count, "fuzz", progress)
    # With the RTL, a chunk holds about ``batch`` Programs per (config, back-end) simulator process.
    step = batch * len(cfgs) * 2 if rtl else batch
    for start in range(0, count, step):
        w = coverage_bins.steer_weights(summ.coverage, cfgs) if steer else None
        summ.add(run_chunk(cfgs, seed, start, min(count, start + step), rtl, fault_rate, save_dir, do_shrink,
                           batch, coverage or steer, w))
        bar.update(min(count, start + step), summ.mismatches + summ.errors)
    bar.close()
    summ.wall_s = time.perf_counter() - t0
    return summ
