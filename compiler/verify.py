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
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Sequence

from compiler.errors import CompileError, DeadlockError
from hw.config import HwConfig
from hw.isa import Instruction, unit_of

UNITS = ("load", "compute", "store")
UNIT_INDEX = {u: i for i, u in enumerate(UNITS)}
QUEUES = ("l2c", "c2l", "c2s", "s2c")
# unit -> flag -> token queue it pops from / pushes to
POPS = {"load": {"pop_next": "c2l"}, "compute": {"pop_prev": "l2c", "pop_next": "s2c"},
        "store": {"pop_prev": "c2s"}}
PUSHES = {"load": {"push_next": "l2c"}, "compute": {"push_prev": "c2l", "push_next": "c2s"},
          "store": {"push_prev": "s2c"}}
# token queue -> (pushing unit, popping unit)
QUEUE_ENDS = {"l2c": ("load", "compute"), "c2l": ("compute", "load"),
              "c2s": ("compute", "store"), "s2c": ("store", "compute")}


def pops_of(insn: Instruction) -> list[str]:
    """Token queues ``insn`` pops from before it starts."""
    return [q for f, q in POPS[unit_of(insn)].items() if getattr(insn, f)]


def pushes_of(insn: Instruction) -> list[str]:
    """Token queues ``insn`` pushes to when it ends."""
    return [q for f, q in PUSHES[unit_of(insn)].items() if getattr(insn, f)]


def check_finish(insns: Sequence[Instruction], where: str = "program") -> None:
    """Exactly one FINISH, as the last instruction."""
    fin = [k for k, i in enumerate(insns) if i.MNEMONIC == "FINISH"]
    if len(fin) != 1 or fin[0] != len(insns) - 1:
        raise CompileError(f"{where}: needs exactly one FINISH as the last instruction "
                           f"(found {len(fin)} at {fin[:4]}, {len(insns)} instructions)")


def token_counts(insns: Sequence[Instruction]) -> dict[str, tuple[int, int]]:
    """Per token queue: (pushes, pops)."""
    push = dict.fromkeys(QUEUES, 0)
    pop = dict.fromkeys(QUEUES, 0)
    for i in insns:
        for q in pushes_of(i):
            push[q] += 1
        for q in pops_of(i):
            pop[q] += 1
    return {q: (push[q], pop[q]) for q in QUEUES}


def check_balance(insns: Sequence[Instruction], where: str = "program") -> None:
    """Every token queue is pushed exactly as often as it is popped."""
    for q, (pu, po) in token_counts(insns).items():
        if pu != po:
            raise CompileError(f"{where}: unbalanced tokens on {q}: {pu} pushes, {po} pops")


def happens_before(insns: Sequence[Instruction], where: str = "program") -> list[tuple[int, int, int]]:
    """Vector clocks: for instruction k, per unit (load, compute, store) the index *within that
    unit* of its last instruction guaranteed complete when k starts (-1: none).

    Raises DeadlockError when the unit order and token edges form a cycle or a pop has
    no matching push (then no schedule exists, whatever the queue depths).
    """
    n = len(insns)
    unit = [UNIT_INDEX[unit_of(i)] for i in insns]
    seq = [0] * n
    count = [0, 0, 0]
    preds: list[list[int]] = [[] for _ in range(n)]
    last = [-1, -1, -1]
    pushers: dict[str, list[int]] = {q: [] for q in QUEUES}
    poppers: dict[str, list[int]] = {q: [] for q in QUEUES}
    for k, i in enumerate(insns):
        u = unit[k]
        seq[k] = count[u]
        count[u] += 1
        if last[u] >= 0:
            preds[k].append(last[u])
        last[u] = k
        for q in pushes_of(i):
            pushers[q].append(k)
        for q in pops_of(i):
            poppers[q].append(k)
    for q in QUEUES:
        if len(poppers[q]) > len(pushers[q]):
            k = poppers[q][len(pushers[q])]
            raise DeadlockError(f"{where}: instruction {k} pops a {q} token that is never pushed")
        for a, b in zip(pushers[q], poppers[q]):
            preds[b].append(a)
    succs: list[list[int]] = [[] for _ in range(n)]
    indeg = [len(p) for p in preds]
    for b, ps in enumerate(preds):
        for a in ps:
            succs[a].append(b)
    ready = deque(k for k in range(n) if indeg[k] == 0)
    vc: list[tuple[int, int, int] | None] = [None] * n
    done = 0
    while ready:
        k = ready.popleft()
        v = [-1, -1, -1]
        for a in preds[k]:
            va = vc[a]
            assert va is not None
            v = [max(x, y) for x, y in zip(v, va)]
            v[unit[a]] = max(v[unit[a]], seq[a])
        vc[k] = (v[0], v[1], v[2])
        done += 1
        for b in succs[k]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    if done < n:
        stuck = min(k for k in range(n) if vc[k] is None)
        raise DeadlockError(f"{where}: instruction {stuck} waits on a cycle of tokens and unit order")
    return [v for v in vc if v is not None]


