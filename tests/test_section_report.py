"""The per-section report of a traced TLM run (cosim/section_report.py), the Perfetto section spans and
the disassembly's section headers, on hand-written kernels with sections (an ALU kernel with a
prologue, two dense layers on the GEMM core: tests/kernels/sectioned.py) and on network Programs.

The report's sums are checked against what the TLM counted by itself (its CYCLES and CSR counters),
so a section row that lost or double-counted an instruction's cycles fails here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler import packing as P
from compiler.build import build
from compiler.graph import Graph
from compiler.network import compile_network
from cosim import models
from cosim.cli import main as cosim_main
from cosim.section_report import COUNTERS, program_sections, section_report
from hw.config import load_config
from hw.isa import INSN_BYTES
from hw.program import Program

KERNELS = Path(__file__).parent / "kernels"
sys.path.insert(0, str(KERNELS))
from sectioned import sectioned_add, two_dense  # noqa: E402


def _add_program(cfg: str, vecs: int = 40, tile: int = 8) -> Program:
    job = models.make_job(f"{KERNELS / 'sectioned.py'}:sectioned_add", load_config(cfg),
                          {"X": f"{vecs}x16", "Y": f"{vecs}x16:int8", "tile": tile})
    return job.program


def _dense_program(cfg: str, m: int = 20, k: int = 70, h: int = 40, n: int = 10) -> Program:
    c = load_config(cfg)
    b = c.block
    rng = np.random.default_rng(1)
    a, w1 = rng.integers(-50, 50, (m, k)).astype(np.int8), rng.integers(-50, 50, (h, k)).astype(np.int8)
    b1, w2 = rng.integers(-3000, 3000, h).astype(np.int32), rng.integers(-50, 50, (n, h)).astype(np.int8)
    args = {"A": P.pack_matrix(a, b), "W1": P.pack_dense_weights(w1, b), "b1": P.pack_bias(b1, b),
            "W2": P.pack_dense_weights(w2, b), "C": np.zeros((1, P.blocks(n, b), m, 1, b), np.int8)}
    prog = build(two_dense, args, c)
    for name in ("A", "W1", "b1", "W2"):
        prog.set_input(name, args[name].reshape(prog.region(name).shape))
    return prog


def _net_program(cfg: str, batch: int = 3) -> Program:
    rng = np.random.default_rng(5)
    g = Graph("small_cnn")
    x = g.input("x", (3, 6, 6))
    y = g.relu(g.requantize(g.conv2d(x, rng.integers(-30, 30, (20, 3, 3, 3)).astype(np.int8),
                                     rng.integers(-900, 900, 20).astype(np.int32), pad=1, name="conv"), 7))
    y = g.flatten(g.max_pool(y, 2, name="pool"))
    y = g.requantize(g.dense(y, rng.integers(-30, 30, (10, y.shape[0])).astype(np.int8), None, name="fc"), 8)
    g.output(y)
    net = compile_network(g, cfg, batch=batch)
    net.set_inputs({"x": rng.integers(-100, 100, (batch, 3, 6, 6)).astype(np.int8)})
    return net.program


PROGRAMS = {"alu_prologue": _add_program, "gemm_two_dense": _dense_program, "network": _net_program}


def _check_partition(prog: Program, tl: models.TlmTimeline) -> None:
    """Each row ends where every instruction before its end has completed (the last at CYCLES): an
    independent restatement of the rule from the tracer's records."""
    rep = section_report(prog, tl)
    done = {pc: t for (_u, pc, *_rest), t in zip(tl.tracer.insns, tl.tracer.retired)}
    start = 0
    for k, row in enumerate(rep.rows):
        assert row.start == start
        want = tl.result.cycles if k == len(rep.rows) - 1 else \
            max([start] + [t for pc, t in done.items() if pc < row.first + row.count])
        assert row.end == want, row.name
        start = row.end


