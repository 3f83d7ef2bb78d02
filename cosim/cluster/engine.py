"""Run many independent tasks on a Dask cluster: the scale-out engine of fuzz, regress, sweep and bench.

::

    from cosim.cluster import Task, run_tasks
    tasks = [Task(f"case-{i}", "my.module:run_case", {"seed": i}) for i in range(1000)]
    for rec in run_tasks(tasks, results="out.jsonl"):          # embedded cluster of this machine
        ...
    run_tasks(tasks, scheduler="tcp://head:8786")              # a running cluster (or COSIM_SCHEDULER)

A task is one self-contained job: a top-level function named ``"module:function"``,
imported where it runs, called with its JSON-able ``args`` plus ``args["workdir"]`` (a
fresh folder of its own, removed afterwards), returning something JSON-able. Each task
runs in a task process of the worker (:mod:`cosim.cluster.task_runner`), so a time limit
can kill it and a crash cannot take the worker down.

Where the work runs:

* no scheduler (and env ``COSIM_SCHEDULER`` unset): an embedded ``LocalCluster`` with one
  single-threaded worker process per core of this machine (``workers=`` sets how many);
* ``scheduler="tcp://HOST:PORT"`` (or ``COSIM_SCHEDULER``): a running Dask cluster
  (``dask scheduler`` and ``dask worker`` started by hand, dask-jobqueue on Slurm/PBS/SGE/LSF,
  dask-kubernetes);
* ``workers=0``: no Dask at all, one task after the other in a task process of this
  machine (for debugging; the same records, results file and time limits).

What it promises: records stream to ``results`` (JSON lines) as tasks finish, and a key
already there is not run again (resume; but a task stopped by a shorter time limit than this run's
is); a task that raises or runs over ``timeout_s``
is a failed record, not a crash; a task whose worker dies is run again on another
(Dask reschedules it; when Dask gives up, :func:`run_tasks` submits it afresh, up to
``retries`` times) and every key is recorded exactly once; Ctrl-C cancels what is left,
closes the cluster and leaves a valid file. Nothing of Dask reaches the terminal: its log records (of
this process, and the embedded cluster's workers' output) go to a log folder, env ``COSIM_CLUSTER_LOGS``
(kept) or a temporary one (:mod:`cosim.cluster.cluster_logs`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from cosim.cluster.cluster_logs import LOG_DIR_ENV, log_folder, logs_to_file
from cosim.cluster.interrupts import sigint_held
from cosim.cluster.progress import ProgressBar
from cosim.cluster.results_file import ResultsFile
from cosim.cluster.task_runner import execute, stop_task_process

# How long to wait for a scheduler to answer, and for a first worker to join it (seconds; env overrides).
CONNECT_TIMEOUT_S = 30.0
WORKER_WAIT_S = 120.0
# A campaign with no worker at all for this long stops (a cluster that lost every worker never finishes).
NO_WORKER_S = 300.0
_HOST = r"(\[[0-9A-Fa-f:.]+\]|[^\s/:\[\]]+)"  # a name, an IPv4 address, or an IPv6 one in brackets
ADDRESS_RE = re.compile(rf"^(tcp|tls|ws|wss|ucx)://{_HOST}(:\d+)?$|^{_HOST}:\d+$")
FN_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class ClusterError(ConnectionError):
    """The cluster cannot go on (its scheduler gone, no worker left): the results so far are kept."""


@dataclass(frozen=True)
class Task:
    """One self-contained job of a campaign."""

    key: str                 # unique within a campaign; the resume key
    fn: str                  # "module:function", imported on the worker (top-level function)
    args: dict[str, Any]     # JSON-able payload (a Program folder path or spec, seeds, config name...)


def _env_seconds(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not v > 0:
        raise ValueError(f"{name}={text!r}: expected a positive number of seconds")
    return v


def scheduler_address(scheduler: str | None) -> str | None:
    """The scheduler to connect to: ``scheduler``, else env ``COSIM_SCHEDULER``, else None (embedded).
    ``HOST:PORT`` means ``tcp://HOST:PORT``; anything else that is not an address is a ValueError."""
    given = scheduler if scheduler is not None else os.environ.get("COSIM_SCHEDULER", "")
    text = given.strip()
    if not text:
        return None
    where = "--scheduler" if scheduler is not None else "COSIM_SCHEDULER"
    if not ADDRESS_RE.match(text):
        raise ValueError(f"{where} {text!r}: expected a Dask scheduler address like tcp://HOST:8786")
    return text if "://" in text else f"tcp://{text}"


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def open_client(address: str | None, workers: int | None) -> Iterator[Any]:
    """A Dask client: of a new embedded LocalCluster (``address`` None) or of the scheduler at ``address``;
    the cluster is closed (its worker processes stopped) when the block ends, however it ends.

    Ctrl-C while the cluster starts or closes is held until that is done (:func:`sigint_held`), then
    raised; the embedded cluster's worker processes never receive it, and neither they nor Dask in this
    process write to the terminal (:mod:`cosim.cluster.cluster_logs`)."""
    from distributed import Client, LocalCluster

    if address is None:
        # multiprocessing starts its resource tracker on first need, from the thread that needs it, and
        # unblocks SIGINT in that thread afterwards: started here first, it cannot unblock it in the event-loop
        # thread that spawns the workers (see sigint_held)
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
    with log_folder() as logs, logs_to_file(logs / "client.log"):
        cluster = client = None
        try:
            with sigint_held():
                if address is None:
                    # the scheduler's HTTP server on a free port (not 8787, which another cluster may hold); no
                    # memory limit: the work happens in the task processes, which a worker's monitor does not count
                    cluster = LocalCluster(n_workers=workers or default_workers(), threads_per_worker=1,
                                           processes=True, dashboard_address="127.0.0.1:0",
                                           silence_logs=logging.CRITICAL, memory_limit=0,
                                           preload=["cosim.cluster.worker_setup"],
                                           env={LOG_DIR_ENV: str(logs)})
                    client = Client(cluster, set_as_default=False)
                else:
                    client = _connect(address)
            if address is not None:
                wait = _env_seconds("COSIM_WORKER_WAIT", WORKER_WAIT_S)
                try:
                    client.wait_for_workers(1, timeout=wait)
                except (TimeoutError, OSError):
                    raise ConnectionError(f"no Dask worker joined the scheduler at {address} within {wait:g} s "
                                          f"(start some with `dask worker {address}`)") from None
            yield client
        finally:
            with sigint_held():
                for part in (client, cluster):
                    if part is not None:
                        with contextlib.suppress(Exception):  # closing is best effort: the run is over
                            part.close()


