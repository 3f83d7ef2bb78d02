"""The simulator builds under the build folder: which exist, how big, when last used, and removing them.

Every Verilator model (``build/rtl/rtl-<rtl_id>-<mem>-<sim>[-waves]``, the raw harness's
``build/raw/<config>-<id>-<mem>``, and any other folder with a ``build.stamp`` one level under
``build/rtl`` or ``build/raw``) is one entry. A build is marked used (``last_used``, its
mtime) each time it is built or reused, so ``cosim clean --keep N`` keeps the N most recently
used. A build is removed under its build lock, so a run that holds it is waited for, never
cut short.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

MARK = "last_used"
KINDS = ("rtl", "raw")


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


@contextlib.contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock (fcntl) held for the block: one build (or removal) of a folder at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


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
            if not sub.is_dir() or not ((sub / "build.stamp").exists() or (sub / MARK).exists()):
                continue
            mark = sub / MARK
            used = mark.stat().st_mtime if mark.exists() else sub.stat().st_mtime
            out.append(CachedBuild(sub, kind, _size(sub), used))
    return sorted(out, key=lambda b: -b.last_used)


def remove(b: CachedBuild) -> None:
    """Delete one build folder, holding its build lock (a run or build using it finishes first)."""
    with build_lock(b.path.parent / f"{b.path.name}.lock"):
        shutil.rmtree(b.path, ignore_errors=True)
    (b.path.parent / f"{b.path.name}.lock").unlink(missing_ok=True)