@pytest.mark.parametrize("config", ["default", "small", "wide"])
@pytest.mark.parametrize("kind", list(PROGRAMS))
def test_sections_partition_the_run_and_sum_to_the_counters(kind: str, config: str) -> None:
    prog = PROGRAMS[kind](config)
    tl = models.tlm_traced(prog)
    res = tl.result
    assert res.error is None
    plain = models.tlm(prog)  # untraced (fast-forward allowed): the very same run
    assert plain.cycles == res.cycles and plain.counters == res.counters
    rep = section_report(prog, tl)
    assert rep.mismatches() == []
    assert sum(r.cycles for r in rep.rows) == res.cycles
    tot = rep.totals()
    assert {c: tot[c] for c in COUNTERS} == {c: res.counters[c] for c in COUNTERS}
    assert [r.name for r in rep.rows if r.name != "(prologue)"] == [s["name"] for s in prog.meta["sections"]]
    # only FINISH is outside the rows: one compute instruction, its 16 bytes of fetch
    assert rep.outside["compute_insns"] == 1 and rep.outside["fetch_bytes"] == INSN_BYTES
    assert sum(rep.outside[f"{u}_insns"] for u in ("load", "store")) == 0
    peak = prog.config.macs_per_cycle
    assert sum(r.block_macs for r in rep.rows) == res.counters["gemm_ops"] * peak
    _check_partition(prog, tl)
    if kind == "alu_prologue":
        assert rep.rows[0].name == "(prologue)" and rep.rows[0].count == 1 and rep.rows[0].counters["load_insns"] == 1
        assert all(r.macs == 0 for r in rep.rows)
    elif kind == "gemm_two_dense":
        assert [r.macs_source for r in rep.rows] == ["gemm blocks"] * 2
        assert all(r.macs == r.block_macs > 0 for r in rep.rows)
    else:
        layers = {ly["name"]: ly["macs"] for ly in prog.meta["network"]["layers"]}
        assert all(r.macs_source == "network" and r.macs == layers[r.name] for r in rep.rows)
        assert rep.rows[0].macs == 3 * 20 * 36 * 27  # conv: batch x O x Ho*Wo x C*K*K
        j = rep.to_json()
        assert j["sums_match_counters"] and j["sections"][0]["peak_pct"] == pytest.approx(
            100 * rep.rows[0].macs / rep.rows[0].cycles / peak)


def test_gaps_and_empty_sections_keep_the_sums() -> None:
    """Sections as a Program folder may carry them: one dropped (its instructions are outside every
    row, their time in the next row's span) and one empty (0 cycles)."""
    prog = _add_program("default", vecs=48)
    secs = prog.meta["sections"]
    prog.meta["sections"] = [secs[0], {"name": "empty", "first": secs[1]["first"], "count": 0}] + secs[2:]
    tl = models.tlm_traced(prog)
    rep = section_report(prog, tl)
    assert rep.mismatches() == []
    by = {r.name: r for r in rep.rows}
    assert by["empty"].cycles == 0 and by["empty"].counters["fetch_bytes"] == 0
    assert rep.outside["fetch_bytes"] == (secs[1]["count"] + 1) * INSN_BYTES  # the dropped tile + FINISH
    assert rep.outside["store_insns"] == 1
    _check_partition(prog, tl)


def test_a_program_without_sections_has_no_rows_and_no_section_track(tmp_path: Path) -> None:
    job = models.make_job("matmul", load_config("default"))
    tl = models.tlm_traced(job.program, trace=tmp_path / "t.json")
    rep = section_report(job.program, tl)
    assert rep.rows == [] and rep.mismatches() == []
    assert rep.outside == {c: tl.result.counters[c] for c in COUNTERS}
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert not [e for e in ev if e.get("tid") == 6]


def test_perfetto_has_one_span_per_section_tiling_the_run(tmp_path: Path) -> None:
    prog = _net_program("default")
    tl = models.tlm_traced(prog, trace=tmp_path / "t.json")
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    track = [e for e in ev if e["ph"] == "M" and e["args"].get("name") == "sections"]
    assert len(track) == 1
    spans = [e for e in ev if e.get("tid") == track[0]["tid"] and e["ph"] == "X"]
    assert [s["name"] for s in spans] == [s["name"] for s in prog.meta["sections"]]
    assert spans[0]["ts"] == 0 and spans[-1]["ts"] + spans[-1]["dur"] == tl.result.cycles
    assert all(a["ts"] + a["dur"] == b["ts"] for a, b in zip(spans, spans[1:]))
    rep = section_report(prog, tl)
    assert [s["dur"] for s in spans] == [r.cycles for r in rep.rows]


