"""The hardware config: shipped files load, derived sizes hold, bad files fail in one line."""

from __future__ import annotations

import json

import pytest

from hw.config import ConfigError, load_config, parse_config


def _default_dict():
    return load_config("default").to_dict()


def test_shipped_configs_load(cfg):
    assert cfg.lanes * 4 == cfg.acc_vec_bytes
    assert cfg.out_vec_bytes % cfg.bus_bytes == 0
    assert cfg.region_align % cfg.bus_bytes == 0
    assert 2 ** cfg.sram_index_bits >= cfg.acc_depth


def test_default_matches_the_documented_sizes():
    c = load_config("default")
    assert (c.block, c.batch, c.inp_width, c.out_width, c.acc_width, c.bus_width) == (16, 1, 8, 8, 32, 64)
    assert c.acc_depth >= 2048
    assert c.acc_vec_bytes == 64 and c.beats_per_acc_vec == 8 and c.beats_per_out_vec == 2
    assert load_config("small").block == 8 and load_config("wide").bus_width == 128


def test_config_is_frozen():
    c = load_config("default")
    with pytest.raises(Exception):
        c.block = 8  # type: ignore[misc]


def test_config_id_depends_on_sizes_not_name():
    d = _default_dict()
    a = parse_config(d)
    d2 = dict(d, name="renamed", description="x")
    assert parse_config(d2).config_id == a.config_id
    d3 = dict(d, dram_read_latency=17)
    assert parse_config(d3).config_id != a.config_id


