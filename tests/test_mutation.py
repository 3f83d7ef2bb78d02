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
import shutil
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
from tests.conftest import long_tests_enabled

# Mutants by their stable key (file:digest:kind:variant, cosim.mutation.points): lines added or removed
# elsewhere in a file leave the key alone; the comment says where the mutant was when it was chosen.
KILLED = [
    "alu_lane.v:fab1cd9a61:arith:->+",                 # alu_lane.v:25 nsv = 0 + s: negative shifts and CLIP's low bound
    "alu_lane.v:d0347de99d:constant:32'd0>32'd1",      # alu_lane.v:27 a left shift past 31 gives 1, not 0
    "token_queue.v:dcd4ef8354:arith:+>-",              # token_queue.v:25 a token push counts down
    "token_queue.v:fec739d849:stuck_bit:count[0]=1",   # token_queue.v:25 the token count's bit 0 stuck at 1
    "region_check.v:8034813130:arith:+>-",             # region_check.v:23 a region's end is base - size
    "burst_calc.v:61a22c7761:ternary_swap:swap",       # burst_calc.v:15 the burst length's arms swapped
    # survived the first campaigns (no BARRIER on one core), killed by the BARRIER variant of an example:
    "fetch.v:006a6a7194:condition_negated:not",        # fetch.v:203 FETCH leaves F_BAR at once instead of on bar_done
    # survived while every run began after a reset, killed by a Program run twice without one:
    "csr_block.v:cb83438f5c:logical:||>&&",            # csr_block.v:341 START does not clear CYCLES
    # survived while every stream began 32-byte aligned, killed by a stream starting half a line in:
    "fetch.v:d85504dd8a:stuck_bit:addr[4]=0",          # fetch.v:156 the fetch address's bit 4 lost at START (by hand)
    # survived the generated Programs, killed by hand-built edge Programs:
    "alu_lane.v:dd0d38a5b0:constant:32'sd31>32'sd32",  # alu_lane.v:27 SHR by -32 shifts left by 0 instead of giving 0
    "unit_shell.v:95de2e13d5:equality:==>!=",          # unit_shell.v:80 FINISH waiting in EXEC for a drain is not stuck
    "alu_lane.v:172669fd1c:stuck_bit:nsv[30]=1",       # alu_lane.v:25 CLIP's lower bound -s with bit 30 held (edge-clip-wide)
    "core.v:8d8ecfbd32:stuck_bit:ld_bpc[26]=0",        # core.v:120 a deadlock with no unit blocked reports 0xfbffffff
    # survived while the raw harness ignored the AXI4-Lite responses and had one DRAM model:
    "csr_block.v:6c3a2cd203:constant:2'b00>2'd1",      # csr_block.v:118 BRESP = EXOKAY on every register write
    "axi_arbiter.v:2a01527ac6:constant:4'd0>4'd1",     # axi_arbiter.v:271 ARID = 1 (the C++ DRAM model records the IDs)
    # survived while no Program wrote outside the map or CTRL without START, or read a one-core bank:
    "csr_block.v:5bc391cbfb:and_term_dropped:drop1",   # csr_block.v:134 a write past max_regions aliases region 0
    "csr_block.v:0591585b20:and_term_dropped:drop1",   # csr_block.v:146 CTRL without START starts a run
    "csr_block.v:3d68934da6:constant:32'd0>32'd1",     # csr_block.v:427 a bank read past the counters gives 1
]
EQUIVALENT = "alu_lane.v:e0367d9d32:relational:>>>="  # alu_lane.v:26 s > 31 vs s >= 31: both shift by 31 at s == 31
# Survivors of the whole regression's plain runs that only its directed variants kill (built into the same
# schemata, run by test_directed_variants_kill_the_survivors; key -> the variant that must kill it):
DIRECTED = {
    # W beats of a STORE burst orphaned by a soft reset, stretched by WREADY past the START written next,
    # counted in the restarted run's DMA_WR_BYTES without the burst's owner in s_beat
    "axi_arbiter.v:96ef7bb17f:and_term_dropped:drop1": "stall-restart",   # axi_arbiter.v:183
    # a W taken while the CSR block still holds one (WREADY dropped): the second of two writes outstanding
    "csr_block.v:41dfac97a0:and_term_dropped:drop1": "csr-pair",          # csr_block.v:216
}
EXAMPLES = ["vadd", "clip", "vshr", "matmul"]
FUZZ = 4
FAULTS = 3
BARRIERS = 1
OFFSETS = 1
TWICE = 2
EDGES = 12


