"""Symbolic dimensions with a maximum: ``S.var("token", max=2048)`` and the expressions built on them.

A :class:`Var` stands for a positive integer known only at run time, between ``min`` (default 1)
and ``max``. Expressions are built with ``+``, ``-``, ``*`` (by integers or other expressions),
``//`` and :func:`ceil_div` by positive integer constants; every expression carries an interval
``[lo, hi]`` computed when it is built (interval arithmetic), so the compiler can plan DRAM at the
maximum. Anything it cannot bound (a variable without a maximum, a division by a variable, a power)
is refused at once with one :class:`SymbolicError` line. :func:`bind` turns an expression, or a
tuple / list holding some, into plain integers for given values: the golden path and every trace
run on concrete values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.errors import CompileError


class SymbolicError(CompileError):
    """A shape expression that cannot be bounded, or a value outside a variable's range."""


class Expr:
    """An integer expression over variables, with its interval ``[lo, hi]`` and its meaning ``fn``."""

    __slots__ = ("lo", "hi", "text", "fn", "names")

    def __init__(self, lo: int, hi: int, text: str, fn: Any, names: frozenset[str]) -> None:
        self.lo, self.hi, self.text, self.fn, self.names = lo, hi, text, fn, names

    def __repr__(self) -> str:
        return self.text

    def value(self, values: Mapping[str, int]) -> int:
        """The expression's value for ``values`` (a name -> int mapping covering its variables)."""
        return int(self.fn(values))

    def _bin(self, other: Any, sym: str) -> "Expr":
        o = _lift(other, sym)
        f, g = self.fn, o.fn
        if sym == "+":
            return Expr(self.lo + o.lo, self.hi + o.hi, f"({self.text} + {o.text})", lambda v: f(v) + g(v),
                        self.names | o.names)
        if sym == "-":
            return Expr(self.lo - o.hi, self.hi - o.lo, f"({self.text} - {o.text})", lambda v: f(v) - g(v),
                        self.names | o.names)
        corners = [a * b for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        return Expr(min(corners), max(corners), f"{self.text} * {o.text}", lambda v: f(v) * g(v),
                    self.names | o.names)

    def __add__(self, other: Any) -> "Expr":
        return self._bin(other, "+")

    def __radd__(self, other: Any) -> "Expr":
        return _lift(other, "+")._bin(self, "+")

    def __sub__(self, other: Any) -> "Expr":
        return self._bin(other, "-")

    def __rsub__(self, other: Any) -> "Expr":
        return _lift(other, "-")._bin(self, "-")

    def __mul__(self, other: Any) -> "Expr":
        return self._bin(other, "*")

    def __rmul__(self, other: Any) -> "Expr":
        return self._bin(other, "*")

    def __floordiv__(self, other: Any) -> "Expr":
        d = _divisor(other, self, "//")
        f = self.fn
        return Expr(self.lo // d, self.hi // d, f"{self.text} // {d}", lambda v: f(v) // d, self.names)

    def __rfloordiv__(self, other: Any) -> "Expr":
        raise SymbolicError(f"cannot bound {other!r} // {self.text}: a divisor must be a positive integer constant")

    def __pow__(self, other: Any) -> "Expr":
        raise SymbolicError(f"cannot bound {self.text} ** {other!r}: only +, -, *, // and ceil_div are bounded")

    def __index__(self) -> int:
        raise SymbolicError(f"'{self.text}' is symbolic: its value is known only at run time (bind it first)")

    def __bool__(self) -> bool:
        raise SymbolicError(f"'{self.text}' is symbolic: it has no truth value before it is bound")


class Var(Expr):
    """A run-time dimension ``name`` in ``[min, max]``."""

    __slots__ = ("name", "min", "max")

    def __init__(self, name: str, max: int, min: int = 1) -> None:  # noqa: A002 - the DSL's words
        self.name, self.min, self.max = name, min, max
        super().__init__(min, max, name, lambda v: v[name], frozenset({name}))

    def check(self, value: Any) -> int:
        """``value`` as an int in range, else one SymbolicError line naming the variable and its range."""
        if isinstance(value, bool) or not isinstance(value, int) or not self.min <= value <= self.max:
            raise SymbolicError(f"variable '{self.name}': {value!r} is out of range {self.min}..{self.max}")
        return value

    def to_json(self) -> dict[str, int]:
        return {"min": self.min, "max": self.max}


def var(name: str, max: Any = None, min: int = 1) -> Var:  # noqa: A002 - the DSL's words
    """A symbolic dimension ``name`` in ``[min, max]``; a variable without a maximum is refused (it cannot be
    planned in DRAM)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise SymbolicError(f"variable name {name!r} must be an identifier")
    if max is None:
        raise SymbolicError(f"variable '{name}': cannot bound it: give its maximum, S.var('{name}', max=N)")
    if isinstance(max, bool) or not isinstance(max, int) or isinstance(min, bool) or not isinstance(min, int) \
            or not 1 <= min <= max:
        raise SymbolicError(f"variable '{name}': needs integers 1 <= min <= max, got min={min!r} max={max!r}")
    return Var(name, max, min)


def ceil_div(a: Any, d: int) -> Any:
    """``ceil(a / d)`` for a positive integer constant ``d``; plain ints stay ints."""
    if isinstance(a, Expr):
        d = _divisor(d, a, "ceil_div")
        f = a.fn
        return Expr(-(-a.lo // d), -(-a.hi // d), f"ceil({a.text} / {d})", lambda v: -(-f(v) // d), a.names)
    return -(-int(a) // int(d))


def _lift(x: Any, sym: str) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool) or not isinstance(x, int):
        raise SymbolicError(f"cannot bound an expression with {x!r} (operator {sym}): only integers and "
                            f"variables")
    return Expr(x, x, str(x), lambda v: x, frozenset())


def _divisor(d: Any, a: Expr, sym: str) -> int:
    if isinstance(d, Expr) or isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise SymbolicError(f"cannot bound {a.text} {sym} {d!r}: a divisor must be a positive integer constant")
    return d


def is_symbolic(x: Any) -> bool:
    """Whether ``x`` is an expression or a tuple / list / dict holding one."""
    if isinstance(x, Expr):
        return True
    if isinstance(x, (tuple, list)):
        return any(is_symbolic(e) for e in x)
    if isinstance(x, dict):
        return any(is_symbolic(e) for e in x.values())
    return False


def bind(x: Any, values: Mapping[str, int]) -> Any:
    """``x`` with every expression replaced by its value for ``values`` (tuples, lists, dicts walked)."""
    if isinstance(x, Expr):
        return x.value(values)
    if isinstance(x, tuple):
        return tuple(bind(e, values) for e in x)
    if isinstance(x, list):
        return [bind(e, values) for e in x]
    if isinstance(x, dict):
        return {k: bind(e, values) for k, e in x.items()}
    return x


def check_dimension(x: Any, what: str) -> None:
    """Refuse a shape dimension ``what`` whose interval is not within positive integers."""
    if isinstance(x, Expr) and x.lo < 1:
        raise SymbolicError(f"{what}: cannot bound '{x.text}' to a positive size (it ranges {x.lo}..{x.hi})")


def check_values(variables: Mapping[str, Var], values: Mapping[str, Any]) -> dict[str, int]:
    """The values of every variable, checked: unknown names, missing ones and out-of-range values are one
    SymbolicError line naming the variable and its range."""
    for name in values:
        if name not in variables:
            known = ", ".join(f"{n} ({v.min}..{v.max})" for n, v in variables.items()) or "none"
            raise SymbolicError(f"unknown variable '{name}' (variables: {known})")
    out = {}
    for name, v in variables.items():
        if name not in values:
            raise SymbolicError(f"variable '{name}' is not set: give --set {name}=N with N in {v.min}..{v.max}")
        out[name] = v.check(values[name])
    return out
