"""Kernel parameters from text: the one parser behind every command's ``-p KEY=VALUE``.

A value is typed by the parameter's default (``compiler.examples``): a shape
(``64``, ``4x3x33`` or ``4,3,33``, every dimension a positive integer), an integer
(decimal or ``0x..``; ``auto``/``none`` where the default is None and for ``tile``),
or text. A user kernel's parameters have no defaults: ``DIMxDIM...[:DTYPE]`` is a
tensor (a one-dimensional one needs the dtype, e.g. ``64:int32``), an integer is a
constant, anything else stays text. Every error is one :class:`ParamError` line
naming the parameter.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from compiler.errors import CompileError
from compiler.tensor import TensorSpec
from hw.program import DTYPES


class ParamError(CompileError):
    """A ``-p KEY=VALUE`` that cannot be parsed or does not fit its parameter."""


_DIMS = r"[+-]?\d+(?:\s*[x,]\s*[+-]?\d+)*"
_SHAPE = re.compile(rf"^\s*({_DIMS})\s*$")
_TENSOR = re.compile(rf"^\s*({_DIMS})\s*(?::\s*(\w*)\s*)?$")
_NONE_WORDS = ("auto", "none")
# Parameters whose None means "the compiler chooses" (e.g. the tile size): ``auto`` is always valid.
AUTO_PARAMS = ("tile",)


def parse_shape(text: str, key: str = "shape") -> tuple[int, ...]:
    """``"4x3x33"``, ``"4,3,33"`` or ``"64"`` -> (4, 3, 33) / (64,); every dimension positive."""
    m = _SHAPE.match(text)
    if not m:
        raise ParamError(f"param '{key}': '{text}' is not a shape (write e.g. 4x3x33)")
    return _dims(m.group(1), key, text)


def _dims(dims: str, key: str, text: str) -> tuple[int, ...]:
    shape = tuple(int(s) for s in re.split(r"[x,]", dims.replace(" ", "")))
    if any(s <= 0 for s in shape):
        raise ParamError(f"param '{key}': shape '{text.strip()}' has a dimension <= 0 (every dimension must be a "
                         f"positive integer)")
    return shape


def parse_dtype(text: str, key: str) -> str:
    """A DRAM tensor's element type (``int8``, ``int16``, ``int32``)."""
    dt = text.strip()
    if dt not in DTYPES:
        raise ParamError(f"param '{key}': unknown data type '{dt}' (DRAM tensors are {', '.join(DTYPES)})")
    return dt


def parse_tensor(text: str, key: str) -> TensorSpec:
    """``"4x3x33:int8"`` (dtype int32 when omitted) -> TensorSpec."""
    m = _TENSOR.match(text)
    if not m:
        raise ParamError(f"param '{key}': '{text}' is not a tensor (write DIMxDIM[:DTYPE], e.g. 4x16:int8)")
    dtype = parse_dtype(m.group(2), key) if m.group(2) is not None else "int32"
    return TensorSpec(_dims(m.group(1), key, text), dtype)


def parse_int(text: str, key: str, none_ok: bool = False) -> int | None:
    """An integer (``0x`` / ``0b`` prefixes allowed); ``auto``/``none`` is None when ``none_ok``."""
    t = text.strip()
    if none_ok and t.lower() in _NONE_WORDS:
        return None
    try:
        return int(t, 0)
    except ValueError:
        hint = " or auto" if none_ok else ""
        raise ParamError(f"param '{key}': '{t}' is not an integer{hint}") from None


def parse_value(key: str, text: str, default: Any) -> Any:
    """``text`` typed like the parameter's ``default``."""
    if key == "shape" or isinstance(default, tuple):
        return parse_shape(text, key)
    if isinstance(default, bool):
        t = text.strip().lower()
        if t not in ("true", "false", "1", "0"):
            raise ParamError(f"param '{key}': '{text}' is not true or false")
        return t in ("true", "1")
    if default is None or isinstance(default, int):
        return parse_int(text, key, none_ok=default is None or key in AUTO_PARAMS)
    return text


def parse_user_value(key: str, text: str) -> Any:
    """A user kernel's parameter: a tensor (``DIMxDIM[:DTYPE]``), an integer constant, or text."""
    t = text.strip()
    if re.fullmatch(r"[+-]?(0[xXbBoO])?[0-9a-fA-F_]+", t):
        try:
            return int(t, 0)
        except ValueError:
            pass
    if _TENSOR.match(t) or re.match(r"^\s*[+-]?\d+\s*[x,:]", t):
        return parse_tensor(t, key)
    if t.lower() in _NONE_WORDS:
        return None
    return t


def parse_user_default(key: str, value: Any) -> Any:
    """A default from a user kernel file's ``<function>_params``: text that reads as a shape (even a
    bare ``"64"``) is a tensor there, other values are taken as they are."""
    if isinstance(value, str) and _TENSOR.match(value):
        return parse_tensor(value, key)
    return parse_user_value(key, value) if isinstance(value, str) else value


def split_item(item: str) -> tuple[str, str]:
    """``"key=value"`` -> (key, value)."""
    if "=" not in item:
        raise ParamError(f"param '{item}' is not KEY=VALUE")
    k, v = item.split("=", 1)
    k = k.strip()
    if not k.isidentifier():
        raise ParamError(f"param '{item}': '{k}' is not a parameter name")
    return k, v


def parse_items(items: list[str] | None, defaults: Mapping[str, Any] | None, kernel: str) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings. With ``defaults`` (an example's params) only those keys exist and
    each value is typed like its default; without (a user kernel) see :func:`parse_user_value`."""
    out: dict[str, Any] = {}
    for it in items or []:
        k, v = split_item(it)
        if defaults is None:
            out[k] = parse_user_value(k, v)
            continue
        if k not in defaults:
            raise ParamError(f"example '{kernel}' has no param '{k}' (params: {', '.join(defaults)})")
        out[k] = parse_value(k, v, defaults[k])
    return out