@pytest.fixture(scope="module")
def all_mutants():
    return scan_rtl(repo_rtl())


@pytest.fixture(scope="module")
def campaign(all_mutants):
    by_key = {m.key: m for m in all_mutants}
    # The scanner holds bit 30 of that statement (every Program kills it); bit 4 is the one only a
    # stream starting half a line in reveals, so that mutant is made by hand from the scanner's.
    m = by_key["fetch.v:d85504dd8a:stuck_bit:addr[30]=1"]
    by_key["fetch.v:d85504dd8a:stuck_bit:addr[4]=0"] = dataclasses.replace(
        m, id=m.id.replace("addr[30]=1", "addr[4]=0"), key=m.key.replace("addr[30]=1", "addr[4]=0"),
        change=m.change.replace("`addr[30]` stuck at 1", "`addr[4]` stuck at 0"), text="addr[4] <= 1'b0;")
    chosen = [by_key[k] for k in KILLED + [EQUIVALENT] + sorted(DIRECTED)]
    setup = prepare("small", 0, 1, fuzz=FUZZ, faults=FAULTS, barriers=BARRIERS, offsets=OFFSETS, twice=TWICE,
                    aimed=0, mutants=chosen, examples=EXAMPLES, check=True)
    verdicts = {int(k): v for k, v in run_mutants(setup.task_args(list(range(1, len(KILLED) + 2)))).items()}
    # the directed mutants ride in the same build; the short regression's report leaves them out
    return dataclasses.replace(setup, mutants=setup.mutants[:len(KILLED) + 1]), verdicts, setup


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


def _edited_rtl(tmp_path: Path) -> tuple[Path, str, int]:
    """A copy of the RTL with a comment line put at the top of every file (every id below moves) and a new
    assignment before load_unit.v's `endmodule` (new mutants): (folder, that file, the new line's number)."""
    rtl = tmp_path / "rtl"
    shutil.copytree(repo_rtl(), rtl)
    for f in rtl.glob("*.v"):
        f.write_text("// a line added above everything\n" + f.read_text())
    f = rtl / "load_unit.v"
    lines = f.read_text().splitlines(keepends=True)
    end = max(n for n, line in enumerate(lines) if line.startswith("endmodule"))
    lines.insert(end, "    wire probe_w = 1'b1 & 1'b0;\n")
    f.write_text("".join(lines))
    return rtl, "load_unit.v", end + 1


