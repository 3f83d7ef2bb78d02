"""`cosim net path.py:function`: a network of the user's own runs like a shipped one (models, --images,
--input, --json, the per-layer table); what cannot be run is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cosim.cli import main
from cosim.models import rtl_available

REPO = Path(__file__).resolve().parents[1]
TINY = f"{REPO}/docs/networks/tiny_cnn.py:tiny_cnn"


def cosim(capsys, *argv):
    rc = main([*map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_user_graph_runs_on_every_model(capsys):
    """The documented graph on 3 random samples: every model's logits bit-exact with the reference, TLM = RTL,
    a per-layer table whose cycles sum to the run's, and no accuracy (no labels)."""
    model = "all" if rtl_available() is None else "tlm"
    rc, out, err = cosim(capsys, "net", TINY, "--model", model, "--images", "3", "--json")
    rep = json.loads(out)
    assert rc == 0 and rep["match"] and rep["images"] == 3, out + err
    assert rep["accuracy"]["reference"] is None and rep["accuracy"]["float"] is None
    assert [ly["name"] for ly in rep["layers"]] == ["conv1", "pool1", "flatten", "fc"]
    assert rep["layer_cycles_sum"] == rep["cycles"]["tlm"]
    if model == "all":
        assert rep["cycles"]["tlm_equals_rtl"]
    rc, out, _ = cosim(capsys, "net", TINY, "--images", "2")
    assert rc == 0 and "accuracy: - (the samples have no labels)" in out and "layer" in out


def test_user_graph_inputs_from_a_file(capsys, tmp_path):
    """--input gives the samples (one sample may omit N); another --seed gives other random samples; a
    wrong shape or dtype is one line."""
    x = np.random.default_rng(1).integers(-128, 128, size=(2, 3, 8, 8)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "one.npy", x[0])
    np.save(tmp_path / "bad.npy", x[:, :2])
    rc, out, err = cosim(capsys, "net", TINY, "--model", "iss", "--input", tmp_path / "x.npy", "--json")
    rep = json.loads(out)
    assert rc == 0 and rep["match"] and rep["images"] == 2, err
    rc, out, err = cosim(capsys, "net", TINY, "--model", "iss", "--input", tmp_path / "one.npy", "--json")
    assert rc == 0 and json.loads(out)["images"] == 1
    rc, out, err = cosim(capsys, "net", TINY, "--input", tmp_path / "bad.npy")
    assert rc == 2 and "--input" in err and "(N, 3, 8, 8)" in err and len(err.strip().splitlines()) == 1, err
    rc, out, err = cosim(capsys, "net", TINY, "--input", tmp_path / "none.npy")
    assert rc == 2 and "no such file" in err, err


def test_user_network_errors_are_one_line(capsys, tmp_path):
    f = tmp_path / "nets.py"
    f.write_text("from compiler.graph import Graph\n"
                 "def number():\n    return 3\n"
                 "def two_outputs():\n"
                 "    import numpy as np\n"
                 "    g = Graph('two')\n    x = g.input('x', (16,))\n"
                 "    w = np.ones((16, 16), np.int8)\n"
                 "    a = g.requantize(g.dense(x, w), 4, name='a')\n"
                 "    b = g.requantize(g.dense(x, w), 4, name='b')\n"
                 "    g.output(a)\n    g.output(b)\n    return g\n"
                 "def raises():\n    raise RuntimeError('no weights here')\n")
    for spec, words in ((f"{f}:number", ["returned int"]), (f"{f}:two_outputs", ["2 output(s)"]),
                        (f"{f}:raises", ["raised RuntimeError", "no weights here"]), (f"{f}:missing", ["no function"]),
                        (f"{tmp_path}/nope.py:g", ["no such network file"]), ("nosuchnet", ["unknown network"])):
        rc, out, err = cosim(capsys, "net", spec)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (spec, err)
        assert all(w in err for w in words), (spec, err)


