"""Re-interleaved fuzz Programs: each unit's order and every token edge kept, pops fetched before their
pushes, never a deadlock, the same results on the reference and the TLM as the original stream; a
sequential run in program order would get them wrong (what the fuzz variant is for). The RTL runs them
in the fuzz sample (``cosim fuzz --rtl``: a share of its valid cases is re-interleaved)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cosim import models
from cosim.fuzz.campaign import compare, make_case
from cosim.fuzz.generator import generate
from cosim.fuzz.interleave import reinterleave
from hw.analysis import deadlock_pc, program_order_problem, token_matches
from hw.config import load_config
from hw.isa import Finish, unit_of
from hw.program import Program, concat_streams, plan_layout


def _per_unit(insns: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for i in insns:
        out.setdefault(unit_of(i), []).append(i)
    return out


def _edges(insns: list) -> set[tuple[str, int, int]]:
    """Token edges as (queue, k-th of the pushing unit, k-th of the popping unit): independent of the
    interleaving."""
    seq, seen = [], {}
    for i in insns:
        u = unit_of(i)
        seq.append(seen.get(u, 0))
        seen[u] = seq[-1] + 1
    return {(q, seq[a], seq[b]) for q, a, b in token_matches(insns)}


@pytest.mark.parametrize("cname", ["small", "default"])
def test_same_tokens_other_fetch_order_same_results(cname: str) -> None:
    cfg = load_config(cname)
    reordered = naive_wrong = 0
    for seed in range(40):
        p = generate(cfg, seed)
        q = reinterleave(p, np.random.default_rng([seed, 11]), 3 * len(p.insns))
        assert _per_unit(q.insns) == _per_unit(p.insns) and _edges(q.insns) == _edges(p.insns), seed
        assert q.insns[-1].MNEMONIC == "FINISH" and deadlock_pc(q.insns, cfg) is None, seed
        reordered += program_order_problem(q.insns, cfg.token_queue_depth) is not None
        ref, tlm = models.iss(q), models.tlm(q)
        assert not compare(models.iss(p), ref, False) and not compare(ref, tlm, False), seed
        # in program order, ignoring the tokens, the same stream often computes something else
        naive_wrong += bool(compare(models.iss(q, check_tokens=False), tlm, False))
    assert reordered >= 30 and naive_wrong >= 5, (reordered, naive_wrong)


def test_the_campaign_mixes_them_in_and_keeps_them_whole() -> None:
    cfg = load_config("small")
    cases = [make_case(cfg, 3, k, fault_rate=0.0) for k in range(40)]
    mixed = [c for c in cases if c.program.meta.get("reinterleaved")]
    assert 4 <= len(mixed) <= 20
    again = make_case(cfg, 3, cases.index(mixed[0]), fault_rate=0.0)  # deterministic: a failure replays
    assert again.program.insns == mixed[0].program.insns
    several = make_case(load_config("small2"), 3, 0, fault_rate=0.0)
    assert "reinterleaved" not in several.program.meta


def test_one_core_only() -> None:
    cfg = load_config("small2")
    insns, windows = concat_streams([[Finish()], [Finish()]])
    p = Program.create(cfg, insns, plan_layout(cfg, [], len(insns)), windows=windows, name="two")
    with pytest.raises(ValueError, match="two: re-interleaving is for one core's stream"):
        reinterleave(p, np.random.default_rng(0), 4)


def test_token_bins_count_valid_runs_and_need_a_one_core_config() -> None:
    from cosim.fuzz.bins import observe, unreachable

    cfg = load_config("small")
    p = next(q for q in (reinterleave(generate(cfg, s), np.random.default_rng([s, 11]), 60) for s in range(20))
             if program_order_problem(q.insns, cfg.token_queue_depth) is not None)
    ref = models.iss(p)
    assert any(b.startswith("token.") for b in observe(p, ref, groups=["token"]))
    faulty = dataclasses.replace(ref, error={"code": 5, "name": "DEADLOCK", "pc": 0})
    assert not observe(p, faulty, groups=["token"])
    assert "token.l2c.pop_first" in unreachable([load_config("small2")])
    assert "token.l2c.pop_first" not in unreachable([load_config("small2"), cfg])
