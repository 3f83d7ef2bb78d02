"""The reviewed list of equivalent mutants: a mutant no test can kill, with the reason.

``equivalents.json`` maps a mutant id (``file:line:col:kind:variant``, where the review saw it) to
``{"key", "reason", "source"}``: ``key`` is the mutant's stable key (:mod:`cosim.mutation.points`),
by which the entry is matched, so lines added or removed elsewhere in the file leave it valid;
``source`` is the stripped source line the review saw; optionally ``"configs"``: the configs on
which it is equivalent (e.g. only with one core), every config when absent. :func:`stale` says
which entries no longer match the RTL (their mutant's line or statement changed, or it is gone):
those must be reviewed again. :func:`moved` says which ids are out of date (the line moved).
"""

from __future__ import annotations

import json
from pathlib import Path

from cosim.mutation.points import MutationError, scan_rtl
from hw.config import unique_keys

EQUIVALENTS_FILE = Path(__file__).resolve().parent / "equivalents.json"


def load(path: Path = EQUIVALENTS_FILE) -> dict[str, dict[str, str]]:
    """The entries: {mutant id: {"key", "reason", "source"}}."""
    try:
        data = json.loads(Path(path).read_text(), object_pairs_hook=unique_keys)
    except (OSError, ValueError) as e:
        raise MutationError(f"{path}: cannot read the equivalent mutants ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) and v.get("reason") and v.get("key")
                                             and "source" in v for v in data.values()):
        raise MutationError(f"{path}: expected {{mutant id: {{\"key\": ..., \"reason\": ..., \"source\": ...}}}}")
    return data


def reasons(config: str | None = None, path: Path = EQUIVALENTS_FILE) -> dict[str, str]:
    """{mutant key: reason} of the entries that hold on ``config`` (None: every entry)."""
    return {v["key"]: v["reason"] for v in load(path).values()
            if config is None or "configs" not in v or config in v["configs"]}


def stale(rtl_dir: Path, path: Path = EQUIVALENTS_FILE) -> list[str]:
    """Entries that no longer describe the RTL of ``rtl_dir`` (one line each; empty: all current)."""
    known = {m.key: m for m in scan_rtl(rtl_dir)}
    out = []
    for mid, entry in load(path).items():
        m = known.get(entry["key"])
        if m is None:
            out.append(f"{mid}: no such mutant in the RTL any more (its line or statement changed, or it is gone)")
            continue
        line = (Path(rtl_dir) / m.file).read_text().splitlines()[m.line - 1].strip()
        if line != entry["source"]:
            out.append(f"{mid}: the line now reads {line!r}, the review saw {entry['source']!r}")
    return out


def moved(rtl_dir: Path, path: Path = EQUIVALENTS_FILE) -> dict[str, str]:
    """{id in the file: the mutant's current id} of the entries whose mutant now sits elsewhere (lines
    added or removed above it): still valid, only the id is out of date."""
    known = {m.key: m for m in scan_rtl(rtl_dir)}
    return {mid: known[e["key"]].id for mid, e in load(path).items()
            if e["key"] in known and known[e["key"]].id != mid}