def test_user_graph_samples_from_a_file_are_named_so(capsys, tmp_path):
    x = np.random.default_rng(2).integers(-128, 128, size=(2, 3, 8, 8)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    rc, out, err = cosim(capsys, "net", TINY, "--model", "iss", "--input", tmp_path / "x.npy")
    first = out.splitlines()[0]
    assert rc == 0 and f"samples from {tmp_path / 'x.npy'}" in first and "random" not in first, out


def test_seeded_samples_are_drawn_as_needed_with_the_values_of_one_draw():
    """A user graph's 64 random samples are drawn one at a time and only as far as a slice asks: the values
    of one draw of them all (the seed's samples are those of earlier versions)."""
    from cosim.network_run import RANDOM_SAMPLES, SeededSamples

    shape = (3, 5, 7)
    want = np.random.default_rng(4).integers(-128, 128, size=(RANDOM_SAMPLES, *shape)).astype(np.int8)
    s = SeededSamples(shape, 4)
    assert len(s) == RANDOM_SAMPLES and s.shape == want.shape and s.dtype == np.int8
    assert np.array_equal(s[:2], want[:2]) and len(s._made) == 2
    assert np.array_equal(s[5:9:2], want[5:9:2]) and np.array_equal(s[-1:], want[-1:])
    assert np.array_equal(np.asarray(s), want) and s[3:1].shape == (0, *shape)


def test_user_graph_too_big_or_too_many_samples_is_one_line(capsys, tmp_path):
    """An input the DRAM cannot hold is refused by name before any planning (or any sample is drawn); more
    --input samples than one Program's batch name --input and --images."""
    f = tmp_path / "nets.py"
    f.write_text("import numpy as np\nfrom compiler.graph import Graph\n"
                 "def huge():\n    g = Graph('huge')\n    x = g.input('x', (100_000, 1000, 1000))\n"
                 "    g.output(g.requantize(g.conv2d(x, np.ones((1, 100_000, 1, 1), np.int8)), 0))\n    return g\n"
                 "def small():\n    g = Graph('small')\n    g.output(g.relu(g.input('a', (1, 1, 1))))\n    return g\n")
    rc, out, err = cosim(capsys, "net", f"{f}:huge", "--model", "golden", "--images", "1")
    last = err.strip().splitlines()[-1]  # after the progress line
    assert rc == 2 and last.startswith("cosim net: error: network 'huge': input 'x' (1 x 100000x1000x1000 int8, "
                                       "100,000,000,000 bytes) does not fit the 16,777,216-byte DRAM"), err
    np.save(tmp_path / "many.npy", np.zeros((65536, 1, 1, 1), np.int8))
    rc, out, err = cosim(capsys, "net", f"{f}:small", "--input", tmp_path / "many.npy")
    assert rc == 2 and "holds 65536 samples; one run takes at most 65535 (give --images N)" in err, err


def test_seed_draws_only_random_samples(capsys, tmp_path):
    """--seed draws a user graph's random samples (another seed, other logits); with --input, or on a shipped
    network with its own test images, it would do nothing: one line."""
    from cosim.network_run import get_network

    rc, out, err = cosim(capsys, "net", TINY, "--model", "iss", "--images", "2", "--seed", "5", "--json")
    assert rc == 0 and json.loads(out)["match"], err
    first = [np.asarray(get_network(TINY, seed).dataset("test")[0][:2]) for seed in (0, 5)]
    assert not np.array_equal(*first)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.int8))
    rc, out, err = cosim(capsys, "net", TINY, "--input", tmp_path / "x.npy", "--seed", "1")
    assert rc == 2 and "--input gives the samples" in err and len(err.strip().splitlines()) == 1, err
    rc, out, err = cosim(capsys, "net", "digits", "--seed", "0")
    assert rc == 2 and "digits has its own" in err and "drop --seed" in err, err


def test_trace_over_an_input_is_refused_and_the_input_kept(capsys, tmp_path):
    """--trace naming the network's source, the --input samples or the --config file would overwrite them."""
    src = tmp_path / "mine.py"
    src.write_text((REPO / "docs/networks/tiny_cnn.py").read_text())
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.int8))
    cfg = tmp_path / "cfg.json"
    cfg.write_text((REPO / "hw/configs/default.json").read_text())
    before = {f: f.read_bytes() for f in (src, tmp_path / "x.npy", cfg)}
    for trace, words in ((src, "NAME"), (tmp_path / "x.npy", "--input"), (cfg, "--config")):
        rc, out, err = cosim(capsys, "net", f"{src}:tiny_cnn", "--input", tmp_path / "x.npy", "--config", cfg,
                             "--trace", trace)
        assert rc == 2 and f"is the file of {words}" in err and len(err.strip().splitlines()) == 1, err
    assert {f: f.read_bytes() for f in before} == before
    rc, out, err = cosim(capsys, "net", TINY, "--input", "")
    assert rc == 2 and "--input" in err and "not an empty string" in err, err
