"""Kernels: Python functions over the intrinsics, callable directly (golden path) or traced.

``@S.kernel`` wraps a function in a :class:`Kernel`. Its parameters are DRAM tensors
(numpy arrays on the golden path, :class:`TensorSpec` when compiling) and compile-time
constants (anything else). Calling the kernel runs the Python halves of the
intrinsics: outputs are written into the numpy arrays passed for them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import numpy as np

from compiler.context import GoldenContext, active
from compiler.errors import CompileError, kernel_error
from compiler.tensor import Tensor, TensorSpec, pad_to_vectors, unpad
from hw.config import HwConfig, load_config
from hw.program import DTYPES


class Kernel:
    """A kernel function: ``kernel(*arrays, config=...)`` runs the golden path."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None):
        if isinstance(fn, Kernel):
            fn = fn.fn
        self.fn = fn
        self.name = name or fn.__name__
        self.signature = inspect.signature(fn)
        functools.update_wrapper(self, fn)

    def bind(self, args: Sequence[Any] | Mapping[str, Any], kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Map positional/keyword arguments to parameter names (defaults applied)."""
        pos, kw = (list(args), dict(kwargs or {})) if not isinstance(args, Mapping) else ([], {**args, **(kwargs or {})})
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
                shape, dtype = v.shape, str(v.dtype)
            elif isinstance(v, TensorSpec):
                shape, dtype = v.shape, v.dtype
            else:
                continue
            if dtype not in DTYPES:
                raise kernel_error(self.name, name, f"unsupported dtype {dtype} (DRAM tensors are "
                                   f"{', '.join(DTYPES)})")
            if any(s < 0 for s in shape) or int(np.prod(shape)) == 0:
                raise kernel_error(self.name, name, f"empty tensor of shape {tuple(shape)}")
            data = None
            if golden:
                data = (pad_to_vectors(v, cfg.lanes, dtype) if isinstance(v, np.ndarray)
                        else np.zeros((-(-int(np.prod(shape)) // cfg.lanes), cfg.lanes), dtype=dtype))
            t = Tensor(name, tuple(int(s) for s in shape), dtype, cfg.lanes, data)
            bound[name] = t
            tensors[name] = t
        return tensors

    def run_golden(self, cfg: HwConfig, args: Sequence[Any] | Mapping[str, Any],
                   kwargs: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        """Run the Python halves; return every tensor argument (``.data`` is its padded DRAM array)."""
        bound = self.bind(args, kwargs)
        tensors = self.make_tensors(bound, cfg, golden=True)
        with active(GoldenContext(cfg, self.name)):
            self.fn(**bound)
        return tensors

    def __call__(self, *args: Any, config: HwConfig | str | None = None, **kwargs: Any) -> None:
        """Golden path: run the kernel on numpy arrays; outputs land in the arrays passed."""
        cfg = config if isinstance(config, HwConfig) else load_config(config or "default")
        bound = self.bind(args, kwargs)
        tensors = self.run_golden(cfg, bound)
        for name, t in tensors.items():
            user = bound[name]
            if t.stored and isinstance(user, np.ndarray) and not np.may_share_memory(user, t.data):
                user[...] = unpad(t.data, user.shape)

    def __repr__(self) -> str:
        return f"<kernel {self.name}{self.signature}>"


def kernel(fn: Callable[..., Any]) -> Kernel:
    """Decorator: make ``fn`` a :class:`Kernel`."""
    return Kernel(fn)


def as_kernel(obj: Any) -> Kernel:
    """``obj`` as a Kernel (plain functions are wrapped)."""
    if isinstance(obj, Kernel):
        return obj
    if callable(obj):
        return Kernel(obj)
    raise CompileError(f"{obj!r} is not a kernel function")