def test_keys_and_the_sample_stay_put_under_unrelated_edits(all_mutants, tmp_path):
    """An edit redraws only the mutants of the lines it touches: keys stay, the sample moves by the new
    mutants and as many pushed out at the end of the draw, the equivalents list stays valid (ids move)."""
    assert len({m.key for m in all_mutants}) == len(all_mutants)
    rtl, file, line = _edited_rtl(tmp_path)
    after = scan_rtl(rtl)
    old = {m.key: m for m in all_mutants}
    new = {m.key: m for m in after}
    assert set(old) <= set(new)
    added = set(new) - set(old)
    assert added and all(new[k].file == file and new[k].line == line for k in added)
    assert all(new[k].line == m.line + 1 and new[k].id != m.id for k, m in old.items())   # the ids did move
    for seed in (1, 7):
        a = {m.key for m in sample(all_mutants, 200, seed)}
        b = {m.key for m in sample(after, 200, seed)}
        entered, left = b - a, a - b
        assert entered <= added and len(left) == len(entered), seed
    assert equivalents.stale(rtl) == []
    moved = equivalents.moved(rtl)
    assert set(moved) == set(equivalents.load()) and all(moved[i] != i for i in moved)
    # a changed line is a new mutant: its entry goes stale
    f = rtl / "alu_lane.v"
    f.write_text(f.read_text().replace("($signed(sv) > 32'sd31)", "($signed(sv) > 32'sd30)"))
    assert any(s.startswith("alu_lane.v:26:49:relational:>>>=") for s in equivalents.stale(rtl))


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
    setup, verdicts, _ = campaign        # prepare() checked +MUT=0 against golden and TLM on every Program
    expected = json.loads(setup.expected.read_text())
    with open(setup.programs, "rb") as f:
        names = [p.name for p in pickle.load(f)]
    stalled = sum(n.endswith("-stall") for n in names)   # the plain fuzz Programs on the C++ DRAM model
    assert 0 < stalled <= FUZZ
    assert len(expected) == len(names) == \
        len(EXAMPLES) + BARRIERS + OFFSETS + FUZZ + FAULTS + EDGES + 4 * TWICE + stalled + 1 + 1  # + register probe, late error
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
        assert len(at) == 3 + 64 and at["0x808"] == sig["csrs"]["INSN_COUNT"] and at["0x810"] == sig["csrs"]["LOAD_BUSY"]
        assert at["0x80c"] == sig["csrs"]["ERR_PC"] and at["0x848"] == sig["csrs"]["GEMM_OPS"]
        assert all(at[f"0x{a:x}"] == 0 for a in list(range(0x84C, 0x880, 4)) + list(range(0x880, 0x900, 4)))
        # the region slot past max_regions (8 on small) reads 0: no alias of a slot
        assert at["0x180"] == at["0x184"] == at["0x188"] == 0
    for k, mid in enumerate(KILLED, 1):
        assert verdicts[k]["killed"], f"{mid} survived"
        assert verdicts[k]["why"]
    assert verdicts[KILLED.index("fetch.v:006a6a7194:condition_negated:not") + 1]["program"] == "ex-vadd-barrier"
    assert verdicts[KILLED.index("csr_block.v:cb83438f5c:logical:||>&&") + 1]["program"].endswith("-twice")
    assert verdicts[KILLED.index("fetch.v:d85504dd8a:stuck_bit:addr[4]=0") + 1]["program"] == "ex-vadd-offset"
    assert verdicts[KILLED.index("alu_lane.v:dd0d38a5b0:constant:32'sd31>32'sd32") + 1]["program"] == "edge-shr"
    assert verdicts[KILLED.index("unit_shell.v:95de2e13d5:equality:==>!=") + 1]["program"] == "edge-finish-deadlock"
    assert verdicts[KILLED.index("alu_lane.v:172669fd1c:stuck_bit:nsv[30]=1") + 1]["program"] == "edge-clip-wide"
    assert verdicts[KILLED.index("core.v:8d8ecfbd32:stuck_bit:ld_bpc[26]=0") + 1]["program"] == "edge-no-finish"
    assert verdicts[KILLED.index("csr_block.v:6c3a2cd203:constant:2'b00>2'd1") + 1]["why"].startswith("AXI4-Lite")
    for mid in ("csr_block.v:5bc391cbfb:and_term_dropped:drop1", "csr_block.v:0591585b20:and_term_dropped:drop1"):
        assert verdicts[KILLED.index(mid) + 1]["program"].endswith("-register-probe"), mid
    assert "by address" in verdicts[KILLED.index("csr_block.v:3d68934da6:constant:32'd0>32'd1") + 1]["why"]
    arid = verdicts[KILLED.index("axi_arbiter.v:2a01527ac6:constant:4'd0>4'd1") + 1]
    assert arid["program"].endswith(("-stall", "-err-r1")) and arid["why"].startswith("AXI IDs")   # a C++ DRAM run
    # the AXI4-Lite responses are recorded (all OKAY), the IDs only on the C++ DRAM model
    assert all(sig["csr_resp"] == [0, 0] for sig, _ in expected)
    cpp = [n.endswith(("-stall", "-err-r1")) for n in names]   # the runs on the C++ DRAM model
    assert sum(cpp) == stalled + 1
    assert all((sig["axi_ids"] == 0) == c for (sig, _), c in zip(expected, cpp))
    # and the AR/AW attributes it records: CACHE 0b0011 (bufferable, modifiable), PROT 0, no LOCK (AW only
    # when the run wrote)
    for (sig, _), c in zip(expected, cpp):
        assert sig["axi_attrs"] is None if not c else (sig["axi_attrs"] & 0xFF == 0x18 and sig["axi_attrs"] >> 8 in (0, 0x18))


