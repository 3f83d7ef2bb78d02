"""`cosim sweep`: the spec, the grid, invalid points, the table, the Pareto front, the plots.

The sweep test runs 8 configs x 3 workloads on the TLM through the engine. Area comes from real
synthesis only: two tiny configs of the grid are synthesized (ECP5, a few seconds each) into a
private cache, and the sweep runs with ``--area cached``, so those two carry their real area and
the front is checked on them; the other configs say they were not synthesized (no number is made
up for them).
"""

from __future__ import annotations

import csv
import json
import shlex
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hw.config import load_config
from cosim.cli import main
from cosim.sweep import area as area_mod
from cosim.sweep.pareto import pareto_front
from cosim.sweep.spec import SpecError, load_spec, parse_spec

# A config smaller than any shipped one: 4 lanes, 16-deep buffers, a 32-bit bus.
TINY = {**load_config("small").to_dict(), "name": "tiny", "description": "sweep tests: the smallest config",
        "block": 4, "acc_depth": 16, "inp_depth": 16, "wgt_depth": 16, "uop_depth": 16, "bus_width": 32,
        "dram_bytes": 1 << 20, "max_burst": 4}

# 2 x 2 x 2 = 8 configs; block 4 with a 64-bit bus is invalid (a 4-byte output vector is not a whole
# 8-byte beat): 2 invalid configs. vadd's 4-vector tiles and the network's layers do not fit a
# 16-deep accumulator buffer.
SPEC = """
name: t
base: tiny.json
parameters:
  block: [4, 8]
  bus_width: [32, 64]
  acc_depth: [16, 32]
workloads:
  - example: vadd
    params: {shape: [32, 8], tile: 4}
  - operator: matmul
    params: {M: 8, K: 16, N: 8}
  - network: digits
    images: 2
area: {target: ecp5, metric: luts, timeout: 300}
"""


def _write(tmp: Path, text: str = SPEC, name: str = "t.yaml") -> Path:
    (tmp / "tiny.json").write_text(json.dumps(TINY))
    p = tmp / name
    p.write_text(text)
    return p


def _one_line_error(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


# ---- the spec -------------------------------------------------------------------------------------
def test_grid_links_keys_and_reports_invalid_configs(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path))
    cps = spec.configs()
    assert len(cps) == 8 and spec.grid_size == 8
    bad = [cp for cp in cps if cp.config is None]
    assert [(cp.overrides["block"], cp.overrides["bus_width"]) for cp in bad] == [(4, 64), (4, 64)]
    assert all(cp.reason.startswith("config: key 'bus_width'") and "beat" in cp.reason for cp in bad)
    linked = parse_spec({"base": "small", "parameters": {"bufs": [{"acc_depth": 64, "inp_depth": 64},
                                                                  {"acc_depth": 128, "inp_depth": 128}]},
                         "workloads": [{"example": "vadd"}]}, tmp_path / "x.yaml")
    assert [(c.config.acc_depth, c.config.inp_depth) for c in linked.configs()] == [(64, 64), (128, 128)]
    # the hardware of a shipped config keeps its name (its RTL build is reused)
    assert linked.configs()[0].name == "small"


def test_random_sample_is_seeded_and_distinct(tmp_path: Path) -> None:
    data = {"base": "small", "parameters": {"dram_read_latency": list(range(1, 41)), "dram_write_latency": [1, 2, 3]},
            "sample": {"count": 10, "seed": 3}, "workloads": [{"example": "vadd"}]}
    a = parse_spec(data, tmp_path / "s.yaml").configs()
    b = parse_spec(data, tmp_path / "s.yaml").configs()
    assert [c.key for c in a] == [c.key for c in b]
    assert len({c.key for c in a}) == 10
    c = parse_spec({**data, "sample": {"count": 10, "seed": 4}}, tmp_path / "s.yaml").configs()
    assert [x.key for x in c] != [x.key for x in a]


