"""Ctrl-C for the scale-out commands: held while a cluster starts or closes, ignored once the command ends.

A terminal's Ctrl-C is a SIGINT to every process of its foreground process group: the
``cosim`` process, and every process it started that did not move to a session of its
own. Three rules keep an interrupted campaign clean:

* :func:`sigint_held`: a block in which a SIGINT is held and raised as
  :class:`KeyboardInterrupt` when the block ends (starting a cluster, closing it: an
  interrupt halfway would leave half a cluster behind). SIGINT is also *blocked* in the
  calling thread for the block, so every thread started inside it, the Dask event-loop
  thread that spawns the worker processes included, keeps it blocked for good: a worker
  process (spawned, or respawned later by its nanny) never sees the terminal's Ctrl-C.
* :func:`end_of_command`: after a command's run, interrupted or not, a further Ctrl-C is
  ignored, so it cannot break the interpreter's exit (thread joins, atexit handlers of
  Dask and multiprocessing) with a traceback: the command's result stands.
* :func:`interruptible`: a command's ``run``, with the run's generators (and so its
  cluster) closed before the CLI prints its one ``interrupted`` line.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from cosim.cli import sigint_seen

F = TypeVar("F", bound=Callable[..., Any])


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """Hold a SIGINT that arrives in the block; raise it (as the handler in place before would) when the
    block ends. Threads started in the block inherit SIGINT blocked. Outside the main thread: no effect."""
    if not _in_main_thread():
        yield
        return
    got: list[int] = []
    before = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        # a SIGINT pending in the block is delivered on the unblock (pthread_sigmask runs the Python handlers
        # before it returns): the recorder takes it, not the old handler
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, before)
        if got:
            if before is signal.default_int_handler:
                raise KeyboardInterrupt
            if callable(before):  # watch_sigint's, or a program's own
                before(signal.SIGINT, None)
            # SIG_IGN or SIG_DFL-with-nothing-to-do: the process chose to ignore it


def _ignore_sigint() -> None:
    if _in_main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _command_is_the_process() -> bool:
    """Whether this process is the ``cosim`` command itself (``cosim ...`` or ``python -m cosim.cli``), not a
    program (a test) that calls a command's ``run`` among other things."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", None) == "cosim.cli" or Path(sys.argv[0] if sys.argv else "").name == "cosim"


def end_of_command() -> None:
    """From the interpreter's exit on, Ctrl-C is ignored: the command is over, and a KeyboardInterrupt in
    an exit handler (Dask's, multiprocessing's) would only print a traceback. Registered last, the handler
    runs first (atexit is last in, first out)."""
    atexit.register(_ignore_sigint)


def run_interruptible(body: Callable[[], Any]) -> Any:
    """Run a scale-out command's ``body``. On Ctrl-C: ignore further ones, close what the run left open
    (its task generators, whose ``finally`` closes the cluster: they are finalized once the interrupted
    frames are gone), then raise :class:`KeyboardInterrupt` for the CLI's one ``interrupted`` line."""
    end_of_command()
    try:
        result = body()
        if _command_is_the_process():  # the work is done and printed: what is left is the process's exit
            _ignore_sigint()
        return result
    except BaseException as e:
        if not (isinstance(e, KeyboardInterrupt) or sigint_seen()):
            raise
        _ignore_sigint()
    # here the traceback of the interrupt, and with it the frames of the run, are released: a generator
    # of run_tasks not closed yet is finalized now (a reference cycle waits for the collection below)
    gc.collect()
    raise KeyboardInterrupt


def interruptible(run: F) -> F:
    """Decorate a scale-out command's ``run(args)`` with :func:`run_interruptible`."""
    @functools.wraps(run)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return run_interruptible(lambda: run(*args, **kwargs))

    return wrapped  # type: ignore[return-value]