def _connect(address: str) -> Any:
    """A client of the scheduler at ``address``; one clear error when it cannot be reached."""
    from distributed import Client

    timeout = _env_seconds("COSIM_CONNECT_TIMEOUT", CONNECT_TIMEOUT_S)
    hint = "start one with `dask scheduler`, or drop --scheduler / COSIM_SCHEDULER for this machine's cores"
    if address.startswith("tcp://"):
        why = _not_a_dask_server(address[len("tcp://"):], timeout)
        if why is None:  # a Dask server: which one
            why = _not_the_scheduler(address, timeout)
        if why and why is not UNREACHABLE:  # unreachable: the client's own connect says why, within its timeout
            raise ConnectionError(f"{address} did not answer as a Dask scheduler ({why}; the dashboard's port is "
                                  f"not the scheduler's, 8786 by default); {hint}")
    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except Exception as e:  # noqa: BLE001 - whatever Dask raises for a peer it cannot use: one line
        raise ConnectionError(f"cannot reach the Dask scheduler at {address} ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}); {hint}") from None


def _not_the_scheduler(address: str, timeout: float) -> str | None:
    """Why the Dask server at ``address`` is not a scheduler (a worker's or a nanny's port), asked in one
    bounded exchange (Dask's client waits on a peer without a bound of its own), or None."""
    import asyncio

    from distributed.comm import connect

    async def ask() -> Any:
        comm = await connect(address, timeout=timeout)
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    try:
        asyncio.get_running_loop()
        return None  # inside an event loop (not the CLI's case): Dask's client asks for itself
    except RuntimeError:
        pass
    try:
        reply = asyncio.run(asyncio.wait_for(ask(), timeout))
    except (asyncio.TimeoutError, TimeoutError):
        return f"no answer to Dask's identity request in {timeout:g} s"
    except Exception as e:  # noqa: BLE001 - a peer that is not Dask fails in many ways
        return f"{type(e).__name__} asking who it is"
    kind = reply.get("type") if isinstance(reply, dict) else None
    return None if kind == "Scheduler" else f"it is a Dask {kind}" if isinstance(kind, str) else \
        "its answer to Dask's identity request is not a scheduler's"


