"""The cluster engine as the sweep uses it: ``Task`` and ``run_tasks`` of ``cosim.cluster``.

Until the engine package lands, a sequential runner in this process with the same interface and
the same record shape (resume from the JSON-lines file, a raising task is a recorded failure,
every task in its own work directory) stands in for it, so the sweep's code does not change when
the engine arrives.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

try:
    from cosim.cluster.engine import Task, run_tasks  # noqa: F401 - re-exported
except ModuleNotFoundError as e:
    if not (e.name or "").startswith("cosim.cluster"):
        raise

    @dataclass(frozen=True)
    class Task:  # type: ignore[no-redef]
        """One self-contained job: ``fn`` ("module:function") called with ``args`` (JSON-able)."""

        key: str
        fn: str
        args: dict[str, Any]

    def _done(results: Path | None) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        if results is None or not results.is_file():
            return out
        for line in results.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by an interruption: that task runs again
            if isinstance(rec, dict) and "key" in rec:
                out[rec["key"]] = rec
        return out

    def run_tasks(tasks: Iterable[Task], *, results: str | Path | None = None,  # type: ignore[no-redef]
                  scheduler: str | None = None, workers: int | None = None, retries: int = 2,
                  progress: bool = True, desc: str = "tasks",
                  timeout_s: float | None = None) -> Iterator[dict[str, Any]]:
        """Run every task here, one after the other (``scheduler``, ``workers``, ``retries`` and
        ``timeout_s`` need the engine and are not used), yielding each record as it finishes and
        appending it to ``results``; keys already there are yielded first, marked resumed."""
        path = Path(results) if results is not None else None
        done = _done(path)
        todo = list(tasks)
        for t in todo:
            if t.key in done:
                yield {**done[t.key], "resumed": True}
        pending = [t for t in todo if t.key not in done]
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        for k, t in enumerate(pending):
            mod, _, fn = t.fn.partition(":")
            work = Path(tempfile.mkdtemp(prefix="cosim-task-"))
            t0 = time.perf_counter()
            rec: dict[str, Any] = {"key": t.key, "ok": True, "result": None, "error": None, "worker": "local",
                                   "attempts": 1}
            try:
                rec["result"] = getattr(importlib.import_module(mod), fn)({**t.args, "workdir": str(work)})
            except Exception as ex:  # noqa: BLE001 - a failing task is a record, not a crash
                rec["ok"], rec["error"] = False, f"{type(ex).__name__}: {str(ex).strip().splitlines()[0] if str(ex).strip() else ''}"
            finally:
                shutil.rmtree(work, ignore_errors=True)
            rec["wall_s"] = round(time.perf_counter() - t0, 3)
            if path is not None:
                with path.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
            if progress:
                print(f"\r{desc}: {k + 1}/{len(pending)}", end="" if k + 1 < len(pending) else "\n",
                      file=sys.stderr, flush=True)
            yield rec
