"""The Dask preload of the embedded cluster's worker processes (``LocalCluster(preload=[this module])``).

Dask imports this module in each worker process as it starts and calls :func:`dask_setup`:
the worker ignores Ctrl-C (the ``cosim`` process handles it, by closing the cluster), and
its stdout, stderr and log records leave the user's terminal for the run's log folder
(:mod:`cosim.cluster.cluster_logs`), so a worker's complaint while the cluster closes
(a heartbeat to a scheduler already gone) is never printed over the command's own lines.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from cosim.cluster.cluster_logs import LOG_DIR_ENV, route_worker_output


def dask_setup(worker: Any) -> None:
    """Called by Dask in the worker process before the worker joins the scheduler."""
    if threading.current_thread() is threading.main_thread():  # signal.signal works there only
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    log_dir = os.environ.get(LOG_DIR_ENV)
    if log_dir:
        route_worker_output(Path(log_dir))
