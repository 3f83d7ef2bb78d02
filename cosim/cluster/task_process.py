"""The task process: a long-lived child of a Dask worker thread that runs task functions.

Started as ``python -m cosim.cluster.task_process`` by :mod:`cosim.cluster.task_runner`.
Why a child process and not the worker thread itself: a thread cannot be stopped, so a
task over its time limit, a model that segfaults or a simulator that hangs would take
the worker with it; a child can be killed (with the simulators it started: it leads
its own process group) and replaced, and the worker lives on. The child stays up from
task to task so the imports (numpy, the models: about a second) are paid once per
worker thread, not once per task.

Protocol, one JSON object per line: the parent writes ``{"fn", "args", "workdir"}`` on
the child's stdin; the child answers ``{"ok": true, "result": ...}`` or ``{"ok": false,
"error": "one line"}`` on the file descriptor given as its only argument. While a task
runs, the child's stdout and stderr (and those of the simulators it starts) go to
``task.log`` in the task's work directory, so nothing a task prints reaches the terminal
or the protocol. This module imports nothing heavy: the task function's module brings
what it needs.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import shutil
import signal
import sys
from typing import Any, Callable

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def resolve(fn: str) -> Callable[[dict[str, Any]], Any]:
    """The top-level function a task names as ``"package.module:function"``."""
    mod_name, sep, attr = fn.partition(":")
    if not sep or not mod_name or not attr or "." in attr:
        raise ValueError(f"task function {fn!r}: expected 'package.module:function'")
    f = getattr(importlib.import_module(mod_name), attr, None)
    if not callable(f):
        raise ValueError(f"task function {fn!r}: module {mod_name} has no function {attr}")
    return f


def error_line(e: BaseException) -> str:
    """``Type: first line of the message``: the one line a failed task records."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


# The work directory of the task running now: removed here if the process is told to die mid-task
# (its parent, which would remove it, is gone then).
current_workdir: str | None = None


def run_one(request: dict[str, Any]) -> dict[str, Any]:
    """Run one task in its work directory; never raises (an exception is the answer's error)."""
    global current_workdir
    workdir = current_workdir = request["workdir"]
    log_fd = os.open(os.path.join(workdir, "task.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.chdir(workdir)
    try:
        fn = resolve(request["fn"])
        result = fn({**request["args"], "workdir": workdir})
        try:
            json.dumps(result)
        except (TypeError, ValueError) as e:
            return {"ok": False, "error": f"TypeError: {request['fn']} returned what JSON cannot hold ({e})"}
        return {"ok": True, "result": result}
    except Exception as e:  # noqa: BLE001 - a failing task is a recorded result, not the end of the process
        return {"ok": False, "error": error_line(e)}
    finally:
        current_workdir = None
        sys.stdout.flush()
        sys.stderr.flush()
        os.chdir("/")  # the parent removes the work directory next
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)


def _end_everything(*_: Any) -> None:
    """On SIGTERM: kill what the task started, remove its work directory, go."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        import psutil  # a dependency of distributed; only needed here

        for child in psutil.Process().children(recursive=True):
            try:
                child.kill()
            except psutil.Error:
                pass
    except ImportError:
        os.killpg(0, signal.SIGKILL)  # the whole group, this process included: the work directory stays
    if current_workdir is not None:
        shutil.rmtree(current_workdir, ignore_errors=True)
    os._exit(143)


def _die_with_parent() -> None:
    """Ask Linux for SIGTERM when the parent (thread) goes: a worker killed outright must not leave
    tasks running. The SIGTERM handler ends what the task started and removes its work directory."""
    signal.signal(signal.SIGTERM, _end_everything)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's end of the pipe closing ends the loop instead
        return
    want = os.environ.get("COSIM_TASK_PARENT")
    if want and os.getppid() != int(want):  # the parent died before prctl took effect
        os.killpg(0, signal.SIGKILL)


def main(argv: list[str]) -> int:
    """Serve requests from stdin until it closes; answer on the descriptor ``argv[0]``."""
    answer_fd = int(argv[0])
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the campaign's to handle, through the parent
    # a worker of the embedded cluster runs with SIGINT blocked (cosim.cluster.interrupts); what a task starts
    # (a simulator) gets the ordinary mask
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    with os.fdopen(answer_fd, "w", buffering=1) as answers:
        for line in sys.stdin:
            if not line.strip():
                continue
            answers.write(json.dumps(run_one(json.loads(line))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
