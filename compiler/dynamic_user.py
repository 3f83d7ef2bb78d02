"""A user kernel (``path.py:function``) with a run-time dimension, from the command line.

``cosim compile FILE.py:fn --var n=64 -p X=nx16 -p Y=nx16:int8 -o DIR`` compiles the kernel once for
every ``n`` in 1..64 (:func:`compiler.dynamic.compile_dynamic`). A ``-p`` tensor dimension, or a whole
constant, may be the variable's name; everything else reads as for a static user kernel (and the
file's ``<fn>_params`` defaults apply; one written as text may use the variable as a ``-p`` item does). The folder records the kernel's file, the ``-p`` items and the
variable (``meta.dynamic_kernel``), so ``cosim run DIR --set n=7`` re-creates the kernel's arguments
for 7, makes seeded inputs as a static user kernel without data does (the file's ``<fn>_inputs`` hook,
called with the arguments of 7, else random over each input's dtype) and runs golden on numpy.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from compiler.dynamic import DynamicProgram, compile_dynamic
from compiler.dynamic_examples import DynamicExample, with_maximum_data
from compiler.examples import (USER_INPUT_RANGES, ExampleError, _load_user, _reference_consts, _reference_outputs,
                               _user_inputs, get_example)
from compiler.kernel import reporting_failures
from compiler.params import ParamError, TensorData, parse_dtype, parse_items, parse_user_default, parse_var, split_item
from compiler.symbolic import SymbolicError, Var
from compiler.tensor import TensorSpec
from hw.config import HwConfig
from hw.program import Program

META_KEY = "dynamic_kernel"
def _symbolic_tensor(text: str, key: str, v: Var) -> TensorSpec | None:
    """``text`` as a tensor with the variable among its dimensions (``nx16:int8``), else None."""
    body, colon, dt = text.strip().partition(":")
    s = body.replace(" ", "")
    dims: list[Any] = []
    i = 0
    while i < len(s):
        if s.startswith(v.name, i):  # the variable's name first: a name may hold an 'x'
            dims.append(v)
            i += len(v.name)
        else:
            m = re.match(r"[0-9]+", s[i:])
            if not m:
                return None
            dims.append(int(m.group()))
            i += m.end()
        if i < len(s):
            if s[i] not in "x," or i + 1 == len(s):
                return None
            i += 1
    if not any(d is v for d in dims):
        return None
    if any(d is not v and d <= 0 for d in dims):
        raise ParamError(f"param '{key}': shape '{body}' has a dimension <= 0 (every dimension must be a "
                         f"positive integer or '{v.name}')")
    return TensorSpec(tuple(dims), parse_dtype(dt.strip(), key) if colon else "int32")


def symbolic_args(kernel: str, items: list[str], v: Var) -> dict[str, Any]:
    """The kernel's argument template: its file's defaults, then the ``-p`` items, where a tensor dimension
    or a constant may be the variable ``v``. Data (``@file``, arrays) is refused: its shape cannot follow
    the variable."""
    ex = get_example(kernel)
    keys = [split_item(it)[0] for it in items]
    dup = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
    if dup is not None:
        raise ParamError(f"param '{dup}' is given twice (-p {dup}=...)")
    static: list[str] = []
    sym: dict[str, Any] = {}
    # the file's ``<fn>_params`` defaults written as text may use the variable too (a -p item wins)
    texts = [(None, k, x) for k, x in ex.params.items() if isinstance(x, str) and k not in keys]
    for it, k, text in [(it, k, split_item(it)[1]) for it, k in zip(items, keys)] + texts:
        if text.strip() == v.name:
            sym[k] = v
        elif (spec := _symbolic_tensor(text, k, v)) is not None:
            sym[k] = spec
        elif v.name in re.split(r"[x,:*+\-/()\s]+", text.strip()):
            raise ParamError(f"param '{k}': {text.strip()!r} uses '{v.name}' but is neither '{v.name}' (a constant) "
                             f"nor a shape of positive integers and '{v.name}' (e.g. {v.name}x16 or "
                             f"{v.name}x16:int8)")
        elif it is not None:
            static.append(it)
    if not sym:
        raise ParamError(f"--var {v.name}: no -p parameter uses '{v.name}' (give a dimension as it, e.g. "
                         f"-p X={v.name}x16)")
    given = parse_items(static, None, kernel, ex.user_flags)
    out: dict[str, Any] = {}
    for k, x in {**ex.params, **given}.items():
        if k in sym:
            continue
        x = parse_user_default(k, x)
        if isinstance(x, TensorData):
            raise ParamError(f"param '{k}': a kernel with a run-time dimension takes no input data (its inputs "
                             f"are drawn for each value when it is run)")
        out[k] = x
    return {**out, **sym}


@dataclasses.dataclass(frozen=True)
class UserDynamicExample(DynamicExample):
    """A user kernel as a dynamic example: its inputs come from its file's ``<fn>_inputs`` hook where it
    has one (the static user kernel's rule, :func:`compiler.examples._user_inputs`)."""

    module: ModuleType | None = None

    def inputs(self, cfg: HwConfig, v: int, seed: int = 0) -> dict[str, Any]:
        bound = self.bound(cfg, v)
        specs = {n: a for n, a in bound.items() if isinstance(a, TensorSpec) and n in self.ranges}
        return _user_inputs(self.module, self.name, specs, {}, bound, seed, self.kernel)

    def reference(self, cfg: HwConfig, v: int, inputs: dict[str, np.ndarray],
                  program: Program) -> dict[str, np.ndarray] | None:
        """The outputs of the file's ``<fn>_reference`` for value ``v`` in the user's shapes (None without one),
        as a static user kernel's are checked against golden."""
        ref_fn = getattr(self.module, f"{self.name}_reference", None)
        if not callable(ref_fn):
            return None
        bound = self.bound(cfg, v)
        roles = {r.name: r.role for r in program.regions}
        consts = {n: a for n, a in bound.items() if not isinstance(a, TensorSpec)}
        outs = {n: a for n, a in bound.items() if isinstance(a, TensorSpec)
                and (roles.get(n) == "output" or n in self.in_place)}
        label = f"reference '{self.name}_reference'"
        with reporting_failures(ref_fn, f"{label} at {self.var.name}={v}"):
            # on copies: a reference that updates its argument (X += 3) must not change the inputs
            r = ref_fn(**{n: np.array(a) for n, a in inputs.items()}, **_reference_consts(ref_fn, self.kernel, consts))
        return _reference_outputs(r, ref_fn, label, outs)

    def check_compiles_to(self, cfg: HwConfig, v: int, program: Program, where: str) -> None:
        """Refuse, in one line naming ``where``, a kernel that no longer compiles to ``program`` at value
        ``v`` (its file, or the folder's record of it, changed since the folder was compiled): the models
        would be judged against another kernel's golden outputs."""
        if self.static(cfg, v).insns != program.insns:
            raise ExampleError(f"{where}: the {self.description} (meta.{META_KEY}) no longer compiles to this "
                               f"folder's Program at {self.var.name}={v} (it changed since cosim compile): compile "
                               f"the folder again")


def one_var(values: list[str] | None) -> str | None:
    """The text of the one ``--var`` given (None: none); more than one is one ParamError line."""
    if values is not None and len(values) > 1:
        raise ParamError(f"--var is given {len(values)} times ({', '.join(values)}): a kernel takes one run-time "
                         f"variable")
    return values[0] if values else None


def var_refusal(kernel: str) -> str:
    """Why ``--var`` does not apply to ``kernel`` (neither a dynamic example nor ``path.py:function``)."""
    why = ("a kernel file needs its function: path/to/file.py:function" if kernel.endswith(".py") else
           "no Program folder is there" if "/" in kernel or "\\" in kernel else
           "an example's parameters are fixed when it is compiled")
    return (f"{kernel}: --var is for a dynamic example (a narrower range) or a user kernel (path/to/file.py:function); "
            f"{why}")


def user_dynamic(kernel: str, items: list[str], var_text: str) -> DynamicExample:
    """The user kernel ``path.py:fn`` with the variable of ``--var`` and the ``-p`` items, as a dynamic
    example; its inputs' ranges are set by :func:`with_roles` once the kernel's use of each tensor is known."""
    v = parse_var(var_text)
    k, mod, fn = _load_user(kernel)
    if v.name in k.signature.parameters:
        raise ParamError(f"--var {var_text!r}: '{v.name}' is a parameter of kernel '{fn}'; name the variable "
                         f"otherwise (e.g. n) and give the parameter as it (-p {v.name}=n...)")
    args = symbolic_args(kernel, items, v)
    path = str(Path(kernel.rsplit(":", 1)[0]).resolve())  # the folder may be run from elsewhere
    origin = {META_KEY: {"kernel": f"{path}:{fn}", "params": list(items), "var": var_text}}
    return UserDynamicExample(fn, f"user kernel {kernel}", k, v, lambda cfg: args, {}, origin, module=mod)


def compile_user(ex: DynamicExample, cfg: HwConfig, verify_all: bool = False) -> DynamicProgram:
    """The one Program of :func:`user_dynamic`'s ``ex`` for every value, with the maximum's inputs and
    expected outputs (seed 0) attached, as a dynamic example's."""
    dp = compile_dynamic(ex.kernel, ex.args(cfg), ex.var, cfg, name=ex.name, meta=ex.origin, verify_all=verify_all)
    return with_maximum_data(dp, with_roles(ex, dp.program), cfg)


def with_roles(ex: DynamicExample, prog: Program) -> DynamicExample:
    """``ex`` drawing random inputs (over each dtype's user range) for the tensors ``prog`` loads, and
    checking those it also stores (updated in place) as outputs."""
    args = ex.args(prog.config)
    loaded = [r for r in prog.regions if r.role in ("input", "scratch") and r.name in args]
    return dataclasses.replace(ex, ranges={r.name: USER_INPUT_RANGES[r.dtype] for r in loaded},
                               in_place=tuple(r.name for r in loaded if r.role == "scratch"))


def from_meta(meta: Mapping[str, Any], base: Program, where: str) -> DynamicExample:
    """The dynamic example a folder's ``meta.dynamic_kernel`` records, for ``base`` (its Program); a
    kernel file that is gone or no longer compiles so is one ExampleError line naming ``where``."""
    d = meta.get(META_KEY)
    if not isinstance(d, dict) or not isinstance(d.get("kernel"), str) or not isinstance(d.get("var"), str) \
            or not isinstance(d.get("params"), list) or not all(isinstance(p, str) for p in d["params"]):
        raise ExampleError(f"{where}: meta.{META_KEY} is not {{kernel, params, var}} as cosim compile writes it")
    try:
        return with_roles(user_dynamic(d["kernel"], d["params"], d["var"]), base)
    except (ExampleError, ParamError, SymbolicError) as e:
        raise ExampleError(f"{where}: cannot re-create the kernel of meta.{META_KEY}: {e}") from None
