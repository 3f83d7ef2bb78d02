"""The kernel author's namespace, imported as ``from compiler import S``.

Tensors and views: ``S.kernel`` (decorator; ``S.kernel(elementwise=True)`` lets the
golden path run a vector-wise kernel in lockstep, see :mod:`compiler.kernel`), ``S.tensor(shape, dtype)`` (argument
spec for the compiler), ``S.acc`` (accumulator views: ``S.acc[a:b]``), ``S.inp``, ``S.wgt``,
``S.uop`` (input, weight and micro-op buffer views, alike), ``S.config()`` (the HwConfig the
kernel runs for), ``S.core_id()``, ``S.num_cores()``, ``S.core_range(n)``, ``S.barrier()`` (several cores: :mod:`compiler.cores`), ``S.section(name)`` (names the instructions that follow, for reports), ``S.error(arg, reason)`` (the one-line CompileError a kernel raises for
arguments it cannot handle).
Intrinsics: ``S.load`` (into any buffer), ``S.store``, ``S.add``, ``S.sub``, ``S.mul``, ``S.min``,
``S.max``, ``S.shr``, ``S.clip``, ``S.mov``, ``S.mulhr``, ``S.clz``, ``S.sync``, ``S.gemm``; DRAM the kernel makes:
``S.const(array)`` (a constant tensor), ``S.uops(table)`` (a constant micro-op table),
``S.scratch(shape, dtype)`` (a tensor for intermediate results).
Dynamic shapes: ``S.var(name, max=N)`` (a run-time dimension) and ``S.ceil_div``, usable in
``S.tensor`` shapes and constants given to :func:`compiler.dynamic.compile_dynamic`.
"""

from __future__ import annotations

from compiler.context import current, source_line
from compiler.errors import CompileError, kernel_error
from compiler.ir import BarrierOp
from compiler.intrinsics import (add, clip, clz, const, gemm, load, max, min, mov, mul, mulhr,  # noqa: A004
                                 scratch, shr, store, sub, sync, uops)
from compiler.kernel import Kernel, kernel
from compiler.symbolic import ceil_div, var
from compiler.tensor import AccView, InpView, Tensor, TensorSpec, UopView, WgtView, acc, inp, tensor, uop, wgt
from hw.config import HwConfig


def config() -> HwConfig:
    """The hardware config of the current kernel run (for tiling decisions)."""
    return current().cfg


def section(name: str) -> None:
    """Start a named section of the instruction stream here (a network's layer, a phase of a kernel): the
    Program's ``meta["sections"]`` lists each section's first instruction and count, and the tools
    report cycles and traffic per section. Nothing on the golden path."""
    if not isinstance(name, str) or not name:
        raise kernel_error(current().kernel_name, None, f"S.section at {source_line()}: name {name!r} must be a "
                                                        f"non-empty string")
    ctx = current()
    if ctx.mode == "lower":
        ctx.trace.sections.append((name, len(ctx.trace.ops)))  # type: ignore[attr-defined]


def core_id() -> int:
    """Which core runs this kernel run (0 .. ``num_cores() - 1``): kernels split their work by it."""
    return current().core_id


def num_cores() -> int:
    """How many cores the config has (each runs the kernel once, on the same DRAM)."""
    return current().cfg.num_cores


def core_range(total: int) -> range:
    """This core's share of ``total`` work items (tiles, vectors): a contiguous, balanced part, the first
    cores one larger; every item once over all cores (``range(total)`` on one core)."""
    n, k = num_cores(), core_id()
    q, r = divmod(total, n)
    lo = k * q + (k if k < r else r)  # (``min`` here is the ALU intrinsic)
    return range(lo, lo + q + (1 if k < r else 0))


def barrier() -> None:
    """Wait until every core has reached this barrier; DRAM written before it by any core is visible
    after it to every core (on one core: an ``S.sync``). Golden path: :mod:`compiler.cores`; compiled for
    several cores: the BARRIER instruction in the core's stream (:func:`compiler.deps.insert_tokens`)."""
    ctx = current()
    if ctx.cores is not None:
        ctx.cores.barrier(ctx.core_id)
    elif ctx.cfg.num_cores == 1:
        sync()
    elif ctx.mode == "lower":  # compiling for several cores: the BARRIER instruction in this core's stream
        ctx.record(BarrierOp())  # type: ignore[attr-defined]


def error(arg: str | None, reason: str) -> CompileError:
    """A CompileError naming the current kernel, ``arg`` and ``reason`` (for kernels to raise)."""
    return kernel_error(current().kernel_name, arg, reason)


__all__ = ["AccView", "InpView", "Kernel", "Tensor", "TensorSpec", "UopView", "WgtView", "acc", "add", "barrier",
           "clip", "config", "const", "core_id", "core_range", "error", "gemm", "inp", "kernel", "load", "max", "min",
           "mov", "mul", "mulhr", "clz", "num_cores", "scratch", "section", "shr", "store", "sub", "sync", "tensor",
           "uop", "uops", "var", "ceil_div", "wgt"]