BAD_SPECS = [
    ("frobnicate: 1\nworkloads: [{example: vadd}]", "unknown key 'frobnicate'"),
    ("parameters: {blok: [8]}\nworkloads: [{example: vadd}]", "key 'parameters.blok': 'blok' is not a config key"),
    ("parameters: {block: [8, eight]}\nworkloads: [{example: vadd}]", "key 'parameters.block': 'eight' must be an integer"),
    ("parameters: {block: 8}\nworkloads: [{example: vadd}]", "key 'parameters.block': must be a non-empty list"),
    ("parameters: {block: [8], b: [{block: 16}]}\nworkloads: [{example: vadd}]", "also set by parameter 'block'"),
    ("workloads: []", "key 'workloads': must be a non-empty list"),
    ("workloads: [{example: nosuch}]", "key 'workloads[0]': a sweep takes a registered example (cosim list), not 'nosuch'"),
    ("workloads: [{example: vadd, params: {tyle: 4}}]", "example 'vadd' has no param 'tyle'"),
    ("workloads: [{operator: conv9d}]", "unknown GEMM operator 'conv9d'"),
    ("workloads: [{network: digits, images: 100000}]", "images"),
    ("workloads: [{example: vadd}, {example: vadd}]", "two workloads are labelled 'vadd'"),
    ("workloads: [{example: vadd, network: digits}]", "exactly one of example, operator, network"),
    ("base: nosuchconfig\nworkloads: [{example: vadd}]", "key 'base'"),
    ("area: {target: asic}\nworkloads: [{example: vadd}]", "key 'area.target'"),
    ("area: {metric: gates}\nworkloads: [{example: vadd}]", "key 'area.metric': 'gates' is not an area column"),
    ("rtl: some\nworkloads: [{example: vadd}]", "key 'rtl'"),
    ("sample: {count: 0}\nworkloads: [{example: vadd}]", "key 'sample.count'"),
    ("parameters: {dram_read_latency: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], dram_write_latency: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],"
     " max_burst: [1, 2, 4, 8, 16, 32, 64, 128, 256], token_queue_depth: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}\n"
     "workloads: [{example: vadd}]", "add 'sample: {count: N}'"),
    ("workloads: [{example: vadd}\n  - oops", "not valid YAML"),
    ("- just\n- a list", "the spec must be a mapping"),
    ("workloads: [{example: vadd}]\nseed: 1\nseed: 2", "key 'seed' is given twice at line 3"),
    ("workloads:\n  - {example: vadd, n: 64, n: 128}", "key 'n' is given twice at line 2"),
    ("workloads: [{network: docs/networks/tiny_cnn.py:tiny_cnn}]",
     "key 'workloads[0]': give it a name: (letters, digits"),
    # a param of the wrong type is the spec's error, not an invalid point on every config
    ("workloads: [{operator: matmul, params: {M: 1.5}}]", "param 'M': 1.5 is not an integer"),
    ("workloads: [{example: vadd, params: {shape: abc}}]", "param 'shape': 'abc' is not a shape"),
    ("workloads: [{example: vadd, params: {shape: [0, 16]}}]", "param 'shape': [0, 16] is not a shape"),
    ("workloads: [{operator: dense, params: {relu: 'yes'}}]", "param 'relu': 'yes' is not true or false"),
    ("workloads: [{example: vadd, params: {tile: eight}}]", "param 'tile': 'eight' is not an integer, auto or null"),
    ("workloads: [{example: vadd, params: {tile: true}}]", "param 'tile': True is not an integer, auto or null"),
    ("workloads: [{example: requant_real, params: {scale: .nan}}]", "param 'scale': nan is not a number"),
    ("workloads: [{operator: conv2d, params: {shift: -1}}]", "param 'shift': -1 must be a non-negative integer"),
    ("workloads: [{operator: conv2d, params: {stride: 0}}]", "param 'stride': 0 must be a positive integer"),
    ("workloads: [{example: requant_real, params: {scale: [1]}}]", "param 'scale': [1] is not a number"),
    ("rtl: 0\nworkloads: [{example: vadd}]", "key 'rtl.sample'"),
    ("area: 0\nworkloads: [{example: vadd}]", "key 'area'"),
]


