"""The intrinsic registry: one interface, two implementations.

An intrinsic is declared once with :func:`intrinsic` (its *interface*: the function
that checks the kernel's arguments and returns an operation record), and gets its
two halves with :func:`implements`: the ``"python"`` half executes the record on
numpy arrays (golden path), the ``"lower"`` half records it for the compiler. Both
halves live next to the interface in the same module. A second declaration of a
name, or a second registration of either half, is refused.

Calling the intrinsic runs the interface, then the half the current context
selects (``context.mode``).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from compiler.context import _local, current, source_line
from compiler.errors import BufferRangeError, CompileError, IntrinsicError, kernel_error

HALVES = ("python", "lower")


class ArgError(Exception):
    """Raised by an interface for a bad argument; the Intrinsic adds kernel, intrinsic and line."""

    def __init__(self, msg: str, arg: str | None = None, cls: type[CompileError] = CompileError):
        super().__init__(msg)
        self.arg = arg
        self.cls = cls


class Intrinsic:
    """A named intrinsic: the interface plus its registered halves."""

    def __init__(self, name: str, interface: Callable[..., Any]):
        self.name = name
        self.interface = interface
        self.halves: dict[str, Callable[[Any, Any], Any]] = {}
        self.__doc__ = interface.__doc__
        self.__name__ = name
        self.__wrapped__ = interface

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        stack = getattr(_local, "stack", None)  # compiler.context.current(), inlined: this is the hot path
        ctx = stack[-1] if stack else current()
        try:
            op = self.interface(ctx, *args, **kwargs)
        except ArgError as e:
            raise kernel_error(ctx.kernel_name, e.arg, f"S.{self.name} at {source_line()}: {e}", e.cls) from None
        except TypeError as e:  # wrong arguments to the intrinsic itself
            raise kernel_error(ctx.kernel_name, None,
                               f"S.{self.name} at {source_line()}: {self._call_error(e, args, kwargs)}") from None
        try:
            half = self.halves[ctx.mode]
        except KeyError:
            raise IntrinsicError(f"intrinsic '{self.name}' has no {ctx.mode!r} half") from None
        return half(ctx, op)

    def _call_error(self, e: TypeError, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """What is wrong with the call, in the kernel author's terms: a call that does not fit the
        intrinsic's parameters is named against its signature (without the context the registry
        passes first, which Python's own message would count); another TypeError is as raised."""
        if e.__traceback__ is not None and e.__traceback__.tb_next is not None:
            return str(e)  # raised inside the interface, not by the call's binding
        params = [q.replace(annotation=inspect.Parameter.empty)
                  for q in list(inspect.signature(self.interface).parameters.values())[1:]]
        sig = inspect.Signature(params)
        try:
            sig.bind(*args, **kwargs)
        except TypeError as bind_error:
            return f"{bind_error} (S.{self.name}{sig})"
        return str(e)

    def __repr__(self) -> str:
        return f"<intrinsic S.{self.name} halves={sorted(self.halves)}>"


REGISTRY: dict[str, Intrinsic] = {}


def intrinsic(name: str) -> Callable[[Callable[..., Any]], Intrinsic]:
    """Declare intrinsic ``name`` with the decorated function as its interface.

    The interface is called as ``interface(ctx, *args, **kwargs)``, checks the
    arguments (raising :class:`ArgError`) and returns the operation record both
    halves receive.
    """
    def deco(fn: Callable[..., Any]) -> Intrinsic:
        if name in REGISTRY:
            raise IntrinsicError(f"intrinsic '{name}' is already declared")
        REGISTRY[name] = Intrinsic(name, fn)
        return REGISTRY[name]
    return deco


def implements(name: str, half: str) -> Callable[[Callable[[Any, Any], Any]], Callable[[Any, Any], Any]]:
    """Register the decorated ``fn(ctx, op)`` as the ``half`` ("python" or "lower") of ``name``.

    Refuses an unknown half, an undeclared intrinsic and a second registration.
    """
    if half not in HALVES:
        raise IntrinsicError(f"unknown half {half!r} (halves: {', '.join(HALVES)})")

    def deco(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        intr = REGISTRY.get(name)
        if intr is None:
            raise IntrinsicError(f"intrinsic '{name}' is not declared (declare it with @intrinsic first)")
        if half in intr.halves:
            raise IntrinsicError(f"intrinsic '{name}' already has a {half!r} half")
        intr.halves[half] = fn
        return fn
    return deco


def range_error(msg: str, arg: str | None = None) -> ArgError:
    """An ArgError that becomes a BufferRangeError (a buffer index out of range)."""
    return ArgError(msg, arg, BufferRangeError)