def test_rtl_id_leaves_out_the_dram_timing_only():
    """Configs that differ only in the DRAM's latencies (and name) make the same RTL: one simulator build."""
    d = _default_dict()
    a = parse_config(d)
    b = parse_config(dict(d, name="slow", dram_read_latency=64, dram_write_latency=32))
    assert b.rtl_id == a.rtl_id and b.config_id != a.config_id
    assert parse_config(dict(d, max_burst=8)).rtl_id != a.rtl_id
    assert parse_config(dict(d, dram_bytes=d["dram_bytes"] // 2)).rtl_id != a.rtl_id


def _write(tmp_path, data):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return p


@pytest.mark.parametrize("mutate, key, words", [
    (lambda d: d.pop("block"), "block", "missing key"),
    (lambda d: d.update(lanes_extra=3), "lanes_extra", "unknown key"),
    (lambda d: d.update(block="16"), "block", "must be int"),
    (lambda d: d.update(max_burst=True), "max_burst", "must be int"),
    (lambda d: d.update(block=12), "block", "power of two"),
    (lambda d: d.update(acc_depth=1000), "acc_depth", "power of two"),
    (lambda d: d.update(acc_depth=4), "acc_depth", "at least"),
    (lambda d: d.update(acc_depth=4096), "acc_depth", "at most"),
    (lambda d: d.update(acc_width=16), "acc_width", "must be 32"),
    (lambda d: d.update(bus_width=48), "bus_width", "one of"),
    (lambda d: d.update(block=2, bus_width=64), "bus_width", "whole number"),
    (lambda d: d.update(bus_width=256), "bus_width", "one of"),
    (lambda d: d.update(max_burst=512), "max_burst", "power of two"),
    (lambda d: d.update(max_burst=1), "max_burst", "cannot carry one 16-byte instruction"),  # 64-bit bus
    (lambda d: d.update(max_burst=2, bus_width=32), "max_burst", "need at least 4"),
    (lambda d: d.update(load_queue_depth=3), "load_queue_depth", "power of two"),
    (lambda d: d.update(uop_depth=4096), "uop_depth", "between 1 and 2048"),  # GEMM would need 133 bits
    (lambda d: d.update(name="défaut"), "name", "must be ASCII letters"),
    (lambda d: d.update(name="my cfg"), "name", "must be ASCII letters"),
    (lambda d: d.update(dram_read_latency=0), "dram_read_latency", "between"),
    (lambda d: d.update(dram_reads_in_flight=0), "dram_reads_in_flight", "between 1 and 8"),
    (lambda d: d.update(dram_reads_in_flight=9), "dram_reads_in_flight", "between 1 and 8"),
    (lambda d: d.update(dram_reads_in_flight="2"), "dram_reads_in_flight", "must be int"),
    (lambda d: d.update(dram_reads_in_flight=2, num_cores=16), "dram_reads_in_flight", "at most 8 cores"),
    (lambda d: d.update(dram_writes_in_flight=0), "dram_writes_in_flight", "between 1 and 8"),
    (lambda d: d.update(dram_writes_in_flight=9), "dram_writes_in_flight", "between 1 and 8"),
    (lambda d: d.update(dram_writes_in_flight=2.0), "dram_writes_in_flight", "must be int"),
    (lambda d: d.update(dram_writes_in_flight=2, num_cores=16), "dram_writes_in_flight", "at most 8 cores"),
])
def test_bad_config_one_line(tmp_path, mutate, key, words):
    d = _default_dict()
    mutate(d)
    p = _write(tmp_path, d)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert "\n" not in msg
    assert str(p) in msg and f"'{key}'" in msg and words in msg


def test_reads_in_flight_is_optional_and_shapes_the_rtl(tmp_path):
    """``dram_reads_in_flight`` may be left out (1: one burst at a time, the identity of a config
    without the key); above 1 it is part of the RTL's identity and of the generated header."""
    from hw.gen_header import header_text
    d = _default_dict()
    assert "dram_reads_in_flight" not in d
    one = parse_config(d)
    assert one.dram_reads_in_flight == 1
    assert parse_config({**d, "dram_reads_in_flight": 1}).config_id == one.config_id
    four = parse_config({**d, "dram_reads_in_flight": 4})
    assert four.rtl_id != one.rtl_id and four.to_dict()["dram_reads_in_flight"] == 4
    assert "`define CFG_DRAM_READS_IN_FLIGHT 4" in " ".join(header_text(four).split())


def test_writes_in_flight_is_optional_and_shapes_the_rtl():
    """``dram_writes_in_flight`` may be left out (1: one write at a time, the identity of a config
    without the key); above 1 it is part of the RTL's identity and of the generated header."""
    from hw.gen_header import header_text
    d = _default_dict()
    one = parse_config(d)
    assert one.dram_writes_in_flight == 1
    assert parse_config({**d, "dram_writes_in_flight": 1}).config_id == one.config_id
    three = parse_config({**d, "dram_writes_in_flight": 3})
    assert three.rtl_id != one.rtl_id and three.to_dict()["dram_writes_in_flight"] == 3
    assert "`define CFG_DRAM_WRITES_IN_FLIGHT 3" in " ".join(header_text(three).split())
    assert "`define CFG_DRAM_WRITES_IN_FLIGHT 1" in " ".join(header_text(one).split())


def test_a_key_given_twice_is_refused(tmp_path):
    """JSON keeps the last of two equal keys; a config written by hand that sets a size twice is
    more likely a slip than a wish, so it is refused by name."""
    p = tmp_path / "twice.json"
    text = json.dumps(_default_dict())
    p.write_text(text.replace('"block": ', '"block": 4, "block": ', 1))
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == f"{p}: key 'block' is given twice"


def test_missing_and_malformed_files(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config("nonexistent_cfg")
    monkeypatch.chdir(tmp_path)  # a file here named bare is not read as a shipped name's file: said so
    (tmp_path / "mine").write_text("{}")
    with pytest.raises(ConfigError, match=r"^mine: no shipped config of that name .* naming its folder \(\./mine\)$"):
        load_config("mine")
    p = _write(tmp_path, "{ not json")
    with pytest.raises(ConfigError, match=r"bad.json: not valid JSON.*line 1"):
        load_config(p)
    p = _write(tmp_path, [1, 2])
    with pytest.raises(ConfigError, match="must be a JSON object"):
        load_config(p)
    p = _write(tmp_path, '{"block": ' + "9" * 5000 + "}")
    with pytest.raises(ConfigError, match=r"bad.json: not a config file \(Exceeds the limit"):
        load_config(p)
    with pytest.raises(ConfigError, match="a folder, not a config file"):
        load_config(tmp_path)
    p = tmp_path / "bom.json"  # a byte-order mark, as some editors write
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps({**_default_dict(), "name": "bom"}).encode())
    assert load_config(p).name == "bom"
