"""The reviewed list of equivalent mutants: a mutant no test can kill, with the reason.

``equivalents.json`` maps a mutant id (``file:line:col:kind:variant``) to ``{"reason", "source"}``,
``source`` being the stripped source line the review saw, and optionally ``"configs"``: the
configs on which it is equivalent (e.g. only with one core), every config when absent. :func:`stale` says which entries no
longer match the RTL (the mutant is gone or its line changed): those must be reviewed again.
"""

from __future__ import annotations

import json
from pathlib import Path

from cosim.mutation.points import MutationError, scan_rtl

EQUIVALENTS_FILE = Path(__file__).resolve().parent / "equivalents.json"


def load(path: Path = EQUIVALENTS_FILE) -> dict[str, dict[str, str]]:
    """The entries: {mutant id: {"reason", "source"}}."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise MutationError(f"{path}: cannot read the equivalent mutants ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) and v.get("reason") and "source" in v
                                             for v in data.values()):
        raise MutationError(f"{path}: expected {{mutant id: {{\"reason\": ..., \"source\": ...}}}}")
    return data


def reasons(config: str | None = None, path: Path = EQUIVALENTS_FILE) -> dict[str, str]:
    """{mutant id: reason} of the entries that hold on ``config`` (None: every entry)."""
    return {k: v["reason"] for k, v in load(path).items()
            if config is None or "configs" not in v or config in v["configs"]}


def stale(rtl_dir: Path, path: Path = EQUIVALENTS_FILE) -> list[str]:
    """Entries that no longer describe the RTL of ``rtl_dir`` (one line each; empty: all current)."""
    known = {m.id: m for m in scan_rtl(rtl_dir)}
    out = []
    for mid, entry in load(path).items():
        m = known.get(mid)
        if m is None:
            out.append(f"{mid}: no such mutant in the RTL any more")
            continue
        line = (Path(rtl_dir) / m.file).read_text().splitlines()[m.line - 1].strip()
        if line != entry["source"]:
            out.append(f"{mid}: the line now reads {line!r}, the review saw {entry['source']!r}")
    return out
