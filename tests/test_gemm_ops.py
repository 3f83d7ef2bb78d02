"""The GEMM core's compiler side: S.gemm and the new buffers in the DSL, packing, the operators (matmul,
dense, conv2d, residual_add, resnet_block) against plain numpy references on odd shapes on every config,
the tiling's instruction streams (one GEMM per step, double buffering proved from the tokens, every
conflict through a buffer or DRAM ordered, checked from the Program alone), the ResNet-18 layer's
utilization estimate, and one-line errors for what the hardware cannot do.

Tests marked ``models`` run compiled GEMM Programs on the ISS and the TLM (they need the models' GEMM)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from compiler import S, build
from compiler import gemm_ops as G
from compiler import gemm_reference as R
from compiler import packing as P
from compiler.conv_plan import INSN_HANDSHAKE, ConvShape, _store_cycles, plan_conv
from compiler.errors import BufferRangeError, CompileError
from compiler.examples import get_example, list_examples, make_case
from compiler.intrinsics import decode_uop_bytes, encode_uop_table
from hw import analysis
from hw.assembler import Assembler, assemble
from hw.config import load_config
from hw.isa import BUFFER_NAMES, Finish, Store, encode_uops
from hw.isa_semantics import dram_span, footprint, unit_of

GEMM_EXAMPLES = [n for n in list_examples() if get_example(n).gemm]
RNG = np.random.default_rng(2024)


def i8(*shape: int) -> np.ndarray:
    return RNG.integers(-128, 128, size=shape).astype(np.int8)


def i32(*shape: int, lo: int = -30000, hi: int = 30000) -> np.ndarray:
    return RNG.integers(lo, hi, size=shape).astype(np.int32)


# ---- packing ----------------------------------------------------------------------------------
def test_packing_layouts_and_round_trips():
    b = 8
    x = i8(2, 11, 3, 5)
    px = P.pack_activation(x, b)
    assert px.shape == (2, 2, 3, 5, 8) and px.dtype == np.int8
    assert px[1, 1, 2, 4, 2] == x[1, 10, 2, 4] and px[1, 1, 2, 4, 3] == 0  # channel 11.. is padding
    assert np.array_equal(P.unpack_activation(px, 11), x)
    w = i8(10, 11, 3, 3)
    pw = P.pack_conv_weights(w, b)
    assert pw.shape == (2, 2, 3, 3, 8, 8)
    # block [ob, cb, ky, kx], row o = output channel ob*B+o, column c = input channel cb*B+c
    assert pw[1, 0, 2, 1, 1, 5] == w[9, 5, 2, 1] and pw[1, 1, 0, 0, 2, 0] == 0
    a, m = i8(7, 12), i8(12, 5)
    assert np.array_equal(P.unpack_matrix(P.pack_matrix(a, b), 12), a)
    assert P.pack_matmul_weights(m, b)[0, 1, 0, 0, 3, 2] == m[10, 3]
    assert np.array_equal(P.pack_bias(np.arange(5, dtype=np.int32), 4), [0, 1, 2, 3, 4, 0, 0, 0])


def test_micro_op_encoding_matches_the_isa():
    table = [(0, 1, 2), (65535, 7, 300), (5, 65535, 0)]
    raw = encode_uop_table(table)
    assert raw.dtype == np.int8 and raw.shape == (3, 16)
    assert raw.tobytes() == encode_uops(table)
    assert decode_uop_bytes(raw).tolist() == [list(t) for t in table]
    with pytest.raises(ValueError, match="micro-op 1"):
        encode_uop_table([(0, 0, 0), (0, 65536, 0)])


# ---- S.gemm and the new buffers ------------------------------------------------------------------
@S.kernel
def one_block(X, Wt, Y, reset=False, iters=4):
    """Y[i] = X[i] . Wt^T for four input vectors, one GEMM over one micro-op."""
    S.load(S.uop[0:1], S.uops([(0, 0, 0)]))
    S.load(S.inp[0:4], X, cols=4)
    S.load(S.wgt[0:1], Wt, cols=1)
    S.mov(S.acc[0:4], 5)
    S.gemm(S.uop[0:1], iters=(iters, 1), acc_factors=(1, 0), inp_factors=(1, 0), reset=reset)
    S.store(Y, S.acc[0:4])


def test_gemm_intrinsic_golden_and_compiled_fields():
    cfg = load_config("default")
    x, w = i8(4, 16), i8(16, 16)
    y = np.zeros((4, 16), np.int8)
    one_block(x, w, y)
    assert np.array_equal(y, (5 + R.matmul_ref(x, w.T)).astype(np.int8))
    one_block(x, w, y, reset=True)
    assert not y.any()
    prog = build(one_block, [x, w, S.tensor((4, 16), "int8")], cfg)
    g = [i for i in prog.insns if i.MNEMONIC == "GEMM"]
    assert len(g) == 1 and (g[0].uop_begin, g[0].uop_end, g[0].iter_out, g[0].acc_factor_out,
                            g[0].inp_factor_out, g[0].wgt_factor_out) == (0, 1, 4, 1, 1, 0)
    loads = {BUFFER_NAMES[i.buf]: i for i in prog.insns if i.MNEMONIC == "LOAD"}
    assert set(loads) == {"UOP", "INP", "WGT"}
    # dram_base counts entries of the destination buffer: the micro-op table sits in the constants' region
    const = prog.region("_const")
    assert loads["UOP"].dram_base * 16 == const.addr and const.role == "input"
    assert loads["WGT"].dram_base * cfg.wgt_block_bytes == prog.region("Wt").addr
    assert decode_uop_bytes(prog.inputs["_const"][:16]).tolist() == [[0, 0, 0]]


@pytest.mark.parametrize("fault,match,cls", [
    ("uop", "micro-op 0 was never loaded", CompileError),
    ("wgt", "weight block 0 was never loaded", CompileError),
    ("range", r"input index \d+ >= INP_DEPTH", BufferRangeError),
])
def test_gemm_faults_are_the_same_on_both_paths(fault, match, cls):
    cfg = load_config("small")

    @S.kernel
    def faulty(X, Wt, Y):
        if fault != "uop":
            S.load(S.uop[0:1], S.uops([(0, 0, 0)]))
        S.load(S.inp[0:4], X, cols=4)
        if fault != "wgt":
            S.load(S.wgt[0:1], Wt, cols=1)
        S.mov(S.acc[0:4], 0)
        S.gemm(S.uop[0:1], iters=(100 if fault == "range" else 4, 1), acc_factors=(0, 0), inp_factors=(1, 0))
        S.store(Y, S.acc[0:4])

    x, w = i8(4, 8), i8(8, 8)
    for run in (lambda: faulty(x, w, np.zeros((4, 8), np.int8), config=cfg),
                lambda: build(faulty, [x, w, S.tensor((4, 8), "int8")], cfg)):
        with pytest.raises(cls, match=match) as e:
            run()
        assert "S.gemm at test_gemm_ops.py:" in str(e.value) and "\n" not in str(e.value)


def test_new_buffer_views_and_loads():
    cfg = load_config("small")
    b = cfg.block

    @S.kernel
    def pads(X, Wt, Y):
        # a 2x3 window of a 4x5 plane with one padding row above and a padding column each side
        S.load(S.inp[10:25], X, offset=6, rows=2, cols=3, stride=5, pad=(1, 0, 1, 1))
        S.load(S.wgt[3:5], Wt, offset=1, cols=2)
        S.load(S.uop[0:2], S.uops([(0, 10, 3), (0, 16, 4)]), cols=2)
        S.mov(S.acc[0:5], 0)
        S.gemm(S.uop[0:2], iters=(5, 1), acc_factors=(1, 0), inp_factors=(1, 0))
        S.store(Y, S.acc[0:5])

    x, w = i8(20, b), i8(3, b, b)
    y = np.zeros((5, b), np.int8)
    pads(x, w, y, config=cfg)
    tile = np.zeros((3, 5, b), np.int64)
    tile[1:, 1:4] = x.reshape(4, 5, b)[1:3, 1:4]
    flat = tile.reshape(15, b)
    want = flat[:5] @ w[1].T.astype(np.int64) + flat[6:11] @ w[2].T.astype(np.int64)
    assert np.array_equal(y, R.wrap32(want).astype(np.int8))
    with pytest.raises(CompileError, match="micro-ops must come from a constant tensor"):
        build(lambda X, U: S.load(S.uop[0:1], U), [S.tensor((1, 16), "int8"), S.tensor((1, 16), "int8")], cfg)
    with pytest.raises(CompileError, match="LOAD into the weight buffer moves int8"):
        build(lambda X: S.load(S.wgt[0:1], X), [S.tensor((64,), "int32")], cfg)
    with pytest.raises(BufferRangeError, match="the micro-op buffer has 128 micro-ops"):
        build(lambda X: S.load(S.uop[120:130], S.uops([(0, 0, 0)] * 10), cols=10), [S.tensor(8)], cfg)
    with pytest.raises(CompileError, match="reads inp"):  # the trace knows what the GEMM reads
        @S.kernel
        def unread(X, Wt, Y):
            S.load(S.uop[0:1], S.uops([(0, 9, 0)]))
            S.load(S.wgt[0:1], Wt, cols=1)
            S.load(S.inp[0:4], X, cols=4)
            S.mov(S.acc[0:4], 0)
            S.gemm(S.uop[0:1], iters=(1, 1))
            S.store(Y, S.acc[0:4])
        build(unread, [S.tensor((4, b), "int8"), S.tensor((b, b), "int8"), S.tensor((4, b), "int8")], cfg)


# ---- operators against numpy, every config ------------------------------------------------------
MATMULS = [(1, 1, 1), (37, 70, 23), (5, 33, 17), (32, 16, 16), (3, 200, 50)]


@pytest.mark.parametrize("m,k,n", MATMULS)
def test_matmul_equals_numpy(cfg, m, k, n):
    a, b = i8(m, k), i8(k, n)
    got = G.matmul(a, b, config=cfg)
    assert got.shape == (m, n) and got.dtype == np.int8
    assert np.array_equal(got, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32).astype(np.int8))


@pytest.mark.parametrize("m,k,n,shift,relu,bias", [(9, 200, 40, 10, True, True), (1, 17, 3, 0, False, False),
                                                   (20, 33, 70, 20, False, True)])
def test_dense_equals_numpy(cfg, m, k, n, shift, relu, bias):
    a, w = i8(m, k), i8(n, k)
    b = i32(n) if bias else None
    got = G.dense(a, w, b, shift=shift, relu=relu, config=cfg)
    assert np.array_equal(got, R.dense_ref(a, w, b, shift, relu).astype(np.int8))


CONVS = [  # batch, C, H, W, O, k, stride, pad, shift, relu, bias
    (1, 20, 13, 11, 24, 3, 1, 1, 9, True, True),
    (1, 19, 15, 14, 33, 3, 2, 1, 9, False, True),
    (2, 5, 7, 6, 3, 1, 2, 0, 4, True, False),
    (1, 3, 5, 5, 7, 3, 1, 2, 20, True, True),     # padding wider than the kernel's reach, a wide rounding term
    (1, 9, 9, 12, 17, 5, 1, 2, 11, False, True),  # a 5x5 kernel
    (1, 4, 10, 9, 6, 3, 3, 0, 8, False, False),   # stride 3, no padding
    (1, 17, 6, 6, 16, 1, 1, 0, 6, True, True),
]


@pytest.mark.parametrize("case", CONVS, ids=lambda c: "x".join(map(str, c[:5])) + f"_k{c[5]}s{c[6]}p{c[7]}")
def test_conv2d_equals_direct_convolution(cfg, case):
    n, c, h, w, o, k, stride, pad, shift, relu, bias = case
    x, wt = i8(n, c, h, w), i8(o, c, k, k)
    b = i32(o) if bias else None
    got = G.conv2d(x, wt, b, stride=stride, pad=pad, shift=shift, relu=relu, config=cfg)
    want = R.conv2d_layer_ref(x, wt, b, stride, pad, shift, relu).astype(np.int8)
    assert got.shape == want.shape and np.array_equal(got, want)


def test_conv2d_reference_is_a_direct_convolution():
    """The reference itself against the textbook loop on a tiny case (every output element summed)."""
    x, w = i8(1, 2, 4, 5), i8(3, 2, 3, 3)
    out = R.conv2d_ref(x, w, stride=2, pad=1)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for o in range(3):
        for y in range(out.shape[2]):
            for z in range(out.shape[3]):
                assert out[0, o, y, z] == (xp[0, :, 2 * y:2 * y + 3, 2 * z:2 * z + 3] * w[o]).sum()


@pytest.mark.parametrize("shape,shift,relu", [((2, 20, 5, 7), 1, True), ((1, 3, 1, 1), 0, False),
                                              ((1, 40, 9, 9), 3, True)])
def test_residual_add_equals_numpy(cfg, shape, shift, relu):
    x, r = i8(*shape), i8(*shape)
    got = G.residual_add(x, r, shift=shift, relu=relu, config=cfg)
    assert np.array_equal(got, R.residual_add_ref(x, r, shift, relu).astype(np.int8))


def test_resnet_block_equals_numpy(cfg):
    c = 24
    x, w1, w2 = i8(1, c, 9, 10), i8(c, c, 3, 3), i8(c, c, 3, 3)
    b1, b2 = i32(c), i32(c)
    got = G.resnet_block(x, w1, b1, w2, b2, shift1=10, shift2=10, config=cfg)
    want = R.resnet_block_ref(x, w1, b1, w2, b2, 10, 10).astype(np.int8)
    assert np.array_equal(got, want) and 0 < np.count_nonzero(want) < want.size  # ReLU cut some, not all


# the large examples on the default config only here (tests/test_examples.py runs every one everywhere)
@pytest.mark.parametrize("name,config", [(n, c) for n in GEMM_EXAMPLES for c in ("default", "small", "wide")
                                         if c == "default" or not get_example(n).large])
def test_gemm_examples_golden_equals_reference(name, config):
    case = make_case(name, config, seed=5)
    g, r = case.golden(), case.reference()
    assert set(g) == set(r) and all(np.array_equal(g[k], r[k]) for k in g)


# ---- the instruction streams ---------------------------------------------------------------------
def _uop_state(prog, k_max):
    """The micro-op buffer's contents before instruction k, from the Program's LOADs into it."""
    cfg = prog.config
    img = np.frombuffer(bytes(prog.dram_image()), dtype=np.int8)
    table = np.zeros((cfg.uop_depth, 3), np.int64)
    out = []
    for i in prog.insns[:k_max]:
        out.append(table.copy() if i.MNEMONIC == "GEMM" else None)
        if i.MNEMONIC == "LOAD" and BUFFER_NAMES[i.buf] == "UOP":
            assert (i.y_size, i.y_pad_0 + i.y_pad_1 + i.x_pad_0 + i.x_pad_1) == (1, 0)
            raw = img[i.dram_base * 16:(i.dram_base + i.x_size) * 16].reshape(-1, 16)
            table[i.sram_base:i.sram_base + i.x_size] = decode_uop_bytes(raw)
    return out


def assert_conflicts_ordered(prog):
    """From the Program alone: every two instructions of different units that touch one buffer entry
    (one writing it) or one DRAM byte (a STORE and a LOAD) are ordered by unit order and tokens."""
    insns = prog.insns
    uops = _uop_state(prog, len(insns))
    fps = [footprint(i, uops[k]) if i.MNEMONIC == "GEMM" else footprint(i) for k, i in enumerate(insns)]
    spans = [dram_span(i, prog.config) for i in insns]
    order = analysis.happens_before(insns)
    unit = [unit_of(i) for i in insns]
    checked = 0
    for b in range(len(insns)):
        for a in range(b):
            if unit[a] == unit[b]:
                continue
            hit = any(buf in fps[b] and (fa.writes & (fps[b][buf].reads | fps[b][buf].writes) or
                                         fa.reads & fps[b][buf].writes) for buf, fa in fps[a].items())
            kinds = {insns[a].MNEMONIC, insns[b].MNEMONIC}
            if not hit and kinds == {"LOAD", "STORE"} and spans[a] and spans[b]:
                hit = spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
            if hit:
                checked += 1
                assert order.before(a, b), f"{prog.name}: instructions {a} and {b} conflict but are not ordered"
    return checked


def test_conflict_check_catches_missing_tokens():
    """The checker above fails on the same Program with its dependency flags cleared."""
    import dataclasses
    prog = make_case("resnet_block", "default").program
    bare = [dataclasses.replace(i, pop_prev=False, pop_next=False, push_prev=False, push_next=False)
            for i in prog.insns]
    with pytest.raises(AssertionError, match="conflict but are not ordered"):
        assert_conflicts_ordered(dataclasses.replace(prog, insns=bare))


@pytest.mark.parametrize("name", ["matmul", "conv3x3", "conv3x3_s2", "residual_add", "resnet_block", "dense"])
def test_every_conflict_is_ordered_by_the_tokens(name):
    for cfg in ("default", "small"):
        prog = make_case(name, cfg).program
        assert len(prog.insns) < 500  # the check is quadratic
        assert assert_conflicts_ordered(prog) > 0


def _steps(prog):
    """Per GEMM (not the residual's): the index of the GEMM and of the LOADs of its step before it."""
    steps, loads = [], []
    for k, i in enumerate(prog.insns):
        if i.MNEMONIC == "LOAD" and BUFFER_NAMES[i.buf] in ("INP", "WGT"):
            loads.append(k)
        elif i.MNEMONIC == "GEMM":
            steps.append((k, loads))
            loads = []
    return steps


def test_double_buffering_overlaps_loads_with_gemm_and_stores_with_the_next_tile():
    prog = make_case("conv2d_resnet", "default").program  # 64 steps in 8 output tiles, both buffers halved
    order = analysis.happens_before(prog.insns)
    steps = _steps(prog)
    assert len(steps) > 10
    overlapped = 0
    for (g0, _), (g1, loads1) in zip(steps, steps[1:]):
        assert all(order.before(ld, g1) for ld in loads1)  # a GEMM waits for its own loads
        overlapped += all(not order.before(g0, ld) and not order.before(ld, g0) for ld in loads1)
    assert overlapped >= len(steps) // 2, (overlapped, len(steps))
    stores = [k for k, i in enumerate(prog.insns) if i.MNEMONIC == "STORE"]
    gemms = [k for k, _ in steps]
    free = sum(any(g > s and not order.before(s, g) for g in gemms) for s in stores[:-1])
    assert free >= len(stores) // 2  # a tile's stores overlap the next tile's GEMMs


def test_resnet_layer_one_gemm_per_step_and_utilization_estimate():
    """The VTA tutorial's ResNet-18 layer on the default config: GEMMs of thousands of blocks, and the
    planner's cycle estimate (docs/microarch.md formulas) at >= 80 % of one block per cycle."""
    cfg = load_config("default")
    case = make_case("conv2d_resnet", cfg)
    insns = case.program.insns
    gemms = [i for i in insns if i.MNEMONIC == "GEMM"]
    blocks = sum(i.iter_out * i.iter_in * (i.uop_end - i.uop_begin) for i in gemms)
    macs = 14 * 14 * 256 * 256 * 9
    assert blocks * cfg.macs_per_cycle == macs  # exactly the layer's work, no padding blocks computed
    assert min(i.iter_out * i.iter_in * (i.uop_end - i.uop_begin) for i in gemms) >= 1000
    assert len(insns) < 600
    plan = plan_conv(cfg, ConvShape(1, 16, 14, 14, 16, 3, 3, 1, 1, bias=True, alu_passes=3))
    assert plan.estimate <= macs / cfg.macs_per_cycle / 0.8, plan.estimate


@pytest.mark.parametrize("writes,rows,x", [(2, 1, 32), (3, 2, 24), (2, 6, 1), (4, 6, 1)])
def test_store_estimate_with_writes_in_flight(writes, rows, x):
    """The planner's STORE estimate with posted writes against the TLM's STORE EXEC of one STORE
    (plus the unit's handshakes): exact while the W channel is the limit (long bursts), within a
    tenth while the writes in flight are (one short burst a row, each waiting for its B)."""
    from sim.tlm import run_program
    cfg = replace(load_config("default"), dram_writes_in_flight=writes)
    vb = cfg.out_vec_bytes
    stride = 4096 // vb  # each row at the start of a 4 KiB page: no row is cut
    data = np.zeros(((rows + 1) * stride, cfg.lanes), np.int32)
    asm = Assembler(cfg)
    asm.input("a", data)
    asm.output("out", data.shape, "int8")
    page = -(-asm.regions(2)[2].addr // 4096)  # the output region's first whole page
    prog = assemble(cfg, [Store(sram_base=0, dram_base=page * stride, y_size=rows, x_size=x, x_stride=stride), Finish()],
                    [("a", "input", data.shape, "int32"), ("out", "output", data.shape, "int8")], {"a": data})
    busy = run_program(prog).counters["store_busy"]
    est = _store_cycles(cfg, rows, x * vb // cfg.bus_bytes) - INSN_HANDSHAKE
    if x * vb // cfg.bus_bytes >= cfg.max_burst:
        assert est == busy
    else:
        assert abs(est - busy) <= busy / 10, (est, busy)


# ---- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("call,match", [
    (lambda: G.matmul(np.zeros((3, 4)), i8(4, 2)), "operator 'matmul': argument 'a' must be int8"),
    (lambda: G.matmul(i8(3, 4), i8(5, 2)), "operator 'matmul': argument 'b' has 5 rows"),
    (lambda: G.dense(i8(3, 4), i8(2, 4), np.zeros(2, np.int8)), "operator 'dense': argument 'bias' must be int32"),
    (lambda: G.conv2d(i8(1, 3, 5, 5), i8(4, 2, 3, 3)), "operator 'conv2d': argument 'w' has 2 input channels"),
    (lambda: G.conv2d(i8(1, 3, 5, 5), i8(4, 3, 3, 3), pad=16), "argument 'pad': 16 must be an integer 0..15"),
    (lambda: G.conv2d(i8(1, 3, 5, 5), i8(4, 3, 3, 2)), "square kernels only"),
    (lambda: G.conv2d(i8(1, 3, 2, 2), i8(4, 3, 5, 5)), "the 5x5 kernel does not fit the 2x2 input"),
    (lambda: G.conv2d(i8(3, 5, 5), i8(4, 3, 3, 3)), "argument 'x' must be a non-empty NCHW activation"),
    (lambda: G.conv2d(i8(1, 3, 5, 5), i8(4, 3, 3, 3), stride=0), "argument 'stride': 0 must be an integer"),
    (lambda: G.residual_add(i8(1, 3, 5, 5), i8(1, 3, 5, 4)), "argument 'r' has shape"),
    (lambda: G.resnet_block(i8(1, 3, 5, 5), i8(3, 3, 3, 3), i32(3), i8(3, 3, 1, 1), i32(3)), "argument 'w2'"),
])
def test_bad_operator_arguments_are_one_line_errors(call, match):
    with pytest.raises(CompileError, match=match) as e:
        call()
    assert "\n" not in str(e.value)


def test_bad_packed_kernel_arguments_name_the_kernel():
    from compiler import gemm_kernels as K
    cfg = load_config("default")
    x = S.tensor((1, 1, 5, 5, 16), "int8")
    with pytest.raises(CompileError, match=r"kernel 'conv2d': argument 'W': has 2 input-channel blocks, X has 1"):
        build(K.conv2d, {"X": x, "W": S.tensor((1, 2, 3, 3, 16, 16), "int8"), "bias": None,
                         "Y": S.tensor((1, 1, 5, 5, 16), "int8"), "pad": 1}, cfg)
    with pytest.raises(CompileError, match=r"kernel 'conv2d': argument 'X': must be int8"):
        build(K.conv2d, {"X": S.tensor((1, 1, 5, 5, 16), "int32"), "W": S.tensor((1, 1, 3, 3, 16, 16), "int8"),
                         "bias": None, "Y": S.tensor((1, 1, 5, 5, 16), "int8"), "pad": 1}, cfg)
    with pytest.raises(CompileError, match=r"kernel 'conv2d': argument 'Y': has shape \(1, 1, 5, 5, 16\), the "
                                           r"layer's output is \(1, 1, 3, 3, 16\)"):
        build(K.conv2d, {"X": x, "W": S.tensor((1, 1, 3, 3, 16, 16), "int8"), "bias": None,
                         "Y": S.tensor((1, 1, 5, 5, 16), "int8")}, cfg)
    with pytest.raises(CompileError, match=r"kernel 'matmul': argument 'B': has 2 input-channel blocks"):
        build(K.matmul, {"A": S.tensor((1, 1, 7, 1, 16), "int8"), "B": S.tensor((1, 2, 1, 1, 16, 16), "int8"),
                         "C": S.tensor((1, 1, 7, 1, 16), "int8")}, cfg)


# ---- on the models (needs the ISS's and the TLM's GEMM) ---------------------------------------------
@pytest.mark.parametrize("name", [n for n in GEMM_EXAMPLES if not get_example(n).large])
def test_models_run_gemm_examples(name):
    from cosim import models
    for cfg in ("default", "small"):
        job = models.make_job(name, load_config(cfg))
        for run in (models.run_iss, models.run_tlm):
            r = run(job)
            assert r.error is None, (name, cfg, r.error)
            for k, exp in job.expected.items():
                assert np.array_equal(r.outputs[k], exp), (name, cfg, r.model, k)


def test_models_resnet_layer_at_80_percent_of_peak():
    """The VTA tutorial's ResNet-18 layer on the TLM (cycle-exact to the RTL): outputs equal golden,
    at least 80 % of one 16x16 block per cycle on the default config."""
    from cosim import models
    cfg = load_config("default")
    job = models.make_job("conv2d_resnet", cfg)
    r = models.run_tlm(job)
    assert r.error is None, r.error
    assert all(np.array_equal(r.outputs[k], v) for k, v in job.expected.items())
    macs = 14 * 14 * 256 * 256 * 9
    assert macs / (r.cycles * cfg.macs_per_cycle) >= 0.8, r.cycles
