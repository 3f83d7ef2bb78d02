"""The cache of compiled Verilator runtime objects (testbench/object_cache.py), with the real compiler:
a second build folder gets the first one's object, and anything that changes the object changes the key."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testbench.object_cache import compile_cached, objcache_command

CXX = shutil.which("c++") or shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler")


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A 'runtime' source outside the build folders, including a header of its own."""
    d = tmp_path / "runtime"
    d.mkdir()
    (d / "answer.h").write_text("#define ANSWER 42\n")
    (d / "answer.cpp").write_text('#include "answer.h"\nint answer() { return ANSWER + EXTRA; }\n')
    return d


def _compile(shared: Path, build: Path, cache: Path, *flags: str, keep: int = 64) -> tuple[int, str]:
    build.mkdir(parents=True, exist_ok=True)
    argv = [CXX, "-Os", "-MMD", "-DEXTRA=0", *flags, "-c", "-o", "answer.o", str(shared / "answer.cpp")]
    return compile_cached(argv, cache, build, keep=keep)


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.o")) if cache.is_dir() else []


def test_second_build_folder_gets_the_stored_object(shared, tmp_path):
    cache = tmp_path / "cache"
    assert _compile(shared, tmp_path / "a", cache) == (0, "miss")
    assert _compile(shared, tmp_path / "b", cache) == (0, "hit")
    a, b = tmp_path / "a", tmp_path / "b"
    assert (a / "answer.o").read_bytes() == (b / "answer.o").read_bytes()
    assert (b / "answer.d").read_text() == (a / "answer.d").read_text()
    assert "answer.h" in (b / "answer.d").read_text()  # make still sees the header as a dependency
    assert len(_entries(cache)) == 1


def test_a_changed_header_or_flag_is_a_new_key(shared, tmp_path):
    cache = tmp_path / "cache"
    assert _compile(shared, tmp_path / "a", cache)[1] == "miss"
    (shared / "answer.h").write_text("#define ANSWER 43\n")
    assert _compile(shared, tmp_path / "b", cache)[1] == "miss"
    assert (tmp_path / "a" / "answer.o").read_bytes() != (tmp_path / "b" / "answer.o").read_bytes()
    assert _compile(shared, tmp_path / "c", cache, "-DEXTRA2=1")[1] == "miss"
    assert _compile(shared, tmp_path / "d", cache, "-O2")[1] == "miss"
    assert len(_entries(cache)) == 4


def test_profile_builds_and_the_designs_own_files_pass_through(shared, tmp_path):
    cache = tmp_path / "cache"
    assert _compile(shared, tmp_path / "a", cache, "-fprofile-generate") == (0, "uncached")
    own = tmp_path / "own"
    own.mkdir()
    (own / "design.cpp").write_text("int design() { return 1; }\n")
    argv = [CXX, "-Os", "-c", "-o", "design.o", str(own / "design.cpp")]
    assert compile_cached(argv, cache, own) == (0, "uncached")
    assert _entries(cache) == []


def test_a_failed_compile_fails_and_stores_nothing(shared, tmp_path):
    (shared / "answer.h").write_text("#define ANSWER (\n")
    rc, how = _compile(shared, tmp_path / "a", tmp_path / "cache")
    assert rc != 0 and how == "miss" and _entries(tmp_path / "cache") == []


def test_the_cache_keeps_only_the_most_recently_used(shared, tmp_path):
    cache = tmp_path / "cache"
    for k in range(3):
        assert _compile(shared, tmp_path / f"b{k}", cache, f"-DV{k}", keep=2)[1] == "miss"
    assert len(_entries(cache)) == 2
    assert _compile(shared, tmp_path / "again", cache, "-DV2", keep=2)[1] == "hit"
    assert _compile(shared, tmp_path / "first", cache, "-DV0", keep=2)[1] == "miss"  # pruned


def test_make_runs_it_as_objcache(shared, tmp_path):
    """verilated.mk's ``$(OBJCACHE) $(CXX) ...`` with OBJCACHE from MAKEFLAGS (escaped spaces): the
    second folder's make copies the object."""
    cache = tmp_path / "cache dir"  # a space, to check the escaping
    for name in ("m1", "m2"):
        d = tmp_path / name
        d.mkdir()
        (d / "Makefile").write_text(f"answer.o:\n\t$(OBJCACHE) {CXX} -DEXTRA=1 -c -o answer.o {shared / 'answer.cpp'}\n")
        env = {**os.environ, "MAKEFLAGS": objcache_command(cache)}
        r = subprocess.run(["make", "-s"], cwd=d, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert (d / "answer.o").is_file()
    assert len(_entries(cache)) == 1
    assert (tmp_path / "m1" / "answer.o").read_bytes() == (tmp_path / "m2" / "answer.o").read_bytes()
