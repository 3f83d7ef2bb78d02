"""Directed coverage tests: what the examples, unit cases and fuzz never make the RTL do.

* ``barrier_one_core``: a BARRIER on a one-core config (it only drains the loads and stores; FETCH
  dispatches nothing after it until it completes), checked on the ISS, the TLM and the RTL;
* ``abort_after_error``: an error on the compute queue while a LOAD's bursts are in flight (the
  arbiter aborts the burst), checked the same way;
* ``halt_while_pushing``: that error while the load unit waits to push on a full token queue;
* ``gemm_offset_saturates``: a GEMM loop offset stepping by the largest factor, which saturates
  one iteration ahead of the SRAM_RANGE fault;
* ``uop_fields_all_ones``: a GEMM on a micro-op whose fields are all ones (SRAM_RANGE);
* ``widest_rows``: a LOAD of the whole weight buffer and one of the whole accumulator as one row each,
  and a STORE of that row back;
* ``widest_loops``: GEMM and ALU loops of 2^14 - 1 outer, then inner, iterations (the GEMMs reset, their
  input and weight offsets stepping by the largest factor), stored back;
* ``store_tokens_fill_queue``: STOREs pushing tokens back to compute until their queue is full;
* ``widest_tiles``: a LOAD as tall and one as wide as the accumulator holds, with the most padding,
  stored back whole;
* ``window_ends_at_barrier``: INSN_COUNT ends the window at a BARRIER (FETCH goes from its barrier
  wait to done; DEADLOCK on every model);
* ``axi_error_at_barrier`` (RTL only, fast back-end: the Verilog DRAM model answers SLVERR past
  its end, cocotbext-axi's AxiRam does not): a DRAM slave error while FETCH waits at a BARRIER;
* ``widest_fields`` (per buffer, LOAD; STORE; the instruction window): every field of the
  instruction (or INSN_ADDR_LO and INSN_COUNT) at its largest, so every bit of the address, span,
  tile and window arithmetic moves; DRAM_RANGE (or INSN_RANGE) at pc 0 on every model;
* ``top_of_address_space`` (RTL only, fast back-end, as above): a region at the last 4 KiB of the
  32-bit address space (its end is 2^32) with a LOAD, a STORE, or the instruction window in it: the
  upper bits of every DRAM address (fetch, load and store ports, the arbiter, the AXI bus) move, and
  the DRAM model answers SLVERR (ERR_AXI_RESP);
* ``raw_harness_cases`` (the raw back-end's task): DECERR from the C++ DRAM model on a read and on a
  write, and a register write to the bank of a core the config lacks;
* ``long_window`` (fast back-end): instruction windows as long as the DRAM holds (2^20 instructions on
  16 MiB), no-op ALUs ending in a malformed word (one core, ERR_BAD_OPCODE at the last pc) or a BARRIER
  one core never reaches (several, the stream shared, ERR_BARRIER), then ending in FINISH (several: one
  stream every core runs to a shared BARRIER), on one core also without FINISH (ERR_DEADLOCK at pc 2^20),
  then a clean Program: every bit of the pcs, the
  instruction counts and the error pcs a DRAM's instructions can set rises and falls; the RTL's error
  and CYCLES are the TLM's;
* ``long_counters`` (RTL only, fast back-end): on every core a GEMM of 2^24 block operations (``--long-log2``;
  2^31 moves every bit of the 32-bit counters, hours on a coverage build) with a LOAD and a STORE waiting for
  its tokens meanwhile, so COMPUTE_BUSY, GEMM_BUSY, GEMM_OPS, the LOAD and STORE stalls and CYCLES count
  past 2^24, then a short one whose START clears them;
* several cores (``tests/test_cores_hw.py``'s Programs): a core that FINISHes while the others wait
  at a BARRIER (ERR_BARRIER), a core that faults while the others wait, each kind of fault of FETCH,
  LOAD, compute and STORE on each core alone, and (writes in flight) a fault while each core's posted
  writes await their B;
* the directed cocotb job (``testbench.coverage_job``) on a few Programs (with writes in flight on
  several cores also one per core whose STOREs' posted writes await their B halfway through the run):
  every CSR read back (region registers and each core's bank, by address), the read-write ones written
  back through their own (bank) addresses, a soft clear during the fetch and one mid-run; the Program's final
  run from reset must still give the expected outputs (and, on the fast DRAM model, the TLM's
  cycles and counters);
* on the protocol back-end, the same job's counter carry walk (``testbench.coverage_job.counter_walk``)
  on those Programs and on ``busy_cores`` (every counter of every core moving): each event counter and
  CYCLES preset below each power of two from its top bit down, so the upper bits that only 2^31 events
  (or 2^64 cycles) would reach carry and wrap by the counters' own adders, checked after each carry and
  read back through the CSRs (:func:`check_walk`).

Backpressure (ARREADY/WREADY waits) comes from the protocol back-end's random pauses, which every
coverage run on that back-end has.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cosim.cluster import Task
from hw.isa import INSN_BYTES

DIRECTED_JOB = "testbench.coverage_job"
JOB_EXAMPLES = ("vadd", "matmul")


def _unit_helpers() -> tuple[Any, Any, Any]:
    """tests/units' ``Case``, ``narrow`` and ``random_vectors``: the unit-case helpers live in the
    repository's tests/units (imported by name, the repository on ``sys.path`` as cosim.regress does)."""
    from cosim.regress.cells import regression_module

    regression_module()
    from tests.units.every_level import Case
    from tests.units.programs import narrow, random_vectors

    return Case, narrow, random_vectors


