"""Run one task where the engine puts it (a Dask worker thread, or the caller's process).

:func:`execute` is what the engine submits: it makes the task's fresh work directory,
hands the task to this thread's task process (:mod:`cosim.cluster.task_process`, started
on first use and replaced after a timeout or a crash), waits for the answer at most
``timeout_s`` seconds, removes the work directory and returns the record
``{"ok", "result", "error", "worker", "wall_s"}``. It never raises for what a task does:
an exception, a crash of the task process or a timeout is a failed record.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import cosim

REPO = Path(cosim.__file__).resolve().parent.parent
# How often a waiting task looks whether the campaign was cancelled (seconds).
CANCEL_POLL_S = 0.5


def work_root() -> Path:
    """Where task work directories are made: env ``COSIM_WORK_DIR``, else the system's temporary folder."""
    root = Path(os.environ.get("COSIM_WORK_DIR") or tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    return root


def _child_env() -> dict[str, str]:
    """The task process's environment: this process's, with the repository and this process's
    ``sys.path`` (absolute) on PYTHONPATH so the task's module imports as it would here."""
    paths = [str(REPO)]
    for p in sys.path:
        a = os.path.abspath(p) if p else os.getcwd()
        if a not in paths:
            paths.append(a)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "COSIM_TASK_PARENT": str(os.getpid()),
            "PYTHONUNBUFFERED": "1"}


class TaskProcess:
    """One long-lived task process and the pipes to it."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "cosim.cluster.task_process", str(write_fd)],
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, pass_fds=(write_fd,), cwd="/",
                                         env=_child_env(), start_new_session=True)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self.answers = os.fdopen(read_fd, "rb")
        self.buffer = b""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, request: dict[str, Any], timeout_s: float | None,
            cancelled: Callable[[], bool]) -> dict[str, Any]:
        """Send one request and wait for its answer (or the timeout, the process's death, a cancel)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            return {"ok": False, "error": f"the task process died before the task ({self._death()})"}
        try:
            return self._answer(timeout_s, cancelled)
        except BaseException:  # Ctrl-C in a process that runs tasks itself (workers=0): the task goes too
            self.kill()
            raise

    def _answer(self, timeout_s: float | None, cancelled: Callable[[], bool]) -> dict[str, Any]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        fd = self.answers.fileno()
        while b"\n" not in self.buffer:
            wait = CANCEL_POLL_S if deadline is None else min(CANCEL_POLL_S, deadline - time.monotonic())
            if wait <= 0:
                self.kill()
                return {"ok": False, "error": f"TimeoutError: the task ran over its {timeout_s:g} s limit",
                        "timed_out_s": timeout_s}
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                if cancelled():
                    self.kill()
                    return {"ok": False, "error": "cancelled"}
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return {"ok": False, "error": f"the task process died during the task ({self._death()})"}
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return "no answer"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def kill(self) -> None:
        """Kill the process and everything it started (its process group)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.close()

    def close(self) -> None:
        """Let the process end (its stdin closes) and release the pipes."""
        for f in (self.proc.stdin, self.answers):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass


_local = threading.local()


def _task_process() -> TaskProcess:
    """This thread's task process, started now if it has none alive."""
    tp = getattr(_local, "process", None)
    if tp is None or not tp.alive():
        if tp is not None:
            tp.close()
        tp = _local.process = TaskProcess()
    return tp


def stop_task_process() -> None:
    """End this thread's task process, if any (the caller's process at the end of an in-process run)."""
    tp = getattr(_local, "process", None)
    if tp is not None:
        tp.kill()
        _local.process = None


def _dask_worker() -> Any:
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


def _cancelled_by_dask() -> Callable[[], bool]:
    """A check of whether the Dask scheduler has cancelled the task this thread runs (the client
    cancels its futures on Ctrl-C): the worker marks the task ``cancelled`` or forgets it."""
    worker = _dask_worker()
    if worker is None:
        return lambda: False
    from distributed.worker import thread_state

    key = getattr(thread_state, "key", None)
    if key is None:
        return lambda: False

    def cancelled() -> bool:
        ts = worker.state.tasks.get(key)
        return ts is None or ts.state in ("cancelled", "released", "forgotten")

    return cancelled


def _safe(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key)[:60]


def execute(task: dict[str, Any], timeout_s: float | None = None, event_topic: str | None = None) -> dict[str, Any]:
    """Run ``task`` (``{"key", "fn", "args"}``) in a fresh work directory through this thread's task
    process; the record ``{"key", "ok", "result", "error", "worker", "wall_s"}``.

    ``event_topic``: on a Dask worker, a start event is logged there first (the client counts the
    attempts of a task from them: a worker that dies mid-task never answers)."""
    worker = _dask_worker()
    where = worker.address if worker is not None else f"local:{os.getpid()}"
    if worker is not None and event_topic:
        worker.log_event(event_topic, {"key": task["key"]})
    t0 = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix=f"cosim-{_safe(task['key'])}-", dir=work_root())
    try:
        answer = _task_process().ask({"fn": task["fn"], "args": task["args"], "workdir": workdir}, timeout_s,
                                     _cancelled_by_dask())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rec = {"key": task["key"], "ok": bool(answer.get("ok")), "result": answer.get("result"),
           "error": None if answer.get("ok") else str(answer.get("error")), "worker": where,
           "wall_s": round(time.perf_counter() - t0, 3)}
    if answer.get("timed_out_s") is not None:
        rec["timed_out_s"] = answer["timed_out_s"]
    return rec
