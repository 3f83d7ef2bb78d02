"""The interface between the TLM's blocks and the fast-forward (``sim/tlm/fast_forward.py``): how a
block shows its timing state and moves it on by whole periods, without the fast-forward reaching
into it.

Every block the fast-forward covers has a method ``walk_state(w, ...)`` that visits each piece of
its timing state, in a fixed order, through a :class:`StateWalk`:

* ``w.time(v)`` for a cycle, ``w.pc(v)`` for an instruction's pc, ``w.insn(i)`` for an instruction,
  ``w.word(x)`` for an instruction word, ``w.callback(fn)`` for a retry or completion it will call,
  ``w.val(x)`` for anything else that decides its future; each returns the value to keep;
* when ``w.shifting`` is False the walk is a *snapshot* (the block's part of the signature) and the
  block changes nothing; when it is True the walk *advances the block by whole periods* and the
  block stores what the walk returns.

A block declares, as class attributes, which of its attributes the walk covers
(``STEADY_STATE``) and which cannot change its timing within a run (``STEADY_FIXED``: wiring,
sizes, callbacks, observations, counters that the fast-forward advances by their delta, state
whose presence makes the walk refuse). :func:`undeclared_state` lists what is in neither, so that
a new attribute cannot silently escape the signature (``tests/test_tlm_fast_forward.py``).

The events a block schedules that may still be pending at an instruction boundary are marked with
:func:`steady_event`; an event carrying its owner's version number (a plan or tenure that a later
one supersedes) is marked ``versioned=True`` and its owner offers ``event_version`` and
``advance_event_version(n)``. Any other pending event makes the walk refuse (:class:`Unsupported`).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

STEADY_MARK = "steady_event_versioned"  # the attribute steady_event sets on a method


class Unsupported(Exception):
    """The state at this boundary is outside what the fast-forward can prove periodic."""


class StateWalk(Protocol):
    """One walk over the blocks' timing state: a snapshot, or an advance by whole periods."""

    shifting: bool
    t: int  # the cycle of the boundary the walk is at

    def time(self, v: int | None) -> int | None:
        """A cycle (None: no cycle)."""

    def pc(self, v: int | None) -> int | None:
        """An instruction's pc (None: none)."""

    def val(self, x: Any) -> Any:
        """A value that decides the future and does not move with time."""

    def insn(self, i: Any) -> Any:
        """A decoded instruction (None: none)."""

    def word(self, word: int) -> int:
        """An instruction word not yet decoded."""

    def callback(self, fn: Callable[..., Any] | None) -> None:
        """A bound method the block will call later (a retry, a completion)."""


def steady_event(fn: F | None = None, *, versioned: bool = False) -> Any:
    """Mark a block's method as an event the fast-forward may find pending and move in time;
    ``versioned``: its first argument is its owner's ``event_version`` when it was scheduled."""

    def mark(f: F) -> F:
        setattr(f, STEADY_MARK, versioned)
        return f

    return mark(fn) if fn is not None else mark


def event_mark(fn: Callable[..., Any]) -> bool | None:
    """How a scheduled callable is marked: None (not a steady event), False, or True (versioned)."""
    return getattr(getattr(fn, "__func__", fn), STEADY_MARK, None)


def _attributes(obj: Any) -> set[str]:
    names = set(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        names |= {s for s in cls.__dict__.get("__slots__", ()) if hasattr(obj, s)}
    return names


def declared_state(cls: type) -> tuple[set[str], set[str]]:
    """``(STEADY_STATE, STEADY_FIXED)`` of ``cls`` and its bases, merged."""
    state: set[str] = set()
    fixed: set[str] = set()
    for c in cls.__mro__:
        state |= set(c.__dict__.get("STEADY_STATE", ()))
        fixed |= set(c.__dict__.get("STEADY_FIXED", ()))
    return state, fixed


def undeclared_state(obj: Any) -> tuple[set[str], set[str]]:
    """``(attributes of obj declared nowhere, declared names obj does not have)``: both empty when
    the declaration of its class matches the object."""
    state, fixed = declared_state(type(obj))
    have = _attributes(obj)
    return have - state - fixed, (state | fixed) - have


__all__ = ["StateWalk", "Unsupported", "declared_state", "event_mark", "steady_event", "undeclared_state"]