UNREACHABLE = "unreachable"  # _not_a_dask_server's word for no connection at all
# The first frame a Dask server sends (its handshake) is small; a length beyond this is not Dask's.
HANDSHAKE_MAX_BYTES = 1 << 20


def _not_a_dask_server(host_port: str, timeout: float) -> str | None:
    """Why the TCP server at ``host_port`` is not a Dask one, or None: a Dask server writes its handshake as
    soon as a connection opens (an 8-byte length, then that many bytes), which Dask's client reads without a
    bound of its own; an HTTP server (the dashboard), or one that never writes, would hold it forever.
    Unreachable: :data:`UNREACHABLE`."""
    host, _, port = host_port.rpartition(":")
    host = host.strip("[]")  # an IPv6 address in brackets
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except (OSError, ValueError):
        return UNREACHABLE
    try:
        head = b""
        deadline = time.monotonic() + timeout
        while len(head) < 8:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(8 - len(head))
            except socket.timeout:
                return f"it sent nothing in {timeout:g} s; set COSIM_CONNECT_TIMEOUT to wait longer"
            except OSError as e:
                return f"the connection failed: {e.strerror or e}"
            if not chunk:
                return "it closed the connection without a word"
            head += chunk
        n = int.from_bytes(head, "little")
        return None if 0 < n <= HANDSHAKE_MAX_BYTES else "what it sent is not Dask's protocol"
    finally:
        sock.close()


def _checked(tasks: Iterable[Task]) -> list[Task]:
    out, seen = [], set()
    for t in tasks:
        if not isinstance(t, Task):
            raise TypeError(f"run_tasks takes Task objects, not {type(t).__name__}")
        if not isinstance(t.key, str) or not t.key:
            raise ValueError(f"task key {t.key!r}: expected a non-empty string")
        if t.key in seen:
            raise ValueError(f"task key {t.key!r} appears twice (keys must be unique: they name results)")
        seen.add(t.key)
        if not isinstance(t.fn, str) or not FN_RE.match(t.fn):
            raise ValueError(f"task {t.key!r}: fn {t.fn!r} is not 'package.module:function'")
        if not isinstance(t.args, dict) or "workdir" in t.args:
            raise ValueError(f"task {t.key!r}: args must be a dict without 'workdir' (the engine gives that)")
        try:
            json.dumps(t.args)
        except (TypeError, ValueError) as e:
            raise ValueError(f"task {t.key!r}: args are not JSON-able ({e})") from None
        out.append(t)
    return out