@pytest.mark.parametrize("text,want", BAD_SPECS, ids=[w for _, w in BAD_SPECS])
def test_bad_spec_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, text: str, want: str) -> None:
    p = _write(tmp_path, text, "bad.yaml")
    err = _one_line_error(capsys, ["sweep", str(p), "--out", str(tmp_path / "o")])
    assert err.startswith(f"cosim sweep: error: {p}") and want in err, err
    with pytest.raises(SpecError):
        load_spec(p)


def test_bad_files_and_arguments_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert "no such sweep spec file" in _one_line_error(capsys, ["sweep", str(tmp_path / "none.yaml")])
    assert "not a regular file" in _one_line_error(capsys, ["sweep", str(tmp_path)])
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deep" in _one_line_error(capsys, ["sweep", str(deep)])
    spec = _write(tmp_path, name="sweep.csv")  # YAML by any name but .json
    before = spec.read_text()
    assert "the sweep writes its report there" in _one_line_error(capsys, ["sweep", str(spec), "--out", str(tmp_path)])
    assert spec.read_text() == before
    j = tmp_path / "s.json"
    j.write_text("{\"workloads\": [}")
    assert "not valid JSON" in _one_line_error(capsys, ["sweep", str(j)])
    j.write_text("{\"seed\": 1, \"seed\": 2, \"workloads\": [{\"example\": \"vadd\"}]}")
    assert "key 'seed' is given twice" in _one_line_error(capsys, ["sweep", str(j)])
    p = _write(tmp_path)
    for bad in ("0", "1_0", "1000001", "some"):
        assert f"--rtl: expected none, all or a number of sampled points 1..1000000, not '{bad}'" in \
            _one_line_error(capsys, ["sweep", str(p), "--rtl", bad])
    assert "--workers" in _one_line_error(capsys, ["sweep", str(p), "--workers", "-1"])
    assert "--scheduler" in _one_line_error(capsys, ["sweep", str(p), "--scheduler", "not an address"])


# ---- the Pareto front -------------------------------------------------------------------------------
def test_pareto_front_is_the_non_dominated_set() -> None:
    rng = random.Random(5)
    for _ in range(200):
        pts = [(k, rng.randint(1, 8), rng.randint(1, 8)) for k in range(rng.randint(1, 12))]
        want = [k for k, x, y in pts
                if not any(x2 <= x and y2 <= y and (x2 < x or y2 < y) for _, x2, y2 in pts)]
        assert sorted(pareto_front(pts)) == sorted(want)
    assert pareto_front([("a", 1, 5), ("b", 2, 2), ("c", 2, 2), ("d", 3, 3), ("e", 5, 1)]) == ["a", "b", "c", "e"]


