"""Scale-out on Dask: many independent tasks on this machine's cores or on a cluster.

* :mod:`cosim.cluster.engine` - :class:`Task` and :func:`run_tasks` (embedded LocalCluster or
  ``--scheduler``/``COSIM_SCHEDULER``, streamed JSON-lines results, resume, retries, time limits);
* :mod:`cosim.cluster.task_runner` - one task on a worker: its work directory, its task process,
  its time limit;
* :mod:`cosim.cluster.task_process` - the child process that runs task functions;
* :mod:`cosim.cluster.results_file` - the JSON-lines results file;
* :mod:`cosim.cluster.progress` - the progress bar;
* :mod:`cosim.cluster.interrupts` - Ctrl-C: held while a cluster starts or closes, never seen by
  the workers, ignored once a command is over;
* :mod:`cosim.cluster.cluster_logs`, :mod:`cosim.cluster.worker_setup` - Dask's messages (this
  process's and the workers') in a log folder, never on the terminal.
"""

from cosim.cluster.engine import Task, run_tasks

__all__ = ["Task", "run_tasks"]
