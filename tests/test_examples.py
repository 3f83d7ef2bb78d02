"""Every example on every config: golden == plain numpy reference, the Program's expected outputs are
the golden ones in read_outputs' shapes, and a replay of the compiled instructions agrees."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.examples import Case, get_example, list_examples, make_case, parse_params
from compiler.errors import CompileError
from tests.test_compiler_build import execute

NAMES = list_examples()


def test_registry_api():
    assert "vadd" in NAMES and len(NAMES) >= 7
    ex = get_example("vadd")
    assert ex.name == "vadd" and ex.description and ex.params["shape"] == (1, 64, 1, 16)
    with pytest.raises(CompileError, match="unknown example"):
        get_example("nope")
    assert parse_params("fused", ["shape=2x3", "shift=4", "tile=auto"]) == {"shape": (2, 3), "shift": 4, "tile": None}
    with pytest.raises(CompileError, match="has no param 'bogus'"):
        parse_params("vadd", ["bogus=1"])


def test_examples_cover_every_alu_op_immediates_tails_and_tiling():
    from hw.config import load_config
    from hw.isa import ALU_OP_NAMES
    ops, imm, tails, big = set(), False, False, False
    for cfg in ("default", "small"):
        c = load_config(cfg)
        for n in NAMES:
            if get_example(n).gemm:  # the elementwise examples (GEMM ones: tests/test_gemm_ops.py)
                continue
            case = make_case(n, c)
            for i in case.program.insns:
                if i.MNEMONIC == "ALU" and i.iter_out * i.iter_in:
                    ops.add(ALU_OP_NAMES[i.alu_op])
                    imm |= i.use_imm
            shape = case.params["shape"]
            tails |= int(np.prod(shape)) % c.lanes != 0
            big |= int(np.prod(shape)) > c.acc_depth * c.lanes
    assert ops == set(ALU_OP_NAMES.values()) and imm and tails and big


@pytest.mark.parametrize("name", NAMES)
def test_golden_equals_reference_on_every_config(cfg, name):
    case: Case = make_case(name, cfg, seed=7)
    g, r = case.golden(), case.reference()
    outs = case.program.read_outputs(case.program.dram_image())  # shapes/dtypes the models return
    assert set(g) == set(r) == set(outs) == set(case.expected)
    for k in g:
        assert g[k].shape == r[k].shape == outs[k].shape == case.expected[k].shape
        assert g[k].dtype == r[k].dtype == outs[k].dtype
        assert np.array_equal(g[k], r[k]), f"{name} on {cfg.name}: golden != reference"
        assert np.array_equal(case.expected[k], g[k])
    for k, a in case.inputs.items():
        assert a.shape == case.program.region(k).shape and a.dtype == np.dtype(case.program.region(k).dtype)
        if not get_example(name).gemm and k in case.user_inputs:
            assert a.dtype == np.int32  # elementwise operators take int32 inputs
    assert {k: v.shape for k, v in case.unpad(g).items()} == {k: case.shapes[k] for k in g}


# replayed on the ISS (GEMM examples need the ISS's GEMM); the large ones are slow there
@pytest.mark.parametrize("name", [n for n in NAMES if n not in ("vadd_large", "requant") and not get_example(n).large])
def test_replay_of_compiled_program_equals_golden(cfg, name):
    case = make_case(name, cfg, seed=11)
    out = execute(case.program)
    for k, v in out.items():
        assert np.array_equal(v, case.expected[k]), f"{name} on {cfg.name}"


def test_params_override_and_seed():
    a = make_case("clip", "small", {"lo": -20, "hi": 90, "shape": (3, 11)}, seed=1)
    b = make_case("clip", "small", {"lo": -20, "hi": 90, "shape": (3, 11)}, seed=2)
    assert not np.array_equal(a.inputs["A"], b.inputs["A"])
    assert np.array_equal(a.golden()["C"], a.reference()["C"])
    assert np.array_equal(execute(a.program)["C"], a.expected["C"])


@pytest.mark.parametrize("example", ["softmax", "layer_norm"])
def test_a_row_operator_s_rows_and_shape_follow_each_other_and_the_lanes(example: str) -> None:
    """A row operator's tensors are (n, lanes): on a config of other lanes (block 32, a config of the user's)
    the default shape follows the lanes; `-p n` alone sets the shape, `-p shape` alone sets n; golden, ISS
    and TLM agree on each."""
    from cosim import models
    from hw.config import load_config, parse_config

    cfg = parse_config({**load_config("default").to_dict(), "name": "block32", "block": 32}, "block32")
    for params, n in (({}, 16), ({"n": 5}, 5), ({"shape": (6, 32)}, 6)):
        case = make_case(example, cfg, params)
        assert case.params["n"] == n and case.shapes["A"] == (n, 32), (params, case.params)
        for run in (models.iss, models.tlm):
            r = run(case.program)
            assert r.error is None and models.first_mismatch(case.program.expected, r.outputs) is None, (params, run)
    with pytest.raises(CompileError, match=r"shape \(4, 32\) is not \(n, lanes\) = \(3, 32\)"):
        make_case(example, cfg, {"n": 3, "shape": (4, 32)})


def test_attention_s_features_follow_the_lanes() -> None:
    """Attention's default features are one block of lanes per head, so the example runs on a config of
    other lanes; features given explicitly stay as given."""
    from cosim import models
    from hw.config import load_config, parse_config

    cfg = parse_config({**load_config("default").to_dict(), "name": "block32", "block": 32}, "block32")
    case = make_case("attention", cfg)
    assert case.params["D"] == 64
    r = models.iss(case.program)
    assert r.error is None and models.first_mismatch(case.program.expected, r.outputs) is None
    assert make_case("attention", load_config("small")).params["D"] == 16
    with pytest.raises(CompileError, match="a head must be a whole number of 32-lane blocks"):
        make_case("attention", cfg, {"D": 32})


def test_vadd_s_tile_follows_a_smaller_accumulator() -> None:
    """vadd's default tile (16 vectors; 8 on small) becomes the largest that fits on a config of the user's
    whose accumulator is smaller (32 vectors: 5), and runs there; the shipped configs keep theirs, and a
    tile given that does not fit is refused naming the range."""
    from cosim import models
    from hw.config import load_config, parse_config

    cfg = parse_config({**load_config("small").to_dict(), "name": "acc32", "acc_depth": 32}, "acc32")
    case = make_case("vadd", cfg)
    assert case.params["tile"] == 5
    r = models.tlm(case.program)
    assert r.error is None and models.first_mismatch(case.program.expected, r.outputs) is None
    assert make_case("vadd", "small").params["tile"] == 8 and make_case("vadd", "default").params["tile"] == 16
    with pytest.raises(CompileError, match=r"argument 'tile': 16 vectors per tile do not fit.*tile must be 1\.\.5"):
        make_case("vadd", cfg, {"tile": 16})


@pytest.mark.parametrize("example", ["attention", "resnet_block"])
def test_kernels_with_int8_intermediates_name_out_width(example: str) -> None:
    """Attention and the ResNet block keep int8 tensors in DRAM between their steps: on a config of 16-bit
    outputs they are refused by out_width, not by an internal tensor's STORE."""
    from hw.config import load_config, parse_config

    cfg = parse_config({**load_config("default").to_dict(), "name": "o16", "out_width": 16}, "o16")
    with pytest.raises(CompileError, match=rf"kernel '{example}': needs a config with int8 outputs \(out_width 8\); "
                                           r"config 'o16' has out_width 16"):
        make_case(example, cfg)
