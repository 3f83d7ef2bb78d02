"""Kernels: Python functions over the intrinsics, callable directly (golden path) or traced.

``@S.kernel`` wraps a function in a :class:`Kernel`. Its parameters are DRAM tensors
(numpy arrays on the golden path, :class:`TensorSpec` when compiling) and compile-time
constants (anything else). Calling the kernel runs the Python halves of the
intrinsics: outputs are written into the numpy arrays passed for them.

``@S.kernel(elementwise=True)`` declares a kernel vector-wise: all its tensors have
one shape, vector j of every output depends only on vector j of the inputs (and on
constants), and what it does depends on its tensors only through their vector count.
The golden path may then run it in *lockstep*: the tensors' vectors are dealt out
to ``batch`` copies of the accelerator (vector ``j*batch + k`` to copy k, so every
copy sees a chunk-sized tensor and a run of vectors of every copy is one contiguous
block) and the kernel runs once, every intrinsic call processing all copies at once
(:class:`compiler.context.GoldenContext` with ``batch``). Each call still runs its interface (argument and buffer range checks,
identical for every chunk) and its numpy half, with the same 32-bit semantics; it
only amortises the per-call overhead over ``batch`` tiles. A lockstep run also defers the calls of a
tile into one numpy expression (:mod:`compiler.deferred_acc`); a run on one context does not. Compiling is unaffected. The batch
follows the kernel's footprint: the first vectors run on one copy (a probe) that records the highest
accumulator vector written, and the rest on as many copies as keep all their footprints in about
``LOCKSTEP_ACC_BYTES`` (``LOCKSTEP_DEFERRED_BYTES`` when the probe never wrote the buffer itself).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from math import prod
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable

import numpy as np

from compiler.context import GoldenContext, active, in_kernel
from compiler.errors import CompileError, exception_text, innermost_line, kernel_error, kernel_failure
from compiler.tensor import Tensor, TensorSpec, pad_to_vectors, unpad
from hw.config import ConfigError, HwConfig, load_config
from hw.program import DTYPES, ProgramError


_DTYPE_NAME = {np.dtype(d): d for d in DTYPES}  # str(dtype) is slow; this is the golden path's hot loop

# Lockstep golden runs size their batch so that the accumulator vectors all copies touch come to about
# this many bytes (to stay in a core's cache: the tiles of every copy are touched on every call).
LOCKSTEP_ACC_BYTES = 3 << 19  # 1.5 MiB: measured a little faster than 1 or 2 MiB with 2 MiB of L2 per core
# The same for a kernel whose probe never wrote the accumulator itself (every call deferred,
# compiler.deferred_acc): a tile of all copies is then read from DRAM and evaluated once, not kept in the
# buffer between calls, so bigger batches (fewer calls) pay; measured a little faster than 1.5 or 24 MiB.
LOCKSTEP_DEFERRED_BYTES = 6 << 20
# Every copy has a whole accumulator (a part may reach vectors the probe did not): the batch stays small
# enough that the buffer of all copies, a lazily touched map, is at most this many bytes of address space.
LOCKSTEP_MAX_BUFFER_BYTES = 1 << 30
# The first vectors of an elementwise kernel's tensors run on one copy first: that run measures the
# accumulator footprint of one copy (the highest vector written) the lockstep batch is sized by.
LOCKSTEP_PROBE_VECTORS = 64


class Kernel:
    """A kernel function: ``kernel(*arrays, config=...)`` runs the golden path."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None, elementwise: bool = False):
        if isinstance(fn, Kernel):
            elementwise = elementwise or fn.elementwise
            fn = fn.fn
        self.fn = fn
        self.name = name or fn.__name__
        self.elementwise = elementwise
        self.signature = inspect.signature(fn)
        functools.update_wrapper(self, fn)
        # For the fast path of bind(): plain parameters only (no positional-only, *args, **kwargs).
        ps = list(self.signature.parameters.values())
        self._plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in ps)
        self._names = {p.name for p in ps}
        self._positional = [p.name for p in ps if p.kind is p.POSITIONAL_OR_KEYWORD]
        self._defaults = {p.name: p.default for p in ps if p.default is not p.empty}

    def bind(self, args: Sequence[Any] | Mapping[str, Any], kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Map positional/keyword arguments to parameter names (defaults applied)."""
        pos, kw = (list(args), dict(kwargs or {})) if not isinstance(args, Mapping) else ([], {**args, **(kwargs or {})})
        if self._plain and len(pos) <= len(self._positional):
            # the common case without inspect's (slow) binder; anything odd falls through to it
            named = dict(zip(self._positional, pos))
            if not named.keys() & kw.keys() and kw.keys() <= self._names:
                out = {**self._defaults, **named, **kw}
                if len(out) == len(self._names):
                    return {n: out[n] for n in self.signature.parameters}
        try:
            b = self.signature.bind(*pos, **kw)
        except TypeError as e:
            raise CompileError(f"kernel '{self.name}': {e}") from None
        b.apply_defaults()
        return dict(b.arguments)

    def make_tensors(self, bound: dict[str, Any], cfg: HwConfig, golden: bool) -> dict[str, Tensor]:
        """Replace array/TensorSpec arguments in ``bound`` by Tensors; return them by name."""
        tensors = {}
        for name, v in bound.items():
            if isinstance(v, np.ndarray):
                shape, dtype = v.shape, _DTYPE_NAME.get(v.dtype) or str(v.dtype)
            elif isinstance(v, TensorSpec):
                shape, dtype = v.shape, v.dtype
            else:
                continue
            if dtype not in DTYPES:
                raise kernel_error(self.name, name, f"unsupported dtype {dtype} (DRAM tensors are "
                                   f"{', '.join(DTYPES)})")
            if any(s < 0 for s in shape) or prod(shape) == 0:
                raise kernel_error(self.name, name, f"empty tensor of shape {tuple(shape)}")
            data = None
            if golden:
                data = (pad_to_vectors(v, cfg.lanes, dtype) if isinstance(v, np.ndarray)
                        else np.zeros((-(-prod(shape) // cfg.lanes), cfg.lanes), dtype=dtype))
            t = Tensor(name, tuple(int(s) for s in shape), dtype, cfg.lanes, data)
            bound[name] = t
            tensors[name] = t
        return tensors

    def run_golden(self, cfg: HwConfig, args: Sequence[Any] | Mapping[str, Any],
                   kwargs: Mapping[str, Any] | None = None, lockstep: bool = True) -> dict[str, Tensor]:
        """Run the Python halves; return every tensor argument (``.data`` is its padded DRAM array).

        An elementwise kernel runs in lockstep (see the module docstring) unless ``lockstep`` is False.
        """
        bound = self.bind(args, kwargs)
        return self._run_bound(cfg, bound, lockstep)

    def _run_bound(self, cfg: HwConfig, bound: dict[str, Any], lockstep: bool = True) -> dict[str, Tensor]:
        tensors = self.make_tensors(bound, cfg, golden=True)
        if cfg.num_cores > 1:  # one run per core on the same tensors (compiler.cores)
            from compiler.cores import run_cores

            run_cores(cfg, self.name, self.fn, bound)
            return tensors
        probe = self.lockstep_probe(tensors, cfg) if lockstep and self.elementwise else 0
        if not probe:
            # call by call: deferring (compiler.deferred_acc) pays on the big tiles of all lockstep copies,
            # not here (measured slower on the small examples and a GEMM reads the accumulator anyway)
            with active(GoldenContext(cfg, self.name, defer=False)):
                self.fn(**bound)
            return tensors
        footprint, touched = self._run_part(cfg, bound, tensors, 1, 0, probe)
        budget = LOCKSTEP_ACC_BYTES if touched else LOCKSTEP_DEFERRED_BYTES
        for batch, first, chunk in self.lockstep_parts(tensors, cfg, probe, footprint, budget):
            self._run_part(cfg, bound, tensors, batch, first, chunk)
        return tensors

    def _run_part(self, cfg: HwConfig, bound: dict[str, Any], tensors: dict[str, Tensor], batch: int, first: int,
                  chunk: int) -> tuple[int, bool]:
        """One lockstep run over vectors ``first .. first + batch*chunk`` of every tensor (vector
        ``first + j*batch + k`` to copy k); returns the accumulator vectors one copy used (its high-water
        mark) and whether the buffer itself was written (False: every call deferred)."""
        lanes = cfg.lanes
        sub = dict(bound)
        views = {}
        for name, t in tensors.items():
            data = t.data[first:first + batch * chunk]
            if batch > 1:  # chunk vector j of copy k is vector first + j*batch + k
                data = data.reshape(chunk, batch, lanes)
            views[name] = sub[name] = Tensor(name, (chunk * lanes,), t.dtype, lanes, data)
        ctx = GoldenContext(cfg, self.name, batch)
        with active(ctx):
            self.fn(**sub)
        high, touched = ctx.acc_high, ctx.acc_written
        ctx.release()
        for name, v in views.items():
            tensors[name].loaded |= v.loaded
            tensors[name].stored |= v.stored
        return high, touched

    @staticmethod
    def lockstep_probe(tensors: dict[str, Tensor], cfg: HwConfig) -> int:
        """How many first vectors a lockstep run gives its one-copy probe run (0: a plain run instead, for
        tensors of different shapes or too few vectors to gain anything)."""
        if not tensors or len({t.shape for t in tensors.values()}) != 1:
            return 0
        nvec = next(iter(tensors.values())).nvec
        probe = min(LOCKSTEP_PROBE_VECTORS, max(1, cfg.acc_depth // 2))
        return probe if nvec >= 4 * probe else 0

    @staticmethod
    def lockstep_parts(tensors: dict[str, Tensor], cfg: HwConfig, start: int, footprint: int,
                       budget: int = LOCKSTEP_ACC_BYTES) -> list[tuple[int, int, int]]:
        """How a lockstep run covers the tensors' vectors from ``start`` on: ``(batch, first vector, chunk
        vectors)`` per kernel run. ``footprint`` is the accumulator vectors one copy touches (the probe's
        high-water mark; the whole buffer when unknown): the batch keeps all copies' footprints near
        ``budget`` bytes. The vectors left over by the batch run as a last part of one vector per copy,
        unless a batch down to half as big divides them evenly (one kernel run fewer). What the copies
        compute does not depend on any of it, only the speed."""
        nvec = next(iter(tensors.values())).nvec - start
        if nvec <= 0:
            return []
        foot = min(max(footprint, 1), cfg.acc_depth) * cfg.lanes * 4
        batch = min(nvec, max(1, budget // foot), max(1, LOCKSTEP_MAX_BUFFER_BYTES // (cfg.acc_depth * cfg.lanes * 4)))
        chunk, rest = divmod(nvec, batch)
        if rest:
            least = -(-nvec // batch)
            for c in range(least, min(2 * least, least + 64) + 1):  # batch nvec // c: at least half as big
                if nvec % c == 0:
                    return [(nvec // c, start, c)]
        return [(batch, start, chunk)] + ([(rest, start + batch * chunk, 1)] if rest else [])

    def __call__(self, *args: Any, config: HwConfig | str | None = None, **kwargs: Any) -> None:
        """Golden path: run the kernel on numpy arrays; outputs land in the arrays passed.

        Called inside another kernel (a shipped operator such as ``gemm_kernels.dense`` used in a user
        kernel), it is composed into the running kernel: its body runs on the caller's tensors, golden or
        traced, as if written there."""
        if in_kernel():
            if config is not None:
                raise CompileError(f"kernel '{self.name}': config= cannot be given to a kernel called inside "
                                   f"another kernel (it runs on the caller's accelerator)")
            caller = sys._getframe(1)
            try:
                self.fn(*args, **kwargs)
            except CompileError as e:
                if not caller.f_code.co_filename.startswith(_COMPILER_DIR):  # a call in the user's code
                    _add_call_site(e, self.name, f"{os.path.basename(caller.f_code.co_filename)}:{caller.f_lineno}")
                raise
            return
        cfg = config if isinstance(config, HwConfig) else load_config(config or "default")
        bound = self.bind(args, kwargs)
        tensors = self._run_bound(cfg, dict(bound))
        for name, t in tensors.items():
            user = bound[name]
            if t.stored and isinstance(user, np.ndarray) and not np.may_share_memory(user, t.data):
                user[...] = unpad(t.data, user.shape)

    def __repr__(self) -> str:
        return f"<kernel {self.name}{self.signature}>"


# The compiler's own kernels compose each other: only a call from outside it is named in an error.
_COMPILER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _add_call_site(e: CompileError, callee: str, where: str) -> None:
    """Append ``(in CALLEE called at FILE:LINE, ...)`` to the error's one line: a shipped kernel called
    inside a user's names its own arguments, so the line says which call of the user's code refused them."""
    calls = getattr(e, "_call_sites", None)
    if calls is None:
        calls = []
        e._call_sites = calls  # type: ignore[attr-defined]
        e._base_text = str(e)  # type: ignore[attr-defined]
    calls.append(f"in {callee} called at {where}")
    e.args = (f"{e._base_text} ({', '.join(calls)})",)  # type: ignore[attr-defined]


def kernel(fn: Callable[..., Any] | None = None, *, elementwise: bool = False) -> Any:
    """Decorator: make ``fn`` a :class:`Kernel` (``@S.kernel`` or ``@S.kernel(elementwise=True)``)."""
    if fn is None:
        return lambda f: Kernel(f, elementwise=elementwise)
    return Kernel(fn, elementwise=elementwise)


def as_kernel(obj: Any) -> Kernel:
    """``obj`` as a Kernel (plain functions are wrapped)."""
    if isinstance(obj, Kernel):
        return obj
    if callable(obj):
        return Kernel(obj)
    raise CompileError(f"{obj!r} is not a kernel function")


# ---- a kernel's own exceptions, reported in one line ----------------------------------------------
def describe_failure(file: str, e: BaseException) -> str:
    """``"ZeroDivisionError: division by zero (at k.py:12)"``: the exception and the innermost line of
    ``file`` in its traceback."""
    line = innermost_line(file, e)
    return f"{exception_text(e)} (at {file}:{line})" if line is not None else exception_text(e)


@contextlib.contextmanager
def reporting_failures(fn: Callable[..., Any], label: str) -> Iterator[None]:
    """Run the block; an exception raised by ``fn``'s code (anything but the compiler's, the config's and
    the Program's own one-line errors) becomes a :class:`KernelFailure` naming ``label``, ``fn``'s file
    and line, and the exception."""
    try:
        yield
    except (CompileError, ProgramError, ConfigError):
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # the user's code may raise anything (sys.exit, GeneratorExit too): one line
        raise kernel_failure(fn, label, e) from e