@dataclass
class Schedule:
    """Result of an abstract run: per instruction, start and end of EXECUTE, and the end time."""

    start: list[int]
    end: list[int]
    time: int


_IDLE, _WAIT, _EXEC, _PUSH = range(4)


def simulate(insns: Sequence[Instruction], cfg: HwConfig, durations: Sequence[int] | None = None,
             atomic_push: bool = False, where: str = "program") -> Schedule:
    """Run the three in-order units abstractly (see the module docstring).

    ``durations[k]`` is instruction k's EXECUTE time (default 1); fetch and token
    handshakes take no time. Raises DeadlockError when no unit can progress.
    """
    n = len(insns)
    units = [unit_of(i) for i in insns]
    pops = [pops_of(i) for i in insns]
    pushes = [pushes_of(i) for i in insns]
    dur = list(durations) if durations is not None else [1] * n
    depth = {"load": cfg.load_queue_depth, "compute": cfg.compute_queue_depth, "store": cfg.store_queue_depth}
    cap = cfg.token_queue_depth
    queues: dict[str, deque[int]] = {u: deque() for u in UNITS}
    state = dict.fromkeys(UNITS, _IDLE)
    cur: dict[str, int] = dict.fromkeys(UNITS, -1)
    until: dict[str, int] = dict.fromkeys(UNITS, 0)
    pending: dict[str, list[str]] = {u: [] for u in UNITS}
    tokens = dict.fromkeys(QUEUES, 0)
    start, end = [-1] * n, [-1] * n
    pc, t, finished = 0, 0, False
    while not finished:
        changed = True
        while changed and not finished:
            changed = False
            while pc < n and len(queues[units[pc]]) < depth[units[pc]]:  # in-order fetch/dispatch
                queues[units[pc]].append(pc)
                pc += 1
                changed = True
            for u in UNITS:
                st = state[u]
                if st == _IDLE and queues[u]:
                    cur[u] = queues[u].popleft()
                    state[u] = st = _WAIT
                    changed = True
                k = cur[u]
                if st == _WAIT and all(tokens[q] > 0 for q in pops[k]):
                    if insns[k].MNEMONIC == "FINISH" and not (
                            pc == n and state["load"] == _IDLE and state["store"] == _IDLE
                            and not queues["load"] and not queues["store"]):
                        continue
                    for q in pops[k]:
                        tokens[q] -= 1
                    start[k] = t
                    until[u] = t + dur[k]
                    state[u] = st = _EXEC
                    changed = True
                if st == _EXEC and until[u] <= t:
                    end[k] = t
                    pending[u] = list(pushes[k])
                    state[u] = st = _PUSH
                    changed = True
                if st == _PUSH:
                    if atomic_push:
                        if all(tokens[q] < cap for q in pending[u]):
                            for q in pending[u]:
                                tokens[q] += 1
                            pending[u] = []
                    else:
                        for q in list(pending[u]):
                            if tokens[q] < cap:
                                tokens[q] += 1
                                pending[u].remove(q)
                    if not pending[u]:
                        state[u] = _IDLE
                        changed = True
                        if insns[k].MNEMONIC == "FINISH":
                            finished = True
        if finished:
            break
        running = [until[u] for u in UNITS if state[u] == _EXEC]
        if not running:
            raise DeadlockError(f"{where}: deadlock: {_stuck(insns, state, cur, pending, pc, n, tokens)}")
        t = min(running)
    return Schedule(start, end, t)


def _stuck(insns: Sequence[Instruction], state: dict[str, int], cur: dict[str, int],
           pending: dict[str, list[str]], pc: int, n: int, tokens: dict[str, int]) -> str:
    parts = []
    for u in UNITS:
        k = cur[u]
        if state[u] == _WAIT:
            need = [q for q in pops_of(insns[k])]
            parts.append(f"{u} insn {k} waits for {'+'.join(need) or 'the other units (FINISH)'}")
        elif state[u] == _PUSH:
            parts.append(f"{u} insn {k} cannot push {'+'.join(pending[u])} (queue full)")
    if pc < n:
        parts.append(f"fetch stalled at insn {pc} ({unit_of(insns[pc])} queue full)")
    elif not any(i.MNEMONIC == "FINISH" for i in insns):
        parts.append("no FINISH")
    toks = ", ".join(f"{q}={v}" for q, v in tokens.items())
    return "; ".join(parts) + f" (tokens {toks})"


def verify_program(insns: Sequence[Instruction], cfg: HwConfig, where: str = "program") -> None:
    """All the proofs: FINISH, balance, an acyclic happens-before, and no deadlock under
    the config's queue depths with either push discipline."""
    check_finish(insns, where)
    check_balance(insns, where)
    happens_before(insns, where)
    for atomic in (False, True):
        simulate(insns, cfg, atomic_push=atomic, where=where)