def run_tasks(tasks: Iterable[Task], *, results: str | Path | None = None, scheduler: str | None = None,
              workers: int | None = None, retries: int = 2, progress: bool = True,
              desc: str = "tasks", timeout_s: float | None = None) -> Iterator[dict[str, Any]]:
    """Run every task (skipping keys already in `results`), yield each record as it finishes:
    {"key", "ok": bool, "result": <fn's JSON-able return> | None, "error": "one line" | None,
     "worker": address, "wall_s": float, "attempts": int}.
    - scheduler None and COSIM_SCHEDULER unset: an embedded LocalCluster, one single-threaded worker
      process per core (workers= overrides, and then COSIM_SCHEDULER is not used; workers=0 runs the
      tasks one by one without Dask); else connect to that address (tcp://HOST:PORT).
    - each record is appended to `results` (JSON lines, flushed) as it arrives; records of keys
      already in the file are not run again (they are yielded first, marked "resumed": true), except a
      task that ran over a shorter time limit than this run's ("timed_out_s" in its record).
    - fn raising = a recorded failure (ok false, error = its one line), not a crash.
    - a worker dying mid-task: the task is retried on another (dask retries / lost-worker
      rescheduling); every key is recorded exactly once.
    - Ctrl-C: cancels outstanding futures, closes the client/cluster, the file stays valid JSONL.
    - every task runs in its own fresh work directory (fn gets it as args["workdir"]), removed after
      unless the fn keeps something by returning paths outside it.
    - bounded: timeout_s per task (a task over it is a recorded failure), and the whole run ends.
    """
    todo_all = _checked(tasks)
    if workers is not None and workers < 0:
        raise ValueError(f"workers must be >= 0, not {workers}")
    if retries < 0:
        raise ValueError(f"retries must be >= 0, not {retries}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s}")
    if scheduler and workers is not None:
        raise ValueError("workers= sizes the embedded cluster; it cannot be given with a scheduler address")
    # workers= given means this machine, whatever env COSIM_SCHEDULER says (an argument beats the environment)
    address = None if workers is not None else scheduler_address(scheduler)
    return _run(todo_all, results, address, workers, retries, progress, desc, timeout_s)


def _run(tasks: list[Task], results: str | Path | None, address: str | None, workers: int | None, retries: int,
         progress: bool, desc: str, timeout_s: float | None) -> Iterator[dict[str, Any]]:
    store = ResultsFile(results) if results is not None else None
    done = store.load() if store is not None else {}
    bar = ProgressBar(len(tasks), desc, progress)
    n_done = n_failed = 0
    try:
        todo = []
        for t in tasks:
            rec = done.get(t.key)
            if rec is None or _over_a_shorter_limit(rec, timeout_s):
                todo.append(t)
                continue
            n_done, n_failed = n_done + 1, n_failed + (not rec.get("ok"))
            bar.update(n_done, n_failed)
            yield {**rec, "resumed": True}
        if not todo:
            return
        if store is not None:
            store.open()
        runner = _run_here(todo, timeout_s) if workers == 0 else \
            _run_on_dask(todo, address, workers, retries, timeout_s)
        for rec in runner:
            if store is not None:
                store.append(rec)
            n_done, n_failed = n_done + 1, n_failed + (not rec["ok"])
            bar.update(n_done, n_failed)
            yield rec
    finally:
        bar.close()
        if store is not None:
            store.close()


def _over_a_shorter_limit(rec: dict[str, Any], timeout_s: float | None) -> bool:
    """Whether ``rec`` is a task stopped at a time limit shorter than ``timeout_s`` (None: no limit): not a
    result of this run, whose task may finish within its longer one."""
    was = rec.get("timed_out_s")
    return not rec.get("ok") and isinstance(was, (int, float)) and (timeout_s is None or was < timeout_s)


def _lost_scheduler(detail: str = "") -> ClusterError:
    return ClusterError(f"lost the connection to the Dask scheduler{detail}; the results so far are in the results "
                        f"file (run again to resume)")


def _payload(t: Task) -> dict[str, Any]:
    return {"key": t.key, "fn": t.fn, "args": t.args}