def barrier_one_core(cfg: Any) -> Any:
    """LOAD, ALU +3, STORE out, no-op, BARRIER, ALU +1, STORE out2, FINISH (a one-core config): a tests.units
    Case. The BARRIER is instruction 4, the first of a fetch burst, so the instructions behind it are already
    buffered when it completes."""
    from hw.assembler import Assembler
    from hw.isa import Barrier

    Case, narrow, random_vectors = _unit_helpers()

    data = random_vectors(cfg, 2, 77, -1000, 1000)
    asm = Assembler(cfg, "cov_barrier_one_core")
    a = asm.input("a", data)
    out = asm.output("out", (2, cfg.lanes))
    out2 = asm.output("out2", (2, cfg.lanes))
    asm.load(a, x=2, push_next=True)
    asm.alu("ADD", imm=3, iter_out=2, dst_factor_out=1, src_factor_out=1, pop_prev=True, push_next=True)
    asm.store(out, x=2, pop_prev=True)
    asm.alu("ADD", imm=0, iter_out=0)  # a no-op: the BARRIER starts a fetch burst, its followers come with it
    asm.add(Barrier())
    asm.alu("ADD", imm=1, iter_out=2, dst_factor_out=1, src_factor_out=1, push_next=True)
    asm.store(out2, x=2, pop_prev=True)
    asm.finish()
    d = data.astype(np.int64)
    return Case(asm.program(expected={"out": narrow(cfg, d + 3), "out2": narrow(cfg, d + 4)}))


def widest_tiles(cfg: Any) -> list[Any]:
    """Tiles as tall and as wide as the accumulator buffer holds, with the most padding (a one-core
    config; tests.units Cases): a LOAD of ``depth - 2 * P`` rows of one vector between ``P`` pad rows
    (P the largest padding, 15), then one row of that many vectors between ``P`` pad columns, each
    STOREd back as ``depth`` rows of one vector: the LOAD's row and column walk and the STORE's row
    count reach the buffer's depth, where the Programs' tiles stop at a few rows."""
    from hw.assembler import Assembler
    from hw.isa import PAD_BITS

    Case, narrow, random_vectors = _unit_helpers()

    depth, p = cfg.acc_depth, (1 << PAD_BITS) - 1
    n = depth - 2 * p
    cases = []
    for shape, pads in (("tall", {"y_pad_0": p, "y_pad_1": p}), ("wide", {"x_pad_0": p, "x_pad_1": p})):
        data = random_vectors(cfg, n, 79, -1000, 1000)
        asm = Assembler(cfg, f"cov_widest_tile_{shape}")
        a = asm.input("a", data)
        out = asm.output("out", (depth, cfg.lanes))
        asm.load(a, x=1 if shape == "tall" else n, y=n if shape == "tall" else 1, push_next=True, **pads)
        asm.alu("ADD", imm=0, iter_out=0, pop_prev=True, push_next=True)
        asm.store(out, x=1, y=depth, pop_prev=True)
        asm.finish()
        zeros = np.zeros((p, cfg.lanes), dtype=np.int64)
        tile = np.concatenate([zeros, data.astype(np.int64), zeros])
        cases.append(Case(asm.program(expected={"out": narrow(cfg, tile)})))
    return cases


def widest_rows(cfg: Any) -> Any:
    """DMA rows as long as a buffer holds (a one-core config; a tests.units Case): a LOAD of the whole
    weight buffer as one row, one of the whole accumulator as one row, and a STORE of that row back:
    the units' beats left in a row start from the most a row that fits can have (the weight buffer's
    depth times a block's beats; the accumulator's depth times an output vector's)."""
    from hw.assembler import Assembler

    Case, narrow, random_vectors = _unit_helpers()

    depth = cfg.acc_depth
    rng = np.random.default_rng(80)
    data = random_vectors(cfg, depth, 81, -1000, 1000)
    asm = Assembler(cfg, "cov_widest_rows")
    w = asm.input("w", rng.integers(-128, 128, size=(cfg.wgt_depth, cfg.elem_bytes("WGT")), dtype=np.int8))
    a = asm.input("a", data)
    out = asm.output("out", (depth, cfg.lanes))
    asm.load(w, x=cfg.wgt_depth, buf="WGT")
    asm.load(a, x=depth, push_next=True)
    asm.alu("ADD", imm=0, iter_out=0, pop_prev=True, push_next=True)
    asm.store(out, x=depth, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, data.astype(np.int64))}))


