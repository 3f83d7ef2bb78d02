"""Where Dask's own messages go: a log folder of the run, never the user's terminal.

Dask, tornado and asyncio log to stderr. During a campaign that is noise for the user
(a worker's heartbeat failing while the cluster closes after Ctrl-C, an event loop slow
on a loaded machine), and what a task does is already a record (its errors, its
output in its work directory). So:

* in this process, while a cluster is open, the records of those loggers go to
  ``client.log`` of the run's log folder (:func:`logs_to_file`);
* each worker process of the embedded cluster runs :mod:`cosim.cluster.worker_setup`
  as its Dask preload: its stdout and stderr go to ``/dev/null`` and its log records to
  ``worker-<pid>.log`` of the same folder.

The folder is env ``COSIM_CLUSTER_LOGS`` when set (kept), else a fresh folder under the
task work root, removed when the cluster has closed. Each log file is bounded
(:data:`MAX_LOG_BYTES`, one older file kept).
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

# Loggers whose records are Dask's business (and of the libraries it runs on), not the user's.
DASK_LOGGERS = ("distributed", "dask", "tornado", "asyncio", "bokeh")
# A log file's size limit; one older file is kept beside it (so at most twice this per process).
MAX_LOG_BYTES = 1 << 20
# The environment variable that hands the log folder to the worker processes.
LOG_DIR_ENV = "COSIM_CLUSTER_LOG_DIR"


class LogFile(logging.Handler):
    """A bounded log file (rotated at :data:`MAX_LOG_BYTES`), opened on the first record.

    Not a ``StreamHandler`` on purpose: Dask's ``silence_logs`` raises the level of every
    StreamHandler of its loggers while a cluster lives (to keep the terminal quiet), and the file
    is where its records are meant to go."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.file = logging.handlers.RotatingFileHandler(path, maxBytes=MAX_LOG_BYTES, backupCount=1, delay=True,
                                                         encoding="utf-8")
        self.file.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.file.handle(record)

    def close(self) -> None:
        self.file.close()
        super().close()


def log_file_handler(path: Path) -> logging.Handler:
    """A :class:`LogFile` at ``path``."""
    return LogFile(path)


@contextlib.contextmanager
def log_folder() -> Iterator[Path]:
    """The run's log folder: ``COSIM_CLUSTER_LOGS`` (made if missing, kept), else a temporary one (removed)."""
    wanted = os.environ.get("COSIM_CLUSTER_LOGS", "").strip()
    if wanted:
        path = Path(wanted)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    from cosim.cluster.task_runner import work_root

    path = Path(tempfile.mkdtemp(prefix="cosim-cluster-logs-", dir=work_root()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _dask_loggers() -> list[logging.Logger]:
    """The loggers of :data:`DASK_LOGGERS` and their children that exist now."""
    names = [n for n in logging.Logger.manager.loggerDict
             if any(n == top or n.startswith(top + ".") for top in DASK_LOGGERS)]
    return [logging.getLogger(n) for n in sorted(set(names) | set(DASK_LOGGERS))]


@contextlib.contextmanager
def logs_to_file(path: Path) -> Iterator[None]:
    """For the block, this process's Dask, tornado and asyncio records go to ``path`` and nowhere else."""
    handler = log_file_handler(path)
    saved = []
    for lg in _dask_loggers():
        saved.append((lg, lg.handlers[:], lg.propagate))
        # the top loggers write the file; a child with handlers of its own (Dask gives some) is silenced
        # and passes its records up instead
        lg.handlers = [handler] if lg.name in DASK_LOGGERS else []
        lg.propagate = lg.name not in DASK_LOGGERS
    try:
        yield
    finally:
        for lg, handlers, propagate in saved:
            lg.handlers, lg.propagate = handlers, propagate
        handler.close()


def route_worker_output(log_dir: Path) -> None:
    """In a worker process: stdout and stderr to /dev/null, every log record to ``worker-<pid>.log``."""
    handler = log_file_handler(log_dir / f"worker-{os.getpid()}.log")
    root = logging.getLogger()
    root.addHandler(handler)
    for lg in [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict)]:
        if isinstance(lg, logging.Logger) and lg.handlers and not lg.propagate:
            lg.addHandler(handler)  # a logger that stops its records before the root writes them here too
    logging.captureWarnings(True)  # warnings.warn becomes a record, not a line on stderr
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(null, fd)
    os.close(null)