def _run_here(tasks: list[Task], timeout_s: float | None) -> Iterator[dict[str, Any]]:
    """``workers=0``: the tasks one after the other in a task process of this machine."""
    try:
        for t in tasks:
            yield {**execute(_payload(t), timeout_s), "attempts": 1}
    finally:
        stop_task_process()


def _failure(key: str, error: str, t_submit: float) -> dict[str, Any]:
    return {"key": key, "ok": False, "result": None, "error": error, "worker": None,
            "wall_s": round(time.monotonic() - t_submit, 3)}


def _run_on_dask(tasks: list[Task], address: str | None, workers: int | None, retries: int,
                 timeout_s: float | None) -> Iterator[dict[str, Any]]:
    """The tasks as Dask futures; records in the order they finish."""
    from distributed import as_completed

    run_id = uuid.uuid4().hex[:10]
    topic = f"cosim-task-start-{run_id}"
    starts: Counter[str] = Counter()     # start events per key: attempts that reached a worker
    submitted: Counter[str] = Counter()  # submissions per key from here
    first_submit: dict[str, float] = {}
    no_worker_s = _env_seconds("COSIM_NO_WORKER_TIMEOUT", NO_WORKER_S)
    by_key = {t.key: t for t in tasks}
    with open_client(address, workers) as client:
        client.subscribe_topic(topic, lambda event: starts.update([event[1]["key"]]))
        pending: dict[Any, str] = {}     # future -> task key
        ac = as_completed(loop=client.loop)

        def submit(keys: list[str]) -> None:
            now = time.monotonic()
            for k in keys:
                submitted[k] += 1
                first_submit.setdefault(k, now)
            futs = client.map(execute, [_payload(by_key[k]) for k in keys],
                              key=[f"cosim-{run_id}-{submitted[k]}-{k}" for k in keys], pure=False,
                              timeout_s=timeout_s, event_topic=topic)
            for k, f in zip(keys, futs):
                pending[f] = k
            ac.update(futs)

        try:
            submit(list(by_key))
            last_worker_seen = time.monotonic()
            last_check = 0.0
            while pending:
                batch = ac.next_batch(block=False)
                if not batch:
                    now = time.monotonic()
                    if now - last_check > 2.0:
                        last_check = now
                        if client.status not in ("running", "connecting"):
                            raise _lost_scheduler()
                        if client.nthreads():
                            last_worker_seen = now
                        elif now - last_worker_seen > no_worker_s:
                            raise ClusterError(f"no Dask worker for {no_worker_s:g} s with {len(pending)} task(s) "
                                               f"left; run again with the same results file to resume")
                    time.sleep(0.05)
                    continue
                for fut in batch:
                    key = pending.pop(fut)
                    rec, why = None, ""
                    if fut.status == "finished":
                        try:
                            rec = fut.result(timeout=60)
                        except Exception as e:  # noqa: BLE001 - its data died with a worker: run it again
                            why = f"{type(e).__name__}: {e}"
                    else:
                        try:
                            e = fut.exception(timeout=60)
                            why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                        except Exception as e2:  # noqa: BLE001 - cancelled: no exception to fetch
                            why = f"{type(e2).__name__}: {e2}"
                    fut.release()
                    if rec is None:
                        if submitted[key] <= retries:
                            submit([key])
                            continue
                        rec = _failure(key, f"gave up after {submitted[key]} attempt(s): {why}", first_submit[key])
                    rec["attempts"] = max(submitted[key], starts[key])
                    yield rec
        except ClusterError:
            raise
        except OSError as e:  # Dask's own word for a scheduler gone (e.g. "ConnectionPool closing.")
            raise _lost_scheduler(f" ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
        finally:
            with sigint_held():  # a second Ctrl-C must not cut the cancel short
                if pending:
                    with contextlib.suppress(Exception):
                        client.cancel(list(pending), force=True)
                with contextlib.suppress(Exception):
                    client.unsubscribe_topic(topic)
