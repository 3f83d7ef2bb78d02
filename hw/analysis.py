"""Static analyses of an instruction stream's dependency tokens: balance, happens-before, deadlock.

They read ISA instructions only (never a kernel), so they check any Program, compiled,
generated or hand-made; the topology they use is :mod:`hw.isa_semantics`. Callers wrap
the findings in their own error types (the compiler's CompileError, the Program
loader's ProgramError, the TLM's ERR_DEADLOCK); the ISS has its own untimed token run.

* :func:`token_counts`, :func:`balance_problem` - pushes and pops per token queue.
* :func:`finish_problem` - exactly one FINISH, as the last instruction.
* :func:`after_finish_problem` - only FINISHes after the first FINISH (the Program loader's rule:
  a stream may lack its FINISH, but what follows one must not race with the drain).
* :func:`token_matches` - which push each pop consumes (the k-th push of a queue is
  consumed by its k-th pop).
* :func:`program_order_problem` - the program-order token rule (every pop matches an
  earlier push, no queue ever holds more than its depth), a sufficient condition for
  deadlock freedom that generators build to.
* :func:`happens_before` - per instruction, for each unit, the last of its instructions
  guaranteed complete when this one starts (unit order, token edges and BARRIER fences).
* :func:`run_tokens` - an untimed (or abstractly timed) run of fetch's in-order dispatch,
  the three in-order units, their instruction queues and the token queues, with the
  microarchitecture's rules (docs/microarch.md "Control"): tokens taken together in WAIT,
  FINISH completes once load and store are idle with empty queues, a push waits while
  its queue is full. A BARRIER (several cores) drains like FINISH and fetch dispatches nothing
  after it until it completes; the run is one core's on its own, so a BARRIER completes once
  drained (the other cores' arrival is the caller's business). Units and bounded FIFOs form a determinate network, so whether and
  where it deadlocks does not depend on timing: one run decides. :func:`deadlock_pc` is
  the ERR_PC the hardware reports for it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Sequence

from hw.isa import Instruction
from hw.isa_semantics import QUEUE_ENDS, QUEUE_OF_OPCODE, TOKEN_QUEUES, UNITS, pops_of, pushes_of

UNIT_INDEX = {u: k for k, u in enumerate(UNITS)}


class TokenOrderError(ValueError):
    """No schedule exists: a pop without a push, or a cycle of unit order and token edges.

    ``pc`` is the first instruction that can never start."""

    def __init__(self, message: str, pc: int):
        super().__init__(message)
        self.pc = pc


# ---- counting ------------------------------------------------------------------------------------
def token_counts(insns: Sequence[Instruction]) -> dict[str, tuple[int, int]]:
    """Per token queue: (pushes, pops)."""
    push = dict.fromkeys(TOKEN_QUEUES, 0)
    pop = dict.fromkeys(TOKEN_QUEUES, 0)
    for i in insns:
        for q in pushes_of(i):
            push[q] += 1
        for q in pops_of(i):
            pop[q] += 1
    return {q: (push[q], pop[q]) for q in TOKEN_QUEUES}


def balance_problem(insns: Sequence[Instruction]) -> str | None:
    """None when every token queue is pushed exactly as often as popped, else one line naming the first
    queue that is not (a surplus push would run silently, a surplus pop deadlocks)."""
    for q, (push, pop) in token_counts(insns).items():
        if push != pop:
            pu, pf, cu, cf = QUEUE_ENDS[q]
            return (f"unbalanced dependency tokens: queue {q} gets {push} push(es) ({pu} {pf}) "
                    f"but {pop} pop(s) ({cu} {cf})")
    return None


def finish_problem(insns: Sequence[Instruction]) -> str | None:
    """None when the stream has exactly one FINISH, as its last instruction, else one line."""
    fin = [k for k, i in enumerate(insns) if i.MNEMONIC == "FINISH"]
    if len(fin) != 1 or fin[0] != len(insns) - 1:
        return (f"needs exactly one FINISH as the last instruction "
                f"(found {len(fin)} at {fin[:4]}, {len(insns)} instructions)")
    return None


def after_finish_problem(insns: Sequence[Instruction], skip: frozenset[int] = frozenset()) -> str | None:
    """None unless an instruction other than FINISH follows the stream's first FINISH, else one line;
    the indices in ``skip`` count as neither (raw words, whose stand-in instruction means nothing).

    Fetch goes on dispatching after a FINISH until the drain completes, so whether a LOAD or STORE
    there runs depends on timing (how far the FINISH's fetch burst reaches), and so does how many of
    the words after it are fetched at all. The compute unit never runs what follows its FINISH: more
    FINISHes (padding) are dead but harmless, apart from FETCH_BYTES.
    """
    fin = next((k for k, i in enumerate(insns) if i.MNEMONIC == "FINISH" and k not in skip), None)
    if fin is None:
        return None
    late = next((k for k in range(fin + 1, len(insns)) if insns[k].MNEMONIC != "FINISH" and k not in skip), None)
    if late is None:
        return None
    return (f"instruction {late} ({insns[late].MNEMONIC}) follows the FINISH at instruction {fin}: whether it "
            f"runs would depend on timing (end the stream with its FINISH)")


def token_matches(insns: Sequence[Instruction]) -> list[tuple[str, int, int]]:
    """``(queue, pushing index, popping index)`` for every matched token, FIFO per queue."""
    pushers: dict[str, list[int]] = {q: [] for q in TOKEN_QUEUES}
    poppers: dict[str, list[int]] = {q: [] for q in TOKEN_QUEUES}
    for k, i in enumerate(insns):
        for q in pushes_of(i):
            pushers[q].append(k)
        for q in pops_of(i):
            poppers[q].append(k)
    return [(q, a, b) for q in TOKEN_QUEUES for a, b in zip(pushers[q], poppers[q])]


def program_order_problem(insns: Sequence[Instruction], depth: int) -> tuple[int, str] | None:
    """The first instruction breaking the program-order token rule, with what it breaks; None when none does.

    The rule: run in program order, every pop matches an earlier unmatched push of its queue and no
    queue ever holds more than ``depth`` tokens. A stream that keeps it cannot deadlock (every wait
    is on an earlier instruction); a stream that breaks it still may not (see :func:`run_tokens`).
    """
    pushed = dict.fromkeys(TOKEN_QUEUES, 0)
    popped = dict.fromkeys(TOKEN_QUEUES, 0)
    for k, i in enumerate(insns):
        for q in pops_of(i):
            if popped[q] >= pushed[q]:
                return k, f"instruction {k}: pops {q} with no earlier unmatched push"
            popped[q] += 1
        for q in pushes_of(i):
            pushed[q] += 1
            if pushed[q] - popped[q] > depth:
                return k, f"instruction {k}: {q} would hold more than {depth} tokens"
    return None


# ---- happens-before ----------------------------------------------------------------------------------
@dataclass
class Order:
    """The happens-before relation of a stream.

    ``unit[k]`` is instruction k's unit index (``UNITS`` order), ``seq[k]`` its index within its
    unit, ``vc[k]`` its vector clock: per unit, the index *within that unit* of the last of its
    instructions guaranteed complete when k starts (-1: none).
    """

    unit: list[int]
    seq: list[int]
    vc: list[tuple[int, int, int]]

    def before(self, a: int, b: int) -> bool:
        """Instruction ``a`` is guaranteed complete before ``b`` starts (by unit order and tokens)."""
        return self.vc[b][self.unit[a]] >= self.seq[a]


def happens_before(insns: Sequence[Instruction]) -> Order:
    """Vector clocks of every instruction (see :class:`Order`).

    Raises TokenOrderError when a pop has no matching push or the unit order and token edges
    form a cycle (then no schedule exists, whatever the queue depths).
    """
    n = len(insns)
    unit = [UNIT_INDEX[QUEUE_OF_OPCODE[i.MNEMONIC]] for i in insns]
    seq = [0] * n
    count = [0, 0, 0]
    preds: list[list[int]] = [[] for _ in range(n)]
    last = [-1, -1, -1]
    pushers: dict[str, list[int]] = {q: [] for q in TOKEN_QUEUES}
    poppers: dict[str, list[int]] = {q: [] for q in TOKEN_QUEUES}
    fence = -1  # the latest BARRIER: it completes after every earlier instruction (the loads and stores
    # drain, fetch dispatches nothing after it meanwhile) and before any later one starts
    for k, i in enumerate(insns):
        u = unit[k]
        seq[k] = count[u]
        count[u] += 1
        if last[u] >= 0:
            preds[k].append(last[u])
        if fence > last[u]:
            preds[k].append(fence)
        if i.MNEMONIC == "BARRIER":
            preds[k] += [j for j in last if 0 <= j and j != last[u]]
            fence = k
        last[u] = k
        for q in pushes_of(i):
            pushers[q].append(k)
        for q in pops_of(i):
            poppers[q].append(k)
    for q in TOKEN_QUEUES:
        if len(poppers[q]) > len(pushers[q]):
            k = poppers[q][len(pushers[q])]
            raise TokenOrderError(f"instruction {k} pops a {q} token that is never pushed", k)
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
        raise TokenOrderError(f"instruction {stuck} waits on a cycle of tokens and unit order", stuck)
    return Order(unit, seq, [v for v in vc if v is not None])


# ---- the abstract run: deadlock ----------------------------------------------------------------------
@dataclass
class TokenRun:
    """Result of :func:`run_tokens`.

    ``start[k]``/``end[k]``: when instruction k entered and left EXECUTE (-1: never);
    ``time``: when the run stopped; ``deadlock_pc``: None when FINISH completed, else the
    ERR_PC the hardware reports (the smallest pc a unit holds in WAIT, PUSH or FINISH's
    EXECUTE, or the instruction count when none holds one); ``stuck``: what each unit waits
    for ("" when FINISH completed).
    """

    start: list[int]
    end: list[int]
    time: int
    deadlock_pc: int | None
    stuck: str


_IDLE, _WAIT, _EXEC, _PUSH = range(4)


def run_tokens(insns: Sequence[Instruction], cfg: Any, durations: Sequence[int] | None = None,
               atomic_push: bool = True) -> TokenRun:
    """Run fetch, the instruction queues, the three units and the token queues abstractly.

    ``durations[k]`` is instruction k's EXECUTE time (default 1; a FINISH also waits until load
    and store are drained); fetch, queue moves and token handshakes take no time. With
    ``atomic_push`` (the hardware's rule) an instruction pushes all its tokens in the same step,
    once none of their queues is full; without it each token goes as soon as its queue has room.
    Queue depths come from ``cfg`` (``load/compute/store_queue_depth``, ``token_queue_depth``).
    """
    n = len(insns)
    units = [QUEUE_OF_OPCODE[i.MNEMONIC] for i in insns]
    pops = [pops_of(i) for i in insns]
    pushes = [pushes_of(i) for i in insns]
    is_finish = [i.MNEMONIC == "FINISH" for i in insns]
    drains = [i.MNEMONIC in ("FINISH", "BARRIER") for i in insns]
    dur = list(durations) if durations is not None else [1] * n
    depth = {"load": cfg.load_queue_depth, "compute": cfg.compute_queue_depth, "store": cfg.store_queue_depth}
    cap = cfg.token_queue_depth
    queues: dict[str, deque[int]] = {u: deque() for u in UNITS}
    state = dict.fromkeys(UNITS, _IDLE)
    cur: dict[str, int] = dict.fromkeys(UNITS, -1)
    until: dict[str, int] = dict.fromkeys(UNITS, 0)
    pending: dict[str, list[str]] = {u: [] for u in UNITS}
    tokens = dict.fromkeys(TOKEN_QUEUES, 0)
    start, end = [-1] * n, [-1] * n
    pc, t = 0, 0
    fenced = False  # a BARRIER was dispatched and has not completed: fetch waits

    def drained() -> bool:
        return (state["load"] == _IDLE and state["store"] == _IDLE
                and not queues["load"] and not queues["store"])

    while True:
        changed = True
        while changed:
            changed = False
            while not fenced and pc < n and len(queues[units[pc]]) < depth[units[pc]]:  # in-order fetch/dispatch
                queues[units[pc]].append(pc)
                fenced = insns[pc].MNEMONIC == "BARRIER"
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
                    for q in pops[k]:  # taken together
                        tokens[q] -= 1
                    start[k] = t
                    until[u] = t + dur[k]
                    state[u] = st = _EXEC
                    changed = True
                if st == _EXEC and until[u] <= t and (not drains[k] or drained()):
                    end[k] = t
                    if insns[k].MNEMONIC == "BARRIER":
                        fenced = False
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
                        if is_finish[k]:
                            return TokenRun(start, end, t, None, "")
        running = [until[u] for u in UNITS if state[u] == _EXEC and until[u] > t]
        if not running:
            held = [cur[u] for u in UNITS if state[u] != _IDLE]
            return TokenRun(start, end, t, min(held) if held else n,
                            _stuck(insns, state, cur, pending, pc, tokens, fenced))
        t = min(running)


def deadlock_pc(insns: Sequence[Instruction], cfg: Any) -> int | None:
    """None when the stream's FINISH completes, else the ERR_PC of ``ERR_DEADLOCK`` (microarch.md)."""
    return run_tokens(insns, cfg).deadlock_pc


def _stuck(insns: Sequence[Instruction], state: dict[str, int], cur: dict[str, int],
           pending: dict[str, list[str]], pc: int, tokens: dict[str, int], fenced: bool = False) -> str:
    parts = []
    for u in UNITS:
        k = cur[u]
        if state[u] == _WAIT:
            parts.append(f"{u} insn {k} waits for {'+'.join(pops_of(insns[k]))}")
        elif state[u] == _EXEC:
            parts.append(f"{u} insn {k} ({insns[k].MNEMONIC}) waits for the load and store units to drain")
        elif state[u] == _PUSH:
            parts.append(f"{u} insn {k} cannot push {'+'.join(pending[u])} (queue full)")
    if fenced and pc < len(insns):
        parts.append(f"fetch waits at insn {pc} for the BARRIER before it")
    elif pc < len(insns):
        parts.append(f"fetch stalled at insn {pc} ({QUEUE_OF_OPCODE[insns[pc].MNEMONIC]} queue full)")
    elif not any(i.MNEMONIC == "FINISH" for i in insns):
        parts.append("no FINISH")
    toks = ", ".join(f"{q}={v}" for q, v in tokens.items())
    return "; ".join(parts) + f" (tokens {toks})"
