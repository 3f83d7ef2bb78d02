"""The errors of the kernel DSL and compiler: one clear line each, ValueError subclasses.

The CLI prints a ValueError's first line and exits 2, so every message names the
kernel, the argument (or intrinsic operand) and the reason.
"""

from __future__ import annotations


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