def abort_after_error(cfg: Any) -> Any:
    """A long LOAD (several bursts) and, in parallel on the compute queue, a GEMM reading micro-ops no
    LOAD wrote: ERR_UNLOADED while the LOAD's bursts are in flight, which the AXI arbiter aborts."""
    from hw.assembler import Assembler

    Case, _, random_vectors = _unit_helpers()

    x = min(cfg.acc_depth, 8 * max(1, cfg.max_burst // cfg.beats_per_acc_vec))
    asm = Assembler(cfg, "cov_abort_after_error")
    a = asm.input("a", random_vectors(cfg, x, 78, -1000, 1000))
    asm.load(a, x=x)
    pc = asm.gemm(reset=True)
    asm.finish()
    return Case(asm.program(), ("UNLOADED", pc))


def halt_while_pushing(cfg: Any) -> Any:
    """A long ALU, then a GEMM reading micro-ops no LOAD wrote, on the compute queue; behind them
    more short LOADs pushing l2c tokens than the queue holds: the load unit waits in PUSH on the full
    queue when the GEMM's error halts it."""
    from hw.assembler import Assembler

    Case, _, random_vectors = _unit_helpers()

    n = cfg.token_queue_depth + 2
    asm = Assembler(cfg, "cov_halt_while_pushing")
    a = asm.input("a", random_vectors(cfg, n, 79, -1000, 1000))
    asm.alu("ADD", imm=1, iter_out=64, iter_in=32)
    pc = asm.gemm(reset=True)
    for k in range(n):
        asm.load(a, offset=k, sram=k + 1, push_next=True)
    asm.finish()
    return Case(asm.program(), ("UNLOADED", pc))


def gemm_offset_saturates(cfg: Any) -> Any:
    """A GEMM (reset) whose accumulator offset steps by the largest factor the field holds: the loop
    stage computes offsets an iteration ahead, so the offset saturates (gemm.v's sat_add) while the
    index stage faults with SRAM_RANGE on the first index past the buffer."""
    from hw.assembler import Assembler

    Case = _unit_helpers()[0]

    asm = Assembler(cfg, "cov_gemm_offset_saturates")
    asm.load(asm.uops("uops", [(0, 0, 0)]), buf="UOP", push_next=True)
    pc = asm.gemm(reset=True, iter_in=6, acc_factor_in=(1 << cfg.sram_index_bits) - 1, pop_prev=True)
    asm.finish()
    return Case(asm.program(), ("SRAM_RANGE", pc))


def widest_loops(cfg: Any) -> Any:
    """GEMM and ALU loops of the most iterations their fields hold (2^14 - 1 outer, then inner): the
    compute unit's and GEMM's loop counters walk every bit, where the Programs' loops stop at a few
    hundred. The GEMMs reset (only their accumulator index is checked) with the input and weight
    factors at the largest value the field holds, so those offsets walk to saturation and the indices,
    micro-op fields 0xFFFF plus an offset, carry bit 16; the ALUs add 0 to accumulator vector 0. Then a
    STORE of that vector (zeros), the same on every model."""
    from hw.assembler import Assembler
    from hw.isa import ALU_ITER_BITS, GEMM_ITER_BITS

    Case, narrow, _ = _unit_helpers()

    f = (1 << cfg.sram_index_bits) - 1
    gemm_max, alu_max = (1 << GEMM_ITER_BITS) - 1, (1 << ALU_ITER_BITS) - 1
    asm = Assembler(cfg, "cov_widest_loops")
    out = asm.output("out", (1, cfg.lanes))
    asm.load(asm.uops("uops", [(0, 0xFFFF, 0xFFFF)]), buf="UOP", push_next=True)
    asm.gemm(reset=True, iter_out=gemm_max, inp_factor_out=f, wgt_factor_out=f, pop_prev=True)
    asm.gemm(reset=True, iter_in=gemm_max, inp_factor_in=f, wgt_factor_in=f)
    asm.alu("ADD", imm=0, iter_out=alu_max)
    asm.alu("ADD", imm=0, iter_in=alu_max, push_next=True)
    asm.store(out, pop_prev=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, np.zeros((1, cfg.lanes), dtype=np.int64))}))


def store_tokens_fill_queue(cfg: Any) -> Any:
    """As many STOREs pushing a token back to compute as its queue holds (TOKEN_QUEUE_DEPTH) while the
    compute unit runs a long ALU (adding 0), then as many ALUs popping them: the store-to-compute token
    queue fills, which no Program's double buffering does (a STORE frees its accumulator half and the
    compute unit takes it at once)."""
    from hw.assembler import Assembler
    from hw.isa import ALU_ITER_BITS

    Case, narrow, _ = _unit_helpers()

    n = cfg.token_queue_depth
    asm = Assembler(cfg, "cov_store_tokens_fill_queue")
    out = asm.output("out", (n, cfg.lanes))
    asm.alu("ADD", imm=0, iter_out=(1 << ALU_ITER_BITS) - 1)
    for k in range(n):
        asm.store(out, x=1, offset=k, push_prev=True)
    for _ in range(n):
        asm.alu("ADD", imm=0, iter_out=0, pop_next=True)
    asm.finish()
    return Case(asm.program(expected={"out": narrow(cfg, np.zeros((n, cfg.lanes), dtype=np.int64))}))


def uop_fields_all_ones(cfg: Any) -> Any:
    """A GEMM on a micro-op whose three 16-bit fields are all ones (indices far past every buffer): the
    micro-op's read data and the GEMM's index arithmetic carry their upper bits, then SRAM_RANGE at
    the GEMM (the Programs' micro-ops stay below the buffers' depths, 2^11)."""
    from hw.assembler import Assembler

    Case = _unit_helpers()[0]

    asm = Assembler(cfg, "cov_uop_fields_all_ones")
    asm.load(asm.uops("uops", [(0xFFFF, 0xFFFF, 0xFFFF)]), buf="UOP", push_next=True)
    pc = asm.gemm(pop_prev=True)
    asm.finish()
    return Case(asm.program(), ("SRAM_RANGE", pc))