# ---- the sweep ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    """A build root whose synthesis cache holds the real ECP5 area of the two 4-lane, 32-bit-bus
    configs of the test grid (synthesized here, in parallel): config name -> area."""
    root = tmp_path_factory.mktemp("build")
    spec = load_spec(_write(tmp_path_factory.mktemp("spec")))
    tiny = [cp for cp in spec.configs() if cp.config is not None and cp.overrides["block"] == 4]
    assert len(tiny) == 2
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COSIM_BUILD_DIR", str(root))
        args = [{"config": cp.config.to_dict(), "target": "ecp5", "timeout": 300,
                 "key": area_mod.area_key(cp.config, "ecp5")} for cp in tiny]
        with ThreadPoolExecutor(2) as pool:  # yosys runs in a subprocess: the two run side by side
            areas = list(pool.map(area_mod.area_task, args))
        again = area_mod.area_task(args[0])
    assert all(a["status"] == "ok" and a["source"] == "synthesized" for a in areas), areas
    assert again["source"] == "cached" and again["luts"] == areas[0]["luts"]
    for a in areas:
        assert a["luts"] > 1000 and a["ffs"] > 500 and a["multipliers"] > 0
    return root, {cp.name: a for cp, a in zip(tiny, areas)}


def test_sweep_writes_table_front_and_plots(tmp_path: Path, synthesized: tuple[Path, dict[str, dict]],
                                            capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    root, areas = synthesized
    monkeypatch.setenv("COSIM_BUILD_DIR", str(root))
    spec = _write(tmp_path)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--area", "cached", "--workers", "2", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    rows = rep["rows"]
    assert rep["counts"]["configs"] == 8 and len(rows) == 24 and rep["counts"]["failed"] == 0
    # invalid points: the 2 rejected configs x 3 workloads, and vadd's tile on 16-deep buffers
    inv = [r for r in rows if r["status"] == "invalid"]
    assert sum(r["reason"].startswith("config: key 'bus_width'") for r in inv) == 6
    # vadd's 4-vector tiles and the digits network's pooling rows do not fit 16-deep buffers
    wl_inv = [r for r in inv if r["reason"].startswith("workload:")]
    assert {(r["workload"], r["params"]["block"]) for r in wl_inv} == {(w, b) for w in ("vadd", "digits") for b in (4, 8)}
    assert all(r["params"]["acc_depth"] == 16 and "tile" in r["reason"] for r in wl_inv)
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 24 - len(inv)
    for r in ok:
        assert r["tlm_cycles"] > 0 and 0 < r["utilization"]["load"] <= 1 and r["dma_rd_bytes"] > 0
        if r["workload"] in ("matmul", "digits"):
            assert r["macs"] > 0 and 0 < r["mac_utilization"] <= 1
    # area: real numbers for the two synthesized configs, none made up for the others
    for r in ok:
        if r["config"] in areas:
            assert r["area"] == areas[r["config"]]["luts"] and r["area_detail"]["brams"] == areas[r["config"]]["brams"]
        else:
            assert r["area"] is None and r["area_status"].startswith("not synthesized")
    # the front of each workload is the non-dominated set of its points with an area
    for label in ("vadd", "matmul", "digits"):
        cand = [r for r in ok if r["workload"] == label and r["area"] is not None]
        want = {r["config"] for r in cand
                if not any(o["area"] <= r["area"] and o["tlm_cycles"] <= r["tlm_cycles"]
                           and (o["area"] < r["area"] or o["tlm_cycles"] < r["tlm_cycles"]) for o in cand)}
        assert {f["config"] for f in rep["fronts"][label]} == want and want
        assert {r["config"] for r in rows if r["workload"] == label and r["on_front"]} == want
    # the files: CSV (one row per point), JSON, a PNG per workload
    with open(out / "sweep.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 24 and {"block", "bus_width", "acc_depth", "tlm_cycles", "area", "util_load",
                                 "on_front"} <= set(table[0])
    assert json.loads((out / "sweep.json").read_text())["counts"] == rep["counts"]
    for label in ("vadd", "matmul", "digits"):
        png = out / f"pareto-{label}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # each point is recorded once; a rerun resumes them all and gives the same table
    keys = [json.loads(line)["key"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 18
    assert main(["sweep", str(spec), "--out", str(out), "--area", "cached", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert len((out / "results.jsonl").read_text().splitlines()) == 18
    assert [(r["config"], r["workload"], r["tlm_cycles"]) for r in again["rows"]] == \
        [(r["config"], r["workload"], r["tlm_cycles"]) for r in rows]


def test_sweep_text_report_and_no_area(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = _write(tmp_path, "base: small\nparameters: {dram_read_latency: [8, 64]}\n"
                            "workloads: [{example: vadd}]\narea: none\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "2 configs x 1 workloads = 2 points (ok 2" in text and "area: not measured" in text
    rep = json.loads((tmp_path / "o" / "sweep.json").read_text())
    cyc = {r["params"]["dram_read_latency"]: r["tlm_cycles"] for r in rep["rows"]}
    assert cyc[64] > cyc[8]  # a longer DRAM latency costs cycles
    assert rep["fronts"] == {} and not list((tmp_path / "o").glob("*.png"))
    # every point's config is written beside the results, and any command takes it
    files = sorted((tmp_path / "o" / "configs").glob("*.json"))
    assert len(files) == 2 and rep["files"]["configs"] == str(tmp_path / "o" / "configs") and "configs:" in text
    for row in rep["rows"]:  # latency 8 is `small` itself; 64 a derived config (small's tile given by hand)
        tile = [] if row["config"] == "small" else ["-p", "tile=8"]
        assert main(["run", "vadd", "--model", "tlm", "--json", *tile, "--config",
                     str(tmp_path / "o" / "configs" / f"{row['config']}.json")]) == 0
        got = json.loads(capsys.readouterr().out)["cycles"]
        assert got == row["tlm_cycles"] if not tile else got > 0
    # a resumed record that is not a point's result (edited, or from another tool) is refused, naming it
    lines = (tmp_path / "o" / "results.jsonl").read_text().splitlines()
    for change, why in ((lambda r: r.__setitem__("tlm_cycles", -5), "tlm_cycles -5 is not a count"),
                        (lambda r: r.__setitem__("status", "weird"), "status 'weird'"),
                        (lambda r: r.pop("counters"), "its counters are not a map of counts")):
        rec = json.loads(lines[0])
        change(rec["result"])
        (tmp_path / "o" / "results.jsonl").write_text("\n".join([json.dumps(rec)] + lines[1:]) + "\n")
        assert main(["sweep", str(spec), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress lines
        assert "results.jsonl: the record of tlm/" in err and why in err, err


def test_rtl_points_of_one_rtl_share_one_build(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``small`` at two DRAM read latencies: two configs, one RTL, so ONE Verilator build (the one the rest
    of the suite uses) runs both points, with CONFIG_ID and the latency given at run time; each point's
    RTL cycles and counters equal the TLM's, and the latency shows in the cycles."""
    spec = _write(tmp_path, "base: small\nparameters: {dram_read_latency: [8, 32]}\n"
                            "workloads: [{operator: matmul, params: {M: 8, K: 16, N: 8}}]\nrtl: all\n"
                            "area: none\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    ran = [r for r in rep["rows"] if r["rtl_cycles"] is not None]
    assert rep["counts"]["rtl_points"] == len(ran) == 2
    assert all(r["rtl_cycles"] == r["tlm_cycles"] and r["tlm_equals_rtl"] for r in ran)
    assert len({r["rtl_cycles"] for r in ran}) == 2
    assert rep["rtl"]["points"] == 2 and rep["rtl"]["configs"] == 2 and rep["rtl"]["builds"] == 1
    assert rep["rtl"]["build_dirs"][0].startswith(f"rtl-{load_config('small').rtl_id:08x}-fast-")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--fresh"]) == 0
    out = capsys.readouterr().out
    assert "RTL: 2 point(s) of 2 config(s) on 1 simulator build(s) (0 compiled, 1 reused)" in out


def test_rtl_sample_reports_the_cycle_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The RTL on a sample of one point (``small`` itself: its Verilator build is the one the rest
    of the suite uses), in one simulator process: its cycles and counters equal the TLM's."""
    spec = _write(tmp_path, "base: small\nparameters: {dram_read_latency: [8]}\n"
                            "workloads: [{operator: matmul, params: {M: 8, K: 16, N: 8}}]\nrtl: {sample: 1, seed: 0}\n"
                            "area: none\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    ran = [r for r in rep["rows"] if r["rtl_cycles"] is not None]
    assert rep["counts"]["rtl_points"] == len(ran) == 1
    assert ran[0]["rtl_cycles"] == ran[0]["tlm_cycles"] and ran[0]["error_pct"] == 0.0 and ran[0]["tlm_equals_rtl"]
    assert rep["rtl"]["max_abs_error_pct"] == 0.0


def test_optional_config_keys_are_parameters(tmp_path: Path) -> None:
    """Bursts in flight are config keys a one-core base leaves out at their default: a sweep still takes them."""
    p = _write(tmp_path, "base: small\nparameters: {dram_reads_in_flight: [1, 2], dram_writes_in_flight: [1, 3]}\n"
                         "workloads: [{example: vadd}]")
    spec = load_spec(p)
    assert spec.parameters == {"dram_reads_in_flight": [1, 2], "dram_writes_in_flight": [1, 3]}


def test_rtl_one_is_a_sample_of_one_point_not_all() -> None:
    """``1 == True`` in Python: a count of one is not "all" (nor a count of zero "none")."""
    spec = parse_spec({"rtl": 1, "workloads": [{"example": "vadd"}]}, "t.yaml")
    assert (spec.rtl.mode, spec.rtl.count) == ("sample", 1)
    assert parse_spec({"rtl": True, "workloads": [{"example": "vadd"}]}, "t.yaml").rtl.mode == "all"


def test_params_come_typed_from_the_spec() -> None:
    auto = parse_spec({"workloads": [{"example": "vadd", "params": {"tile": "auto"}}]}, "t.yaml")
    assert auto.workloads[0].params == {"tile": None}
    spec = parse_spec({"workloads": [{"example": "vadd", "params": {"shape": [5, 16], "tile": None}},
                                     {"operator": "dense", "params": {"relu": False, "M": 3}}]}, "t.yaml")
    assert [w.params for w in spec.workloads] == [{"shape": [5, 16], "tile": None}, {"relu": False, "M": 3}]


def test_every_point_runs_the_base_config_s_workload() -> None:
    """An example's per-config defaults (vadd's tile, layer_norm's rows) are the base config's on every point,
    whichever shipped core a point happens to equal; a default that follows a given param still follows it."""
    from cosim.sweep.workloads import build_workload

    spec = parse_spec({"base": "small2", "parameters": {"acc_depth": [64, 128]},
                       "workloads": [{"example": "vadd"}, {"example": "layer_norm"},
                                     {"example": "layer_norm", "name": "ln5", "params": {"shape": [5, 8]}}]}, "t.yaml")
    vadd, ln, ln5 = spec.workloads
    assert (vadd.params, vadd.pinned, ln.params, ln5.params, ln5.given) == (
        {"tile": 8}, ("tile",), {"n": 8}, {"shape": [5, 8]}, {"shape": [5, 8]})
    assert vadd.to_dict()["from_base"] == ["tile"]
    points = [cp.config for cp in spec.configs()]
    assert [c.acc_depth for c in points] == [64, 128]
    for w in spec.workloads:
        built = [build_workload(w, cfg, 0) for cfg in points]
        assert len({len(b.program.insns) for b in built}) == 1, w.label
        assert len({tuple(r.shape for r in b.program.regions) for b in built}) == 1, w.label
        assert built[0].params == built[1].params, w.label
    assert build_workload(ln5, points[1], 0).params["n"] == 5


def test_a_tile_shrunk_to_fit_the_base_is_not_pinned_on_the_points() -> None:
    """The base's per-config default is pinned as set; a point whose accumulator takes it runs it whole."""
    from cosim.sweep.workloads import build_workload

    spec = parse_spec({"base": "small2", "parameters": {"acc_depth": [16, 64]},
                       "workloads": [{"example": "vadd"}]}, "t.yaml")
    (vadd,) = spec.workloads
    assert vadd.params == {"tile": 8}
    tiles = [build_workload(vadd, cp.config, 0).params["tile"] for cp in spec.configs()]
    assert tiles[1] == 8 and tiles[0] < 8, tiles


def test_a_sample_has_count_distinct_configs() -> None:
    """Two mappings that make the same hardware are one config; the sample still has ``count`` of them."""
    data = {"base": "small", "parameters": {"bufs": [{"acc_depth": 64}, {"acc_depth": 64}, {"acc_depth": 128},
                                                     {"acc_depth": 256}]},
            "workloads": [{"example": "vadd"}]}
    for seed in range(6):
        got = parse_spec({**data, "sample": {"count": 3, "seed": seed}}, "t.yaml").configs()
        assert sorted(cp.config.acc_depth for cp in got) == [64, 128, 256], seed


def test_the_report_names_the_command_of_each_point_and_unit_shares_of_one_core(tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture) -> None:
    """The hand-run command of each workload gives the point's cycles; a unit's busy share is of the average
    core (a config of two cores: at most 100 %)."""
    spec = tmp_path / "two.yaml"
    spec.write_text("base: small2\nparameters: {acc_depth: [128]}\nseed: 3\narea: none\n"
                    "workloads: [{example: vadd, params: {shape: [37, 13]}}]\n")
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "0", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    (row,) = rep["rows"]
    assert all(0 <= u <= 1 for u in row["utilization"].values()) and row["utilization"]["load"] > 0.5, row
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "0"]) == 0
    text = capsys.readouterr().out
    cmd = next(line.strip() for line in text.splitlines() if line.strip().startswith("cosim run vadd"))
    assert "-p tile=8 -p shape=37x13" in cmd and "--seed 3" in cmd and row["config"] in cmd, cmd
    assert main(shlex.split(cmd)[1:] + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cycles"] == row["tlm_cycles"]


def test_out_is_refused_where_a_sweep_would_replace_someone_else_s_files(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    spec = _write(tmp_path, "workloads: [{example: vadd}]\narea: none\n", "s.yaml")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sweep.csv").write_text("my table")
    err = _one_line_error(capsys, ["sweep", str(spec), "--out", str(mine), "--workers", "0"])
    assert "sweep.csv is there and the folder is not a sweep's" in err, err
    (mine / "sweep.json").write_text("{}")
    err = _one_line_error(capsys, ["sweep", str(spec), "--out", str(mine)])
    assert "sweep.json, sweep.csv are there and the folder is not a sweep's" in err, err
    assert (mine / "sweep.csv").read_text() == "my table" and (mine / "sweep.json").read_text() == "{}"
    # a sweep's own folder stays its own when a run stopped before its report (the marker says whose it is)
    ours = tmp_path / "ours"
    assert main(["sweep", str(spec), "--out", str(ours), "--workers", "0", "--json"]) == 0
    capsys.readouterr()
    (ours / "sweep.json").unlink()
    assert main(["sweep", str(spec), "--out", str(ours), "--workers", "0", "--json"]) == 0
    capsys.readouterr()
    err = _one_line_error(capsys, ["sweep", str(spec), "--out", str(tmp_path / "o"), "--results", str(spec)])
    assert f"(--results {spec})" in err and "appends its records there" in err, err


def test_an_area_over_its_bound_names_the_spec_s_limit() -> None:
    from cosim.sweep.area import synthesize_area

    a = synthesize_area(load_config("small"), "ecp5", 0.01)
    assert a["status"] == ("absent: yosys did not finish synthesizing small for ecp5 within 0.01 s (a larger "
                           "area.timeout in the spec allows more)"), a


def test_no_area_no_front_no_plot(tmp_path: Path, capsys: pytest.CaptureFixture,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """--area cached with nothing cached: the report says why there is no area, and draws no empty front."""
    monkeypatch.setenv("COSIM_BUILD_DIR", str(tmp_path / "build"))
    spec = _write(tmp_path, "workloads: [{example: vmul}]\narea: {target: ecp5}\n", "s.yaml")
    out = tmp_path / "o"
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "0", "--area", "cached"]) == 0
    text = capsys.readouterr().out
    assert "no area on 1 config(s): not synthesized (--area cached: not in the cache)" in text, text
    assert "no front (no point has an area)" in text and "plots:" not in text, text
    assert not list(out.glob("pareto-*.png"))


def test_a_stopped_sweep_s_folder_and_fresh_of_another_campaign_s_file(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    """A folder holding a sweep's results file only (a run stopped before its report) is the sweep's; --fresh
    deletes only a sweep's results file, not another campaign's given by mistake."""
    spec = _write(tmp_path, "workloads: [{example: vmul}]\narea: none\n", "s.yaml")
    out = tmp_path / "o"
    out.mkdir()
    rec = {"key": "tlm/vmul-0/abc/s0", "ok": False, "result": None, "error": "stopped"}
    (out / "results.jsonl").write_text(json.dumps(rec) + "\n")
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "0", "--json"]) in (0, 1)
    capsys.readouterr()
    fuzz = tmp_path / "fuzz.jsonl"
    fuzz.write_text(json.dumps({"key": "chunk/0", "ok": True, "result": {}}) + "\n")
    err = _one_line_error(capsys, ["sweep", str(spec), "--out", str(tmp_path / "o2"), "--results", str(fuzz),
                                   "--fresh", "--workers", "0"])
    assert "holds another campaign's records (keys like 'chunk/0')" in err and fuzz.exists(), err
