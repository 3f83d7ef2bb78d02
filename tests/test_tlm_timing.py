"""TLM timing: exact cycle counts derived here from the config and the Timing fields
(the formulas documented in sim/tlm/timing.py), never copied from a run."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from hw.assembler import Assembler, assemble as make_program
from hw.config import load_config
from hw.isa import ALU_OPS, Alu, Finish, Load, Store
from sim.tlm import Timing, TimingError, TlmModel, run_program
from sim.tlm.burst_calc import row_burst_beats


def timing_of(cfg, **kw) -> Timing:
    return Timing.from_config(cfg, calibration=False, **kw)


def ref_bursts(addr: int, nbytes: int, bus: int, max_burst: int) -> list[int]:
    """Greedy reference split: min(MAX_BURST, beats left, beats to the 4 KiB boundary)."""
    out = []
    while nbytes > 0:
        n = min(max_burst, nbytes // bus, (4096 - addr % 4096) // bus)
        out.append(n)
        addr += n * bus
        nbytes -= n * bus
    return out


def fetch_end(T: Timing, n_insns: int, start: int | None = None) -> int:
    """End of a fetch burst of ``n_insns`` granted at ``start`` (default: the first burst,
    requested at ``fetch_start_cycles``) on a free port."""
    start = T.fetch_start_cycles if start is None else start
    return start + T.read_burst_cycles(n_insns * T.beats_per_insn)


def exec_start(T: Timing, d: int) -> int:
    """EXECUTE of an instruction dispatched at ``d`` to an idle unit, its tokens ready:
    visible ``queue_latency_cycles`` later, popped then, WAIT, EXEC (3 cycles on the RTL)."""
    return d + T.queue_latency_cycles + T.insn_pop_cycles + T.token_pop_cycles


def period(T: Timing, work: int) -> int:
    """Pop-to-pop period of a unit executing back to back (E + 3 on the RTL)."""
    return T.insn_pop_cycles + T.token_pop_cycles + max(T.min_execute_cycles, work) + T.token_push_cycles


def finish_done(T: Timing, d_finish: int, compute_idle: int, drained: int) -> int:
    """DONE of a FINISH dispatched at ``d_finish``, the compute unit idle from ``compute_idle``,
    load/store/port drained from cycle ``drained``: its EXEC runs until the first drained
    cycle, PUSH ``finish_cycles`` later (DONE at its end)."""
    pop = max(d_finish + T.queue_latency_cycles, compute_idle)
    x = pop + T.insn_pop_cycles + T.token_pop_cycles
    return max(x, drained) + T.finish_cycles


def traced(prog, T):
    m = TlmModel(prog.config, T, trace=True)
    m.load_dram(prog.dram_image())
    from hw import csr
    addr = csr.csr_by_name(prog.config.max_regions)
    for n, v in prog.regs:
        m.write_csr(addr[n].addr, v)
    m.run()
    assert m.error is None, m.error
    return m


def input_prog(cfg, insns, nvec=200):
    """(layout of a Program of ``len(insns)`` instructions over input ``a`` and output ``out``, a's data)."""
    a = np.arange(nvec * cfg.lanes, dtype=np.int32).reshape(nvec, cfg.lanes)
    asm = Assembler(cfg)
    asm.input("a", a)
    asm.output("out", (nvec, cfg.lanes), "int8")
    return asm.regions(len(insns)), a


# ---- Timing object ---------------------------------------------------------------------------
def test_timing_from_config_and_defaults(cfg):
    T = timing_of(cfg)
    assert T.read_latency == cfg.dram_read_latency and T.write_latency == cfg.dram_write_latency
    assert T.bus_bytes == cfg.bus_bytes and T.max_burst == cfg.max_burst
    assert T.read_burst_cycles(4) == T.rd_burst_overhead + cfg.dram_read_latency + 4
    assert T.write_burst_cycles(4) == T.wr_burst_overhead + 4 + cfg.dram_write_latency
    assert T.dispatch_cycles == 1 and T.deadlock_cycles == 2
    assert set(T.overheads()) == set(Timing.overhead_fields())
    # the RTL-measured defaults (docs/microarch.md "RTL cycle costs (measured)")
    assert T.fetch_start_cycles + 1 == 3                                  # START -> first AR
    assert T.read_burst_cycles(4) == cfg.dram_read_latency + 4 + 1        # Lr + n + 1
    assert T.write_burst_cycles(4) == cfg.dram_write_latency + 4 + 1      # Lw + n + 1
    assert period(T, 10) == 10 + 3                                        # E + 3
    assert exec_start(T, 0) == 3                                          # dispatch -> EXEC
    assert T.token_latency_cycles == 1 and T.finish_cycles == 1 and T.halt_cycles == 1


def test_timing_calibration_file_beside_config(tmp_path):
    src = load_config("small")
    p = tmp_path / "mine.json"
    d = src.to_dict()
    d["name"] = "mine"
    p.write_text(json.dumps(d))
    (tmp_path / "mine.timing.json").write_text(json.dumps({"_measured": "test", "rd_burst_overhead": 3,
                                                           "insn_pop_cycles": 2}))
    cfg = load_config(p)
    T = Timing.from_config(cfg)
    assert T.rd_burst_overhead == 3 and T.insn_pop_cycles == 2 and T.read_latency == cfg.dram_read_latency
    assert Timing.from_config(cfg, calibration=False).rd_burst_overhead == 1
    (tmp_path / "mine.timing.json").write_text(json.dumps({"read_latency": 3}))
    with pytest.raises(TimingError, match="hardware config"):
        Timing.from_config(cfg)
    (tmp_path / "mine.timing.json").write_text(json.dumps({"bogus": 3}))
    with pytest.raises(TimingError, match="unknown timing field"):
        Timing.from_config(cfg)


def test_burst_plan_matches_greedy_reference(cfg):
    rng = np.random.default_rng(1)
    for vb in (cfg.acc_vec_bytes, cfg.out_vec_bytes):
        addrs = rng.integers(0, 1 << 16, size=50) * vb
        for x in (1, 3, 17, 70, 200):
            beats, per_row = row_burst_beats(addrs, x * vb, cfg.bus_bytes, cfg.max_burst)
            ref = [ref_bursts(int(a), x * vb, cfg.bus_bytes, cfg.max_burst) for a in addrs]
            assert beats.tolist() == [b for r in ref for b in r]
            assert per_row.tolist() == [len(r) for r in ref]


# ---- single burst, multi-burst, 4 KiB --------------------------------------------------------
def _one_load_cycles(T: Timing, bursts: list[int], n_insns: int = 2, pads: int = 0) -> tuple[int, int]:
    """(cycles, load busy) of [LOAD, FINISH] whose LOAD issues ``bursts`` on an idle port
    (and writes ``pads`` padding vectors, which end its EXECUTE after the last burst here)."""
    e = fetch_end(T, n_insns)
    x = exec_start(T, e)                                  # LOAD dispatched at e
    load_end = x + sum(T.read_burst_cycles(b) for b in bursts) + pads * T.pad_vector_cycles
    compute_idle = 0
    cycles = finish_done(T, e + T.dispatch_cycles, compute_idle, load_end + T.token_push_cycles)
    return cycles, load_end - x


def test_single_dma_burst(cfg):
    T = timing_of(cfg)
    regions, a = input_prog(cfg, [0, 0])
    va = regions[1].addr // cfg.acc_vec_bytes
    prog = make_program(cfg, [Load(sram_base=3, dram_base=va + 2, y_size=1, x_size=1, x_stride=1), Finish()],
                        [("a", "input", a.shape, "int32"), ("out", "output", a.shape, "int8")], {"a": a})
    beats = cfg.acc_vec_bytes // cfg.bus_bytes
    assert beats <= cfg.max_burst
    cycles, busy = _one_load_cycles(T, [beats])
    r = run_program(prog, timing=T)
    assert r.cycles == cycles
    assert r.counters["load_busy"] == busy == T.read_burst_cycles(beats)
    assert r.counters["dma_rd_bytes"] == cfg.acc_vec_bytes and r.counters["fetch_bytes"] == 32
    assert r.counters["load_insns"] == 1 and r.counters["compute_insns"] == 1
    # FINISH waits in EXECUTE (busy) from its start until the load is idle, then one cycle
    f_exec = exec_start(T, fetch_end(T, 2) + T.dispatch_cycles)
    assert r.counters["compute_busy"] == cycles - T.finish_cycles - f_exec + 1
    assert r.counters["load_stall"] == r.counters["compute_stall"] == 0


def test_multi_burst_load_max_burst_and_4k(cfg):
    """A 2-row load whose first row crosses a 4 KiB boundary off a burst multiple."""
    T = timing_of(cfg)
    vb, bus = cfg.acc_vec_bytes, cfg.bus_bytes
    nvec = 3 * 4096 // vb + 8
    regions, a = input_prog(cfg, [0, 0], nvec)
    va = regions[1].addr // vb
    page_vecs = 4096 // vb
    first = (va // page_vecs + 1) * page_vecs - 1      # last vector before a 4 KiB boundary
    x = max(3, 2 * cfg.max_burst * bus // vb + 1)       # several max bursts per row
    stride = x + page_vecs // 2
    ld = Load(sram_base=0, dram_base=first, y_size=2, x_size=x, x_stride=stride)
    prog = make_program(cfg, [ld, Finish()], [("a", "input", a.shape, "int32"), ("out", "output", a.shape, "int8")],
                        {"a": a})
    # by hand: row 0 = one vector up to the boundary, then full bursts and a tail
    vbeats, mb = vb // bus, cfg.max_burst
    row0_rest = (x - 1) * vbeats
    hand_row0 = [vbeats] if vbeats <= mb else [mb] * (vbeats // mb)
    hand_row0 += [mb] * (row0_rest // mb) + ([row0_rest % mb] if row0_rest % mb else [])
    assert hand_row0 == ref_bursts(first * vb, x * vb, bus, mb)
    bursts = hand_row0 + ref_bursts((first + stride) * vb, x * vb, bus, mb)
    assert len(bursts) > 2 * (x * vbeats) // mb - 1
    cycles, busy = _one_load_cycles(T, bursts)
    m = traced(prog, T)
    assert m.cycles == cycles and m.load.busy == busy
    assert [b[4] for b in m.tracer.bursts() if b[0] == "load"] == bursts
    exp = np.zeros((2 * x, cfg.lanes), np.int32)
    exp[:x], exp[x:] = a[first - va:first - va + x], a[first - va + stride:first - va + stride + x]
    assert np.array_equal(m.acc[:2 * x], exp)


def test_load_padding_costs_one_cycle_per_vector():
    cfg = load_config("default")
    T = timing_of(cfg)
    regions, a = input_prog(cfg, [0, 0])
    va = regions[1].addr // cfg.acc_vec_bytes
    ld = Load(sram_base=0, dram_base=va, y_size=2, x_size=2, x_stride=4, y_pad_0=1, y_pad_1=0, x_pad_0=1, x_pad_1=2)
    prog = make_program(cfg, [ld, Finish()], [("a", "input", a.shape, "int32"), ("out", "output", a.shape, "int8")],
                        {"a": a})
    row = 1 + 2 + 2
    pads = (1 + 2 + 0) * row - 2 * 2
    bursts = [2 * cfg.acc_vec_bytes // cfg.bus_bytes] * 2
    cycles, busy = _one_load_cycles(T, bursts, pads=pads)
    m = traced(prog, T)
    assert m.load.busy == busy == sum(T.read_burst_cycles(b) for b in bursts) + pads * T.pad_vector_cycles
    assert m.cycles == cycles
    tile = m.acc[:3 * row].reshape(3, row, -1)
    assert not tile[0].any() and not tile[:, 0].any() and not tile[:, 3:].any()
    assert np.array_equal(tile[1, 1:3], a[0:2]) and np.array_equal(tile[2, 1:3], a[4:6])


# ---- ALU --------------------------------------------------------------------------------------
def test_one_alu_instruction(cfg):
    T = timing_of(cfg)
    alu = Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=5, iter_out=3, iter_in=4, dst_base=0, dst_factor_out=4,
              dst_factor_in=1)
    regions, a = input_prog(cfg, [0, 0])
    prog = make_program(cfg, [alu, Finish()], [("a", "input", a.shape, "int32"), ("out", "output", a.shape, "int8")],
                        {"a": a})
    e = fetch_end(T, 2)
    alu_dur = T.alu_setup_cycles + 12 + T.alu_pipeline_cycles
    x = exec_start(T, e)
    idle = x + alu_dur + T.token_push_cycles            # FINISH is popped here
    cycles = finish_done(T, e + T.dispatch_cycles, idle, 0)
    # the RTL's numbers: dispatch -> EXEC 3, E = 12 + 1 (12 reads, the writes one cycle behind), PUSH 1,
    # FINISH pop -> DONE 3 (pop, WAIT, EXEC; PUSH = d)
    assert cycles == e + 3 + 13 + 1 + 3
    m = traced(prog, T)
    assert m.cycles == cycles
    assert m.compute.busy == alu_dur + T.finish_cycles
    assert m.compute.insns == 2 and m.compute.stall == 0
    assert (m.acc[:12] == 5).all() and not m.acc[12:].any()


# ---- overlap through tokens --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["default", "wide"])  # the 5 instructions arrive in one fetch burst
def test_two_tiles_overlap_through_tokens(name):
    """L0, L1 push l2c; A0, A1 pop it: A0 runs while L1 is loading."""
    cfg = load_config(name)
    T = timing_of(cfg)
    regions, a = input_prog(cfg, [0] * 5)
    va = regions[1].addr // cfg.acc_vec_bytes
    x = 4
    n = 3  # ALU iterations per vector pass
    insns = [Load(sram_base=0, dram_base=va, y_size=1, x_size=x, x_stride=x, push_next=True),
             Load(sram_base=x, dram_base=va + x, y_size=1, x_size=x, x_stride=x, push_next=True),
             Alu(alu_op=ALU_OPS["MUL"], use_imm=True, imm=3, iter_out=n, iter_in=x, dst_base=0, dst_factor_in=1,
                 pop_prev=True),
             Alu(alu_op=ALU_OPS["MUL"], use_imm=True, imm=3, iter_out=n, iter_in=x, dst_base=x, dst_factor_in=1,
                 pop_prev=True),
             Finish()]
    prog = make_program(cfg, insns, [("a", "input", a.shape, "int32"), ("out", "output", a.shape, "int8")],
                        {"a": a})
    assert T.insns_per_fetch_burst >= 5
    P, tp, tl, dc, ql = (T.insn_pop_cycles, T.token_pop_cycles, T.token_latency_cycles, T.dispatch_cycles,
                         T.queue_latency_cycles)
    D = sum(T.read_burst_cycles(b) for b in ref_bursts(va * cfg.acc_vec_bytes, x * cfg.acc_vec_bytes,
                                                       cfg.bus_bytes, cfg.max_burst))
    A = T.alu_setup_cycles + n * x + T.alu_pipeline_cycles
    e = fetch_end(T, 5)                          # L0, L1, A0, A1, FINISH dispatched at e + k*dc
    l0_end = exec_start(T, e) + D                # L0 pushes its token at l0_end (PUSH cycle)
    l1_pop = max(e + dc + ql, l0_end + T.token_push_cycles)
    l1_end = l1_pop + P + tp + D
    w0 = e + 2 * dc + ql + P                     # A0 waits from here ...
    tau0 = max(w0, l0_end + tl)                  # ... until L0's token is visible
    a0_start = tau0 + tp
    a0_end = a0_start + A
    w1 = max(e + 3 * dc + ql, a0_end + T.token_push_cycles) + P
    tau1 = max(w1, l1_end + tl)
    a1_end = tau1 + tp + A
    cycles = finish_done(T, e + 4 * dc, a1_end + T.token_push_cycles, l1_end + T.token_push_cycles)
    m = traced(prog, T)
    assert m.cycles == cycles
    assert a0_start < l1_end                       # the overlap really happens
    assert m.compute.stall == (tau0 - w0) + (tau1 - w1) > 0
    assert m.load.busy == 2 * D and m.load.stall == 0
    assert np.array_equal(m.acc[:2 * x], (a[:2 * x] * 27).astype(np.int32))


# ---- fetch stalls on a full queue ------------------------------------------------------------
def test_fetch_stalls_on_full_queue():
    cfg = load_config("small")
    assert cfg.compute_queue_depth == 2 and cfg.max_burst // (16 // cfg.bus_bytes) == 2
    T = timing_of(cfg)
    it = 100
    alus = [Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=1, iter_out=1, iter_in=it, dst_base=0) for _ in range(6)]
    regions, a = input_prog(cfg, [0] * 7, 8)
    prog = make_program(cfg, alus + [Finish()], [("a", "input", a.shape, "int32"),
                                                 ("out", "output", a.shape, "int8")], {"a": a})
    F = T.read_burst_cycles(2 * T.beats_per_insn)       # a fetch burst of 2 instructions
    dc, ql = T.dispatch_cycles, T.queue_latency_cycles
    A = T.alu_setup_cycles + it + T.alu_pipeline_cycles
    U = period(T, A)                                    # pop-to-pop of the ALUs
    e0 = T.fetch_start_cycles + F                       # burst 0 (i0, i1) ends
    p = [e0 + ql + k * U for k in range(7)]             # pops of i0..i5 and FINISH
    # i0, i1 dispatched at e0, e0+dc; burst 1 requested after the last dispatch, at e0+2dc;
    # i2 fits (i0 popped); i3 waits for i1's pop (the slot is free ql later); burst 2 after it;
    # i4 waits for i2's pop, i5 for i3's; burst 3 (FINISH) after i5.
    starts = [T.fetch_start_cycles, e0 + 2 * dc, p[1] + ql + dc, p[3] + ql + dc]
    assert starts[2] + F < p[2]                         # burst 2 ends before i2 is popped
    m = traced(prog, T)
    assert [b[2] for b in m.tracer.bursts() if b[0] == "fetch"] == starts
    assert m.cycles == finish_done(T, p[4] + ql, p[6], 0)
    assert m.compute.busy == 6 * A + T.finish_cycles
    assert max(v for _, v in m.tracer.queue_levels("compute")) == 2
    assert (m.acc[0] == 6 * it).all()


# ---- port contention ----------------------------------------------------------------------------
def _contention_prog(cfg, first_store: bool, x_store: int, x_load: int):
    regions, a = input_prog(cfg, [0] * 3, 64)
    va = regions[1].addr // cfg.acc_vec_bytes
    vo = regions[2].addr // cfg.out_vec_bytes
    st = Store(sram_base=0, dram_base=vo, y_size=1, x_size=x_store, x_stride=x_store)
    ld = Load(sram_base=100 % cfg.acc_depth // 2, dram_base=va, y_size=1, x_size=x_load, x_stride=x_load)
    insns = [st, ld, Finish()] if first_store else [ld, st, Finish()]
    prog = make_program(cfg, insns, [("a", "input", a.shape, "int32"), ("out", "output", a.shape, "int8")],
                        {"a": a})
    return prog, va * cfg.acc_vec_bytes, vo * cfg.out_vec_bytes


def test_load_cuts_store_burst_chain():
    """STORE holds the port with a chain of bursts; LOAD (higher priority) asks a cycle later and
    gets the port at the store's next burst boundary; the store resumes after the load's burst."""
    cfg = load_config("default")
    T = timing_of(cfg)
    prog, la, sa = _contention_prog(cfg, True, 32, 2)
    sb = ref_bursts(sa, 32 * cfg.out_vec_bytes, cfg.bus_bytes, cfg.max_burst)
    lb = ref_bursts(la, 2 * cfg.acc_vec_bytes, cfg.bus_bytes, cfg.max_burst)
    assert len(sb) == 4 and len(lb) == 1
    e = fetch_end(T, 3)
    s0 = exec_start(T, e)                       # store granted in its first EXEC cycle
    l_req = exec_start(T, e + T.dispatch_cycles)  # load asks one cycle later
    W = [T.write_burst_cycles(b) for b in sb]
    assert W[0] > 1
    l0 = s0 + W[0]                              # first store boundary after l_req
    assert l0 >= l_req
    load_end = l0 + T.read_burst_cycles(lb[0])
    store_end = load_end + sum(W[1:])
    m = traced(prog, T)
    got = [(b[0], b[2], b[3]) for b in m.tracer.bursts()]
    assert got[1:] == [("store", s0, s0 + W[0]), ("load", l0, load_end),
                       ("store", load_end, load_end + W[1]), ("store", load_end + W[1], load_end + W[1] + W[2]),
                       ("store", load_end + W[1] + W[2], store_end)]
    assert m.cycles == finish_done(T, e + 2 * T.dispatch_cycles, 0, store_end + T.token_push_cycles)
    assert m.load.busy == load_end - l_req and m.store.busy == store_end - s0


def test_store_waits_for_load_chain():
    """LOAD holds the port with a chain; STORE (lower priority) waits for the whole chain."""
    cfg = load_config("default")
    T = timing_of(cfg)
    prog, la, sa = _contention_prog(cfg, False, 2, 8)
    lb = ref_bursts(la, 8 * cfg.acc_vec_bytes, cfg.bus_bytes, cfg.max_burst)
    sb = ref_bursts(sa, 2 * cfg.out_vec_bytes, cfg.bus_bytes, cfg.max_burst)
    e = fetch_end(T, 3)
    load_end = exec_start(T, e) + sum(T.read_burst_cycles(b) for b in lb)
    store_end = load_end + sum(T.write_burst_cycles(b) for b in sb)
    m = traced(prog, T)
    assert [b[0] for b in m.tracer.bursts()] == ["fetch"] + ["load"] * len(lb) + ["store"] * len(sb)
    assert m.cycles == finish_done(T, e + 2 * T.dispatch_cycles, 0, store_end + T.token_push_cycles)
    assert m.store.busy == store_end - exec_start(T, e + T.dispatch_cycles)


@pytest.mark.parametrize("writes", [1, 2])
def test_b_resp_cycles_pause_the_store_after_each_b(writes):
    """A calibrated ``b_resp_cycles`` = k: the STORE waits k cycles after each burst's B before its next
    burst or the end of EXECUTE, with one write at a time and with write bursts in flight (where k > 0
    also ends the posting: each burst waits for its B)."""
    cfg = dataclasses.replace(load_config("default"), dram_writes_in_flight=writes)
    prog, _, sa = _contention_prog(cfg, True, 32, 0)
    sb = ref_bursts(sa, 32 * cfg.out_vec_bytes, cfg.bus_bytes, cfg.max_burst)
    assert len(sb) > 1
    busy = {k: traced(prog, timing_of(cfg, b_resp_cycles=k)).store.busy for k in (0, 3)}
    assert busy[3] == sum(timing_of(cfg).write_burst_cycles(b) + 3 for b in sb)
    if writes == 1:
        assert busy[3] - busy[0] == 3 * len(sb)
    else:  # posted: W beats back to back, then the last burst's B
        assert busy[0] < busy[3] - 3 * len(sb)


def test_fetch_cuts_load_chain():
    """FETCH (highest priority) takes the port at a load burst boundary."""
    cfg = load_config("default")
    T = timing_of(cfg)
    k = T.insns_per_fetch_burst
    regions, a = input_prog(cfg, [0] * (k + 1), 64)
    va = regions[1].addr // cfg.acc_vec_bytes
    ld = Load(sram_base=0, dram_base=va, y_size=1, x_size=8, x_stride=8)
    nops = [Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=0, iter_out=1, iter_in=1, dst_base=500)
            for _ in range(k - 1)]
    prog = make_program(cfg, [ld] + nops + [Finish()], [("a", "input", a.shape, "int32"),
                                                         ("out", "output", a.shape, "int8")], {"a": a})
    lb = ref_bursts(va * cfg.acc_vec_bytes, 8 * cfg.acc_vec_bytes, cfg.bus_bytes, cfg.max_burst)
    R = [T.read_burst_cycles(b) for b in lb]
    e = fetch_end(T, k)
    s = exec_start(T, e)                         # load granted
    f_req = e + k * T.dispatch_cycles            # fetch asks for burst 2 after k dispatches
    ends = list(np.cumsum(R) + s)
    cut = next(x for x in ends if x >= f_req)
    m = traced(prog, T)
    fetches = [b for b in m.tracer.bursts() if b[0] == "fetch"]
    assert fetches[1][2] == cut
    assert fetches[1][3] == cut + T.read_burst_cycles(T.beats_per_insn)
