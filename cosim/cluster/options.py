"""The command-line options every scale-out command shares (fuzz, regress, sweep, bench).

``add_cluster_args(parser)`` adds ``--scheduler``, ``--workers``, ``--results`` and
``--task-timeout``; ``cluster_kwargs(args)`` turns them into :func:`cosim.cluster.run_tasks`
keyword arguments, checking them first so that a bad value is one error line (exit 2)
before any cluster starts.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cosim.cli import float_arg, int_arg, output_arg
from cosim.cluster.engine import scheduler_address

MAX_WORKERS = 256  # processes of an embedded cluster on one machine (a larger one goes to --scheduler)


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    """Add the scale-out options to a command's parser."""
    g = p.add_argument_group("scale-out (Dask)")
    g.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run on the Dask cluster of this scheduler, e.g. tcp://HOST:8786 (default: env "
                        "COSIM_SCHEDULER, else an embedded cluster of this machine's cores)")
    g.add_argument("--workers", type=int_arg(0, MAX_WORKERS), default=None, metavar="N",
                   help="worker processes of the embedded cluster (default: one per core; 0: no Dask, one task "
                        f"after the other in this machine; at most {MAX_WORKERS})")
    g.add_argument("--results", type=output_arg, default=None, metavar="FILE.jsonl",
                   help="append one JSON record per task as it finishes; run again with the same file to resume "
                        "(tasks already in it are not run again, failed ones included: delete their lines to "
                        "retry them)")
    g.add_argument("--task-timeout", type=float_arg(1e-3, 1e9, "a positive number of seconds"), default=None,
                   metavar="SECONDS", help="a task running longer is stopped and recorded as failed (default: none)")


def cluster_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``scheduler``, ``workers``, ``results`` and ``timeout_s`` for ``run_tasks``, checked. ``--workers``
    means this machine, whatever env ``COSIM_SCHEDULER`` says; with ``--scheduler`` it is an error."""
    if args.scheduler is not None and args.workers is not None:
        raise ValueError("--workers sizes the embedded cluster; it cannot go with --scheduler")
    if args.workers is None:
        scheduler_address(args.scheduler)  # a bad address (or COSIM_SCHEDULER) fails here, in one line
    if args.results is not None and Path(args.results).is_dir():
        raise ValueError(f"--results {args.results}: is a folder, not a file")
    return {"scheduler": args.scheduler, "workers": args.workers, "results": args.results,
            "timeout_s": args.task_timeout}
