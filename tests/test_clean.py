"""`cosim clean --keep N`: the N most recently used simulator builds stay, the rest go (under their locks);
a real build is marked used when it is reused."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

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
    runs = tmp_path / "rtl" / "default-1-fast-verilator" / "runs" / "r1"  # a failed run's folder, kept for a look
    runs.mkdir(parents=True)
    (runs / "sim.log").write_bytes(b"x" * 500)
    assert main(["clean", "--keep", "1", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_folders_freed_bytes"] >= 500 and runs.is_dir()
    assert main(["clean", "--keep", "1"]) == 0
    out = capsys.readouterr().out
    assert "run folders left in kept builds" in out and not runs.exists()
    assert "removed 2 build(s)" in out and "kept 1" in out
    assert sorted(p.name for p in (tmp_path / "rtl").iterdir() if p.suffix != ".lock") == \
        ["default-1-fast-verilator", "notes"]  # (the kept build's lock file stays, as beside every build)
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


def test_build_lock_waits_are_bounded_and_said(tmp_path, capsys):
    """Runs share a build's lock, a build or removal takes it alone; a wait past a couple of seconds says so
    on stderr, and no wait lasts past its bound (one line naming the lock)."""
    import pytest

    from testbench.build_cache import BuildLockTimeout, build_lock

    lock = tmp_path / "rtl-x.lock"
    with build_lock(lock, shared=True), build_lock(lock, shared=True):
        with pytest.raises(BuildLockTimeout) as e:
            with build_lock(lock, wait_s=2.5):
                pass
    msg = str(e.value)
    assert msg.startswith(f"{lock}: still locked by another process after ") and "\n" not in msg
    assert f"waiting for {tmp_path / 'rtl-x'}" in capsys.readouterr().err
    with build_lock(lock, wait_s=0.1):  # free again
        pass


def test_a_removed_lock_file_is_never_held_twice(tmp_path):
    """A removal deletes the folder and its lock file while holding it; whoever waited takes the file made
    anew, so two holders of one build never hold two different files (two builds in one folder)."""
    import threading

    from testbench.build_cache import CachedBuild, build_lock, lock_path, remove

    bdir = tmp_path / "rtl" / "b"
    bdir.mkdir(parents=True)
    events: list[str] = []
    holding = threading.Event()
    release = threading.Event()

    def hold(name: str, wait_for: threading.Event | None = None) -> None:
        with build_lock(lock_path(bdir)):
            events.append(f"{name}+")
            holding.set()
            if wait_for is not None:
                wait_for.wait(10)
            else:
                time.sleep(1.0)
            events.append(f"{name}-")

    a = threading.Thread(target=hold, args=("a", release))
    a.start()
    holding.wait(10)
    r = threading.Thread(target=remove, args=(CachedBuild(bdir, "rtl", 0, 0.0),))
    r.start()
    time.sleep(0.2)
    b = threading.Thread(target=hold, args=("b",))  # waits on the file the removal deletes
    b.start()
    time.sleep(0.2)
    release.set()
    r.join(20)
    c = threading.Thread(target=hold, args=("c",))  # comes after the removal: a new file
    c.start()
    for t in (a, b, c):
        t.join(20)
    assert not bdir.exists()
    # every holder released before the next one took it
    assert len(events) == 6 and all(events[i][0] == events[i + 1][0] for i in range(0, 6, 2)), events


def test_build_root_is_pinned_for_other_folders(tmp_path, monkeypatch):
    """A relative COSIM_BUILD_DIR means the folder under the one cosim started in, also for the task processes
    that run elsewhere; an empty one means unset."""
    from testbench.build_cache import REPO, build_root, pin_build_root

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COSIM_BUILD_DIR", "rel/b")
    pin_build_root()
    assert os.environ["COSIM_BUILD_DIR"] == str(tmp_path / "rel" / "b")
    monkeypatch.chdir("/")
    assert build_root() == tmp_path / "rel" / "b"
    monkeypatch.setenv("COSIM_BUILD_DIR", "")
    assert build_root() == REPO / "build"
    pin_build_root()
    assert "COSIM_BUILD_DIR" not in os.environ


def test_a_run_holds_its_build_against_removal(monkeypatch):
    """While the RTL simulates, its build's lock is held shared: a removal (cosim clean) or a rebuild would
    wait; another run shares it. Observed from inside a real run of the small config's build."""
    import pytest

    from cosim.models import rtl_available
    from testbench import rtl_model
    from testbench.build_cache import BuildLockTimeout, build_lock, lock_path

    if rtl_available() is not None:
        pytest.skip("no RTL")
    from compiler.examples import make_case

    seen: dict[str, object] = {}
    real = rtl_model._run_batch

    def observed(b, *a, **kw):
        with pytest.raises(BuildLockTimeout):
            with build_lock(lock_path(b.dir), wait_s=0.2):
                pass
        with build_lock(lock_path(b.dir), shared=True, wait_s=5):
            seen["shared"] = True
        return real(b, *a, **kw)

    monkeypatch.setattr(rtl_model, "_run_batch", observed)
    program = make_case("vadd", "small").program
    r = rtl_model.run_program(program)
    assert r.error is None and seen == {"shared": True}
    bdir = rtl_model.build_dir_for(program.config, "fast", "verilator", False)
    with build_lock(lock_path(bdir), wait_s=5):  # released after the run
        assert bdir.name == r.extra["build"]["dir"]


