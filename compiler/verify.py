"""Static proofs about an instruction stream: FINISH, token balance, happens-before, no deadlock.

These work on ISA instructions only (never on the kernel), so they check any Program,
compiled or hand-made:

* :func:`check_finish` - exactly one FINISH, and it is the last instruction.
* :func:`check_balance` - every token queue gets as many pushes as pops.
* :func:`happens_before` - the vector clock of every instruction: for each unit,
  the last of its instructions guaranteed complete when this one starts (unit order
  plus token edges; the k-th push of a queue is consumed by its k-th pop).
* :func:`simulate` - an abstract run of the three in-order units with the fetch
  unit's in-order dispatch, the configured instruction-queue depths and the token
  queues' capacity (a push waits while full). It returns a schedule, or raises
  DeadlockError naming the stuck instructions. Such a network of deterministic
  in-order processes over bounded FIFOs is deterministic, so one run decides
  whether the program can deadlock; both token-push disciplines (each token as soon
  as its queue has room, or both together) are checked.

The analyses themselves live in :mod:`hw.analysis` (shared with the Program loader,
the ISS and the fuzzer); this module turns their findings into the compiler's errors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

from compiler.errors import CompileError, DeadlockError
from hw import analysis
from hw.analysis import token_counts
from hw.config import MAX_INSN_QUEUE_DEPTH, MAX_TOKEN_QUEUE_DEPTH, HwConfig
from hw.isa import Instruction

__all__ = ["check_finish", "check_balance", "token_counts", "happens_before", "Schedule", "simulate",
           "verify_program"]


def check_finish(insns: Sequence[Instruction], where: str = "program") -> None:
    """Exactly one FINISH, as the last instruction."""
    problem = analysis.finish_problem(insns)
    if problem:
        raise CompileError(f"{where}: {problem}")


def check_balance(insns: Sequence[Instruction], where: str = "program") -> None:
    """Every token queue is pushed exactly as often as it is popped."""
    problem = analysis.balance_problem(insns)
    if problem:
        raise CompileError(f"{where}: {problem}")


def happens_before(insns: Sequence[Instruction], where: str = "program") -> list[tuple[int, int, int]]:
    """Vector clocks (:class:`hw.analysis.Order`): for instruction k, per unit (load, compute, store)
    the index *within that unit* of its last instruction guaranteed complete when k starts (-1: none).

    Raises DeadlockError when the unit order and token edges form a cycle or a pop has
    no matching push (then no schedule exists, whatever the queue depths).
    """
    try:
        return analysis.happens_before(insns).vc
    except analysis.TokenOrderError as e:
        raise DeadlockError(f"{where}: {e}") from None


@dataclass
class Schedule:
    """Result of an abstract run: per instruction, start and end of EXECUTE, and the end time."""

    start: list[int]
    end: list[int]
    time: int


def simulate(insns: Sequence[Instruction], cfg: HwConfig, durations: Sequence[int] | None = None,
             atomic_push: bool = False, where: str = "program") -> Schedule:
    """Run the three in-order units abstractly (:func:`hw.analysis.run_tokens`).

    ``durations[k]`` is instruction k's EXECUTE time (default 1); fetch and token
    handshakes take no time. Raises DeadlockError when no unit can progress.
    """
    run = analysis.run_tokens(insns, cfg, durations, atomic_push=atomic_push)
    if run.deadlock_pc is not None:
        raise DeadlockError(f"{where}: deadlock: {run.stuck}")
    return Schedule(run.start, run.end, run.time)


def verify_program(insns: Sequence[Instruction], cfg: HwConfig, where: str = "program") -> None:
    """All the proofs: FINISH, balance, an acyclic happens-before, and no deadlock under
    the config's queue depths with either push discipline."""
    check_finish(insns, where)
    check_balance(insns, where)
    happens_before(insns, where)
    for atomic in (False, True):
        try:
            simulate(insns, cfg, atomic_push=atomic, where=where)
        except DeadlockError as e:
            raise DeadlockError(f"{e}{_shallow_queues(insns, cfg, atomic)}") from None


# The deepest queues a config may have: a stream that deadlocks only below them deadlocks because of the config.
_DEEPEST = {"token_queue_depth": MAX_TOKEN_QUEUE_DEPTH, **{f"{u}_queue_depth": MAX_INSN_QUEUE_DEPTH
                                                          for u in ("load", "compute", "store")}}


def _shallow_queues(insns: Sequence[Instruction], cfg: HwConfig, atomic: bool) -> str:
    """'' unless the stream runs with the deepest queues: then which of the config's queue depths to raise
    (the compiler sizes its tiles by the buffers, not by the queues: a double-buffered loop pushes tokens
    two tiles ahead)."""
    deep = dataclasses.replace(cfg, **_DEEPEST)
    if analysis.run_tokens(insns, deep, atomic_push=atomic).deadlock_pc is not None:
        return ""
    for key in _DEEPEST:
        if analysis.run_tokens(insns, dataclasses.replace(cfg, **{key: _DEEPEST[key]}),
                               atomic_push=atomic).deadlock_pc is None:
            need = next(d for d in range(getattr(cfg, key) + 1, _DEEPEST[key] + 1)
                        if (key == "token_queue_depth" or d & (d - 1) == 0)
                        and analysis.run_tokens(insns, dataclasses.replace(cfg, **{key: d}),
                                                atomic_push=atomic).deadlock_pc is None)
            return f"; config '{cfg.name}': {key} {getattr(cfg, key)} is too shallow for this stream (it runs " \
                   f"with {need})"
    return f"; config '{cfg.name}': its queues are too shallow for this stream (it runs with the deepest)"
