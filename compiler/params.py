"""Kernel parameters from text: the one parser behind every command's ``-p KEY=VALUE``.

A value is typed by the parameter's default (``compiler.examples``): a shape
(``64``, ``4x3x33`` or ``4,3,33``, every dimension a positive integer), an integer
(decimal or ``0x..``; ``auto``/``none`` where the default is None and for ``tile``),
or text. A user kernel's parameters have no defaults: ``DIMxDIM...[:DTYPE]`` is a
tensor (a one-dimensional one needs the dtype, e.g. ``64:int32``), ``@file.npy`` or
``@file.npz:NAME`` is a tensor with its data (shape and dtype from the array), an
integer is a constant, anything else stays text. Every error is one
:class:`ParamError` line naming the parameter.
"""

from __future__ import annotations

import math
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Mapping

import numpy as np

from compiler.errors import CompileError
from compiler.symbolic import SymbolicError, Var, var
from compiler.tensor import TensorSpec
from hw.npz_file import NpzError, read_npz
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


@dataclass(frozen=True, eq=False)
class TensorData:
    """A tensor parameter given with its data (``-p NAME=@file.npy``): the spec and the array."""

    spec: TensorSpec
    array: np.ndarray
    source: str


def load_tensor_file(text: str, key: str, mark: str = "@") -> TensorData:
    """``"@x.npy"`` or ``"@w.npz:name"`` (a ``.npz`` with one array needs no name) -> its array, which must
    be of a DRAM dtype (int8, int16, int32). ``mark`` is what comes before the file name (an option that
    takes only files has none), as the error lines quote it."""
    ref = text.strip()[len(mark):]
    path, member = ref, ""
    if ".npz:" in ref:
        path, member = ref.split(".npz:", 1)
        path += ".npz"
    if not path.endswith((".npy", ".npz")):
        raise ParamError(f"param '{key}': '{text.strip()}' is not {mark}FILE.npy or {mark}FILE.npz[:NAME]")
    p = Path(path)
    if not p.is_file():
        raise ParamError(f"param '{key}': no such file {path}")
    try:
        if path.endswith(".npy"):
            a = np.load(p, allow_pickle=False)
            if not isinstance(a, np.ndarray):  # np.load reads an .npz archive whatever its name
                a.close()
                raise ParamError(f"param '{key}': {path} is an .npz archive, not a single .npy array (rename "
                                 f"it .npz)")
        else:
            arrays = read_npz(p)
            names = list(arrays)
            if not member and len(names) != 1:
                raise ParamError(f"param '{key}': {path} holds {len(names)} arrays "
                                 f"({', '.join(names) or 'none'}): write {mark}{path}:NAME")
            name = member or names[0]
            if name not in names:
                raise ParamError(f"param '{key}': {path} has no array '{name}' (it has {', '.join(names)})")
            a = arrays[name]
    except ParamError:
        raise
    except NpzError as e:
        raise ParamError(f"param '{key}': {e}") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ParamError(f"param '{key}': cannot read {path} as numpy data ({type(e).__name__}: {e})") from None
    dt = str(a.dtype)
    if dt not in DTYPES:
        raise ParamError(f"param '{key}': {ref} holds {dt} data; DRAM tensors are {', '.join(DTYPES)} "
                         f"(convert it, e.g. np.save(path, x.astype(np.int8)))")
    if a.ndim == 0 or a.size == 0:
        raise ParamError(f"param '{key}': {ref} holds an empty or scalar array of shape {a.shape} (a tensor needs "
                         f"at least one element)")
    return TensorData(TensorSpec(tuple(int(s) for s in a.shape), dt), np.ascontiguousarray(a), ref)


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


def _ascii_digits(key: str, text: str) -> None:
    """Refuse digits of other scripts (``int`` and ``float`` would read them): numbers are written 0-9."""
    if any(ch.isdigit() and not ch.isascii() for ch in text):
        raise ParamError(f"param '{key}': {text.strip()!a} has a digit that is not 0-9")


def parse_value(key: str, text: str, default: Any) -> Any:
    """``text`` typed like the parameter's ``default``."""
    _ascii_digits(key, text)
    if key == "shape" or isinstance(default, tuple):
        return parse_shape(text, key)
    if isinstance(default, bool):
        t = text.strip().lower()
        if t not in ("true", "false", "1", "0"):
            raise ParamError(f"param '{key}': '{text}' is not true or false")
        return t in ("true", "1")
    if default is None or isinstance(default, int):
        return parse_int(text, key, none_ok=default is None or key in AUTO_PARAMS)
    if isinstance(default, float):
        return parse_float(text, key)
    return text


