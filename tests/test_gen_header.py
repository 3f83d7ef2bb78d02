"""The generated Verilog headers are current and carry the Python definitions."""

from __future__ import annotations

import re
import subprocess
import sys

from hw import csr
from hw.config import list_configs, load_config, parse_config
from hw.gen_header import header_path, header_text, stale_headers
from hw.isa import ALU_OPS, OPCODES, Isa


def test_committed_headers_are_current():
    assert stale_headers() == [], "run `make gen` and commit hw/rtl/gen"


def test_check_mode_reports_stale(tmp_path, monkeypatch):
    import hw.gen_header as g
    monkeypatch.setattr(g, "GEN_DIR", tmp_path)
    assert g.stale_headers(["default"]) == ["default"]
    g.write_header(load_config("default"), tmp_path / "default")
    assert g.stale_headers(["default"]) == []


def _defines(text):
    return {m.group(1): m.group(2) for m in re.finditer(r"^`define\s+(\w+)\s+(\S+)", text, re.M)}


def test_header_values(cfg):
    d = _defines(header_text(cfg))
    isa = Isa(cfg)
    assert d["CFG_LANES"] == str(cfg.lanes) and d["CFG_BUS_WIDTH"] == str(cfg.bus_width)
    assert d["CFG_CONFIG_ID"] == f"32'h{cfg.config_id:08x}"
    for n, v in OPCODES.items():
        assert d[f"OP_{n}"] == f"3'd{v}"
    for n, v in ALU_OPS.items():
        assert d[f"ALU_{n}"] == f"4'd{v}"
    f = isa.field("ALU", "imm")
    assert d["F_ALU_IMM_LO"] == str(f.lo) and d["F_ALU_IMM_W"] == str(f.width)
    assert d["CSR_ERR_PC"] == f"12'h{0x1c:03x}" and d["ERR_DEADLOCK"] == f"8'd{csr.ERR_DEADLOCK}"


def test_runtime_config_header_is_the_rtl_only(cfg):
    """A simulation build's header names no config and holds no CONFIG_ID or DRAM latency (plusargs give
    them), so two configs that differ only there get the same text, and hence one build."""
    text = header_text(cfg, runtime_config=True)
    d = _defines(text)
    assert "CFG_RUNTIME_CONFIG" in d and cfg.name not in text.split("`define")[0]
    assert not {"CFG_CONFIG_ID", "CFG_DRAM_READ_LATENCY", "CFG_DRAM_WRITE_LATENCY"} & set(d)
    other = parse_config(dict(cfg.to_dict(), name="other", dram_read_latency=cfg.dram_read_latency + 7,
                              dram_write_latency=cfg.dram_write_latency + 3))
    assert header_text(other, runtime_config=True) == text
    assert {k: v for k, v in _defines(header_text(cfg)).items()
            if k not in ("CFG_CONFIG_ID", "CFG_DRAM_READ_LATENCY", "CFG_DRAM_WRITE_LATENCY")} == \
        {k: v for k, v in d.items() if k != "CFG_RUNTIME_CONFIG"}


def test_gen_check_cli():
    r = subprocess.run([sys.executable, "-m", "hw.gen_header", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert all(header_path(n).is_file() for n in list_configs())
