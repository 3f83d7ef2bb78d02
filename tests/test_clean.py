"""`cosim clean --keep N`: the N most recently used simulator builds stay, the rest go (under their locks);
a real build is marked used when it is reused."""

from __future__ import annotations

import json
import os
import time

from cosim.cli import main


def _fake_build(root, kind: str, name: str, used: float, size: int) -> None:
    d = root / kind / name
    d.mkdir(parents=True)
    (d / "build.stamp").write_text("x")
    (d / "model.bin").write_bytes(b"\0" * size)
    (d / "last_used").touch()
    os.utime(d / "last_used", (used, used))


def test_clean_keeps_the_most_recently_used(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COSIM_BUILD_DIR", str(tmp_path))
    now = time.time()
    _fake_build(tmp_path, "rtl", "default-1-fast-verilator", now - 10, 1000)
    _fake_build(tmp_path, "rtl", "small-2-protocol-verilator", now - 5000, 2000)
    _fake_build(tmp_path, "raw", "default-1-verilog", now - 100, 3000)
    (tmp_path / "rtl" / "notes").mkdir()  # not a build: no stamp, never touched
    assert main(["clean", "--keep", "2", "--dry-run", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [b["path"].rsplit("/", 1)[1] for b in d["removed"]] == ["small-2-protocol-verilator"]
    assert d["freed_bytes"] >= 2000 and (tmp_path / "rtl" / "small-2-protocol-verilator").is_dir()
    assert main(["clean", "--keep", "1"]) == 0
    out = capsys.readouterr().out
    assert "removed 2 build(s)" in out and "kept 1" in out
    assert sorted(p.name for p in (tmp_path / "rtl").iterdir()) == ["default-1-fast-verilator", "notes"]
    assert not (tmp_path / "raw" / "default-1-verilog").exists()
    assert main(["clean", "--keep", "0", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["removed"]) == 1


def test_reuse_marks_the_build_used(tmp_path):
    """The raw harness's build of the small config (reused when the suite built it already) is marked used
    each time it is asked for."""
    import pytest

    from cosim.models import raw_build, rtl_available

    if rtl_available() is not None:
        pytest.skip("no RTL")
    exe = raw_build("small")
    mark = exe.parent / "last_used"
    os.utime(mark, (1.0, 1.0))
    raw_build("small")
    assert mark.stat().st_mtime > 1.0
