"""The errors of the kernel DSL and compiler: one clear line each, ValueError subclasses.

The CLI prints a ValueError's first line and exits 2, so every message names the
kernel, the argument (or intrinsic operand) and the reason.
"""

from __future__ import annotations

import inspect
import traceback
from typing import Any, Callable


class CompileError(ValueError):
    """A kernel or operator that cannot be compiled (or run on the golden path) as written."""


class BufferRangeError(CompileError, IndexError):
    """An on-chip buffer index out of range; the message names the intrinsic and the source line."""


class ConfigFitError(CompileError):
    """A kernel or network that is right as written but does not fit a config: no tiling fits its buffers,
    or its block size (or number of cores) is not one the model can use."""


class DeadlockError(CompileError):
    """An instruction stream whose tokens, queues and fetch order can stop every unit."""


def on_core(e: CompileError, kernel: str, core: int) -> CompileError:
    """``e`` (one line about kernel ``kernel``, as :func:`kernel_error` or a failure of the kernel's code
    words it) naming core ``core`` of a multi-core run, of ``e``'s class: ``kernel 'k': core 2 (file:line)
    raised ...`` or ``kernel 'k': core 2: argument ...``."""
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    head = f"kernel '{kernel}'"
    rest = msg[len(head):] if msg.startswith(head) else f": {msg}"
    if not rest.startswith((":", " (")):
        rest = f": {rest.lstrip()}"
    return type(e)(f"{head}: core {core}{rest}")


class IntrinsicError(RuntimeError):
    """Misuse of the intrinsic registry itself (a second registration, a missing half)."""


def kernel_error(kernel: str, arg: str | None, reason: str, cls: type[CompileError] = CompileError) -> CompileError:
    """Build the one-line error naming the kernel, the argument and the reason."""
    where = f"kernel '{kernel}'" + (f": argument '{arg}'" if arg else "")
    return cls(f"{where}: {reason}")


# ---- a kernel's own exceptions, reported in one line ----------------------------------------------
class KernelFailure(CompileError):
    """The kernel's own code raised: one line naming the kernel, its file and line, and the exception.

    The original exception is the ``__cause__`` (``cosim --traceback`` prints the whole chain)."""


def innermost_line(file: str, e: BaseException) -> int | None:
    """The last line of ``file`` in ``e``'s traceback: where the user's code raised, or called what raised."""
    line = None
    for frame, lineno in traceback.walk_tb(e.__traceback__):
        if frame.f_code.co_filename == file:
            line = lineno
    return line


def exception_text(e: BaseException) -> str:
    """``"ZeroDivisionError: division by zero"`` (the first line of the message only); a ``SystemExit``
    is ``"called sys.exit(0)"`` (a kernel that exits has not compiled, whatever the code), and a message
    that cannot be made (its ``__str__`` raises) is named as such."""
    try:
        text = str(e).strip().splitlines()
    except Exception as inner:  # the user's exception class may be broken too
        text = [f"<its message raised {type(inner).__name__}>"]
    if isinstance(e, SystemExit):
        return f"called sys.exit({e.code!r})"
    return type(e).__name__ + (f": {text[0]}" if text else "")


def kernel_failure(fn: Callable[..., Any], label: str, e: BaseException) -> KernelFailure:
    """The :class:`KernelFailure` line of exception ``e`` raised by ``fn``'s code: ``label``, the line of
    ``fn``'s file it came from, and the exception."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    file = code.co_filename if code is not None else "?"
    line = innermost_line(file, e)
    if line is None and code is not None:
        line = code.co_firstlineno
    text = exception_text(e)
    return KernelFailure(f"{label} ({file}:{line}) " + (text if isinstance(e, SystemExit) else f"raised {text}"))
