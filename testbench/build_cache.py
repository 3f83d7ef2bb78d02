"""The simulator builds under the build folder: which exist, how big, when last used, and removing them.

Every Verilator model (``build/rtl/rtl-<rtl_id>-<mem>-<sim>[-waves]``, the raw harness's
``build/raw/<config>-<id>-<mem>``, and any other folder with a ``build.stamp`` one level under
``build/rtl`` or ``build/raw``) is one entry. A build is marked used (``last_used``, its
mtime) each time it is built or reused, so ``cosim clean --keep N`` keeps the N most recently
used. A folder's build lock (``<folder>.lock`` beside it) is exclusive while the folder is built
or removed and shared while a simulation runs what is built there, so a removal or a rebuild
waits for the runs, never cuts one short. A wait that lasts is said once on stderr, and no wait
lasts more than :data:`LOCK_WAIT_S`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
BUILD_DIR_ENV = "COSIM_BUILD_DIR"
MARK = "last_used"
KINDS = ("rtl", "raw")
# The longest wait for a build lock: a build takes minutes, a run one batch of Programs; an hour
# held means a process stopped (Ctrl-Z) or a run far longer than any this project makes.
LOCK_WAIT_S = 3600.0
# After this long waiting, say whom we wait for.
LOCK_NOTICE_S = 2.0


class BuildLockTimeout(TimeoutError):
    """A build lock stayed held by another process longer than the wait allows."""


@dataclass(frozen=True)
class CachedBuild:
    """One simulator build folder."""

    path: Path
    kind: str          # "rtl" (cocotb back-ends) or "raw" (the C++ harness)
    bytes: int
    last_used: float   # seconds since the epoch

    def to_json(self) -> dict[str, object]:
        return {"path": str(self.path), "kind": self.kind, "bytes": self.bytes,
                "last_used": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.last_used))}


def build_root() -> Path:
    """The build folder: env ``COSIM_BUILD_DIR`` (empty: unset), else ``<repo>/build``."""
    return Path(os.environ.get(BUILD_DIR_ENV) or REPO / "build").resolve()


def pin_build_root() -> None:
    """Make a relative ``COSIM_BUILD_DIR`` absolute (and drop an empty one) in this process's environment:
    the processes it starts (task runners, simulators) work in other folders, where the same relative
    name would be another build folder."""
    if BUILD_DIR_ENV in os.environ:
        if os.environ[BUILD_DIR_ENV]:
            os.environ[BUILD_DIR_ENV] = str(build_root())
        else:
            del os.environ[BUILD_DIR_ENV]


# The first line of a build log that says what went wrong: Verilator's %Error, make's ***, a compiler's error.
_PROBLEM_MARKS = ("%Error", "*** ", "error:", "Error:", "fatal error", "No space left")


def log_problem(log: Path) -> str:
    """The first line of the build log ``log`` that names a problem ("" if none does, or no log)."""
    try:
        with open(log, errors="replace") as f:
            for line in f:
                if any(m in line for m in _PROBLEM_MARKS):
                    return " ".join(line.split())[:300]
    except OSError:
        pass
    return ""


def space_problem(bdir: Path) -> str:
    """Why ``bdir`` cannot hold a Verilator build ("" if it can): make cannot build in a path with a space."""
    if " " in str(bdir):
        return (f"{bdir}: Verilator's makefiles cannot build in a folder whose path has a space; set "
                f"{BUILD_DIR_ENV} to another folder")
    return ""


def lock_path(bdir: Path) -> Path:
    """The build lock of the build folder ``bdir``."""
    return bdir.parent / f"{bdir.name}.lock"


@contextlib.contextmanager
def build_lock(path: Path, shared: bool = False, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """An advisory lock (fcntl) held for the block: exclusive to build or remove a folder, ``shared`` to
    run what is built there. Waits at most ``wait_s`` (:class:`BuildLockTimeout`), saying so on stderr
    when the wait lasts. A lock file removed (with its folder) while we waited is opened again, so two
    holders never hold two different files of one name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    t0 = time.monotonic()
    told = False
    pause = 0.01
    while True:
        f = open(path, "a+")
        try:
            fcntl.flock(f, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            waited = time.monotonic() - t0
            if waited >= wait_s:
                raise BuildLockTimeout(f"{path}: still locked by another process after {waited:.0f} s (a build, a "
                                       f"removal or a run of {path.with_suffix('').name}; a stopped process holds it "
                                       f"until it ends)") from None
            if waited >= LOCK_NOTICE_S and not told:
                print(f"waiting for {path.with_suffix('')} (another process is building, removing or running it)",
                      file=sys.stderr, flush=True)
                told = True
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
            continue
        try:
            same = os.fstat(f.fileno()).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()  # removed (and perhaps made again) while we took it: take the file that is there now
    try:
        yield
    finally:
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


def mark_used(bdir: Path) -> None:
    """Record that the build in ``bdir`` was just used (built or reused)."""
    (bdir / MARK).touch()


def _size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def builds(root: Path) -> list[CachedBuild]:
    """Every build under ``root`` (the build folder), most recently used first."""
    out = []
    for kind in KINDS:
        d = root / kind
        if not d.is_dir():
            continue
        for sub in d.iterdir():
            if not sub.is_dir() or not any((sub / f).exists() for f in ("build.stamp", MARK, "build.log")):
                continue
            mark = sub / MARK
            # a build stopped half-way (a log, no stamp) is of no use: listed as the least recently used
            used = mark.stat().st_mtime if mark.exists() else 0.0 if not (sub / "build.stamp").exists() \
                else sub.stat().st_mtime
            out.append(CachedBuild(sub, kind, _size(sub), used))
    return sorted(out, key=lambda b: -b.last_used)


def _used_since(b: CachedBuild) -> bool:
    try:
        return (b.path / MARK).stat().st_mtime > b.last_used
    except FileNotFoundError:
        return False


def remove(b: CachedBuild) -> bool:
    """Delete one build folder, holding its build lock (a run or build using it finishes first), unless it
    was built or used since it was listed (then it is kept: False). The lock file goes too, while still
    held: a process waiting on it takes the one made anew."""
    lock = lock_path(b.path)
    with build_lock(lock):
        if _used_since(b):
            return False
        if b.path.is_symlink():  # a link to a build kept elsewhere: the link goes, what it points at stays
            b.path.unlink()
        else:
            shutil.rmtree(b.path, ignore_errors=True)
        if b.path.exists():  # not removable (permissions): kept, not reported as removed
            return False
        lock.unlink(missing_ok=True)
    return True


def run_folders_bytes(b: CachedBuild) -> int:
    """The bytes of the run folders a cocotb build holds (what :func:`prune_runs` would free)."""
    runs = b.path / "runs"
    return _size(runs) if b.kind == "rtl" and runs.is_dir() else 0


def prune_runs(b: CachedBuild) -> int:
    """Remove the run folders a kept cocotb build holds (a run that failed at the testbench level keeps its
    folder for a look; a run killed leaves its own), unless a run is using the build now; the bytes freed."""
    runs = b.path / "runs"
    if b.kind != "rtl" or not runs.is_dir():
        return 0
    try:
        with build_lock(lock_path(b.path), wait_s=0):
            freed = _size(runs)
            shutil.rmtree(runs, ignore_errors=True)
            return freed
    except BuildLockTimeout:
        return 0
