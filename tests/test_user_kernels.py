"""A user's own kernels from the command line (docs/kernels.md), and reports that say what happened.

* the documented int8 GEMM kernel runs with ``--model all`` from its file, its hooks giving shapes, inputs
  and the reference;
* random inputs follow each tensor's dtype (an int8 input no longer fails as an int32 that does not fit);
  ``-p NAME=@file.npy`` / ``@file.npz:ARRAY`` give real data; ``<fn>_inputs`` is used;
* a shipped operator composes inside a user kernel by its plain name;
* a bare number where a tensor was meant says what to write instead;
* a Program folder's golden is re-run from its recorded kernel (an edited expected.npz is caught), or shown
  as ``expected`` when it cannot be;
* a TLM-vs-RTL run on the protocol back-end says that its cycles are not comparable.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cosim.cli import main as cosim_main
from cosim.models import rtl_available

REPO = Path(__file__).resolve().parents[1]
DOC_KERNEL = f"{REPO}/docs/kernels/int8_dense.py:int8_dense"
GEMM_ARGS = ["-p", "A=1x2x4x1x16:int8", "-p", "W=2x2x1x1x16x16:int8", "-p", "bias=32:int32",
             "-p", "C=1x2x4x1x16:int8"]


def cosim(capsys, *args) -> tuple[int, str, str]:
    rc = cosim_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line(rc: int, err: str, *words: str) -> None:
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


@pytest.fixture
def user_file(tmp_path):
    """A user kernel file that calls the shipped dense operator by its plain name."""
    f = tmp_path / "mine.py"
    f.write_text(
        "from compiler import S\n"
        "from compiler import gemm_kernels as G\n\n"
        "@S.kernel\n"
        "def mydense(A, W, bias, C, shift=4):\n"
        "    G.dense(A, W, bias, C, shift=shift)\n\n"
        "def mydense_reference(A, W, bias, shift):\n"
        "    from compiler.gemm_reference import dense_ref\n"
        "    from compiler.packing import pack_matrix, unpack_matrix\n"
        "    m, k = A.shape[2], A.shape[1] * A.shape[4]\n"
        "    a = A[0, :, :, 0, :].transpose(1, 0, 2).reshape(m, k)\n"
        "    w = W[:, :, 0, 0].transpose(0, 2, 1, 3).reshape(W.shape[0] * 16, k)\n"
        "    return {'C': pack_matrix(dense_ref(a, w, bias, shift, False).astype('int8'), 16)}\n")
    return f


def test_documented_gemm_kernel_runs_on_every_model(capsys):
    """The page's kernel: shapes from int8_dense_params, inputs from int8_dense_inputs, checked against
    int8_dense_reference on golden, and bit-exact on ISS, TLM and RTL (TLM = RTL cycles)."""
    models = "all" if rtl_available() is None else "tlm"
    rc, out, err = cosim(capsys, "run", DOC_KERNEL, "--model", models, "--json")
    assert rc == 0, out + err
    d = json.loads(out)
    rows = d["results"] if "results" in d else [d]
    assert all(r["match"] and r["status"] == "ok" for r in rows), rows
    cyc = {r["model"]: r["cycles"] for r in rows if r.get("cycles")}
    assert len(set(cyc.values())) == 1 and cyc["tlm"] > 0, cyc


def test_inputs_follow_dtype_and_hooks(user_file):
    """Without a hook, an int8 input is random over the whole int8 range (not int32 values that do not fit)
    and an int32 one over USER_INPUT_RANGES; the documented kernel's inputs hook makes its small biases;
    another seed gives other data."""
    from compiler.examples import USER_INPUT_RANGES, make_case

    params = dict(p.split("=", 1) for p in GEMM_ARGS[1::2])
    c = make_case(f"{user_file}:mydense", "default", params, seed=3)
    a, b = c.user_inputs["A"], c.user_inputs["bias"]
    assert a.dtype == np.int8 and a.min() < -100 and a.max() > 100
    lo, hi = USER_INPUT_RANGES["int32"]
    assert b.dtype == np.int32 and lo <= b.min() and b.max() <= hi and np.abs(b).max() > 2000
    assert not np.array_equal(make_case(f"{user_file}:mydense", "default", params, seed=4).user_inputs["A"], a)
    d = make_case(DOC_KERNEL, "default", {}, seed=3)
    assert d.user_inputs["A"].dtype == np.int8 and np.abs(d.user_inputs["bias"]).max() <= 2000


def test_tensor_data_from_files(capsys, tmp_path, user_file):
    """-p A=@a.npy and -p W=@w.npz:W give real data (shape and dtype from the array); the outputs follow it;
    a bad file, a missing array, a float array and data for an output are one line each."""
    a = np.arange(128, dtype=np.int64).reshape(1, 2, 4, 1, 16) % 7 - 3
    np.save(tmp_path / "a.npy", a.astype(np.int8))
    np.savez(tmp_path / "w.npz", W=np.ones((2, 2, 1, 1, 16, 16), np.int8), other=np.zeros(3, np.int8))
    np.save(tmp_path / "f.npy", np.zeros((4,), np.float32))
    base = ["run", f"{user_file}:mydense", "--model", "iss", "--json", "-p", "bias=32:int32",
            "-p", "C=1x2x4x1x16:int8"]
    rc, out, err = cosim(capsys, *base, "-p", f"A=@{tmp_path}/a.npy", "-p", f"W=@{tmp_path}/w.npz:W")
    assert rc == 0 and json.loads(out)["match"], out + err
    from compiler.examples import make_case

    c = make_case(f"{user_file}:mydense", "default",
                  {"A": f"@{tmp_path}/a.npy", "W": f"@{tmp_path}/w.npz:W", "bias": "32:int32",
                   "C": "1x2x4x1x16:int8"})
    assert np.array_equal(c.user_inputs["A"], a.astype(np.int8))
    rc, out, err = cosim(capsys, *base, "-p", f"A=@{tmp_path}/a.npy", "-p", f"W=@{tmp_path}/w.npz")
    _one_line(rc, err, "param 'W'", "2 arrays", ":NAME")
    rc, out, err = cosim(capsys, *base, "-p", f"A=@{tmp_path}/a.npy", "-p", f"W=@{tmp_path}/w.npz:nope")
    _one_line(rc, err, "param 'W'", "no array 'nope'")
    rc, out, err = cosim(capsys, *base, "-p", f"A=@{tmp_path}/f.npy", "-p", f"W=@{tmp_path}/w.npz:W")
    _one_line(rc, err, "param 'A'", "float32")
    rc, out, err = cosim(capsys, *base, "-p", f"A=@{tmp_path}/missing.npy", "-p", f"W=@{tmp_path}/w.npz:W")
    _one_line(rc, err, "param 'A'", "no such file")
    rc, out, err = cosim(capsys, "run", f"{user_file}:mydense", "--model", "iss", "-p", "bias=32:int32",
                         "-p", f"A=@{tmp_path}/a.npy", "-p", f"W=@{tmp_path}/w.npz:W", "-p", f"C=@{tmp_path}/a.npy")
    _one_line(rc, err, "param 'C'", "output", "shape instead")


def test_shipped_operator_composes_in_a_user_kernel(capsys, user_file):
    """G.dense(...) inside a user kernel runs as part of it (golden and traced), checked by the file's
    reference: no nested golden run, no bare TypeError."""
    rc, out, err = cosim(capsys, "run", f"{user_file}:mydense", *GEMM_ARGS, "--model", "tlm", "--json")
    assert rc == 0, out + err
    rc, out, err = cosim(capsys, "run", f"{user_file}:mydense", *GEMM_ARGS, "--model", "golden", "--json")
    d = json.loads(out)
    assert rc == 0 and d["match"] and d["status"] == "ok", out + err


def test_bare_number_for_a_tensor_says_what_to_write(capsys, user_file):
    args = ["-p", "A=64", *GEMM_ARGS[2:]]
    rc, out, err = cosim(capsys, "run", f"{user_file}:mydense", *args, "--model", "golden")
    _one_line(rc, err, "argument 'A'", "-p A=64 made 'A' the constant 64", "A=64:int32", "@file.npy")


def test_program_folder_golden_is_rerun(capsys, tmp_path, user_file):
    """A folder's golden re-runs its kernel on inputs.npz: an edited expected.npz is a golden MISMATCH while
    the other models agree with the re-run; a folder whose kernel file is gone shows golden as 'expected'
    (not re-run, and why) and judges the rest against expected.npz."""
    d = tmp_path / "vadd"
    assert cosim(capsys, "compile", "vadd", "-o", d)[0] == 0
    rc, out, err = cosim(capsys, "run", d, "--model", "golden", "--json")
    assert rc == 0 and json.loads(out)["status"] == "ok", out + err
    exp = dict(np.load(d / "expected.npz"))
    k = next(iter(exp))
    exp[k] = exp[k].copy()
    exp[k].flat[5] += 1
    np.savez(d / "expected.npz", **exp)
    rc, out, err = cosim(capsys, "run", d, "--model", "all" if rtl_available() is None else "tlm", "--json")
    res = json.loads(out)
    rows = {r["model"]: r for r in (res["results"] if "results" in res else [res])}
    if "golden" in rows:
        assert rows["golden"]["status"] == "mismatch" and "expected.npz differs" in rows["golden"]["mismatch"]
    assert all(r["status"] == "ok" for m, r in rows.items() if m != "golden"), rows
    rc, out, err = cosim(capsys, "run", d, "--model", "golden", "--model", "iss")
    # argparse keeps the last --model: iss, compared with the re-run golden (ok), and the edited
    # expected.npz still fails the run without a golden row
    assert rc == 1 and " ok " in out and "expected.npz differs from the golden re-run" in err, out + err

    u = tmp_path / "user"
    assert cosim(capsys, "compile", f"{user_file}:mydense", *GEMM_ARGS, "-o", u)[0] == 0
    user_file.rename(user_file.with_suffix(".gone"))
    rc, out, err = cosim(capsys, "run", u, "--model", "all" if rtl_available() is None else "iss", "--json")
    res = json.loads(out)
    rows = {r["model"]: r for r in (res["results"] if "results" in res else [res])}
    if "golden" in rows:
        g = rows["golden"]
        assert g["status"] == "expected" and g["match"] is None and "not re-run" in g["golden"], g
        assert res["match"] is True, res
    assert rc == 0 and all(r["status"] == "ok" for m, r in rows.items() if m != "golden"), rows
    rc, out, err = cosim(capsys, "run", u, "--model", "all" if rtl_available() is None else "iss")
    if rtl_available() is None:
        assert "golden  expected" in out and "not re-run" in out, out


@pytest.mark.skipif(rtl_available() is not None, reason="no RTL")
def test_protocol_cycles_are_not_compared(capsys):
    """TLM and RTL on the protocol back-end: the table and the JSON say the cycles are not comparable."""
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "all", "--mem", "protocol", "--json")
    d = json.loads(out)
    assert rc == 0 and d["match"] and d["cycles_comparable"] is False and "fast DRAM back-end" in d["timing_note"]
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "all", "--mem", "protocol")
    assert rc == 0 and "note: the TLM's cycles model the fast DRAM back-end" in out, out
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "all", "--json")
    assert "cycles_comparable" not in json.loads(out)
    rc, out, err = cosim(capsys, "sim", "--kernels", "vadd", "--mem", "protocol", "--json")
    d = json.loads(out)
    assert rc == 0 and d["cycles_comparable"] is False and "protocol back-end" in d["timing_note"]
    rc, out, err = cosim(capsys, "sim", "--kernels", "vadd", "--mem", "protocol")
    assert "note: the TLM's cycles model the fast DRAM back-end" in out and "cycle error: mean" not in out
    # generate and net: agreeing models are a match, the cycles are not judged (they exited 1, "DIFFER")
    rc, out, err = cosim(capsys, "generate", "charlm", "--prompt", "B", "--max-new", "2", "--model", "all", "--mem",
                         "protocol", "--json")
    d = json.loads(out)
    assert rc == 0 and d["match"] and "tlm_equals_rtl" not in d and "fast DRAM back-end" in d["timing_note"]
    rc, out, err = cosim(capsys, "net", "digits", "--model", "all", "--images", "1", "--mem", "protocol", "--json")
    d = json.loads(out)
    assert rc == 0 and "tlm_equals_rtl" not in d["cycles"] and "fast DRAM back-end" in d["cycles"]["timing_note"]


def test_inputs_hook_errors_are_one_line(capsys, tmp_path):
    """An _inputs hook that returns a wrong shape, a value that does not fit, or an input the kernel does not
    load is refused in one line naming the input and the hook."""
    src = (f"{Path(DOC_KERNEL.split(':')[0]).read_text()}\n\n"
           "def int8_dense_inputs(rng, A, W, bias, C, shift):\n"
           "    return BAD\n")
    for bad, words in (("{'A': np.zeros((2, 2), np.int8)}", ["input 'A'", "int8_dense_inputs", "shape"]),
                       ("{'A': np.full(A.shape, 300)}", ["input 'A'", "does not fit int8"]),
                       ("{'Z': np.zeros(3)}", ["'Z'", "does not load"]),
                       ("[1, 2]", ["returned list"])):
        f = tmp_path / "k.py"
        f.write_text(src.replace("BAD", bad))
        rc, out, err = cosim(capsys, "run", f"{f}:int8_dense", "--model", "golden")
        _one_line(rc, err, *words)


def test_reference_results_are_checked_in_one_line(capsys, tmp_path):
    """A reference returning an output the kernel does not have, another shape (even with as many
    elements), None or non-integers is refused naming the reference; integers computed in floating point
    are fine, and a reference that disagrees is a mismatch that blames the reference, not expected.npz."""
    doc = Path(DOC_KERNEL.split(":")[0]).read_text()
    src = doc.replace("def int8_dense_reference(", "def _true_reference(") + (
        "\n\ndef int8_dense_reference(A, W, bias, shift):\n"
        "    c = _true_reference(A, W, bias, shift)\n"
        "    c = c['C'] if isinstance(c, dict) else c\n"
        "    return BAD\n")
    for bad, words in (("{'D': c}", ["int8_dense_reference", "returned 'D', not an output", "outputs: C"]),
                       ("c.reshape(-1)", ["returned shape (", "for 'C', the kernel's 'C' is ("]),
                       ("None", ["returned NoneType for 'C', not an integer array"]),
                       ("c + 0.5", ["returned an array of float64 for 'C', not an integer array"])):
        f = tmp_path / "k.py"
        f.write_text(src.replace("BAD", bad))
        rc, out, err = cosim(capsys, "run", f"{f}:int8_dense", "--model", "golden")
        _one_line(rc, err, *words)
    f.write_text(src.replace("BAD", "c.astype(np.float64)"))
    rc, out, err = cosim(capsys, "run", f"{f}:int8_dense", "--model", "golden")
    assert rc == 0, err
    f.write_text(src.replace("BAD", "c + 1"))
    rc, out, err = cosim(capsys, "run", f"{f}:int8_dense", "--model", "golden")
    assert rc == 1 and "the reference does not agree with the golden run of the kernel" in err, err


def test_a_kernel_file_imports_the_module_beside_it(capsys, tmp_path):
    d = tmp_path / "mykernels"
    d.mkdir()
    (d / "shapes_of_mine.py").write_text("ROWS = 3\n")
    (d / "k.py").write_text("from compiler import S\nfrom shapes_of_mine import ROWS\n\n"
                            "@S.kernel\ndef plus_one(A, C):\n    S.load(S.acc[0:ROWS], A)\n"
                            "    S.add(S.acc[0:ROWS], 1)\n    S.store(C, S.acc[0:ROWS])\n")
    rc, out, err = cosim(capsys, "run", f"{d / 'k.py'}:plus_one", "-p", "A=3x16", "-p", "C=3x16:int8",
                         "--model", "golden")
    assert rc == 0, err


IN_PLACE = '''\
import numpy as np
from compiler import S


def _eye(B):
    return S.const(np.eye(B, dtype=np.int8).reshape(1, B, B), "eye")


@S.kernel
def twice(X, Y):
    """X = int8(3 X + 1) three times in place (through the input buffer and an identity GEMM); Y the last."""
    B = S.config().block
    n = X.nvec
    S.load(S.wgt[0:1], _eye(B))
    S.load(S.uop[0:1], S.uops([(0, 0, 0)]))
    for r in range(3):
        S.load(S.inp[0:n], X)
        S.gemm(S.uop[0:1], iters=(n, 1), acc_factors=(1, 0), inp_factors=(1, 0), reset=True)  # zeroes
        S.gemm(S.uop[0:1], iters=(n, 1), acc_factors=(1, 0), inp_factors=(1, 0))
        S.mul(S.acc[0:n], 3)
        S.add(S.acc[0:n], 1)
        S.store(X, S.acc[0:n])
    S.store(Y, S.acc[0:n])


def twice_reference(X):
    x = X
    for r in range(3):
        x = (x.astype(np.int32) * 3 + 1).astype(np.int8)
    return {"Y": x}


twice_params = {"X": "5x16:int8", "Y": "5x16:int8"}


@S.kernel
def bump(X):
    B = S.config().block
    n = X.nvec
    S.load(S.inp[0:n], X)
    S.load(S.wgt[0:1], _eye(B))
    S.load(S.uop[0:1], S.uops([(0, 0, 0)]))
    S.gemm(S.uop[0:1], iters=(n, 1), acc_factors=(1, 0), inp_factors=(1, 0), reset=True)
    S.gemm(S.uop[0:1], iters=(n, 1), acc_factors=(1, 0), inp_factors=(1, 0))
    S.add(S.acc[0:n], 3)
    S.store(X, S.acc[0:n])


bump_params = {"X": "2x16:int8"}
'''


def test_a_tensor_updated_in_place_is_an_input_and_an_output(capsys, tmp_path):
    """The golden run's stores into a tensor it also loads do not reach the inputs the other models and the
    Program folder run on (they used to run on the golden run's final values, f(f(X))); its final value is
    checked on every model like an output's, and kept in the folder's expected.npz; a reference may give it."""
    f = tmp_path / "inplace.py"
    f.write_text(IN_PLACE)
    model = "all" if rtl_available() is None else "tlm"
    rc, out, err = cosim(capsys, "run", f"{f}:twice", "--model", model, "--json")
    assert rc == 0 and all(r["match"] for r in json.loads(out)["results"]), out + err
    folder = tmp_path / "tw"
    assert cosim(capsys, "compile", f"{f}:twice", "-o", folder)[0] == 0
    from compiler.examples import make_case

    case = make_case(f"{f}:twice", "default")
    with np.load(folder / "inputs.npz") as z:
        assert np.array_equal(z["X"].reshape(-1), case.user_inputs["X"].reshape(-1))  # not the kernel's final X
    with np.load(folder / "expected.npz") as z:
        assert sorted(z) == ["X", "Y"] and np.array_equal(z["X"], z["Y"])  # the last X is the last Y
    rc, out, err = cosim(capsys, "run", folder, "--model", "tlm", "--json")
    assert rc == 0 and json.loads(out)["match"], out + err
    rc, out, err = cosim(capsys, "run", f"{f}:bump", "--model", model, "--json")
    assert rc == 0 and all(r["match"] for r in json.loads(out)["results"]), out + err
    f.write_text(IN_PLACE + "\n\ndef bump_reference(X):\n    X += 3\n    return {'X': X}\n")  # updates its argument
    rc, out, err = cosim(capsys, "run", f"{f}:bump", "--model", model, "--json")  # on a copy: the inputs stay
    assert rc == 0 and all(r["match"] for r in json.loads(out)["results"]), out + err
    for delta, rc_want in ((3, 0), (4, 1)):  # a reference of X's final value is compared with golden's
        f.write_text(IN_PLACE + f"\n\ndef bump_reference(X):\n    return {{'X': (X.astype('int32') + {delta})"
                                f".astype('int8')}}\n")
        rc, out, err = cosim(capsys, "run", f"{f}:bump", "--model", "golden")
        assert rc == rc_want and ("output 'X'[0, 0]" in out) == bool(rc_want), out + err
        rc, out, err = cosim(capsys, "run", f"{f}:bump", "--model", "tlm", "--json")  # no golden row: checked too
        assert rc == rc_want and ("reference_check" in json.loads(out)) == bool(rc_want), out + err
        rc, out, err = cosim(capsys, "run", f"{f}:bump", "--model", "iss")
        assert rc == rc_want and ("the reference does not agree with the golden run" in err) == bool(rc_want), err


def test_a_dynamic_kernels_tensor_updated_in_place_is_checked(capsys, tmp_path):
    """With a run-time dimension (--var) too, a tensor loaded and stored in place is each value's output: every
    model's final X is compared, a folder keeps it in expected.npz, and a reference may give it (a wrong one is
    caught)."""
    f = tmp_path / "inplace.py"
    f.write_text(IN_PLACE)
    model = "all" if rtl_available() is None else "tlm"
    dyn = ["--var", "n=8", "-p", "X=nx16:int8"]
    rc, out, err = cosim(capsys, "run", f"{f}:bump", *dyn, "--set", "n=3", "--model", model, "--json")
    assert rc == 0 and all(r["match"] for r in json.loads(out)["results"]), out + err
    from cosim.dynamic_run import dynamic_job

    job = dynamic_job(f"{f}:bump", None, ["n=3"], 0, "n=8", ["X=nx16:int8"])
    assert [r.name for r in job.program.outputs()] == ["X"] and not np.array_equal(job.expected["X"],
                                                                                    job.program.inputs["X"])
    folder = tmp_path / "dyn"
    assert cosim(capsys, "compile", f"{f}:bump", *dyn, "-o", folder)[0] == 0
    with np.load(folder / "expected.npz") as z:
        assert sorted(z) == ["X"]
    rc, out, err = cosim(capsys, "run", folder, "--set", "n=5", "--model", "tlm", "--json")
    assert rc == 0 and json.loads(out)["match"], out + err
    for delta, rc_want in ((3, 0), (4, 1)):  # a reference of X's final value is compared with golden's
        f.write_text(IN_PLACE + f"\n\ndef bump_reference(X):\n    X += 1\n"
                                f"    return {{'X': (X.astype('int32') + {delta - 1}).astype('int8')}}\n")
        rc, out, err = cosim(capsys, "run", f"{f}:bump", *dyn, "--set", "n=2", "--model", "golden")
        assert rc == rc_want and ("output 'X'[0, 0]" in out) == bool(rc_want), out + err


HALF = '''\
from compiler import S


@S.kernel
def half(a, c):
    """Each core stores the first half of its share only: the models agree on the zeros of the rest."""
    n = a.nvec // S.num_cores()
    S.load(S.acc[0:n], a, offset=n * S.core_id())
    S.store(c, S.acc[0:n // 2], offset=n * S.core_id())


half_params = {"a": "8x16:int32", "c": "8x16:int8"}
'''


def test_output_elements_that_no_store_writes_are_named(capsys, tmp_path):
    """On every model alike they stay 0, so the run is 'ok': a note says how many (a kernel that calls an
    operator from one core only, or a loop one short), in the text and in --json."""
    f = tmp_path / "half.py"
    f.write_text(HALF)
    for cfg, never in (("quad", 64), ("default", 64)):
        rc, out, err = cosim(capsys, "run", f"{f}:half", "--config", cfg, "--model", "tlm")
        assert rc == 0 and f"note: output 'c': {never} of its 128 elements are written by no STORE" in out, out + err
        rc, out, err = cosim(capsys, "run", f"{f}:half", "--config", cfg, "--model", "iss", "--json")
        assert rc == 0 and json.loads(out)["unstored"] == {"c": {"never_stored": never, "elements": 128}}, out
    rc, out, err = cosim(capsys, "run", "vadd", "--model", "tlm", "--json")
    assert rc == 0 and "unstored" not in json.loads(out), out


PADDED = '''\
import numpy as np
from compiler import S


@S.kernel
def inc(A, C, step=1):
    n = A.nvec
    S.load(S.acc[0:n], A)
    S.add(S.acc[0:n], step)
    S.store(C, S.acc[0:n])


def inc_reference(A, step):
    return {"C": (A + step).astype(np.int8)}


def inc_inputs(rng, A, C, step):
    return {"A": np.full(A.shape, 5, np.int32)}


inc_params = {"A": "17:int32", "C": "17:int8"}
'''


def test_a_reference_is_compared_on_the_users_elements_only(capsys, tmp_path):
    """17 elements in two 16-lane vectors: the padding lanes (A + 1 of a zero) are the kernel's business, not
    the reference's; a wrong reference is reported at an index of the user's shape. The inputs hook gets the
    kernel's default (step) as the reference does; a parameter the kernel does not have is one line."""
    f = tmp_path / "pad.py"
    f.write_text(PADDED)
    rc, out, err = cosim(capsys, "run", f"{f}:inc", "--model", "golden", "--json")
    assert rc == 0 and json.loads(out)["match"], out + err
    f.write_text(PADDED.replace("(A + step)", "(A + step + (np.arange(17) == 16))"))
    rc, out, err = cosim(capsys, "run", f"{f}:inc", "--model", "golden")
    assert rc == 1 and "output 'C'[16]: expected 7, got 6 (1 element(s) differ)" in out, out + err
    _one_line(*cosim(capsys, "run", f"{f}:inc", "-p", "Q=3")[::2], "kernel 'inc' has no parameter 'Q'",
              "parameters: A, C, step")


def test_a_dynamic_compile_pads_the_maximums_data(capsys, tmp_path):
    """--var whose maximum gives a tensor of no whole vectors (40 x 3 int32): the folder's data of the maximum
    is padded like every other value's (it was a raw numpy reshape error)."""
    f = tmp_path / "pad.py"
    f.write_text(PADDED)
    folder = tmp_path / "dyn"
    rc, out, err = cosim(capsys, "compile", f"{f}:inc", "--var", "n=40", "-p", "A=nx3:int32", "-p", "C=nx3:int8",
                         "-o", folder)
    assert rc == 0, err
    for model in ("golden", "tlm"):
        rc, out, err = cosim(capsys, "run", folder, "--set", "n=7", "--model", model, "--json")
        assert rc == 0 and json.loads(out)["match"], out + err