def typed_value(key: str, value: Any, default: Any) -> Any:
    """A parameter's value from a YAML or JSON file (already a number, a list, ...) checked like the text of
    ``-p`` by :func:`parse_value`: the same type as ``default`` (a shape: a list of positive integers)."""
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ParamError(f"param '{key}': {value!r} is not text")
        return value
    shape = key == "shape" or isinstance(default, tuple)
    if isinstance(value, (list, tuple)) != shape and not (shape and _plain_int(value)):  # 64 is the shape (64,)
        raise ParamError(f"param '{key}': {value!r} is not {_kind_of(key, default)}")
    if isinstance(value, (list, tuple)):
        text = "x".join(str(v) if _plain_int(v) else "?" for v in value) or "?"
    elif value is None:
        text = "none"
    elif isinstance(value, bool):
        text = "true" if value else "false"
        if not isinstance(default, bool):
            raise ParamError(f"param '{key}': {value!r} is not {_kind_of(key, default)}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ParamError(f"param '{key}': {value!r} is not {_kind_of(key, default)}")
    elif isinstance(value, (int, float)):
        text = str(value)
    elif isinstance(value, str) and value.strip().lower() in _NONE_WORDS and (default is None or key in AUTO_PARAMS):
        text = value  # tile: auto, as -p takes it
    else:
        raise ParamError(f"param '{key}': {value!r} is not {_kind_of(key, default)}")
    try:
        return parse_value(key, text, default)
    except ParamError:
        raise ParamError(f"param '{key}': {value!r} is not {_kind_of(key, default)}") from None


def param_text(v: Any) -> str:
    """A param's value as ``-p KEY=VALUE`` writes it (the inverse of :func:`parse_value`): a shape ``4x3``,
    None ``auto``."""
    if isinstance(v, (tuple, list)):
        return "x".join(str(s) for s in v)
    return "auto" if v is None else str(v)


def _plain_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _kind_of(key: str, default: Any) -> str:
    if key == "shape" or isinstance(default, tuple):
        return "a shape (a list of positive integers)"
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, float):
        return "a number"
    if default is None or key in AUTO_PARAMS:
        return "an integer, auto or null"
    return "an integer"


def parse_float(text: str, key: str) -> float:
    """A real number (``0.0123``, ``1e-3``)."""
    try:
        return float(text.strip())
    except ValueError:
        raise ParamError(f"param '{key}': '{text.strip()}' is not a number") from None


def parse_user_value(key: str, text: str) -> Any:
    """A user kernel's parameter: a tensor (``DIMxDIM[:DTYPE]``), an integer constant, or text."""
    t = text.strip()
    if t.startswith("@"):
        return load_tensor_file(t, key)
    _ascii_digits(key, t)
    if re.fullmatch(r"[+-]?(0[xXbBoO])?[0-9a-fA-F_]+", t):
        try:
            return int(t, 0)
        except ValueError:
            pass
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][+-]?\d+)", t):
        return float(t)
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
    if isinstance(value, np.ndarray):  # data given in the file itself
        return load_array(value, key)
    return parse_user_value(key, value) if isinstance(value, str) else value


def load_array(a: np.ndarray, key: str) -> TensorData:
    """A numpy array given as a parameter's value (a ``<function>_params`` default) as a tensor with data."""
    if str(a.dtype) not in DTYPES or a.ndim == 0 or a.size == 0:
        raise ParamError(f"param '{key}': an array of dtype {a.dtype} and shape {a.shape} is not a tensor "
                         f"(DRAM tensors are {', '.join(DTYPES)}, at least one element)")
    return TensorData(TensorSpec(tuple(int(s) for s in a.shape), str(a.dtype)), np.ascontiguousarray(a), "array")


def split_item(item: str) -> tuple[str, str]:
    """``"key=value"`` -> (key, value)."""
    if "=" not in item:
        raise ParamError(f"param '{item}' is not KEY=VALUE")
    k, v = item.split("=", 1)
    k = k.strip()
    if not k.isidentifier():
        raise ParamError(f"param '{item}': '{k}' is not a parameter name")
    return k, v


def parse_items(items: list[str] | None, defaults: Mapping[str, Any] | None, kernel: str,
                flags: Collection[str] = ()) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings. With ``defaults`` (an example's params) only those keys exist and
    each value is typed like its default; without (a user kernel) see :func:`parse_user_value`, except
    the ``flags`` (parameters whose default is True or False), which read true/false/1/0."""
    out: dict[str, Any] = {}
    for it in items or []:
        k, v = split_item(it)
        if k in out:  # the last one would silently win
            raise ParamError(f"param '{k}' is given twice (-p {k}=...)")
        if defaults is None:
            out[k] = parse_value(k, v, False) if k in flags else parse_user_value(k, v)
            continue
        if k not in defaults:
            raise ParamError(f"example '{kernel}' has no param '{k}' (params: {', '.join(defaults)})")
        out[k] = parse_value(k, v, defaults[k])
    return out


# ASCII only: a name or digits of another script would read as a different text in the folder's meta
_RANGE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:([0-9]+)\s*\.\.\s*)?([0-9]+)\s*$")


def parse_var(text: str) -> Var:
    """``NAME=MAX`` or ``NAME=MIN..MAX`` (``--var``) as a variable; anything else is one line."""
    m = _RANGE.match(text)
    if not m:
        raise ParamError(f"--var {text!r}: expected NAME=MAX or NAME=MIN..MAX (e.g. n=64, n=8..64)")
    try:
        return var(m.group(1), max=int(m.group(3)), min=int(m.group(2)) if m.group(2) is not None else 1)
    except SymbolicError as e:
        raise ParamError(f"--var {text!r}: {e}") from None