def test_cosim_run_trace_writes_the_section_spans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    rc = cosim_main(["run", f"{KERNELS / 'sectioned.py'}:sectioned_add", "-p", "X=24x16", "-p", "Y=24x16:int8",
                     "--model", "tlm", "--trace", str(out)])
    assert rc == 0, capsys.readouterr()
    names = [e["name"] for e in json.loads(out.read_text())["traceEvents"] if e.get("tid") == 6 and e["ph"] == "X"]
    assert names == ["(prologue)", "tile0", "tile1", "tile2"]
    capsys.readouterr()
    rc = cosim_main(["run", f"{KERNELS / 'sectioned.py'}:sectioned_add", "-p", "X=24x16", "-p", "Y=24x16:int8",
                     "--model", "tlm", "--sections", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["match"] is True and d["sections"]["sums_match_counters"] is True
    assert [s["name"] for s in d["sections"]["sections"]] == names
    assert sum(s["cycles"] for s in d["sections"]["sections"]) == d["cycles"]


def test_disasm_heads_each_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = _dense_program("default")
    d = prog.save(tmp_path / "p")
    assert cosim_main(["disasm", str(d)]) == 0
    lines = capsys.readouterr().out.splitlines()
    heads = [k for k, line in enumerate(lines) if line.startswith("; section ")]
    assert [lines[k] for k in heads] == ["; section fc1", "; section fc2"]
    for k, s in zip(heads, prog.meta["sections"]):
        assert lines[k + 1].split(":")[0].strip() == str(s["first"])  # the header precedes its first instruction
    assert len(lines) == len(prog.insns) + 2
    assert (d / "program.lst").read_text().splitlines() == lines
    assert cosim_main(["disasm", str(d), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sections"] == prog.meta["sections"]


@pytest.mark.parametrize("bad, why", [
    ({"name": "", "first": 0, "count": 1}, "non-empty 'name'"),
    ({"name": "a", "first": -1, "count": 1}, "non-negative integers"),
    ({"name": "a", "first": 0, "count": 10**6}, "run past the"),
    ("fc1", "must be an object"),
])
def test_malformed_sections_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad,
                                                why: str) -> None:
    prog = _dense_program("default")
    d = prog.save(tmp_path / "p")
    layout = json.loads((d / "layout.json").read_text())
    layout["meta"]["sections"] = [bad]
    (d / "layout.json").write_text(json.dumps(layout))
    assert cosim_main(["disasm", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and why in err[0] and "meta 'sections'" in err[0], err
    with pytest.raises(ValueError, match="overlap"):
        prog.meta["sections"] = [{"name": "a", "first": 5, "count": 3}, {"name": "b", "first": 6, "count": 1}]
        program_sections(prog)


def test_table_lines_show_every_row_and_the_total() -> None:
    prog = _net_program("default")
    rep = section_report(prog, models.tlm_traced(prog))
    lines = rep.table_lines("layer")
    assert lines[0].startswith("layer") and lines[-1].split()[:2] == ["total", str(rep.cycles)]
    assert [line.split()[0] for line in lines[2:2 + len(rep.rows)]] == [r.name for r in rep.rows]


def _push_stall_program(cfg_name: str) -> Program:
    """LOADs pushing more tokens than the load->compute queue holds while COMPUTE is busy on a long ALU
    loop: the LOADs past the queue's depth wait in PUSH (push stalls), and the compute ALUs that pop
    them wait in WAIT for the rest. Two hand-made sections: the loads, the ALUs and the store."""
    from hw.assembler import Assembler

    cfg = load_config(cfg_name)
    n = cfg.token_queue_depth + 4
    data = np.arange(4 * cfg.lanes, dtype=np.int32).reshape(4, cfg.lanes)
    asm = Assembler(cfg, "push_stall")
    a = asm.input("a", data)
    c = asm.output("c", (4, cfg.lanes))
    asm.alu("ADD", imm=1, iter_out=60 * n, dst_base=8, dst_factor_out=0)  # busy, no tokens
    for k in range(n):
        asm.load(a, x=1, offset=k % 4, sram=k % 4, push_next=True)
    for k in range(n):
        asm.alu("ADD", imm=0, iter_out=1, dst_base=k % 4, dst_factor_out=1, pop_prev=True, push_next=k == n - 1)
    asm.store(c, x=4, pop_prev=True)
    asm.finish()
    prog = asm.program(expected={"c": data.astype(np.int8)})
    prog.meta["sections"] = [{"name": "loads", "first": 1, "count": n},
                             {"name": "alus", "first": 1 + n, "count": n + 1}]
    return prog


def test_push_stalls_are_charged_to_their_instruction() -> None:
    prog = _push_stall_program("default")
    tl = models.tlm_traced(prog)
    assert tl.result.error is None
    rep = section_report(prog, tl)
    assert rep.mismatches() == []
    loads = next(r for r in rep.rows if r.name == "loads")
    # the waits happen in PUSH: a load has no token to take (no WAIT stall)
    assert loads.counters["load_stall"] > 0 and loads.counters["load_stall"] == tl.result.counters["load_stall"]
    assert rep.rows[0].name == "(prologue)" and rep.rows[0].counters["compute_busy"] > 60 * 8
    _check_partition(prog, tl)
