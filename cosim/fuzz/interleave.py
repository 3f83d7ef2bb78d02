"""Another fetch order for the same Program: a valid stream with its units' instructions re-interleaved.

Each token queue has one pushing and one popping unit, and the k-th push of a queue is taken by its
k-th pop, so moving instructions of different units past each other in the stream (each unit's own
order kept) keeps every token edge: the same happens-before relation, so the same results. What
changes is the fetch order: a pop may now come before the push it takes (a STORE fetched before the
ALU whose result it stores), the case a sequential reference must not run in program order, and the
units' instruction queues fill in other patterns. A swap that would make the stream deadlock (a
unit's queue full of waiting instructions stalls fetch before the pushes they wait for) is undone:
:func:`hw.analysis.deadlock_pc` decides.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hw.analysis import deadlock_pc
from hw.isa import unit_of
from hw.program import Program

MOVABLE = ("LOAD", "ALU", "GEMM", "STORE")  # FINISH and BARRIER stay where they are (they wait for the drain)


def reinterleave(p: Program, rng: np.random.Generator, swaps: int) -> Program:
    """``p`` (one core) with up to ``swaps`` random adjacent swaps of instructions of different units, each
    kept only when the stream still completes; same name, layout, inputs and expected outputs."""
    if p.num_cores != 1:
        raise ValueError(f"{p.name}: re-interleaving is for one core's stream ({p.num_cores} cores)")
    insns = list(p.insns)
    n = len(insns)
    for _ in range(swaps if n > 1 else 0):
        k = int(rng.integers(0, n - 1))
        a, b = insns[k], insns[k + 1]
        if a.MNEMONIC not in MOVABLE or b.MNEMONIC not in MOVABLE or unit_of(a) == unit_of(b):
            continue
        insns[k], insns[k + 1] = b, a
        if deadlock_pc(insns, p.config) is not None:
            insns[k], insns[k + 1] = a, b
    return dataclasses.replace(p, insns=insns, meta=dict(p.meta, reinterleaved=swaps))
