"""`cosim net`: a shipped network (compiler.networks) classifying its test images on golden, TLM and RTL
(one batch of 8 images on the RTL, one simulator process), bit-exact logits, accuracies against the
float model, per-layer cycles that sum to CYCLES and counters that sum to the run's, the Perfetto
layer spans; the network rows of `cosim sim` and `cosim bench`; bad input as one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cosim.cli import main as cosim_main
from cosim.section_report import COUNTERS
from hw.toolchain import verilator_env

ROOT = Path(__file__).resolve().parents[1]
DIGITS_LAYERS = ["conv1", "pool1", "flatten", "fc1", "fc2"]  # the stages of the shipped digits network


def cosim(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cosim.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=verilator_env())


def test_net_all_models_on_8_images(tmp_path: Path) -> None:
    trace = tmp_path / "digits.json"
    r = cosim("net", "digits", "--model", "all", "--images", "8", "--json", "--trace", str(trace))
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["network"] == "digits" and d["images"] == 8 and d["match"] is True and d["mismatch"] == {}
    acc = d["accuracy"]
    assert set(acc) == {"float", "reference", "golden", "iss", "tlm", "rtl"}
    assert acc["golden"] == acc["iss"] == acc["tlm"] == acc["rtl"] == acc["reference"]  # the same logits, bit for bit
    cyc = d["cycles"]
    assert cyc["tlm"] == cyc["rtl"] == cyc["total"] and cyc["tlm_equals_rtl"] is True
    assert cyc["per_image"] == pytest.approx(cyc["tlm"] / 8)
    assert d["counters"]["tlm"] == d["counters"]["rtl"]
    layers = d["layers"]
    assert [ly["name"] for ly in layers] == DIGITS_LAYERS
    assert sum(ly["cycles"] for ly in layers) == d["layer_cycles_sum"] == cyc["tlm"]  # the bar: they sum to CYCLES
    assert d["layers_match_counters"] is True
    for c in COUNTERS:  # layers + FINISH = the RTL's own counters
        assert sum(ly[c] for ly in layers) + d["outside_layers"][c] == d["counters"]["rtl"][c], c
    by = {ly["name"]: ly for ly in layers}
    assert by["conv1"]["op"] == "conv2d" and by["conv1"]["macs"] == 8 * 8 * 64 * 9  # batch x O x H*W x C*K*K
    assert by["fc1"]["macs"] == 8 * 32 * 128 and by["fc2"]["macs"] == 8 * 10 * 32
    assert all(0 < ly["macs"] <= ly["block_macs"] for ly in layers if ly["op"] in ("conv2d", "dense"))
    fc1 = by["fc1"]
    assert fc1["peak_pct"] == pytest.approx(100 * fc1["macs"] / fc1["cycles"] / d["peak_macs_per_cycle"])
    dram = d["dram"]
    assert dram["activation_bytes_with_reuse"] <= dram["activation_bytes_without_reuse"] and dram["weights_bytes"] > 0
    ev = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in ev if e.get("tid") == 6 and e["ph"] == "X"]
    assert [(s["name"], s["dur"]) for s in spans] == [(ly["name"], ly["cycles"]) for ly in layers]


def test_net_tlm_whole_test_split_is_within_two_points_of_float() -> None:
    r = cosim("net", "digits", "--model", "tlm", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    from compiler.networks import NETWORKS

    assert d["images"] == len(NETWORKS["digits"].dataset("test")[1]) and d["match"] is True
    assert abs(d["accuracy"]["tlm"] - d["accuracy"]["float"]) <= 0.02 and d["accuracy"]["tlm"] > 0.9
    assert d["layer_cycles_sum"] == d["cycles"]["tlm"] and d["layers_match_counters"] is True


def test_net_text_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert cosim_main(["net", "digits", "--images", "5", "--model", "golden"]) == 0
    out = capsys.readouterr().out
    assert "accuracy: float" in out and "golden" in out and "bit-exact with the reference" in out
    assert "per layer" not in out  # no TLM run, no table
    assert cosim_main(["net", "digits", "--images", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line.split()[0] for line in lines if line.split() and line.split()[0] in DIGITS_LAYERS + ["total"]]
    assert rows == DIGITS_LAYERS + ["total"]
    assert any(line.startswith("cycles: TLM ") and "per image" in line for line in lines)


@pytest.mark.parametrize("args, want", [
    (["nope"], "unknown network 'nope' (networks: digits, digits_transformer, resnet18; or your own as path.py:function)"),
    (["digits", "--images", "0"], "--images: expected a positive integer"),
    (["digits", "--images", "100000"], "--images 100000: network 'digits' has"),
    (["digits", "--model", "golden", "--trace", "t.json"], "--trace needs a TLM run"),
    (["digits", "--model", "bogus"], "invalid choice: 'bogus'"),
    (["digits", "--config", "nosuch"], "nosuch"),
])
def test_net_bad_input_is_one_line(args: list[str], want: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cosim_main(["net", *args]) == 2
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cosim net") and want in err[0], cap.err
    assert "Traceback" not in cap.err and cap.out == ""


def test_sim_widens_a_networks_dram_and_says_which_network_a_config_cannot_tile(tmp_path: Path) -> None:
    """`cosim sim` runs a network as `cosim net` does: on the config with its DRAM widened to what the
    network needs (ResNet-18's 64 MiB; `make sim` failed on default's 16 MiB before), on the network's own
    number of images (one for ResNet-18); a network with no tiling on a config's buffers is a row that
    says so, not a failed run."""
    f = tmp_path / "mine.py"
    f.write_text("from compiler.networks import resnet18_onnx as r\n\n\n"
                 "def small():\n    return r.network(r.Shape(size=64, width=16, classes=100))\n")
    label = f"net:{f}:small"
    r = cosim("sim", "--kernels", "vsub_tail", label, "--no-rtl", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    rows = {k["kernel"]: k for k in d["kernels"]}
    assert rows["vsub_tail"]["config"] == "default" and rows[label]["config"] == "default-dram64m"
    assert rows[label]["match"] is True and rows[label]["tlm"]["cycles"] > 0 and d["skipped"] == []
    assert "compile 1 test image(s)" in r.stderr
    r = cosim("sim", "--config", "small", "--kernels", "vsub_tail", label, "--no-rtl")
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith(label))
    assert "skipped on config small-dram64m" in line and "layer 'maxpool': cannot be tiled" in line, line
    assert r.stdout.rstrip().endswith("all models agree (1 skipped: the config cannot hold them)")


@pytest.mark.long("the main job itself: every example and network on golden, TLM and RTL (a few minutes, "
                  "ResNet-18's own RTL build included)")
def test_make_sim_main_job_agrees() -> None:
    """What `make sim` runs, whole: every row agrees and ResNet-18 runs on its widened DRAM."""
    r = cosim("sim", "--json", timeout=3600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    d = json.loads(r.stdout)
    assert d["match"] is True and d["skipped"] == []
    rows = {k["kernel"]: k for k in d["kernels"]}
    assert rows["net:resnet18"]["config"] == "default-dram64m"
    assert all(k["tlm"]["cycles"] == k["rtl"]["cycles"] for k in d["kernels"])


def test_sim_has_a_network_row() -> None:
    r = cosim("sim", "--kernels", "vsub_tail", "net:digits", "--net-images", "2", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    row = next(k for k in d["kernels"] if k["kernel"] == "net:digits")
    assert row["match"] is True and row["tlm"]["cycles"] == row["rtl"]["cycles"] > 0 and row["error_pct"] == 0
    assert row["golden"]["accuracy"] == row["tlm"]["accuracy"] == row["rtl"]["accuracy"]
    assert "RTL: 2 Programs on Verilator" in r.stderr  # the examples and the network in one simulator process
    r = cosim("sim", "--kernels", "net:nope", "--no-rtl")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "cosim sim: error: unknown network 'nope' (networks: digits, digits_transformer, resnet18; or your own as path.py:function)"]


def test_list_names_the_networks(capsys: pytest.CaptureFixture[str]) -> None:
    assert cosim_main(["list", "--json"]) == 0
    assert [n["name"] for n in json.loads(capsys.readouterr().out)["networks"]] == ["digits", "digits_transformer", "resnet18"]


@pytest.mark.long("the whole digits test split on the TLM and the RTL (test_sim_has_a_network_row runs 2 images)")
def test_bench_network_row_runs_the_whole_test_split() -> None:
    from cosim.bench.networks import measure_networks, table_lines
    from hw.config import load_config

    rows = measure_networks(load_config("default"), reps=1, names=["digits"])  # the transformer: make networks
    row = next(r for r in rows if r["network"] == "digits")
    assert row["agree"] and row["problems"] == [] and row["tlm_cycles"] == row["rtl_cycles"] > 0
    assert row["images"] > 300 and row["images_per_s"] > 0
    assert abs(row["accuracy"]["int8"] - row["accuracy"]["float"]) <= 0.02
    assert any(line.startswith("digits") and line.endswith("yes") for line in table_lines(rows))
