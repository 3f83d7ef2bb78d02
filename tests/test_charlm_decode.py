"""charlm's decode step as one dynamic Program: the driver specialises the one compile for every step,
and golden, ISS, TLM and RTL give the int8 reference's logits bit for bit (TLM and RTL cycles equal)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compiler.build import build
from compiler.errors import ConfigFitError
from compiler.networks import charlm as C
from compiler.networks import charlm_decode as D
from compiler.networks import charlm_int8 as Q
from cosim import models
from cosim.generate_run import GenerateError, generate
from hw.config import load_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def step() -> D.DecodeStep:
    return D.decode_step_program("default")


def _chain(step: D.DecodeStep, text: str) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """(t, token, cache image before, golden output) of the steps over ``text``."""
    kv = step.empty_cache()
    out = []
    for p, tok in enumerate(C.encode(text)):
        gold = step.run_golden(p + 1, int(tok), kv)
        out.append((p + 1, int(tok), kv, gold))
        kv = step.append(kv, p + 1, gold)
    return out


def test_one_compile_two_pieces_and_the_driver_equals_static_compiles(step: D.DecodeStep) -> None:
    pieces = [(p.lo, p.hi) for p in step.dynamic.pieces]
    assert pieces == [(1, 1), (2, C.CONTEXT)]   # t = 1 has no reduction over the values
    for t in (1, 2, 16, 17, 77, C.CONTEXT):
        prog = D.step_program(step, t, 3, step.empty_cache())
        static = build(step.kernel, step.args(t), step.config, name=D.NAME)
        assert [i for i in prog.insns] == [i for i in static.insns], t
        assert [(r.name, r.addr, r.nbytes) for r in prog.regions] == \
            [(r.name, r.addr, r.nbytes) for r in static.regions], t


def test_golden_iss_tlm_equal_the_reference_step_by_step(step: D.DecodeStep) -> None:
    text = "Beautiful is better than ugly.\nExplicit"
    ref = Q.int8_forward(Q.load(), C.encode(text))
    cycles = []
    for t, tok, kv, gold in _chain(step, text):
        assert np.array_equal(step.logits(gold), ref[t - 1]), t
        prog = D.step_program(step, t, tok, kv)
        if t in (1, 2, 16, 17, len(text)):
            for res in (models.iss(prog), models.tlm(prog)):
                assert res.error is None, (t, res.model, res.error)
                assert np.array_equal(res.outputs["out"].reshape(gold.shape), gold), (t, res.model)
                if res.model == "tlm":
                    cycles.append(res.cycles)
    assert cycles == sorted(cycles)   # more context, more cycles


def test_the_cache_past_the_step_does_not_leak(step: D.DecodeStep) -> None:
    """Rows past t - 1 (the rest of a partial block and beyond) hold garbage: same logits on the TLM."""
    t, tok, kv, gold = _chain(step, "Beautiful is better")[16]          # t = 17: one row of the second block
    dirty = kv.copy()
    rng = np.random.default_rng(1)
    for h in range(2 * C.HEADS):
        dirty[h * C.CONTEXT + t:(h + 1) * C.CONTEXT] = rng.integers(-128, 128, size=(C.CONTEXT - t, 16))
    res = models.tlm(D.step_program(step, t, tok, dirty))
    assert np.array_equal(res.outputs["out"].reshape(gold.shape), gold)
    assert np.array_equal(step.run_golden(t, tok, dirty), gold)


def test_the_last_position_of_the_context(step: D.DecodeStep) -> None:
    text = (C.split()[0] * 2)[:C.CONTEXT]
    q = Q.load()
    cache, _ = Q.prefill(q, C.encode(text[:-1]))
    kv = step.empty_cache()
    for h in range(C.HEADS):
        kv[h * C.CONTEXT:(h + 1) * C.CONTEXT] = cache.k[:, h * 16:(h + 1) * 16]
        kv[(C.HEADS + h) * C.CONTEXT:(C.HEADS + h + 1) * C.CONTEXT] = cache.v[:, h * 16:(h + 1) * 16]
    tok = int(C.encode(text[-1])[0])
    want = Q.decode_step(q, cache, tok)
    res = models.tlm(D.step_program(step, C.CONTEXT, tok, kv))
    assert res.error is None
    assert np.array_equal(step.logits(res.outputs["out"]), want)


def test_small_block_and_several_cores_are_one_line() -> None:
    for name, words in (("small", "block of 8"), ("quad", "one core")):
        with pytest.raises(ConfigFitError, match=words):
            D.layout_of(load_config(name))


def test_rtl_two_steps_bit_and_cycle_exact(step: D.DecodeStep) -> None:
    why = models.rtl_available()
    if why:
        pytest.skip(why)
    chain = _chain(step, "Be")
    progs = [D.step_program(step, t, tok, kv) for t, tok, kv, _ in chain]
    results = models.rtl(progs, step.config, between="soft")
    for (t, _, _, gold), prog, res in zip(chain, progs, results):
        assert res.error is None, (t, res.error)
        assert np.array_equal(res.outputs["out"].reshape(gold.shape), gold), t
        assert res.cycles == models.tlm(prog).cycles, t


def _cosim(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cosim.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_generate_golden_tlm_equal_the_reference_text() -> None:
    """A whole run on golden and TLM: 32 characters after "Beautiful is" (the ISS: the step tests, and
    the four-model run of ``make networks``)."""
    rep = generate("Beautiful is", 32, ["golden", "tlm"])
    assert rep["match"], rep["mismatch"]
    assert rep["text"]["reference"] == Q.generate(Q.load(), "Beautiful is", 32)
    assert rep["text"]["golden"] == rep["text"]["tlm"] == rep["text"]["reference"]
    cyc = rep["cycles"]
    assert len(cyc["per_token"]) == 31 and cyc["prefill"] + sum(cyc["per_token"]) == cyc["total"]
    assert cyc["per_token"] == sorted(cyc["per_token"])      # one more cache row per token
    steps = rep["steps"]
    assert [s["t"] for s in steps] == list(range(1, 12 + 32))
    for s in steps:
        assert sum(ly["cycles"] for ly in s["layers"]) <= s["cycles"]
        assert s["split"]["kv_bytes"] == 2 * C.HEADS * (s["t"] + 1) * 16   # t rows read, one written, per K/V head
    assert rep["tokens_per_s"] == pytest.approx(200e6 / cyc["mean_per_token"])
    assert rep["dram_bytes_per_token"] > 0


def test_generate_cli_json_and_trace(tmp_path: Path) -> None:
    trace = tmp_path / "gen.json"
    out = _cosim("generate", "charlm", "--prompt", "Beautiful is", "--max-new", "4", "--model", "tlm", "--json",
                 "--trace", str(trace))
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["match"] and len(rep["text"]["tlm"]) == 4
    ev = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in ev if e["ph"] == "X"]
    steps = [e for e in spans if e["tid"] == 0]
    layers = [e for e in spans if e["tid"] == 1]
    assert len(steps) == 12 + 3 and {e["name"] for e in layers} == set(D.SECTIONS)
    assert len(layers) == len(steps) * len(D.SECTIONS)
    assert sum(e["dur"] for e in steps) == rep["cycles"]["total"]


@pytest.mark.parametrize("argv, words", [
    (["--prompt", "Beautiful is ~"], "not in charlm's vocabulary"),
    (["--prompt", "a" * 120, "--max-new", "10"], "need 129 positions, more than the context of 128"),
    (["--prompt", ""], "the prompt is empty"),
    (["--prompt", "Be", "--max-new", "0"], "positive integer"),
    # 128 passes the option's bound (a 1-character prompt takes it) and is refused by the prompt's length
    (["--prompt", "Be", "--max-new", "128"], "need 129 positions, more than the context of 128"),
    (["--prompt", "B", "--max-new", "129"], "at most 128"),
])
def test_generate_bad_input_is_one_line_exit_2(argv: list[str], words: str) -> None:
    out = _cosim("generate", "charlm", *argv)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and words in out.stderr, out.stderr
    assert out.stdout == ""


def test_generate_rejects_a_config_it_cannot_take() -> None:
    with pytest.raises(GenerateError, match="block of 8"):
        generate("Be", 2, ["tlm"], "small")


@pytest.mark.parametrize("key, value, words", [("inp_depth", 64, "needs 128 input buffer vectors"),
                                               ("acc_depth", 64, "needs 596 accumulator vectors")])
def test_generate_names_the_buffer_a_config_lacks(tmp_path, key: str, value: int, words: str) -> None:
    """A config of the user's with too small a buffer: the buffer and what the step needs, not an index deep
    in the kernel."""
    import json

    from hw.config import load_config

    d = {k: v for k, v in load_config("default").to_dict().items() if k != "source"}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({**d, "name": "mine", key: value}))
    with pytest.raises(GenerateError, match=f"{words}.*, config .mine. has {value}"):
        generate("Be", 2, ["tlm"], str(path))


def test_generate_on_the_rtl_short() -> None:
    why = models.rtl_available()
    if why:
        pytest.skip(why)
    rep = generate("Be", 3, ["rtl"])
    assert rep["match"] and rep["tlm_equals_rtl"], rep["mismatch"]
    assert rep["text"]["rtl"] == rep["text"]["reference"]
    assert rep["cycles_rtl"] == [s["cycles"] for s in rep["steps"]]


@pytest.mark.skipif(os.environ.get("COSIM_NETWORKS") != "full",
                    reason="a whole generation on four models takes about 30 s; run with COSIM_NETWORKS=full")
def test_generate_thirty_two_characters_on_every_model() -> None:
    rep = generate("Beautiful is", 32, ["golden", "iss", "tlm", "rtl"])
    assert rep["match"] and rep["tlm_equals_rtl"], rep["mismatch"]
    assert len({rep["text"][m] for m in ("reference", "golden", "iss", "tlm", "rtl")}) == 1


def test_bench_decode_curve_quick() -> None:
    from cosim.bench.decode import QUICK_CONTEXTS, measure_decode, table_lines

    res = measure_decode(load_config("default"), quick=True)
    assert res["agree"] and [r["t"] for r in res["rows"]] == list(QUICK_CONTEXTS)
    cyc = [r["cycles"] for r in res["rows"]]
    assert cyc == sorted(cyc) and cyc[-1] > cyc[0]
    assert len({r["weights_bytes"] for r in res["rows"]}) == 1          # the parameters do not grow with t
    for r in res["rows"]:
        assert r["kv_bytes"] == 2 * C.HEADS * (r["t"] + 1) * 16
    assert any("tokens/s" in line for line in table_lines(res))


def test_bench_decode_port_variant_moves_the_curve() -> None:
    """The same step with quad's read bursts in flight on one core: same logits, no step slower, the
    parameter streaming (a fixed cost per token) faster."""
    from cosim.bench.decode import PORT_READS, measure_decode, port_variant, table_lines

    cfg = port_variant(load_config("default"))
    assert cfg.dram_reads_in_flight == PORT_READS and cfg.num_cores == 1
    base = measure_decode(load_config("default"), quick=True)
    res = measure_decode(cfg, quick=True)
    assert res["agree"]
    for a, b in zip(base["rows"], res["rows"]):
        assert a["t"] == b["t"] and b["cycles"] <= a["cycles"]
    assert res["rows"][0]["cycles"] < base["rows"][0]["cycles"]
    assert any(f"on {cfg.name}:" in line for line in table_lines(base, [res]))