def test_a_raw_harness_run_holds_its_build_shared(monkeypatch):
    """As the cocotb model's: while the raw harness runs, its build's lock is held shared (a removal or a
    rebuild waits), and released after."""
    import subprocess

    import pytest

    from cosim.models import rtl_available
    from testbench.build_cache import BuildLockTimeout, build_lock, lock_path
    from testbench.raw import harness

    if rtl_available() is not None:
        pytest.skip("no RTL")
    from compiler.examples import make_case

    seen: dict[str, object] = {}
    real = subprocess.run

    def observed(cmd, *a, **kw):
        if Path(str(kw.get("cwd", ""))).parent.name == "runs":  # the simulation, not a build's verilator
            lock = lock_path(Path(cmd[0]).parent)
            with pytest.raises(BuildLockTimeout):
                with build_lock(lock, wait_s=0.2):
                    pass
            with build_lock(lock, shared=True, wait_s=5):
                seen["shared"] = True
        return real(cmd, *a, **kw)

    monkeypatch.setattr(harness.subprocess, "run", observed)
    r = harness.run(make_case("vadd", "small").program)
    assert r.error is None and seen == {"shared": True}
    with build_lock(lock_path(harness.build("small").parent), wait_s=5):
        pass  # released after the run


def test_half_built_folders_and_left_run_folders_are_tidied(tmp_path, monkeypatch, capsys):
    """A build stopped half-way (its log, no stamp) counts as the least recently used; the run folders left in
    a kept build go; a build used after clean listed it stays."""
    from testbench.build_cache import builds, remove

    monkeypatch.setenv("COSIM_BUILD_DIR", str(tmp_path))
    now = time.time()
    _fake_build(tmp_path, "rtl", "kept-fast-verilator", now - 10, 1000)
    runs = tmp_path / "rtl" / "kept-fast-verilator" / "runs" / "vadd-x1"
    runs.mkdir(parents=True)
    (runs / "sim.log").write_bytes(b"\0" * 5000)
    half = tmp_path / "rtl" / "half-fast-verilator"
    half.mkdir()
    (half / "build.log").write_text("verilator ...\n")
    (half / "Vtop.o").write_bytes(b"\0" * 700)
    assert [b.path.name for b in builds(tmp_path)] == ["kept-fast-verilator", "half-fast-verilator"]
    assert main(["clean", "--keep", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [b["path"] for b in d["removed"]] == [str(half)] and d["run_folders_freed_bytes"] == 5000
    assert not half.exists() and not runs.parent.exists() and (tmp_path / "rtl" / "kept-fast-verilator").is_dir()
    listed = builds(tmp_path)[0]
    (listed.path / "last_used").touch()  # a run used it after the listing
    assert remove(listed) is False and listed.path.is_dir()


def test_a_linked_build_loses_its_link_only_and_a_file_as_build_folder_is_one_line(tmp_path, monkeypatch, capsys):
    """A build folder that is a link to one kept elsewhere: clean removes the link (it said "removed" and
    left it), never what it points at; a build folder that is a file is refused, not read as empty."""
    elsewhere = tmp_path / "elsewhere"
    _fake_build(elsewhere, "rtl", "b", time.time() - 1e6, 10)
    root = tmp_path / "build"
    (root / "rtl").mkdir(parents=True)
    (root / "rtl" / "zz-link").symlink_to(elsewhere / "rtl" / "b")
    monkeypatch.setenv("COSIM_BUILD_DIR", str(root))
    assert main(["clean", "--keep", "0"]) == 0
    assert "removed 1 build(s)" in capsys.readouterr().out
    assert not (root / "rtl" / "zz-link").exists() and (elsewhere / "rtl" / "b" / "model.bin").is_file()
    assert main(["clean", "--keep", "0"]) == 0 and "removed 0 build(s)" in capsys.readouterr().out
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("COSIM_BUILD_DIR", str(tmp_path / "afile"))
    assert main(["clean"]) == 2
    err = capsys.readouterr().err
    assert "is not a folder" in err and err.count("\n") == 1, err