def axi_error_at_barrier(cfg: Any) -> Any:
    """RTL only (the ISS and the TLM model no slave errors): a LOAD from a region opened just past the
    DRAM, so the DRAM model answers SLVERR (ERR_AXI_RESP at pc 0), while FETCH waits at the BARRIER
    behind it for the load to drain: the error halts FETCH in its barrier wait. A Program whose regs
    open one more region than its layout (so it has no folder of its own to load)."""
    from hw.assembler import Assembler
    from hw.isa import Barrier

    asm = Assembler(cfg, "cov_axi_error_at_barrier")
    out = asm.output("out", (1, cfg.lanes))
    past = min(cfg.dram_bytes, 64 << 20)  # the testbench's DRAM model ends here (rtl_model.MAX_MODEL_BYTES)
    asm.load(past // cfg.elem_bytes("ACC"), x=1)
    asm.add(Barrier())
    asm.store(out)
    asm.finish()
    prog = asm.program()
    slot = sum(1 for n, _ in prog.regs if n.endswith("_BASE") and n.startswith("REGION"))
    prog.regs = [r for r in prog.regs if r[0] != "CTRL"] + [
        (f"REGION{slot}_BASE", past), (f"REGION{slot}_SIZE", 4096), (f"REGION{slot}_ATTR", 1),
        next(r for r in prog.regs if r[0] == "CTRL")]
    return prog


def window_ends_at_barrier(cfg: Any) -> Any:
    """ALU, BARRIER, FINISH with INSN_COUNT = 2: the instruction window ends at the BARRIER, so FETCH
    goes from its barrier wait straight to done and FINISH never comes: DEADLOCK at pc 2 on every model."""
    from hw.assembler import Assembler
    from hw.isa import Barrier

    Case = _unit_helpers()[0]

    asm = Assembler(cfg, "cov_window_ends_at_barrier")
    asm.alu("ADD", imm=1)
    asm.add(Barrier())
    asm.finish()
    prog = asm.program()
    prog.regs = [(n, 2 if n == "INSN_COUNT" else v) for n, v in prog.regs]
    return Case(prog, ("DEADLOCK", 2))


def widest_fields(cfg: Any) -> list[Any]:
    """Error cases whose instruction fields (or window registers) hold their largest values: a LOAD into
    each buffer and a STORE with DRAM base, sizes, stride, SRAM base (and, for LOAD, paddings) all ones, a
    LOAD whose padded tile is 0xFFFF by 0xFFFF entries,
    and the instruction window from 0xFFFFFFF0 for 2^32 - 1 instructions. The range checks compute
    every bit of their 64-bit bounds before they fail (DRAM_RANGE, INSN_RANGE at pc 0)."""
    from hw.assembler import Assembler

    Case = _unit_helpers()[0]

    ones32, ones16, sram = (1 << 32) - 1, (1 << 16) - 1, (1 << cfg.sram_index_bits) - 1
    cases = []
    for buf in ("ACC", "INP", "WGT", "UOP"):
        asm = Assembler(cfg, f"cov_widest_load_{buf.lower()}")
        asm.load(ones32, x=ones16, y=ones16, stride=ones16, sram=sram, buf=buf,
                 y_pad_0=15, y_pad_1=15, x_pad_0=15, x_pad_1=15)
        asm.finish()
        cases.append(Case(asm.program(), ("DRAM_RANGE", 0)))
    # sizes that with the most padding make the padded tile 0xFFFF rows by 0xFFFF columns
    asm = Assembler(cfg, "cov_widest_padded_tile")
    asm.load(ones32, x=ones16 - 30, y=ones16 - 30, stride=ones16, sram=sram, y_pad_0=15, y_pad_1=15, x_pad_0=15,
             x_pad_1=15)
    asm.finish()
    cases.append(Case(asm.program(), ("DRAM_RANGE", 0)))
    asm = Assembler(cfg, "cov_widest_store")
    asm.store(ones32, x=ones16, y=ones16, stride=ones16, sram=sram)
    asm.finish()
    cases.append(Case(asm.program(), ("DRAM_RANGE", 0)))
    asm = Assembler(cfg, "cov_widest_window")
    asm.finish()
    prog = asm.program()
    prog.regs = [(n, 0xFFFFFFF0 if n == "INSN_ADDR_LO" else ones32 if n == "INSN_COUNT" else v)
                 for n, v in prog.regs]
    cases.append(Case(prog, ("INSN_RANGE", 0)))
    return cases


TOP_REGION = 0xFFFFF000  # the last 4 KiB of the 32-bit address space: far past every DRAM model's end


def _open_top_region(prog: Any, attr: int) -> Any:
    """``prog`` with one more region, [TOP_REGION, 2^32) with ``attr``, opened before its START."""
    slot = sum(1 for n, _ in prog.regs if n.endswith("_BASE") and n.startswith("REGION"))
    ctrl = next(r for r in prog.regs if r[0] == "CTRL")
    prog.regs = [r for r in prog.regs if r[0] != "CTRL"] + [
        (f"REGION{slot}_BASE", TOP_REGION), (f"REGION{slot}_SIZE", 1 << 12), (f"REGION{slot}_ATTR", attr), ctrl]
    return prog


def top_of_address_space(cfg: Any) -> list[Any]:
    """RTL only (slave errors): a LOAD, a STORE and the instruction fetch at the last 4 KiB of the 32-bit
    address space (see the module docstring); each ends in ERR_AXI_RESP at pc 0."""
    from hw import csr
    from hw.assembler import Assembler

    progs = []
    asm = Assembler(cfg, "cov_top_load")
    asm.load(TOP_REGION // cfg.elem_bytes("ACC"), x=min(cfg.acc_depth, (1 << 12) // cfg.elem_bytes("ACC")))
    asm.finish()
    progs.append(_open_top_region(asm.program(), csr.ATTR_READ))
    asm = Assembler(cfg, "cov_top_store")
    asm.store(TOP_REGION // cfg.out_vec_bytes, x=min(cfg.acc_depth, (1 << 12) // cfg.out_vec_bytes))
    asm.finish()
    progs.append(_open_top_region(asm.program(), csr.ATTR_WRITE))
    asm = Assembler(cfg, "cov_top_fetch")
    asm.finish()
    prog = _open_top_region(asm.program(), csr.ATTR_READ)
    prog.regs = [(n, TOP_REGION if n == "INSN_ADDR_LO" else v) for n, v in prog.regs]
    progs.append(prog)
    return progs


def top_of_address_space_per_core(cfg: Any) -> list[Any]:
    """RTL only (slave errors), several cores: for each core, a LOAD, a STORE and the fetch at the top of the
    32-bit address space in that core alone (the others FINISH at once): every core's lane of the
    arbiter's address buses moves. Each ends in ERR_AXI_RESP; the error's core is that core."""
    from hw import csr
    from hw.isa import Finish, Load, Store
    from hw.program import Program, concat_streams, plan_layout

    def program(name: str, core: int, insn: Any, attr: int, fetch_top: bool = False) -> Any:
        streams = [[Finish()] for _ in range(cfg.num_cores)]
        if insn is not None:
            streams[core] = [insn, Finish()]
        insns, windows = concat_streams(streams)
        regions = plan_layout(cfg, [], len(insns))
        prog = _open_top_region(Program.create(cfg, insns, regions, name=name, windows=windows, check_tokens=False),
                                attr)
        if fetch_top:
            prog.regs = [(n, TOP_REGION if n == f"CORE{core}_INSN_ADDR_LO" else v) for n, v in prog.regs]
        return prog

    acc = TOP_REGION // cfg.elem_bytes("ACC")
    out = TOP_REGION // cfg.out_vec_bytes
    progs = []
    for k in range(cfg.num_cores):
        progs += [program(f"cov_top_load_core{k}", k, Load(dram_base=acc, x_size=1, x_stride=1), csr.ATTR_READ),
                  program(f"cov_top_store_core{k}", k, Store(dram_base=out, x_size=1, x_stride=1), csr.ATTR_WRITE),
                  program(f"cov_top_fetch_core{k}", k, None, csr.ATTR_READ, fetch_top=True)]
    return progs


def zero_gemm_inputs(cfg: Any, uop_n: int) -> dict[str, np.ndarray]:
    """The DRAM inputs of a GEMM on zeros: ``u`` (``uop_n`` micro-ops, all (0, 0, 0)), ``i`` (one input
    vector) and ``w`` (one weight block), all zeros, as :func:`long_counters` and :func:`busy_cores` load them."""
    from hw.isa import encode_uops

    return {"u": np.frombuffer(encode_uops([(0, 0, 0)] * uop_n), dtype=np.int8).reshape(uop_n, -1),
            "i": np.zeros((1, cfg.elem_bytes("INP")), dtype=np.int8),
            "w": np.zeros((1, cfg.elem_bytes("WGT")), dtype=np.int8)}


def raw_harness_cases(cfg: Any) -> list[str]:
    """RTL only, on the raw harness (the raw back-end's coverage task): the C++ DRAM model answering
    DECERR to the first read burst (the fetch's), then to the first write burst's B (ERR_AXI_RESP; the
    Verilog DRAM model and cocotbext-axi answer SLVERR only, so RRESP's and BRESP's bit 0 move only
    here), and a register write to the bank of core 15, which no shipped config has (the CSR block
    ignores it: the run is clean). The problems found (empty: all held)."""
    import copy

    from compiler import examples
    from cosim import models
    from hw import csr

    case = examples.make_case("vadd", cfg, seed=0)
    bad = []
    # a stall seed: between beats the model drives SLVERR on RRESP and BRESP, so the DECERR's bit 0 falls
    for what, mode in (("read", (0x5151, 3, 0, -1)), ("write", (0x5151, 3, -1, 0))):
        r = models.raw(case.program, cfg, mem="cpp", dram_mode=mode)
        if (r.error or {}).get("name") != "AXI_RESP":
            bad.append(f"DECERR on the first {what} burst: error {r.error}, expected AXI_RESP")
    far = copy.copy(case.program)
    insn_count = next(a for n, a, _ in csr.BANK_FIXED if n == "INSN_COUNT")
    far.regs = [(csr.CORE_BANK_BASE + 15 * csr.CORE_BANK_STRIDE + insn_count, 1)] + list(far.regs)
    r = models.raw(far, cfg)
    if r.error is not None or models.first_mismatch(case.expected, r.outputs) is not None:
        bad.append(f"a write to core 15's bank: error {r.error} or wrong outputs")
    return bad


LONG_WINDOW_ENDS = ("malformed", "finish", "none")


def long_window(cfg: Any, count: int | None = None, end: str = "malformed") -> Any:
    """Instruction windows as long as the DRAM holds (``count`` instructions in all, default dram_bytes /
    16) of no-op ALUs (``iter_out`` 0), so FETCH's pc, the counts of instructions fetched and dispatched
    and the error pcs reach the DRAM's instruction capacity. ``end`` (:data:`LONG_WINDOW_ENDS`):

    * ``malformed``: one core's window ends in a malformed word (opcode 7), ERR_BAD_OPCODE at pc
      ``count - 1``; on several cores the windows share the stream equally and each ends in a BARRIER and
      FINISH but the last core's in FINISH alone, so ERR_BARRIER comes at core 0's BARRIER;
    * ``finish``: the window ends in FINISH (FETCH's pc reaches ``count``), on several cores in a BARRIER
      and FINISH that every core runs (every core's window registers name the whole stream), so every
      core's pcs reach the capacity;
    * ``none`` (one core): no FINISH at all, every instruction retires and ERR_DEADLOCK comes at pc
      ``count`` (INSN_COUNT: no unit holds an instruction), so the latched error pc reaches it too."""
    if end not in LONG_WINDOW_ENDS or (end == "none" and cfg.num_cores > 1):
        raise ValueError(f"long_window: end '{end}' is not one of {LONG_WINDOW_ENDS} (none: one core only)")
    from hw import csr
    from hw.assembler import Assembler, with_regs
    from hw.isa import Alu, Barrier, Finish
    from hw.program import Program, concat_streams, plan_layout

    n = cfg.num_cores
    count = cfg.dram_bytes // INSN_BYTES if count is None else count
    nop = Alu(iter_out=0)
    fault = end == "malformed"
    name = "cov_long_window" + {"malformed": "", "finish": "_clean", "none": "_no_finish"}[end]
    if n == 1:
        asm = Assembler(cfg, name)
        for _ in range(count - (end != "none")):
            asm.add(nop)
        if end == "malformed":
            asm.raw(7)
        elif end == "finish":
            asm.finish()
        return asm.program()
    if fault:
        per = count // n
        streams = [[nop] * (per - 2) + [Barrier(), Finish()] for _ in range(n - 1)]
        streams.append([nop] * (per - 1) + [Finish()])
    else:  # one stream of ``count`` instructions, cut into n windows only to lay it out
        body = [nop] * (count - 2) + [Barrier(), Finish()]
        cuts = [0] + [count - 2 * (n - k) for k in range(1, n)] + [count]
        streams = [body[a:b] for a, b in zip(cuts, cuts[1:])]
    insns, windows = concat_streams(streams)
    prog = Program.create(cfg, insns, plan_layout(cfg, [], len(insns)), windows=windows, name=name)
    if fault:
        return prog
    # every core's window registers name the whole stream
    lo = dict(prog.regs)[csr.core_reg("INSN_ADDR_LO", 0, n)]
    return with_regs(prog, name, **{csr.core_reg(r, k, n): v for k in range(n)
                                    for r, v in (("INSN_ADDR_LO", lo), ("INSN_COUNT", count))})


LONG_LOG2_CYCLES = 24  # the long-counter Program's GEMM: 2^24 block operations per core (make coverage only)


def long_log2_max(cfg: Any) -> int:
    """The largest ``log2_cycles`` :func:`long_counters` reaches on ``cfg``: 2^26 iterations from the loop
    fields, times the micro-op buffer."""
    return 26 + cfg.uop_depth.bit_length() - 1


def long_counters(cfg: Any, log2_cycles: int = LONG_LOG2_CYCLES) -> Any:
    """Every core: LOAD micro-ops, an input vector and a weight block (zeros), one GEMM of 2^``log2_cycles``
    block operations at one per cycle, and behind it a LOAD and a STORE that wait for its tokens all that
    time, then FINISH. The event counters the shipped Programs move for thousands of cycles only
    (COMPUTE_BUSY, LOAD_STALL, STORE_STALL, GEMM_BUSY, GEMM_OPS) and CYCLES count to about
    2^``log2_cycles`` on every core of the config, so their upper bits move (and back to 0 at the next
    run's clear). The GEMM walks its micro-ops (all (0, 0, 0)) with every factor 0: acc[0] += 0 again
    and again; the STORE writes that zero row to core k's row of ``o``. A Program for the RTL: the ISS and
    the TLM walk every iteration, fine for a short one only (:func:`check_long` checks a run)."""
    from hw.assembler import Assembler
    from hw.isa import BUFFERS, Finish, Gemm, Load, Store
    from hw.program import Program, concat_streams

    n = cfg.num_cores
    # the loop fields hold 14 bits each: up to 2^26 iterations from them, the rest from the micro-ops
    uop_n = min(cfg.uop_depth, 1 << max(0, log2_cycles - 26))
    per = (1 << log2_cycles) // uop_n
    iter_in = min(per, 1 << 13)
    iter_out = max(1, min(per // iter_in, (1 << 14) - 1))
    asm = Assembler(cfg, f"cov_long_counters_{log2_cycles}")
    data = zero_gemm_inputs(cfg, uop_n)
    for name, a in data.items():
        asm.input(name, a)
    asm.output("o", (n, cfg.lanes))
    regions = asm.regions(insn_count=7 * n)
    at = {r.name: r.addr for r in regions}

    def load(buf: str, name: str, x: int = 1, **flags: bool) -> Any:
        return Load(buf=BUFFERS[buf], dram_base=at[name] // cfg.elem_bytes(buf), x_size=x, x_stride=x, y_size=1,
                    **flags)

    def stream(k: int) -> list[Any]:
        return [load("UOP", "u", uop_n), load("INP", "i"), load("WGT", "w", push_next=True),
                Gemm(uop_begin=0, uop_end=uop_n, iter_out=iter_out, iter_in=iter_in,
                     pop_prev=True, push_prev=True, push_next=True),
                load("UOP", "u", pop_next=True),
                Store(dram_base=at["o"] // cfg.out_vec_bytes + k, x_size=1, x_stride=1, y_size=1, pop_prev=True),
                Finish()]

    insns, windows = concat_streams([stream(k) for k in range(n)])
    prog = Program.create(cfg, insns, regions, name=asm.name, windows=windows, inputs=data,
                          expected={"o": np.zeros((n, cfg.lanes), dtype=f"int{cfg.out_width}")})
    prog.meta = dict(prog.meta or {}, gemm_ops=iter_out * iter_in * uop_n)
    return prog


AHEAD = 3  # busy_cores: LOADs ahead of the ALU
BUSY_REPS = 32  # tiles per core of busy_cores: each counter of each core moves at least this often


def busy_cores(cfg: Any, reps: int = BUSY_REPS, tile: int = 2, passes: int = 128) -> Any:
    """Every core: a GEMM of 64 block operations (on zeros, as in :func:`long_counters`), then ``reps``
    times LOAD a tile of ``tile`` accumulator vectors into a slot of its own, ALU ADD k+1 over it ``passes``
    times, STORE it, the three linked by tokens: the LOADs run up to AHEAD tiles ahead of the ALU (then wait
    for its token), into its write port; the STOREs wait for the ALU. So every event counter of every core
    (instructions, bytes, busy, stall and wait cycles, GEMM operations) moves at least about ``reps`` times:
    the raw material of the directed job's counter walk on several cores, where the shipped examples leave
    cores idle. The Program has its expected outputs."""
    from hw.assembler import Assembler
    from hw.isa import ALU_OPS, BUFFERS, Alu, Finish, Gemm, Load, Store
    from hw.program import Program, concat_streams

    _, narrow, random_vectors = _unit_helpers()

    n, L, uop_n = cfg.num_cores, cfg.lanes, 1
    reps = min(reps, (cfg.acc_depth - 1) // tile)
    rows = n * reps * tile
    a = random_vectors(cfg, rows, 81, -1000, 1000)
    asm = Assembler(cfg, "cov_busy_cores")
    data = {**zero_gemm_inputs(cfg, uop_n), "a": a}
    for name, arr in data.items():
        asm.input(name, arr)
    asm.output("o", (rows, L))
    count = n * (5 + 3 * reps)
    at = {r.name: r.addr for r in asm.regions(insn_count=count)}

    def stream(k: int) -> list[Any]:
        s: list[Any] = [Load(buf=BUFFERS["UOP"], dram_base=at["u"] // cfg.elem_bytes("UOP")),
                        Load(buf=BUFFERS["INP"], dram_base=at["i"] // cfg.elem_bytes("INP")),
                        Load(buf=BUFFERS["WGT"], dram_base=at["w"] // cfg.elem_bytes("WGT"), push_next=True),
                        Gemm(uop_begin=0, uop_end=uop_n, iter_out=8, iter_in=8, pop_prev=True)]
        for r in range(reps):
            row, slot = (k * reps + r) * tile, 1 + r * tile  # slot 0 is the GEMM's
            s += [Load(sram_base=slot, dram_base=at["a"] // cfg.acc_vec_bytes + row, x_size=tile, x_stride=tile,
                       push_next=True, pop_next=r >= AHEAD),
                  Alu(alu_op=ALU_OPS["ADD"], use_imm=True, imm=k + 1, iter_out=tile, iter_in=passes, dst_base=slot, src_base=slot,
                      dst_factor_out=1, src_factor_out=1, pop_prev=True, push_next=True,
                      push_prev=r + AHEAD < reps),
                  Store(sram_base=slot, dram_base=at["o"] // cfg.out_vec_bytes + row, x_size=tile, x_stride=tile,
                        pop_prev=True)]
        return s + [Finish()]

    insns, windows = concat_streams([stream(k) for k in range(n)])
    assert len(insns) == count
    add = np.repeat(np.arange(1, n + 1) * passes, reps * tile)[:, None]
    return Program.create(cfg, insns, asm.regions(insn_count=count), name=asm.name, windows=windows, inputs=data,
                          expected={"o": narrow(cfg, a.astype(np.int64) + add)})


LONG_COUNTERS = ("compute_busy", "gemm_busy", "load_stall", "store_stall")


def check_long(prog: Any, res: Any) -> list[str]:
    """What the long-counter Program's run must show: no error, the zero rows, and on every core GEMM_OPS
    equal to the GEMM's block operations and COMPUTE_BUSY, GEMM_BUSY and the LOAD and STORE stalls at
    least that many cycles."""
    bad = []
    if res.error is not None:
        bad.append(f"{prog.name}: error {res.error}")
    for k, want in prog.expected.items():
        if not np.array_equal(res.outputs.get(k), want):
            bad.append(f"{prog.name}: output {k} wrong")
    ops = prog.meta["gemm_ops"]
    cores = res.extra.get("cores") or [res.counters]
    for c, ctr in enumerate(cores):
        if ctr.get("gemm_ops") != ops:
            bad.append(f"{prog.name}: core {c} GEMM_OPS {ctr.get('gemm_ops')} != {ops}")
        for name in LONG_COUNTERS:
            if (ctr.get(name) or 0) < ops:
                bad.append(f"{prog.name}: core {c} {name.upper()} {ctr.get(name)} < {ops}")
    return bad


def check_walk(walk: dict[str, Any] | None) -> list[str]:
    """What the directed job's counter carry walk (``testbench.coverage_job.counter_walk``) must show: no
    mismatch after a preset, every CSR read equal to its counter, and CYCLES (one event per busy cycle)
    carried into every bit from the walk's lowest (``low_bit``) up to the 64th."""
    if not walk:
        return ["no walk result"]
    bad = list(walk["mismatches"]) + list(walk["read_back"])
    done, want = walk["carries"].get("CYCLES"), 64 - walk["low_bit"] + 1
    if done != want:
        bad.append(f"CYCLES carried {done} times, expected {want}")
    return bad


def directed_tasks(configs: Sequence[str], mems: Sequence[str], base: dict[str, Any]) -> list[Task]:
    """One task per (config, back-end) of the cocotb back-ends."""
    return [Task(f"directed {c} {m}", "cosim.coverage.campaign:run_task",
                 {**base, "kind": "directed", "config": c, "mem": m}) for c in configs for m in mems]


def _error_at(r: Any) -> tuple[str, int, int] | None:
    """A result's error as (name, core, pc), None for a clean run."""
    return r.error and (r.error["name"], r.error.get("core", 0), r.error["pc"])


def run_directed(args: dict[str, Any]) -> dict[str, Any]:
    """Engine task body: the directed tests of one (config, back-end); AssertionError naming every problem."""
    from compiler import examples
    from cosim import models
    from hw.config import load_config

    _unit_helpers()  # the repository on sys.path
    from tests.units.every_level import check_rtl, run_rtl

    cfg = load_config(args["config"])
    mem = args["mem"]
    bad: list[str] = []
    detail: dict[str, Any] = {}
    if cfg.num_cores == 1:
        # the widest-field errors first: the clean runs after them move those bits back to 0 (the
        # all-ones micro-op's bits too: gemm_offset_saturates reads micro-op (0, 0, 0) after it)
        cases = [*widest_fields(cfg), barrier_one_core(cfg), abort_after_error(cfg), halt_while_pushing(cfg),
                 uop_fields_all_ones(cfg), gemm_offset_saturates(cfg), window_ends_at_barrier(cfg),
                 *widest_tiles(cfg), widest_rows(cfg), widest_loops(cfg), store_tokens_fill_queue(cfg)]
        for case in cases:
            for name in ("iss", "tlm"):
                r = getattr(models, name)(case.program)
                got = r.error and (r.error["name"], r.error["pc"])
                if got != case.error:
                    bad.append(f"{case.name} on {name}: error {got}, expected {case.error}")
                for k, want in case.program.expected.items():
                    if not np.array_equal(r.outputs.get(k), want):
                        bad.append(f"{case.name} on {name}: output {k} wrong")
        try:
            check_rtl(cases, run_rtl(cases, cfg, mem=mem), cycle_exact=mem == "fast")
        except AssertionError as e:
            bad.append(str(e))
        detail["unit_cases"] = [c.name for c in cases]
    if cfg.num_cores == 1 and mem == "fast":  # cocotbext-axi's AxiRam answers OKAY past its end: no error there
        # every one a slave error at pc 0; a clean run last moves the address bits back to 0
        slverr = [*top_of_address_space(cfg), axi_error_at_barrier(cfg)]
        clean = barrier_one_core(cfg)
        res = models.rtl([*slverr, clean.program], cfg, mem=mem)
        for p, r in zip(slverr, res):
            got = r.error and (r.error["name"], r.error["pc"])
            if got != ("AXI_RESP", 0):
                bad.append(f"{p.name}: RTL error {got}, expected AXI_RESP at pc 0")
        if res[-1].error is not None:
            bad.append(f"{clean.name} after the slave errors: RTL error {res[-1].error}")
    if cfg.num_cores > 1:
        # several cores: one core skips its BARRIER (ERR_BARRIER), one faults while the others wait at theirs
        from tests.test_cores_hw import FAULTS, fault_on_core, posted_stores, program

        progs = [program(cfg, "cov_skip_barrier", skip=1), program(cfg, "cov_fault_at_barrier", bad_core=1)]
        # each unit's faults on each core alone: every core's lane of the error codes and pcs
        progs += [fault_on_core(cfg, k, kind) for k in range(cfg.num_cores) for kind in FAULTS]
        # an error while each core's posted writes await their B
        progs += [posted_stores(cfg, k, fault=True) for k in range(cfg.num_cores) if cfg.dram_writes_in_flight > 1]
        for p, r in zip(progs, models.rtl(progs, cfg, mem=mem)):
            t = models.tlm(p)
            if _error_at(r) != _error_at(t) or r.error is None:
                bad.append(f"{p.name}: RTL error {r.error}, TLM {t.error}")
            elif mem == "fast" and r.cycles != t.cycles:
                bad.append(f"{p.name}: RTL {r.cycles} cycles, TLM {t.cycles}")
        detail["multi_core_cases"] = [p.name for p in progs]
        if mem == "fast":  # the Verilog DRAM model's slave errors, as on one core; a clean run last
            tops = top_of_address_space_per_core(cfg)
            res = models.rtl([*tops, progs[0]], cfg, mem=mem)
            for p, r in zip(tops, res):
                if (r.error or {}).get("name") != "AXI_RESP":
                    bad.append(f"{p.name}: RTL error {r.error}, expected AXI_RESP")
            detail["multi_core_cases"] += [p.name for p in tops]
    if mem == "fast":
        # windows as long as the DRAM holds: the upper bits of every pc (the error's checked); a clean run
        # after it moves them back to 0
        # (one core: also a window without FINISH, whose DEADLOCK's pc is the DRAM's whole capacity)
        ends = LONG_WINDOW_ENDS if cfg.num_cores == 1 else LONG_WINDOW_ENDS[:2]
        progs = [long_window(cfg, end=e) for e in ends] + [examples.make_case(JOB_EXAMPLES[0], cfg, seed=0).program]
        res = models.rtl(progs, cfg, mem=mem)
        for p, r in zip(progs[:-1], res):
            t = models.tlm(p)
            if _error_at(r) != _error_at(t) or r.cycles != t.cycles:
                bad.append(f"{p.name}: RTL error {r.error} in {r.cycles} cycles, TLM {t.error} in {t.cycles}")
        if [r.error is None for r in res] != [e == "finish" for e in ends] + [True]:
            bad.append(f"long windows ({', '.join(ends)}, then a clean run): RTL errors {[r.error for r in res]}")
        detail["long_window"] = len(progs[0].insns)
    long_log2 = int(args.get("long_log2", LONG_LOG2_CYCLES))
    if mem == "fast" and long_log2 > 0:
        # the event counters' upper bits on every core: the long GEMM, then a short one whose START clears them
        progs = [long_counters(cfg, long_log2), long_counters(cfg, 4)]
        for p, r in zip(progs, models.rtl(progs, cfg, mem=mem)):
            bad += check_long(p, r)
        detail["long_counters"] = [p.name for p in progs]
    progs = [examples.make_case(n, cfg, seed=0).program for n in JOB_EXAMPLES]
    if cfg.num_cores > 1 and cfg.dram_writes_in_flight > 1:
        # the clear halfway through comes while core k's posted writes await their B: it orphans them
        from tests.test_cores_hw import posted_stores

        progs += [posted_stores(cfg, k, fault=False) for k in range(cfg.num_cores)]
    if mem != "fast":  # the counter walk's Program: every counter of every core busy
        progs.append(busy_cores(cfg))
    res = models.rtl(progs, cfg, mem=mem, job_module=DIRECTED_JOB)
    for c, r in zip(progs, res):
        d = r.extra.get("directed") or {}
        if r.error is not None:
            bad.append(f"{c.name}: error {r.error}")
        for k, want in c.expected.items():
            if not np.array_equal(r.outputs.get(k), want):
                bad.append(f"{c.name}: output {k} differs after the soft clears")
        if mem == "fast":
            t = models.tlm(c)
            if t.cycles != r.cycles:
                bad.append(f"{c.name}: TLM {t.cycles} cycles, RTL {r.cycles} after the soft clears")
        rb = d.get("readback") or {}
        if rb.get("answered") != rb.get("read"):
            bad.append(f"{c.name}: CSR readback: {rb}")
        bus = rb.get("bus")
        if bus is not None and (not bus["restored"] or not bus["merged"] or bus["unmapped"] != 0
                                or None in bus["strobes"]):
            bad.append(f"{c.name}: AXI4-Lite strobes and byte offsets: {bus}")
        for cl in d.get("clears", []):
            if cl.get("idle_after_reads") is None:
                bad.append(f"{c.name}: a soft clear {cl['after_cycles']} cycles after START never reached idle")
        if mem != "fast":
            bad += [f"{c.name}: counter walk: {m}" for m in check_walk(d.get("walk"))]
        detail[c.name] = d
    assert not bad, "\n".join(bad)
    return detail