def test_listed_equivalent_survives_and_is_reported(campaign):
    setup, verdicts, _ = campaign
    k = len(KILLED) + 1
    assert not verdicts[k]["killed"] and verdicts[k]["runs"] == len(json.loads(setup.expected.read_text()))
    rep = score(setup, verdicts, equivalents.reasons("small"))
    assert set(rep) >= {"mutants", "killed", "score", "by_module", "survivors"}
    assert rep["mutants"] == len(KILLED) + 1 and rep["killed"] == len(KILLED) and rep["score"] == 1.0
    (s,) = rep["survivors"]
    assert s["k"] == k  # the number --only takes, which the survivor line prints
    assert s["key"] == EQUIVALENT and s["equivalent"] and s["file"] == "alu_lane.v" \
        and s["id"] == setup.mutants[-1].id and s["line"] == int(s["id"].split(":")[1])
    assert rep["by_module"]["token_queue"] == {"mutants": 2, "killed": 2}
    assert score(setup, verdicts, {})["score"] < 1.0
    # --only K: the mutants not chosen are outside the score (they were counted as survivors, "not run")
    part = score(setup, {1: verdicts[1]}, {}, only=[1])
    assert (part["mutants"], part["killed"], part["not_chosen"], part["score"]) == (1, 1, len(KILLED), 1.0)
    failed = score(setup, {}, {}, only=[1, 2])  # chosen but its task failed: a survivor, "not run"
    assert failed["mutants"] == 2 and [s["why"] for s in failed["survivors"]] == ["not run", "not run"]


@pytest.mark.parametrize("result", [None, {"1": {"killed": "maybe"}}, {"x": {"killed": True}}, {"1": 5}, "a"])
def test_a_results_record_that_is_no_verdict_is_refused(result):
    from cosim.mutation.campaign import _verdicts
    from cosim.mutation.points import MutationError

    with pytest.raises(MutationError, match="results record 'k': .* is not a verdict"):
        _verdicts({"key": "k", "ok": True, "result": result})
    assert _verdicts({"key": "k", "result": {"3": {"killed": False, "runs": 2}}}) == {3: {"killed": False, "runs": 2}}


def test_directed_variants_kill_the_survivors(campaign):
    """The whole regression's directed variants on vadd: the original gives the plain run's outputs and no
    error on each (the write pair: the whole run), and each directed mutant dies on one of its variant."""
    from compiler.examples import make_case
    from cosim.mutation.campaign import (difference, overlapped_writes, run_raw, signature,
                                         stalled_restart_sweep)

    _, _, full = campaign
    cfg = full.config
    p = make_case("vadd", cfg, seed=0).program
    r = run_raw(p, cfg, full.rtl, 0)
    plain = signature(r)
    pair = overlapped_writes(p)
    assert pair is not None and pair.csr_mode[3] == 2
    sweep = stalled_restart_sweep(p, int(r.extra["sim_cycles"]))
    assert len(sweep) > 100 and all(q.dram_mode[0] for q in sweep)
    if not long_tests_enabled():  # every 4th restart point (several catch a STORE's burst); all with COSIM_LONG
        sweep = sweep[::4]
    variants = {"csr-pair": [pair], "stall-restart": sweep}
    base = {name: [signature(run_raw(q, cfg, full.rtl, 0)) for q in qs] for name, qs in variants.items()}
    assert difference(plain, base["csr-pair"][0]) is None and base["csr-pair"][0]["csr_resp"] == [0, 0]
    for sig in base["stall-restart"]:
        assert sig["error"] is None and sig["outputs"] == plain["outputs"]
    for k, m in enumerate(full.mutants, 1):
        if m.key not in DIRECTED:
            continue
        name = DIRECTED[m.key]
        why = next((d for q, sig in zip(variants[name], base[name])
                    if (d := difference(sig, signature(run_raw(q, cfg, full.rtl, k)))) is not None), None)
        assert why is not None, f"{m.key} survived the {name} variants"
        if name == "stall-restart":
            assert why.startswith("counter dma_wr_bytes"), why


