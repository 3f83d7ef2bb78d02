"""Mutation testing of the RTL (cosim.mutation, `cosim mutate`).

One schemata build of a handful of chosen mutants on the `small` config (the real Verilator, the
raw harness) with a short regression: +MUT=0 must agree with the golden outputs and the TLM, the
chosen mutants must die, the listed equivalent one must survive and be reported as such. The
whole campaign (200+ mutants) is `make mutate`.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from cosim.mutation import equivalents
from cosim.mutation.edge_programs import edge_programs
from cosim.mutation.campaign import prepare, repo_rtl, run_mutants, sample, score
from cosim.mutation.points import KINDS, MutationError, scan_rtl
from cosim.mutation.schemata import mutate_text, write_schemata
from hw.introspect.lint import lint

KILLED = [
    "alu_lane.v:25:25:arith:->+",                    # nsv = 0 + s: negative shifts and CLIP's low bound
    "alu_lane.v:27:46:constant:32'd0>32'd1",         # a left shift past 31 gives 1, not 0
    "token_queue.v:25:28:arith:+>-",                 # a token push counts down
    "token_queue.v:25:13:stuck_bit:count[0]=1",      # the token count's bit 0 stuck at 1
    "region_check.v:23:46:arith:+>-",                # a region's end is base - size
    "burst_calc.v:15:38:ternary_swap:swap",          # the burst length's arms swapped
    # survived the first campaigns (no BARRIER on one core), killed by the BARRIER variant of an example:
    "fetch.v:203:25:condition_negated:not",          # FETCH leaves F_BAR at once instead of on bar_done
    # survived while every run began after a reset, killed by a Program run twice without one:
    "csr_block.v:341:17:logical:||>&&",              # START does not clear CYCLES
    # survived while every stream began 32-byte aligned, killed by a stream starting half a line in:
    "fetch.v:156:13:stuck_bit:addr[4]=0",            # the fetch address's bit 4 lost at START (by hand)
    # survived the generated Programs, killed by hand-built edge Programs:
    "alu_lane.v:27:35:constant:32'sd31>32'sd32",     # SHR by -32 shifts left by 0 instead of giving 0
    "unit_shell.v:80:75:equality:==>!=",             # FINISH waiting in EXEC for a drain is not stuck
    "alu_lane.v:25:13:stuck_bit:nsv[30]=1",          # CLIP's lower bound -s with bit 30 held (edge-clip-wide)
    "core.v:120:9:stuck_bit:ld_bpc[26]=0",           # a deadlock with no unit blocked reports 0xfbffffff (edge-no-finish)
    # survived while the raw harness ignored the AXI4-Lite responses and had one DRAM model:
    "csr_block.v:118:29:constant:2'b00>2'd1",        # BRESP = EXOKAY on every register write
    "axi_arbiter.v:271:41:constant:4'd0>4'd1",       # ARID = 1 (the C++ DRAM model records the IDs)
    # survived while no Program wrote outside the map or CTRL without START, or read a one-core bank:
    "csr_block.v:134:103:and_term_dropped:drop1",     # a write past max_regions aliases region 0
    "csr_block.v:146:36:and_term_dropped:drop1",     # CTRL without START starts a run
    "csr_block.v:427:85:constant:32'd0>32'd1",       # a bank read past the counters gives 1
]
EQUIVALENT = "alu_lane.v:26:49:relational:>>>="       # s > 31 vs s >= 31: both shift by 31 at s == 31
EXAMPLES = ["vadd", "clip", "vshr", "matmul"]
FUZZ = 4
FAULTS = 3
BARRIERS = 1
OFFSETS = 1
TWICE = 2
EDGES = 10


@pytest.fixture(scope="module")
def all_mutants():
    return scan_rtl(repo_rtl())


@pytest.fixture(scope="module")
def campaign(all_mutants):
    by_id = {m.id: m for m in all_mutants}
    # The scanner holds bit 30 of that statement (every Program kills it); bit 4 is the one only a
    # stream starting half a line in reveals, so that mutant is made by hand from the scanner's.
    m = by_id["fetch.v:156:13:stuck_bit:addr[30]=1"]
    by_id["fetch.v:156:13:stuck_bit:addr[4]=0"] = dataclasses.replace(
        m, id="fetch.v:156:13:stuck_bit:addr[4]=0", change=m.change.replace("`addr[30]` stuck at 1", "`addr[4]` stuck at 0"),
        text="addr[4] <= 1'b0;")
    chosen = [by_id[i] for i in KILLED + [EQUIVALENT]]
    setup = prepare("small", 0, 1, fuzz=FUZZ, faults=FAULTS, barriers=BARRIERS, offsets=OFFSETS, twice=TWICE,
                    aimed=0, mutants=chosen, examples=EXAMPLES, check=True)
    verdicts = {int(k): v for k, v in run_mutants(setup.task_args(list(range(1, len(chosen) + 1)))).items()}
    return setup, verdicts


def test_mutants_are_found_in_every_module_of_the_design(all_mutants):
    ids = [m.id for m in all_mutants]
    assert len(ids) == len(set(ids)) > 1000
    assert {m.kind for m in all_mutants} == set(KINDS)
    mods = {m.module for m in all_mutants}
    assert {"alu_lane", "gemm", "fetch", "load_unit", "store_unit", "csr_block", "axi_arbiter"} <= mods
    assert "sram_tdp" not in mods   # not instantiated under accel_top: no accelerator run reaches it
    assert not any(m.change.startswith("`dbg_") for m in all_mutants)


def test_sample_is_deterministic_and_spread(all_mutants):
    a, b = sample(all_mutants, 200, 7), sample(all_mutants, 200, 7)
    assert [m.id for m in a] == [m.id for m in b] and len(a) == 200
    assert [m.id for m in sample(all_mutants, 200, 8)] != [m.id for m in a]
    assert {m.module for m in a} == {m.module for m in all_mutants}


def test_schemata_of_every_mutant_is_lint_clean(all_mutants, tmp_path):
    out = write_schemata(repo_rtl(), tmp_path / "rtl", all_mutants)
    rep = lint("small", out)
    assert rep["ok"], "\n".join(rep["messages"][:10])
    # the original folder is untouched and never a target
    with pytest.raises(MutationError):
        write_schemata(repo_rtl(), repo_rtl() / "copy", all_mutants[:1])


def test_no_mutant_is_the_original_text():
    text = (repo_rtl() / "token_queue.v").read_text()
    assert mutate_text(text, []).endswith(text)


def test_original_reproduces_golden_and_tlm_and_the_chosen_mutants_die(campaign):
    setup, verdicts = campaign        # prepare() checked +MUT=0 against golden and TLM on every Program
    expected = json.loads(setup.expected.read_text())
    with open(setup.programs, "rb") as f:
        names = [p.name for p in pickle.load(f)]
    stalled = sum(n.endswith("-stall") for n in names)   # the plain fuzz Programs on the C++ DRAM model
    assert 0 < stalled <= FUZZ
    assert len(expected) == len(names) == \
        len(EXAMPLES) + BARRIERS + OFFSETS + FUZZ + FAULTS + EDGES + 4 * TWICE + stalled + 1  # + 1 register probe
    # prepare() also checked each run-twice and reset-midway Program against its single run (same
    # signature, a full last run; outputs and error for restart-midway and a stalled DRAM)
    for variant in ("-twice", "-reset-midway", "-restart-midway", "-reset-with-start"):
        assert sum(n.endswith(variant) for n in names) == TWICE, variant
    assert sum(n.endswith("-offset") for n in names) == OFFSETS
    assert {p.name for p in edge_programs(setup.config)} <= set(names) and len(edge_programs(setup.config)) == EDGES
    assert all(sig["csrs"]["REGION0_SIZE"] is not None for sig, _ in expected)   # CSRs read back too
    # one core: its bank read by address holds the fixed map's registers, 0 past the counters and in core 1's
    for sig, _ in expected:
        at = sig["csrs_at"]
        assert len(at) == 64 and at["0x808"] == sig["csrs"]["INSN_COUNT"] and at["0x810"] == sig["csrs"]["LOAD_BUSY"]
        assert at["0x80c"] == sig["csrs"]["ERR_PC"] and at["0x848"] == sig["csrs"]["GEMM_OPS"]
        assert all(at[f"0x{a:x}"] == 0 for a in list(range(0x84C, 0x880, 4)) + list(range(0x880, 0x900, 4)))
    for k, mid in enumerate(KILLED, 1):
        assert verdicts[k]["killed"], f"{mid} survived"
        assert verdicts[k]["why"]
    assert verdicts[KILLED.index("fetch.v:203:25:condition_negated:not") + 1]["program"] == "ex-vadd-barrier"
    assert verdicts[KILLED.index("csr_block.v:341:17:logical:||>&&") + 1]["program"].endswith("-twice")
    assert verdicts[KILLED.index("fetch.v:156:13:stuck_bit:addr[4]=0") + 1]["program"] == "ex-vadd-offset"
    assert verdicts[KILLED.index("alu_lane.v:27:35:constant:32'sd31>32'sd32") + 1]["program"] == "edge-shr"
    assert verdicts[KILLED.index("unit_shell.v:80:75:equality:==>!=") + 1]["program"] == "edge-finish-deadlock"
    assert verdicts[KILLED.index("alu_lane.v:25:13:stuck_bit:nsv[30]=1") + 1]["program"] == "edge-clip-wide"
    assert verdicts[KILLED.index("core.v:120:9:stuck_bit:ld_bpc[26]=0") + 1]["program"] == "edge-no-finish"
    assert verdicts[KILLED.index("csr_block.v:118:29:constant:2'b00>2'd1") + 1]["why"].startswith("AXI4-Lite")
    for mid in ("csr_block.v:134:103:and_term_dropped:drop1", "csr_block.v:146:36:and_term_dropped:drop1"):
        assert verdicts[KILLED.index(mid) + 1]["program"].endswith("-register-probe"), mid
    assert "by address" in verdicts[KILLED.index("csr_block.v:427:85:constant:32'd0>32'd1") + 1]["why"]
    arid = verdicts[KILLED.index("axi_arbiter.v:271:41:constant:4'd0>4'd1") + 1]
    assert arid["program"].endswith("-stall") and arid["why"].startswith("AXI IDs")
    # the AXI4-Lite responses are recorded (all OKAY), the IDs only on the C++ DRAM model
    assert all(sig["csr_resp"] == [0, 0] for sig, _ in expected)
    assert all((sig["axi_ids"] == 0) == n.endswith("-stall") for (sig, _), n in zip(expected, names))


def test_listed_equivalent_survives_and_is_reported(campaign):
    setup, verdicts = campaign
    k = len(KILLED) + 1
    assert not verdicts[k]["killed"] and verdicts[k]["runs"] == len(json.loads(setup.expected.read_text()))
    rep = score(setup, verdicts, equivalents.reasons("small"))
    assert set(rep) >= {"mutants", "killed", "score", "by_module", "survivors"}
    assert rep["mutants"] == len(KILLED) + 1 and rep["killed"] == len(KILLED) and rep["score"] == 1.0
    (s,) = rep["survivors"]
    assert s["id"] == EQUIVALENT and s["equivalent"] and s["file"] == "alu_lane.v" \
        and s["line"] == int(EQUIVALENT.split(":")[1])
    assert rep["by_module"]["token_queue"] == {"mutants": 2, "killed": 2}
    assert score(setup, verdicts, {})["score"] < 1.0


def test_equivalents_file_is_current():
    assert EQUIVALENT in equivalents.reasons()
    assert equivalents.stale(repo_rtl()) == []


def test_cli_lists_the_sample_as_json():
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "mutate", "--list", "--count", "30", "--seed", "3",
                        "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ms = json.loads(r.stdout)
    assert len(ms) == 30 and {"id", "file", "line", "module", "kind", "change"} <= set(ms[0])
    assert Path(repo_rtl() / ms[0]["file"]).is_file()
