"""A cache of compiled objects for the C++ that every Verilator build shares (ccache's idea, in one file).

Each Verilator build compiles its design (a few seconds for a block) and, again, the same runtime:
``verilated.cpp``, ``verilated_vpi.cpp``, ``verilated_threads.cpp``, ``verilated_dpi.cpp`` and the
simulator's main (cocotb's, this project's fast main, the raw harness). On a loaded 2-core machine
that runtime is most of a block bench's build. ``verilated.mk`` runs every compile as
``$(OBJCACHE) $(CXX) ...``: with ``OBJCACHE`` naming this script (see :func:`objcache_command`), a
compile of a source that lives outside the build folder is looked up by a key and, when found, its
object (and ``-MMD`` dependency file) is copied instead of compiled.

The key is what decides the object: the compiler (its resolved path, size and mtime), every
flag, and the *preprocessed* source (so a header that changed, a design header such as ``Vtop.h``
included by a main, or a ``-D`` flag gives a new key). Compiles whose output depends on more than
that are passed through uncached: profile-guided builds (``-fprofile-*`` reads or writes ``.gcda``
files), gcov (``--coverage``), debug info (``-g``, which records the working folder), and
anything that is not one source compiled with ``-c``. The design's own files (inside the build
folder) are never cached: the build stamps already reuse a whole unchanged build.

The cache holds at most :data:`MAX_ENTRIES` objects; the least recently used go first.
Standard library only: make runs it as a script (``python object_cache.py --dir DIR -- c++ ...``).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

MAX_ENTRIES = 64
# the bound on one compile (and on preprocessing one source), far above any here: a whole design with
# coverage compiles in minutes
COMPILE_TIMEOUT_S = 7200
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".C")
# flags whose compile reads or writes files the key does not cover, or records the working folder
UNCACHED_PREFIXES = ("-fprofile", "--coverage", "-ftest-coverage", "-fprofile-arcs", "-g", "-save-temps",
                     "-fdebug-prefix-map", "-fworking-directory", "-flto", "-E", "-S", "-M", "-x")
# dependency-file flags (not part of preprocessing); those followed by a value
DEP_FLAGS = ("-MMD", "-MD", "-MP")
DEP_FLAGS_WITH_VALUE = ("-MF", "-MT", "-MQ")


def objcache_command(cache_dir: Path) -> str:
    """``OBJCACHE=<command>`` for a cache in ``cache_dir``, a make command-line variable for MAKEFLAGS: the
    words shell-quoted (make's recipe runs in a shell), every space escaped (MAKEFLAGS splits at the others)."""
    words = [sys.executable, str(Path(__file__).resolve()), "--dir", str(cache_dir), "--"]
    return "OBJCACHE=" + " ".join(shlex.quote(w) for w in words).replace(" ", "\\ ")


def _plan(argv: Sequence[str], cwd: Path) -> tuple[Path, Path, Path | None, list[str]] | None:
    """(source, object, dependency file or None, preprocessing command) of a cacheable compile, else None."""
    if "-c" not in argv[1:]:
        return None
    sources = [a for a in argv[1:] if a.endswith(SOURCE_SUFFIXES) and not a.startswith("-")]
    if len(sources) != 1:
        return None
    src = Path(sources[0])
    if not src.is_absolute() or cwd in src.resolve().parents:
        return None  # the design's own files: not shared between builds
    out: Path | None = None
    dep: Path | None = None
    deps = False
    pre = [argv[0]]
    args = list(argv[1:])
    k = 0
    while k < len(args):
        a = args[k]
        if a == "-o" and k + 1 < len(args):
            out = Path(args[k + 1])
            k += 2
            continue
        if a in DEP_FLAGS_WITH_VALUE and k + 1 < len(args):
            if a == "-MF":
                dep = Path(args[k + 1])
            elif a in ("-MT", "-MQ"):
                return None  # a renamed dependency target: rare, not worth keying
            k += 2
            continue
        if a in DEP_FLAGS:
            deps = deps or a in ("-MMD", "-MD")
            k += 1
            continue
        if a.startswith(UNCACHED_PREFIXES) or a.startswith(("-o", "-MF")):
            return None
        if a != "-c":
            pre.append(a)
        k += 1
    out = cwd / (out if out is not None else Path(src.stem + ".o"))
    if deps:
        dep = cwd / (dep if dep is not None else out.with_suffix(".d"))
    return src, out, dep, pre + ["-E"]


def _key(argv: Sequence[str], pre: list[str], cwd: Path) -> str | None:
    """The hash of the compiler, the flags and the preprocessed source; None when preprocessing fails."""
    cxx = shutil.which(argv[0])
    if cxx is None:
        return None
    real = os.path.realpath(cxx)
    st = os.stat(real)
    r = subprocess.run(pre, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=COMPILE_TIMEOUT_S)
    if r.returncode != 0:
        return None
    h = hashlib.sha256()
    h.update(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    h.update("\0".join(pre).encode() + b"\0")
    h.update(r.stdout)
    return h.hexdigest()


def _copy_atomic(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` through a temporary file in ``dst``'s folder (a reader never sees half)."""
    fd, tmp = tempfile.mkstemp(prefix=".objcache-", dir=dst.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would make a shared build folder unreadable to others
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _prune(cache: Path, keep: int) -> None:
    """Remove the least recently used entries beyond ``keep``."""
    entries = []
    for o in cache.glob("*.o"):
        try:
            entries.append((o.stat().st_mtime, o))
        except FileNotFoundError:
            pass
    for _t, o in sorted(entries, reverse=True)[keep:]:
        o.unlink(missing_ok=True)
        o.with_suffix(".d").unlink(missing_ok=True)


def _run(argv: Sequence[str], cwd: Path) -> int:
    """Run the compile itself (its output goes where make sends ours); its exit code, 124 past the bound."""
    try:
        return subprocess.run(list(argv), cwd=cwd, timeout=COMPILE_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        print(f"object_cache: {argv[0]} ran past {COMPILE_TIMEOUT_S} s and was stopped", file=sys.stderr)
        return 124


def compile_cached(argv: Sequence[str], cache: Path, cwd: Path | None = None,
                   keep: int = MAX_ENTRIES) -> tuple[int, str]:
    """Run the compile ``argv`` in ``cwd`` through the cache in ``cache``: (exit code, "hit" | "miss" |
    "uncached"). A hit copies the stored object (and dependency file); a miss compiles and stores them."""
    where = Path(cwd or os.getcwd()).resolve()
    plan = _plan(argv, where)
    key = None
    if plan is not None:
        try:
            key = _key(argv, plan[3], where)
        except (OSError, subprocess.SubprocessError):
            key = None
    if plan is None or key is None:
        return _run(argv, where), "uncached"
    _src, out, dep, _pre = plan
    obj_entry, dep_entry = cache / f"{key}.o", cache / f"{key}.d"
    try:
        if obj_entry.is_file() and (dep is None or dep_entry.is_file()):
            _copy_atomic(obj_entry, out)
            if dep is not None:
                _copy_atomic(dep_entry, dep)
            os.utime(obj_entry)  # recently used: kept by _prune
            return 0, "hit"
    except OSError:
        pass  # a pruned or unreadable entry: compile instead
    rc = _run(argv, where)
    if rc == 0 and out.is_file() and (dep is None or dep.is_file()):
        try:
            cache.mkdir(parents=True, exist_ok=True)
            if dep is not None:
                _copy_atomic(dep, dep_entry)
            _copy_atomic(out, obj_entry)  # last: an entry counts once its object is there
            _prune(cache, keep)
        except OSError:
            pass  # the compile succeeded; a cache that cannot be written is only slower
    return rc, "miss"


def main(argv: Sequence[str] | None = None) -> int:
    """``object_cache.py --dir DIR -- CXX ARGS...``: one compile through the cache (make's OBJCACHE)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 4 or args[0] != "--dir" or args[2] != "--":
        print("usage: object_cache.py --dir DIR -- CXX ARGS...", file=sys.stderr)
        return 2
    rc, _how = compile_cached(args[3:], Path(args[1]))
    return rc


if __name__ == "__main__":
    sys.exit(main())