def test_equivalents_file_is_current():
    assert EQUIVALENT in equivalents.reasons()
    assert equivalents.stale(repo_rtl()) == []
    # an entry whose lines moved stays valid; moved() names its current id (the report uses that one)
    assert set(equivalents.moved(repo_rtl())) <= set(equivalents.load())


def test_a_mutant_listed_twice_is_refused(tmp_path):
    """The file is keyed by mutant id and written by hand: a second entry of one id would replace the first
    without a word, so it is refused."""
    entry = '{"key": "k", "reason": "r", "source": "s"}'
    p = tmp_path / "equivalents.json"
    p.write_text(f'{{"m1": {entry}, "m1": {entry}}}')
    with pytest.raises(MutationError, match="key 'm1' is given twice"):
        equivalents.load(p)


# Survivors of the accelerator-level campaign that a unit bench kills: a block alone can be driven in ways the
# whole design reaches only by rare timing (key -> block, its bench, the test that runs it).
UNIT_KILLS = {
    # a push and a pop of one token queue in the same cycle must leave the count unchanged
    "token_queue.v:e9bf2e4a44:and_term_dropped:drop1": ("token_queue", "testbench.units.token_queue_bench"),
}


@pytest.mark.parametrize("key", sorted(UNIT_KILLS))
def test_unit_bench_kills_the_survivor(key, all_mutants, tmp_path, monkeypatch):
    """The mutant written into a copy of the RTL (the real Verilator, cocotb) fails its block's bench."""
    from testbench.block_bench import run_block_bench
    from hw.config import load_config

    m = next(m for m in all_mutants if m.key == key)
    assert m.form == "expr"
    rtl = tmp_path / "rtl"
    shutil.copytree(repo_rtl(), rtl)
    src = (repo_rtl() / m.file).read_text()
    (rtl / m.file).write_text(src[:m.start] + f"({m.text})" + src[m.end:])
    monkeypatch.setenv("COSIM_RTL_DIR", str(rtl))
    monkeypatch.setenv("COSIM_BUILD_DIR", str(tmp_path / "build"))   # never the original's build
    block, bench = UNIT_KILLS[key]
    with pytest.raises(AssertionError):
        run_block_bench(block, bench, load_config("small"))


def test_cli_lists_the_sample_as_json():
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "mutate", "--list", "--count", "30", "--seed", "3",
                        "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ms = json.loads(r.stdout)
    assert len(ms) == 30 and {"id", "file", "line", "module", "kind", "change"} <= set(ms[0])
    assert Path(repo_rtl() / ms[0]["file"]).is_file()
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "mutate", "--list", "--count", "100000", "--json"],
                       capture_output=True, text=True, timeout=60)
    n = len(json.loads(r.stdout))
    assert r.returncode == 0 and n < 100000 and f"the RTL has {n:,} mutants; all are listed" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "cosim.cli", "mutate", "--list", "--only", ","], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "separated by commas" in r.stderr, r.stderr


def test_task_args_name_a_config_given_by_path(tmp_path: Path) -> None:
    """The cluster tasks load the campaign's config again: one given as a file outside hw/configs must reach
    them as that file (by name they would not find it), a shipped one by its name."""
    from cosim.mutation.campaign import Setup
    from hw.config import load_config

    data = json.loads(Path(load_config("small").source).read_text())
    data["name"] = "small_elsewhere"
    path = tmp_path / "small_elsewhere.json"
    path.write_text(json.dumps(data))
    for cfg in (load_config(path), load_config("small")):
        setup = Setup(cfg, [], tmp_path, tmp_path, tmp_path / "p.pkl", tmp_path / "e.json", 0.0, 0.0)
        assert load_config(setup.task_args([1])["config"]) == cfg
