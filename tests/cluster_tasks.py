"""Task functions for the engine's tests (tests/test_cluster.py): imported by name in task processes."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def square(args: dict[str, Any]) -> dict[str, Any]:
    """x squared, after ``sleep`` seconds; writes into its work directory and prints (neither may leak)."""
    time.sleep(args.get("sleep", 0.0))
    Path(args["workdir"], "scratch.txt").write_text("scratch")
    print("a task's own output goes to its log, not to the terminal")
    return {"x": args["x"], "y": args["x"] ** 2, "workdir": args["workdir"], "cwd": os.getcwd()}


def fail(args: dict[str, Any]) -> dict[str, Any]:
    """Raises, as a model that finds a mismatch might (a two-line message: the record keeps the first)."""
    raise AssertionError(f"mismatch in case {args['case']}\nsecond line of detail")


def hang(args: dict[str, Any]) -> dict[str, Any]:
    """Runs far past any reasonable time limit (a hung simulator)."""
    time.sleep(args.get("sleep", 3600.0))
    return {}


def crash(args: dict[str, Any]) -> dict[str, Any]:
    """Dies outright, as a model that segfaults would."""
    os._exit(139)


def not_json(args: dict[str, Any]) -> Any:
    """Returns what JSON cannot hold."""
    return {"a set": {1, 2}}
