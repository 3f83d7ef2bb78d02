"""The Program format: folder round trip, register config, DRAM image, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hw import csr
from hw.assembler import Assembler
from hw.config import load_config, parse_config
from hw.program import Program, ProgramError, plan_layout


def small_program(cfg, n_vec=4):
    """A complete Program: C = int8(A + 1) over n_vec vectors."""
    lanes = cfg.lanes
    A = np.arange(n_vec * lanes, dtype=np.int32).reshape(n_vec, lanes) * 100
    asm = Assembler(cfg, "addone")
    a, c = asm.input("A", A), asm.output("C", (n_vec, lanes), "int8")
    asm.load(a, x=n_vec, push_next=True)
    asm.alu("ADD", imm=1, iter_out=1, iter_in=n_vec, dst_factor_in=1, pop_prev=True, push_next=True)
    asm.store(c, x=n_vec, pop_prev=True)
    asm.finish()
    return asm.program(expected={"C": (A + 1).astype(np.int8)})


def test_save_load_round_trip(tmp_path, cfg):
    p = small_program(cfg)
    d = p.save(tmp_path / "prog")
    for f in ("insn.bin", "regs.json", "regs.h", "layout.json", "program.lst", "inputs.npz", "expected.npz",
              "dram.bin"):
        assert (d / f).is_file(), f
    q = Program.load(d, cfg)
    assert q.insns == p.insns and q.regions == p.regions and q.regs == p.regs
    assert np.array_equal(q.inputs["A"], p.inputs["A"]) and np.array_equal(q.expected["C"], p.expected["C"])
    assert (d / "dram.bin").read_bytes() == bytes(p.dram_image())
    assert len((d / "program.lst").read_text().splitlines()) == 4
    assert Program.load(d).config == cfg  # the config named in layout.json


def test_a_failed_save_leaves_the_folder_as_it_was(tmp_path, cfg):
    """A write that fails (here a real ENOSPC: the staged file is a link to /dev/full) names the folder and
    changes nothing: the Program saved before still loads, and no staged file is left."""
    import os

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    d = small_program(cfg).save(tmp_path / "prog")
    before = {f.name: f.read_bytes() for f in d.iterdir()}
    (d / ".layout.json.saving").symlink_to("/dev/full")
    with pytest.raises(OSError) as e:
        small_program(cfg, n_vec=6).save(d)
    assert e.value.filename == str(d) and "No space" in e.value.strerror
    assert {f.name: f.read_bytes() for f in d.iterdir()} == before
    assert Program.load(d).insns == small_program(cfg).insns


def test_register_config_and_header(cfg):
    p = small_program(cfg)
    names = [n for n, _ in p.regs]
    assert names[-1] == "CTRL" and p.regs[-1][1] == csr.CTRL_START
    assert dict(p.regs)["INSN_COUNT"] == 4
    assert dict(p.regs)["REGION1_ATTR"] == csr.ATTR_READ and dict(p.regs)["REGION2_ATTR"] == csr.ATTR_WRITE
    h = p.regs_header()
    assert h.count("/* ") >= len(p.regs) and f"0x{cfg.config_id:08x}u" in h


def test_dram_image_and_outputs(cfg):
    p = small_program(cfg)
    img = p.dram_image()
    a = p.region("A")
    assert np.array_equal(np.frombuffer(bytes(img[a.addr:a.end]), "<i4").reshape(a.shape), p.inputs["A"])
    c = p.region("C")
    img[c.addr:c.end] = p.expected["C"].tobytes()
    assert np.array_equal(p.read_outputs(img)["C"], p.expected["C"])


def test_insn_bytes_follow_edits_of_the_instruction_list(cfg):
    """The encoding of ``insns`` is kept while the list holds the same (frozen) instructions; replacing,
    appending or removing one encodes afresh, exactly as a fresh encoding would."""
    import dataclasses

    p = small_program(cfg)
    first = p.insn_bytes
    assert p.insn_bytes is first and first == p.isa.encode_stream(p.insns)
    p.insns[1] = dataclasses.replace(p.insns[1], imm=2)
    edited = p.insn_bytes
    assert edited != first and edited == p.isa.encode_stream(p.insns)
    p.insns.append(p.insns[-1])
    assert len(p.insn_bytes) == len(first) + 16
    del p.insns[-1]
    assert p.insn_bytes == edited
    import pickle

    q = pickle.loads(pickle.dumps(p))  # another process: encodes afresh, the same words
    assert q._encoded is None and q.insn_bytes == edited


def _saved(tmp_path, cfg=None):
    cfg = cfg or load_config("default")
    return small_program(cfg).save(tmp_path / "p")


def test_truncated_insn_bin(tmp_path):
    d = _saved(tmp_path)
    data = (d / "insn.bin").read_bytes()
    (d / "insn.bin").write_bytes(data[:-5])
    with pytest.raises(ProgramError) as e:
        Program.load(d)
    assert "insn.bin" in str(e.value) and "not a whole number of 16-byte instructions" in str(e.value)


def test_unknown_csr(tmp_path):
    d = _saved(tmp_path)
    regs = json.loads((d / "regs.json").read_text())
    regs["writes"][2]["csr"] = "FOO"
    (d / "regs.json").write_text(json.dumps(regs))
    with pytest.raises(ProgramError, match=r"regs.json: write 2 names unknown CSR 'FOO'"):
        Program.load(d)


def test_read_only_csr_and_bad_value(tmp_path):
    d = _saved(tmp_path)
    regs = json.loads((d / "regs.json").read_text())
    regs["writes"][0] = {"csr": "CYCLES_LO", "value": 1}
    (d / "regs.json").write_text(json.dumps(regs))
    with pytest.raises(ProgramError, match=r"write 0 targets read-only CSR CYCLES_LO"):
        Program.load(d)
    regs["writes"][0] = {"csr": "INSN_COUNT", "value": 1 << 33}
    (d / "regs.json").write_text(json.dumps(regs))
    with pytest.raises(ProgramError, match=r"write 0 to INSN_COUNT: value 8589934592 is not a 32-bit"):
        Program.load(d)


def test_overlapping_regions(tmp_path):
    d = _saved(tmp_path)
    lay = json.loads((d / "layout.json").read_text())
    lay["regions"][2]["addr"] = lay["regions"][1]["addr"]
    (d / "layout.json").write_text(json.dumps(lay))
    with pytest.raises(ProgramError, match=r"layout.json: regions 'A' \[0x[0-9a-f]+, 0x[0-9a-f]+\) and 'C' .* overlap"):
        Program.load(d)


def test_misaligned_region(tmp_path):
    d = _saved(tmp_path)
    lay = json.loads((d / "layout.json").read_text())
    lay["regions"][2]["addr"] += 8
    (d / "layout.json").write_text(json.dumps(lay))
    with pytest.raises(ProgramError, match=r"layout.json: region 'C' at 0x[0-9a-f]+ is not aligned to 256 bytes"):
        Program.load(d)
    lay["regions"][2]["addr"] = -16  # below DRAM: said so, in readable hex
    (d / "layout.json").write_text(json.dumps(lay))
    with pytest.raises(ProgramError, match=r"layout.json: region 'C' \[-0x10, 0x[0-9a-f]+\) is outside the"):
        Program.load(d)


def test_program_for_another_config(tmp_path):
    d = _saved(tmp_path, load_config("small"))
    with pytest.raises(ProgramError) as e:
        Program.load(d, load_config("default"))
    msg = str(e.value)
    assert "layout.json" in msg and "made for config 'small'" in msg and "uses config 'default'" in msg


def test_a_folder_carries_its_config(tmp_path):
    """A Program made with a config file of the user's own (here named after a shipped one, with other
    sizes) loads without that file: layout.json carries the config; the shipped one of the same name is
    still refused by its identity, and a folder without the copy falls back to the shipped config."""
    data = {**load_config("small").to_dict(), "acc_depth": load_config("small").acc_depth // 2}
    own = parse_config(data, str(tmp_path / "small.json"))
    d = small_program(own).save(tmp_path / "prog")
    q = Program.load(d)
    assert q.config.hardware_dict() == own.hardware_dict() and q.config.name == "small"
    assert q.insns == small_program(own).insns
    with pytest.raises(ProgramError, match=r"config 'small' \(id .*\) \(another config of that name\)"):
        Program.load(d, load_config("small"))
    layout = json.loads((d / "layout.json").read_text())
    (d / "layout.json").write_text(json.dumps({k: v for k, v in layout.items() if k != "hardware"}))
    with pytest.raises(ProgramError, match="another config of that name"):
        Program.load(d)
    # a shipped config's folder loads as that config (the copy agrees with it)
    shipped = _saved(tmp_path / "s", load_config("small"))
    assert Program.load(shipped).config == load_config("small")


def test_missing_files(tmp_path):
    with pytest.raises(ProgramError, match="no such Program folder"):
        Program.load(tmp_path / "nope")
    d = _saved(tmp_path)
    with pytest.raises(ProgramError, match="a file of the Program folder .*; give the folder"):
        Program.load(d / "insn.bin")
    with pytest.raises(ProgramError, match="not a folder"):
        Program.load(d.parent / "x.txt" if (d.parent / "x.txt").write_text("x") else None)
    (d / "regs.json").unlink()
    with pytest.raises(ProgramError, match=r"regs.json: missing"):
        Program.load(d)


def test_region_off_dram_and_too_many_regions():
    cfg = load_config("small")
    with pytest.raises(ProgramError, match="outside the 4194304-byte DRAM"):
        plan_layout(cfg, [("A", "input", (cfg.dram_bytes,), "int32")], insn_count=1)
    with pytest.raises(ProgramError, match="8 region slots"):
        plan_layout(cfg, [(f"t{i}", "input", (8,), "int32") for i in range(8)], insn_count=1)


def test_input_shape_checked():
    cfg = load_config("default")
    p = small_program(cfg)
    with pytest.raises(ProgramError, match=r"input 'A' has shape \(3,\)"):
        p.set_input("A", np.zeros(3, np.int32))
    with pytest.raises(ProgramError, match="'C' is an output region"):
        p.set_input("C", np.zeros((4, 16), np.int8))


def test_create_checks_token_balance_as_load_does(tmp_path):
    """A Program that runs in memory also loads once saved: create refuses unbalanced tokens in one line
    naming the queue, as load does; a deliberately broken one is created only when asked."""
    from hw.isa import Alu, Finish

    cfg = load_config("default")
    insns = [Alu(pop_prev=True, use_imm=True, iter_out=1, iter_in=1), Finish()]
    with pytest.raises(ProgramError, match=r"^p: unbalanced dependency tokens: queue l2c gets 0 push\(es\)"):
        Program.create(cfg, insns, plan_layout(cfg, [], len(insns)), name="p")
    p = Program.create(cfg, insns, plan_layout(cfg, [], len(insns)), name="p", check_tokens=False)
    p.save(tmp_path / "p")
    with pytest.raises(ProgramError, match="unbalanced dependency tokens: queue l2c"):
        Program.load(tmp_path / "p")
    missing = Program.create(cfg, [Finish()], plan_layout(cfg, [], 1), name="q")
    with pytest.raises(ProgramError, match="^q: no output region"):
        missing.region_by_role("output")
