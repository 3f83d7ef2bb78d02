"""The invalid-inputs corpus: bad Program folders, bad configs, and faulty Programs for the models.

Everything is generated deterministically from a small valid Program, so nothing
binary is committed: ``write_corpus(folder)`` writes one sub-folder per entry (a
Program folder, or a ``config.json`` for config entries) and ``corpus.json``, the
manifest of what each entry must produce. ``model_entries()`` adds in-memory Programs
whose bad instruction words cannot live in a folder (the loader refuses them) but
must still be reported by the models (via ``PatchedProgram``).

Layers, from the user's side:

* ``config`` - ``hw.config.load_config`` raises ConfigError (``cosim``: exit 2);
* ``loader`` - ``hw.program.Program.load`` raises ProgramError (exit 2);
* ``runner`` - the folder loads but cannot be run (no inputs): ValueError (exit 2);
* ``model`` - the Program runs and the model reports ``code`` at ``pc`` (TLM: TlmError;
  RTL: STATUS.error and ERR_PC; ``cosim run``: exit 1).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hw import csr
from hw.config import HwConfig, load_config
from hw.assembler import Assembler, patched, set_field, with_insns, with_regs
from hw.isa import BUFFERS, Gemm, Isa, with_opcode
from hw.program import Program


@dataclass
class Entry:
    """One corpus entry and what it must produce."""

    name: str
    layer: str                    # config | loader | runner | model
    error: str                    # exception class name: ConfigError, ProgramError, ValueError, TlmError
    keywords: list[str]           # words the one-line message must contain
    config: str | None = "default"  # the --config to run it with (None: the config the Program names)
    cli: str = "run"              # the cosim subcommand that shows the error (run, or disasm for load-only)
    code: str | None = None       # model layer: hw.csr error name
    pc: int | None = None         # model layer: ERR_PC
    make: Callable[[Path], None] | None = None  # writes the entry's folder (None: in-memory only)
    program: Program | None = None               # model layer, in-memory
    doc: str = ""

    def manifest(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("name", "layer", "error", "keywords", "config", "cli", "code", "pc",
                                           "doc")}
        d["folder"] = self.make is not None
        return d


def base_program(cfg: HwConfig, n_vec: int = 4, name: str = "base") -> Program:
    """A small valid Program: out = int8(in + 3), one tile, tokens load->compute->store."""
    lanes = cfg.lanes
    A = (np.arange(n_vec * lanes, dtype=np.int32).reshape(n_vec, lanes) - 7) * 37
    asm = Assembler(cfg, name)
    a = asm.input("A", A)
    c = asm.output("C", (n_vec, lanes))
    asm.load(a, x=n_vec, push_next=True)
    asm.alu("ADD", imm=3, iter_out=1, iter_in=n_vec, dst_factor_in=1, pop_prev=True, push_next=True)
    asm.store(c, x=n_vec, pop_prev=True)
    asm.finish()
    return asm.program(expected={"C": (A + 3).astype(asm.out_dtype)})


# ---- folder mutations ---------------------------------------------------------------------------
def gemm_program(cfg: HwConfig, name: str = "gemm_base") -> Program:
    """LOAD two micro-ops, one weight block and one input vector, GEMM (reset, then accumulate both
    micro-ops into acc[0] and acc[1]), STORE two vectors: the base of the GEMM fault entries (weight
    block 1 and micro-op 2 are never loaded)."""
    rng = np.random.default_rng(5)
    asm = Assembler(cfg, name)
    u = asm.uops("uops", [(0, 0, 0), (1, 0, 0)])
    wgt = asm.input("wgt", rng.integers(-128, 128, (1, cfg.block, cfg.block)).astype(np.int8))
    inp = asm.input("inp", rng.integers(-128, 128, (1, cfg.lanes)).astype(np.int8))
    out = asm.output("out", (2, cfg.lanes))
    asm.load(u, x=2, buf="UOP")
    asm.load(wgt, x=1, buf="WGT")
    asm.load(inp, x=1, buf="INP", push_next=True)
    asm.gemm(reset=True, uop_begin=0, uop_end=2, pop_prev=True)
    asm.gemm(uop_begin=0, uop_end=2, push_next=True)
    asm.store(out, x=2, pop_prev=True)
    asm.finish()
    return asm.program()


def _saved(p: Program, mutate: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        p.save(d)
        if mutate is not None:
            mutate(d)
    return make


def _patch_word(k: int, fn: Callable[[int], int]) -> Callable[[Path], None]:
    def m(d: Path) -> None:
        b = bytearray((d / "insn.bin").read_bytes())
        w = int.from_bytes(b[16 * k:16 * k + 16], "little")
        b[16 * k:16 * k + 16] = (fn(w) & ((1 << 128) - 1)).to_bytes(16, "little")
        (d / "insn.bin").write_bytes(bytes(b))
    return m


def _edit_json(file: str, fn: Callable[[Any], Any]) -> Callable[[Path], None]:
    def m(d: Path) -> None:
        data = json.loads((d / file).read_text())
        (d / file).write_text(json.dumps(fn(data), indent=1))
    return m


def _set_region(idx: int, **kw) -> Callable[[Any], Any]:
    def f(layout: Any) -> Any:
        layout["regions"][idx].update(kw)
        return layout
    return f


def _set_reg(name: str, value: Any) -> Callable[[Any], Any]:
    def f(regs: Any) -> Any:
        for w in regs["writes"]:
            if w["csr"] == name:
                w["value"] = value
        return regs
    return f


def _field(cfg: HwConfig, mnemonic: str, name: str, value: int) -> Callable[[int], int]:
    isa = Isa(cfg)
    return lambda w: set_field(isa, w, mnemonic, name, value)


def _config_file(changes: dict[str, Any] | None = None, text: str | None = None,
                 drop: str | None = None) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        if text is not None:
            (d / "config.json").write_text(text)
            return
        data = load_config("default").to_dict()
        data["name"] = "corpus"
        data.update(changes or {})
        if drop:
            data.pop(drop)
        (d / "config.json").write_text(json.dumps(data, indent=1))
    return make


def entries() -> list[Entry]:
    """Every corpus entry (folder-backed and in-memory), deterministic."""
    cfg, small = load_config("default"), load_config("small")
    p = base_program(cfg)
    E: list[Entry] = []
    L = lambda name, kw, mk, doc, err="ProgramError", conf="default": E.append(  # noqa: E731
        Entry(name, "loader", err, kw, conf, make=mk, doc=doc))
    # --- instruction binaries ----------------------------------------------------------------------
    def trunc(k: int) -> Callable[[Path], None]:
        return lambda d: (d / "insn.bin").write_bytes((d / "insn.bin").read_bytes()[:-k])
    L("insn_truncated_partial_word", ["insn.bin", "not a whole number", "truncated after instruction 3"],
      _saved(p, trunc(3)), "insn.bin cut 3 bytes short")
    L("insn_truncated_whole_word", ["insn.bin", "48 bytes", "instruction region holds 64"],
      _saved(p, trunc(16)), "insn.bin missing its last instruction (FINISH)")
    L("insn_empty", ["insn.bin", "0 bytes"], _saved(p, lambda d: (d / "insn.bin").write_bytes(b"")),
      "empty instruction binary")
    L("insn_unknown_opcode", ["insn.bin", "instruction 1", "unknown opcode 6"],
      _saved(p, _patch_word(1, lambda w: with_opcode(w, 6))), "opcode 6 does not exist")
    L("insn_reserved_bits", ["insn.bin", "instruction 0", "non-zero reserved bits"],
      _saved(p, _patch_word(0, lambda w: w | (1 << 127))), "bit 127 of a LOAD set")
    L("insn_corrupted_high_bytes", ["insn.bin", "instruction 2", "reserved bits"],
      _saved(p, _patch_word(2, lambda w: w ^ (0xFF << 120))), "top byte of a STORE flipped")
    L("insn_unknown_alu_op", ["insn.bin", "instruction 1", "unknown ALU op 10"],
      _saved(p, _patch_word(1, _field(cfg, "ALU", "alu_op", 10))), "ALU op 10 does not exist")
    L("insn_store_from_uop", ["insn.bin", "instruction 2", "accumulator buffer"],
      _saved(p, _patch_word(2, _field(cfg, "STORE", "buf", BUFFERS["UOP"]))), "STORE from the micro-op buffer")
    L("insn_load_pop_prev", ["insn.bin", "instruction 0", "LOAD has no previous stage"],
      _saved(p, _patch_word(0, _field(cfg, "LOAD", "pop_prev", 1))), "LOAD popping from a missing stage")
    L("insn_store_push_next", ["insn.bin", "instruction 2", "STORE has no next stage"],
      _saved(p, _patch_word(2, _field(cfg, "STORE", "push_next", 1))), "STORE pushing to a missing stage")
    L("insn_store_padding", ["insn.bin", "instruction 2", "STORE cannot pad"],
      _saved(p, _patch_word(2, _field(cfg, "STORE", "x_pad_1", 2))), "STORE with padding")
    L("insn_store_from_inp", ["insn.bin", "instruction 2", "accumulator buffer"],
      _saved(p, _patch_word(2, _field(cfg, "STORE", "buf", BUFFERS["INP"]))), "STORE from INP")
    L("insn_random_garbage", ["insn.bin", "instruction 0"],
      _saved(p, lambda d: (d / "insn.bin").write_bytes(
          np.random.default_rng(8).integers(0, 256, 64, dtype=np.uint8).tobytes())),
      "64 random bytes (seeded)")
    # --- token patterns -----------------------------------------------------------------------
    surplus = list(p.insns)
    surplus[0] = dataclasses.replace(surplus[0], push_next=True)
    surplus[2] = dataclasses.replace(surplus[2], push_prev=True)
    L("tokens_surplus_push", ["insn.bin", "unbalanced dependency tokens", "queue s2c", "1 push(es)", "0 pop(s)"],
      _saved(with_insns(p, surplus, "surplus")), "STORE pushes a token nobody pops")
    missing = list(p.insns)
    missing[0] = dataclasses.replace(missing[0], push_next=False)
    L("tokens_missing_push", ["insn.bin", "unbalanced dependency tokens", "queue l2c", "0 push(es)", "1 pop(s)"],
      _saved(with_insns(p, missing, "missing")), "the ALU pops a token the LOAD never pushes")
    # --- layouts -----------------------------------------------------------------------------------
    L("layout_overlap", ["layout.json", "regions 'A'", "'C'", "overlap"],
      _saved(p, _edit_json("layout.json", _set_region(2, addr=p.regions[1].addr))), "output placed over the input")
    L("layout_misaligned", ["layout.json", "region 'C'", "not aligned"],
      _saved(p, _edit_json("layout.json", _set_region(2, addr=p.regions[2].addr + 8))), "region at +8 bytes")
    L("layout_outside_dram", ["layout.json", "region 'C'", "outside the 16777216-byte DRAM"],
      _saved(p, _edit_json("layout.json", _set_region(2, addr=cfg.dram_bytes))),
      "region past the end of DRAM")
    L("layout_bad_role", ["layout.json", "unknown role 'weights'"],
      _saved(p, _edit_json("layout.json", _set_region(1, role="weights"))), "unknown region role")
    L("layout_bad_dtype", ["layout.json", "unsupported dtype 'float32'"],
      _saved(p, _edit_json("layout.json", _set_region(1, dtype="float32"))), "float region")
    L("layout_not_json", ["layout.json", "not valid JSON"],
      _saved(p, lambda d: (d / "layout.json").write_text('{"regions": [')), "truncated JSON")
    L("layout_missing_keys", ["layout.json", "needs 'config'"],
      _saved(p, _edit_json("layout.json", lambda j: {"regions": j["regions"]})), "no config identity")
    L("layout_malformed_region", ["layout.json", "region 1", "'shape' must be a JSON list"],
      _saved(p, _edit_json("layout.json", _set_region(1, shape="four"))), "shape is not a list of ints")
    L("layout_two_insn_regions", ["layout.json", "exactly one region with role 'insn'"],
      _saved(p, _edit_json("layout.json", _set_region(1, role="insn"))), "two instruction regions")
    L("layout_too_many_regions", ["layout.json", "region slots"],
      _saved(p, _edit_json("layout.json", lambda j: dict(j, regions=j["regions"] + [
          {"name": f"x{k}", "role": "scratch", "addr": 0x10000 + 0x400 * k, "shape": [16], "dtype": "int8"}
          for k in range(cfg.max_regions)]))), "more regions than REGIONn slots")
    # --- missing files and other hardware ----------------------------------------------------------------
    for f in ("insn.bin", "regs.json", "layout.json"):
        L(f"missing_{f.replace('.', '_')}", [f, "missing"], _saved(p, lambda d, f=f: (d / f).unlink()),
          f"Program folder without {f}")
    E.append(Entry("not_a_folder", "loader", "ProgramError", ["no such Program folder"], cli="disasm",
                   make=lambda d: d.parent.mkdir(parents=True, exist_ok=True), doc="the path does not exist"))
    E.append(Entry("missing_inputs", "runner", "ValueError", ["no inputs.npz", "cannot be run"], make=_saved(
        p, lambda d: [(d / f).unlink() for f in ("inputs.npz", "dram.bin", "expected.npz")]),
        doc="a Program without inputs loads (disasm works) but cannot run"))
    L("other_config", ["layout.json", "made for config 'small'", "this run uses config 'default'"],
      _saved(base_program(small)), "a Program for 'small' run with --config default")
    E.append(Entry("unknown_config", "loader", "ProgramError", ["layout.json", "made for config 'nosuch'",
                                                                 "cannot be loaded", "no such config file"],
                   None, cli="disasm", make=_saved(p, _edit_json("layout.json", lambda j: {
                       k: v for k, v in dict(j, config="nosuch").items() if k != "hardware"})),
                   doc="a folder without the copy of its config names one that does not exist (loaded without "
                       "--config)"))
    E.append(Entry("edited_hardware", "loader", "ProgramError", ["layout.json", "'hardware' is config id",
                                                                  "but 'config_id' says", "edited"],
                   None, cli="disasm", make=_saved(p, _edit_json("layout.json", lambda j: dict(
                       j, hardware=dict(j["hardware"], acc_depth=j["hardware"]["acc_depth"] // 2)))),
                   doc="the copy of the config differs from the id the folder names (loaded without --config)"))
    E.append(Entry("malformed_hardware", "loader", "ProgramError", ["layout.json", "'hardware'", "key 'lanes'"],
                   None, cli="disasm", make=_saved(p, _edit_json("layout.json", lambda j: dict(
                       j, hardware=dict(j["hardware"], lanes="16")))),
                   doc="the copy of the config is not a valid config (loaded without --config)"))
    L("config_id_mismatch", ["layout.json", "0x00000bad"],
      _saved(p, _edit_json("layout.json", lambda j: dict(j, config_id="0xbad"))), "wrong hardware id")
    L("regs_unknown_csr", ["regs.json", "unknown CSR 'TURBO'"],
      _saved(p, _edit_json("regs.json", lambda r: dict(r, writes=r["writes"] + [{"csr": "TURBO", "value": 1}]))),
      "write to a register that does not exist")
    L("regs_read_only_csr", ["regs.json", "read-only CSR STATUS"],
      _saved(p, _edit_json("regs.json", lambda r: dict(r, writes=[{"csr": "STATUS", "value": 1}] + r["writes"]))),
      "write to STATUS")
    L("regs_bad_value", ["regs.json", "not a 32-bit unsigned integer"],
      _saved(p, _edit_json("regs.json", _set_reg("INSN_COUNT", -1))), "negative register value")
    L("regs_wrong_address", ["regs.json", "INSN_COUNT gives address 0x99", "the map says 0x18"],
      _saved(p, _edit_json("regs.json", lambda r: dict(r, writes=[dict(w, addr=0x99) if w["csr"] == "INSN_COUNT"
                                                                  else w for w in r["writes"]]))),
      "a write whose address disagrees with the CSR map")
    L("inputs_wrong_shape", ["input 'A'", "has shape (2, 16)"],
      _saved(p, lambda d: np.savez(d / "inputs.npz", A=np.zeros((2, 16), np.int32))), "inputs.npz of another shape")
    L("inputs_unknown_region", ["no region named 'Z'"],
      _saved(p, lambda d: np.savez(d / "inputs.npz", Z=np.zeros((4, 16), np.int32))), "inputs.npz names no region")
    # --- configs with impossible sizes -----------------------------------------------------------------
    C = lambda name, kw, mk, doc: E.append(Entry(name, "config", "ConfigError", kw, make=mk, doc=doc))  # noqa: E731
    C("config_block_not_pow2", ["config.json", "key 'block' must be a power of two", "got 12"],
      _config_file({"block": 12}), "12 lanes")
    C("config_acc_depth_too_small", ["config.json", "key 'acc_depth' must be at least 8"], _config_file({"acc_depth": 4}),
      "accumulator buffer of 4 vectors")
    C("config_acc_depth_too_big", ["config.json", "key 'acc_depth' must be at most 2048"],
      _config_file({"acc_depth": 4096}), "index fields would not fit 128 bits")
    C("config_bus_width", ["config.json", "key 'bus_width' must be one of 32, 64, 128", "got 256"],
      _config_file({"bus_width": 256}), "256-bit bus")
    C("config_out_vector_vs_bus", ["config.json", "key 'bus_width'", "whole number"],
      _config_file({"block": 2, "acc_depth": 8, "bus_width": 32}), "2-lane int8 vector is half a 32-bit beat")
    C("config_dram_too_small", ["config.json", "key 'dram_bytes' must be between 64 KiB and 4 GiB"],
      _config_file({"dram_bytes": 1024}), "1 KiB DRAM")
    C("config_zero_queue", ["config.json", "key 'load_queue_depth'"], _config_file({"load_queue_depth": 0}),
      "no load queue")
    C("config_zero_tokens", ["config.json", "key 'token_queue_depth' must be between 1 and 255"],
      _config_file({"token_queue_depth": 0}), "token queues that hold nothing")
    C("config_missing_key", ["config.json", "missing key 'max_burst'"], _config_file(drop="max_burst"),
      "no max_burst")
    C("config_unknown_key", ["config.json", "unknown key 'turbo'"], _config_file({"turbo": 1}), "typo'd key")
    C("config_bool_value", ["config.json", "key 'batch' must be int, got bool"], _config_file({"batch": True}),
      "true instead of 1")
    C("config_not_json", ["config.json", "not valid JSON"], _config_file(text="{\"name\": "), "truncated JSON")
    C("config_not_object", ["config.json", "must be a JSON object, got list"], _config_file(text="[1, 2]"),
      "a list")
    E.extend(model_entries(cfg))
    return E


def model_entries(cfg: HwConfig) -> list[Entry]:
    """Programs that load (or are built in memory) and must be stopped by the model with code and pc."""
    p = base_program(cfg)
    ins = list(p.insns)
    a, c = p.regions[1], p.regions[2]
    out: list[Entry] = []

    def M(name: str, prog: Program, code: int, pc: int, kw: list[str], doc: str, folder: bool = True) -> None:
        prog.name = name
        out.append(Entry(name, "model", "TlmError", kw, cfg.name, code=csr.ERROR_NAMES[code], pc=pc,
                         make=_saved(prog) if folder else None, program=prog, doc=doc))

    def with_insn(k: int, insn) -> Program:
        q = list(ins)
        q[k] = insn
        return with_insns(p, q, "x")

    M("dram_load_past_region", with_insn(0, dataclasses.replace(ins[0], dram_base=a.addr // cfg.acc_vec_bytes + 1)),
      csr.ERR_DRAM_RANGE, 0, ["DRAM_RANGE"], "LOAD reads one vector past its input region")
    M("dram_load_from_output", with_insn(0, dataclasses.replace(ins[0], dram_base=c.addr // cfg.acc_vec_bytes)),
      csr.ERR_DRAM_RANGE, 0, ["DRAM_RANGE"], "LOAD from a write-only region")
    M("dram_store_into_input", with_insn(2, dataclasses.replace(ins[2], dram_base=a.addr // cfg.out_vec_bytes)),
      csr.ERR_DRAM_RANGE, 2, ["DRAM_RANGE"], "STORE into a read-only region")
    M("dram_store_off_layout", with_insn(2, dataclasses.replace(ins[2], dram_base=(1 << 32) - 1)),
      csr.ERR_DRAM_RANGE, 2, ["DRAM_RANGE"], "STORE at the top of the 32-bit address field")
    M("sram_alu_past_depth", with_insn(1, dataclasses.replace(ins[1], dst_base=cfg.acc_depth - 2)),
      csr.ERR_SRAM_RANGE, 1, ["SRAM_RANGE"], "ALU loop runs past ACC_DEPTH")
    M("sram_load_past_depth", with_insn(0, dataclasses.replace(ins[0], sram_base=cfg.acc_depth - 1)),
      csr.ERR_SRAM_RANGE, 0, ["SRAM_RANGE"], "LOAD tile runs past ACC_DEPTH")
    M("sram_load_padding_past_depth", with_insn(0, dataclasses.replace(
        ins[0], sram_base=cfg.acc_depth - 4, y_size=0, y_pad_0=1, x_pad_1=1)),
      csr.ERR_SRAM_RANGE, 0, ["SRAM_RANGE"], "a LOAD that only pads still writes (and is range-checked)")
    M("sram_store_past_depth", with_insn(2, dataclasses.replace(ins[2], sram_base=cfg.acc_depth - 1)),
      csr.ERR_SRAM_RANGE, 2, ["SRAM_RANGE"], "STORE reads past ACC_DEPTH")
    g = gemm_program(cfg)
    gi = list(g.insns)
    k = [j for j, i in enumerate(gi) if isinstance(i, Gemm)][-1]  # the accumulating GEMM

    def with_gemm(**changes: Any) -> Program:
        q = list(gi)
        q[k] = dataclasses.replace(gi[k], **changes)
        return with_insns(g, q, "x")
    M("sram_gemm_uops_past_depth", with_gemm(uop_begin=cfg.uop_depth - 1, uop_end=cfg.uop_depth + 1),
      csr.ERR_SRAM_RANGE, k, ["SRAM_RANGE"], "GEMM names micro-ops past UOP_DEPTH (checked in WAIT)")
    M("sram_gemm_acc_past_depth", with_gemm(iter_out=2, acc_factor_out=cfg.acc_depth - 1),
      csr.ERR_SRAM_RANGE, k, ["SRAM_RANGE"], "GEMM's accumulator index walks past ACC_DEPTH (in EXEC)")
    M("sram_gemm_inp_past_depth", with_gemm(iter_in=3, inp_factor_in=cfg.inp_depth // 2),
      csr.ERR_SRAM_RANGE, k, ["SRAM_RANGE"], "GEMM's input index walks past INP_DEPTH (in EXEC)")
    M("unloaded_gemm_weight", with_gemm(iter_out=2, wgt_factor_out=1), csr.ERR_UNLOADED, k, ["UNLOADED"],
      "GEMM reads a weight block no LOAD wrote")
    M("unloaded_gemm_uop", with_gemm(uop_begin=2, uop_end=3), csr.ERR_UNLOADED, k, ["UNLOADED"],
      "GEMM walks a micro-op no LOAD wrote")
    cyc = list(ins)  # balanced, but LOAD waits for compute and compute for LOAD
    cyc[0] = dataclasses.replace(cyc[0], pop_next=True)
    cyc[1] = dataclasses.replace(cyc[1], push_prev=True)
    M("deadlock_token_cycle", with_insns(p, cyc, "x"), csr.ERR_DEADLOCK, 0, ["DEADLOCK"],
      "balanced tokens in a cycle: every unit waits")
    M("deadlock_no_finish", with_regs(p, INSN_COUNT=3), csr.ERR_DEADLOCK, 3, ["DEADLOCK"],
      "INSN_COUNT excludes FINISH")
    M("insn_count_zero", with_regs(p, INSN_COUNT=0), csr.ERR_INSN_RANGE, 0, ["INSN_RANGE"], "INSN_COUNT = 0")
    M("insn_addr_hi", with_regs(p, INSN_ADDR_HI=1), csr.ERR_INSN_RANGE, 0, ["INSN_RANGE"],
      "instructions above 4 GiB")
    M("insn_window_past_region", with_regs(p, INSN_COUNT=100), csr.ERR_INSN_RANGE, 0, ["INSN_RANGE"],
      "INSN_COUNT larger than the instruction region")
    M("insn_addr_in_output", with_regs(p, INSN_ADDR_LO=c.addr), csr.ERR_INSN_RANGE, 0, ["INSN_RANGE"],
      "instructions fetched from a write-only region")
    # Raw bad words: the loader refuses them in a folder, so they reach the models in memory only.
    isa = p.isa
    w = [isa.encode_word(i) for i in ins]

    def fld(mn: str, name: str, word: int, v: int) -> int:
        return set_field(isa, word, mn, name, v)
    raw = [("raw_unknown_opcode", 2, with_opcode(w[2], 5), csr.ERR_BAD_OPCODE),
           ("raw_reserved_bits", 1, w[1] | (1 << 127), csr.ERR_BAD_OPCODE),
           ("raw_unknown_alu_op", 1, fld("ALU", "alu_op", w[1], 15), csr.ERR_BAD_OPCODE),
           ("raw_store_from_uop", 2, fld("STORE", "buf", w[2], BUFFERS["UOP"]), csr.ERR_BAD_FIELD),
           ("raw_load_push_prev", 0, fld("LOAD", "push_prev", w[0], 1), csr.ERR_BAD_FIELD),
           ("raw_store_pop_next", 2, fld("STORE", "pop_next", w[2], 1), csr.ERR_BAD_FIELD),
           ("raw_store_padding", 2, fld("STORE", "y_pad_0", w[2], 1), csr.ERR_BAD_FIELD),
           ("raw_store_from_wgt", 2, fld("STORE", "buf", w[2], BUFFERS["WGT"]), csr.ERR_BAD_FIELD),
           ("raw_finish_garbage", 3, w[3] | (0xABCD << 64), csr.ERR_BAD_OPCODE)]
    for name, k, word, code in raw:
        M(name, patched(p, {k: word}), code, k, [csr.ERROR_NAMES[code]], f"word {k} patched", folder=False)
    return out


def write_corpus(folder: str | Path) -> list[Entry]:
    """Write every folder-backed entry under ``folder`` (replacing it) and ``corpus.json``."""
    root = Path(folder)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    es = entries()
    for e in es:
        if e.make is not None:
            e.make(root / e.name)
    (root / "corpus.json").write_text(json.dumps([e.manifest() for e in es], indent=1) + "\n")
    return es


def entry_path(root: Path, e: Entry) -> Path:
    """What to hand to the tools: the config file for config entries, else the Program folder."""
    return root / e.name / "config.json" if e.layer == "config" else root / e.name
