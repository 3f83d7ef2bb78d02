"""The sweep spec: a small YAML or JSON file, validated into a :class:`SweepSpec`.

```yaml
name: example                 # optional (default: the file's stem); names the output folder
base: small                   # the config every point derives from: a name or a JSON path
parameters:                   # config keys (hw/config.py) and their values: the grid is the product
  block: [8, 16]              # aliases: lanes = block, cores = num_cores
  bus_width: [64, 128]
  buffers:                    # a list of mappings sets several keys together (any label)
    - {acc_depth: 64, inp_depth: 64}
    - {acc_depth: 256, inp_depth: 256}
sample: {count: 8, seed: 1}   # optional: a random sample of the grid's configs instead of all
workloads:                    # each point of the grid runs every workload
  - example: vadd             # an example kernel (cosim list) with params over its defaults
    params: {shape: [64, 16], tile: 8}
  - operator: matmul          # a GEMM operator (compiler/gemm_ops.py) with its shape params
    params: {M: 32, K: 64, N: 32}
  - network: digits           # a shipped network on its first N test images, one batch
    images: 4
  # optional 'name:' on a workload labels it (needed when two share an example/operator)
rtl: none                     # none | all | {sample: N, seed: S}: RTL runs (TLM-vs-RTL error)
area: {target: ecp5, metric: luts, timeout: 300}   # or: none
seed: 0                       # the random inputs' seed
timeout: 600                  # seconds per point task (compile + TLM, + RTL when asked)
```

A value out of a config key's range is not an error of the spec: that point is *invalid*, with
hw/config.py's one-line reason. A wrong type, an unknown key, an unknown workload or a bad
parameter name is: :class:`SpecError`, one line naming the file and the key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hw.config import (OPTIONAL_KEYS, ConfigError, DuplicateKeyError, HwConfig, config_path, list_configs, load_config,
                       parse_config, unique_keys)
from cosim.sweep.workloads import Workload, check_workload, with_base_defaults

# The grid is expanded in full: beyond this many configs a spec must sample it.
MAX_CONFIGS = 10_000
ALIASES = {"lanes": "block", "cores": "num_cores"}
AREA_TARGETS = ("ecp5", "generic", "xilinx")
# The area columns a metric may name (hw.synth.AreaCounts, per target: luts is None on generic)
AREA_COLUMNS = ("luts", "ffs", "brams", "lutrams", "multipliers", "memory_bits", "cells", "latches")
DEFAULT_AREA_TIMEOUT = 300.0
DEFAULT_TASK_TIMEOUT = 600.0
_LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TOP_KEYS = ("name", "base", "parameters", "sample", "workloads", "rtl", "area", "seed", "timeout")


class SpecError(ValueError):
    """A sweep spec that cannot be read or is not valid (one line: file, key, problem)."""


@dataclass(frozen=True)
class ConfigPoint:
    """One config of the sweep: the swept values, the config they make, or why it is invalid."""

    key: str                   # a hash of every hardware number (valid or not): the resume key
    values: dict[str, Any]     # parameter label -> its value here (a mapping for linked keys)
    overrides: dict[str, int]  # config key -> value set on the base
    config: HwConfig | None    # None when hw/config.py rejects it
    reason: str | None = None  # that rejection, one line

    @property
    def name(self) -> str:
        return self.config.name if self.config is not None else f"sweep-{self.key}"


@dataclass(frozen=True)
class RtlChoice:
    """Which points also run on the RTL: none, all, or a seeded random sample of the valid ones."""

    mode: str  # "none", "all", "sample"
    count: int = 0
    seed: int = 0


@dataclass(frozen=True)
class AreaChoice:
    """How area is measured: synthesis target, the metric the front uses, the synthesis bound."""

    target: str = "ecp5"
    metric: str | dict[str, float] = "luts"
    timeout: float = DEFAULT_AREA_TIMEOUT
    enabled: bool = True

    @property
    def metric_label(self) -> str:
        """The metric in words: ``luts`` or ``1*luts + 1152*brams``."""
        if isinstance(self.metric, str):
            return self.metric
        return " + ".join(f"{w:g}*{k}" for k, w in self.metric.items())


@dataclass
class SweepSpec:
    """A validated sweep spec (module docstring)."""

    name: str
    path: Path
    base: HwConfig
    parameters: dict[str, list[Any]]  # label -> values (ints, or mappings key -> int)
    workloads: list[Workload]
    sample: tuple[int, int] | None = None  # (count, seed) of a random sample of the grid
    rtl: RtlChoice = RtlChoice("none")
    area: AreaChoice = AreaChoice()
    seed: int = 0
    timeout: float = DEFAULT_TASK_TIMEOUT

    @property
    def grid_size(self) -> int:
        n = 1
        for vals in self.parameters.values():
            n *= len(vals)
        return n

    def configs(self) -> list[ConfigPoint]:
        """Every config of the sweep (the grid, or its sample), each validated by hw/config.py;
        identical hardware from two value combinations is kept once (the first)."""
        if self.sample is None:
            return self._distinct(range(self.grid_size))
        count, seed = self.sample
        rng = random.Random(seed)
        if self.grid_size <= 4 * MAX_CONFIGS:  # a whole seeded order: every distinct config reachable
            order: Any = rng.sample(range(self.grid_size), self.grid_size)
        else:  # a grid too large to order: indices drawn at random (distinct configs are plenty)
            order = (rng.randrange(self.grid_size) for _ in range(64 * MAX_CONFIGS))
        return self._distinct(order, count)

    def _distinct(self, indices: Any, count: int | None = None) -> list[ConfigPoint]:
        """The configs of grid ``indices`` (up to ``count`` distinct ones), by index; two indices that make one
        hardware give one config (hashed before the config is checked, which costs more)."""
        picked: dict[str, tuple[int, dict[str, Any]]] = {}
        for idx in indices:
            values = self._grid_values(idx)
            key = _hardware_key(self._hardware(values)[1])
            if key not in picked:
                picked[key] = (idx, values)
                if len(picked) == count:
                    break
        return [self._point(values) for _, values in sorted(picked.values(), key=lambda iv: iv[0])]

    def _grid_values(self, idx: int) -> dict[str, Any]:
        """The parameter values at index ``idx`` of the grid (mixed radix, the last parameter fastest)."""
        labels = list(self.parameters)
        values: dict[str, Any] = {}
        for label in reversed(labels):
            idx, k = divmod(idx, len(self.parameters[label]))
            values[label] = self.parameters[label][k]
        return {k: values[k] for k in labels}

    def _hardware(self, values: dict[str, Any]) -> tuple[dict[str, int], dict[str, Any]]:
        """(the config keys ``values`` set, the whole hardware: the base's with them over it)."""
        overrides: dict[str, int] = {}
        for label, v in values.items():
            overrides.update(v if isinstance(v, dict) else {ALIASES.get(label, label): v})
        return overrides, {**self._base_hardware, **overrides}

    @functools.cached_property
    def _base_hardware(self) -> dict[str, Any]:
        return self.base.hardware_dict()

    def _point(self, values: dict[str, Any]) -> ConfigPoint:
        overrides, hw = self._hardware(values)
        key = _hardware_key(hw)
        desc = f"sweep {self.name}: " + ", ".join(f"{k}={v}" for k, v in overrides.items())
        # the hardware of a shipped config keeps its name, so its RTL build (per name and hash) is reused
        name = _shipped_names().get(json.dumps(hw, sort_keys=True), f"sweep-{key}")
        try:
            cfg = parse_config({"name": name, "description": desc, **hw}, f"sweep-{key}")
        except ConfigError as e:
            reason = str(e).split(": ", 1)[-1]  # drop the "sweep-<key>: " source prefix
            return ConfigPoint(key, values, overrides, None, f"config: {reason}")
        return ConfigPoint(key, values, overrides, cfg)


def _hardware_key(hw: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(hw, sort_keys=True).encode()).hexdigest()[:10]


@functools.cache
def _shipped_names() -> dict[str, str]:
    """The shipped configs (hw/configs) by their hardware numbers."""
    return {json.dumps(load_config(n).hardware_dict(), sort_keys=True): n for n in list_configs()}


# ---- reading ------------------------------------------------------------------------------------
def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate the sweep spec at ``path`` (YAML, or JSON by its ``.json`` suffix)."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{p}: {'not a regular file' if p.exists() else 'no such sweep spec file'}")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot be read: {e}") from None
    data = _decode(p, text)
    return parse_spec(data, p)


def _decode(p: Path, text: str) -> Any:
    if p.suffix.lower() == ".json":
        try:
            return json.loads(text, object_pairs_hook=unique_keys)
        except DuplicateKeyError as e:
            raise SpecError(f"{p}: {e}") from None
        except json.JSONDecodeError as e:
            raise SpecError(f"{p}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        except RecursionError:  # nested deeper than the decoder goes: no spec is
            raise SpecError(f"{p}: not a sweep spec (nested too deep)") from None
    import yaml

    try:
        return yaml.load(text, Loader=_unique_key_loader())
    except RecursionError:
        raise SpecError(f"{p}: not a sweep spec (nested too deep)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise SpecError(f"{p}: not valid YAML: {problem}{where}") from None


def _unique_key_loader() -> type:
    """PyYAML's safe loader, refusing a key given twice in one mapping (YAML forbids it; PyYAML
    keeps the last value). Keys brought in by a merge (``<<``) may still be overridden."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: the base constructor says so
                    break
                if duplicate:
                    raise yaml.constructor.ConstructorError(None, None, f"key '{key}' is given twice",
                                                            key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_spec(data: Any, path: str | Path = "<spec>") -> SweepSpec:
    """Validate a decoded spec (module docstring); ``path`` names it in errors and anchors the
    relative path of a base config."""
    p = Path(path)

    def err(key: str, msg: str) -> SpecError:
        return SpecError(f"{p}: key '{key}': {msg}")

    if not isinstance(data, dict):
        raise SpecError(f"{p}: the spec must be a mapping (name, base, parameters, workloads, ...), got "
                        f"{type(data).__name__}")
    unknown = [k for k in data if k not in _TOP_KEYS]
    if unknown:
        raise SpecError(f"{p}: unknown key '{unknown[0]}' (known keys: {', '.join(_TOP_KEYS)})")
    name = data.get("name", p.stem)
    if not isinstance(name, str) or not _LABEL_RE.match(name):
        raise err("name", f"{name!r} must be letters, digits, '.', '-' or '_' (it names the output folder)")
    base = _base(data.get("base", "default"), p, err)
    params = _parameters(data.get("parameters"), base, err)
    workloads = [with_base_defaults(w, base) for w in _workloads(data.get("workloads"), err)]
    spec = SweepSpec(name, p, base, params, workloads, _sample(data.get("sample"), err),
                     _rtl(data.get("rtl", "none"), err), _area(data.get("area"), err),
                     _int(data.get("seed", 0), "seed", 0, 2**32 - 1, err),
                     _seconds(data.get("timeout", DEFAULT_TASK_TIMEOUT), "timeout", err))
    if spec.sample is None and spec.grid_size > MAX_CONFIGS:
        raise err("parameters", f"the grid has {spec.grid_size:,} configs, more than {MAX_CONFIGS:,}: add "
                                f"'sample: {{count: N}}' to sweep a random sample of it")
    return spec


def _int(v: Any, key: str, lo: int, hi: int, err: Any) -> int:
    if not _is_int(v) or not lo <= v <= hi:
        raise err(key, f"{v!r} must be an integer {lo}..{hi}")
    return int(v)


def _seconds(v: Any, key: str, err: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 86400:
        raise err(key, f"{v!r} must be a number of seconds in (0, 86400]")
    return float(v)


def _base(v: Any, p: Path, err: Any) -> HwConfig:
    if not isinstance(v, str) or not v:
        raise err("base", f"{v!r} must be a config name (hw/configs) or a JSON file path")
    target: str | Path = v
    if config_path(v) == Path(v) and not Path(v).is_absolute() and (p.parent / v).is_file():
        target = p.parent / v  # a relative path: next to the spec first, else from the working folder
    try:
        return load_config(target)
    except ConfigError as e:
        raise err("base", str(e)) from None


def _parameters(v: Any, base: HwConfig, err: Any) -> dict[str, list[Any]]:
    keys = list(base.hardware_dict())
    keys += [k for k in OPTIONAL_KEYS if k not in keys]  # left out of hardware_dict at their default
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise err("parameters", f"must be a mapping of config keys to lists of values, got {type(v).__name__}")
    out: dict[str, list[Any]] = {}
    set_by: dict[str, str] = {}

    def claim(key: str, label: str, where: str) -> None:
        if key not in keys:
            raise err(where, f"'{key}' is not a config key (config keys: {', '.join(keys)}; aliases: "
                             f"{', '.join(f'{a}={b}' for a, b in ALIASES.items())})")
        if set_by.setdefault(key, label) != label:
            raise err(where, f"config key '{key}' is also set by parameter '{set_by[key]}'")

    for label, vals in v.items():
        where = f"parameters.{label}"
        if not isinstance(label, str):
            raise err("parameters", f"parameter name {label!r} must be a string")
        if not isinstance(vals, list) or not vals:
            raise err(where, f"must be a non-empty list of values, got {vals!r}")
        if all(isinstance(x, dict) for x in vals):  # linked keys
            for k, m in enumerate(vals):
                if not m:
                    raise err(f"{where}[{k}]", "an empty mapping sets nothing")
                for key, x in m.items():
                    claim(ALIASES.get(key, key), label, f"{where}[{k}].{key}")
                    if not _is_int(x):
                        raise err(f"{where}[{k}].{key}", f"{x!r} must be an integer")
            out[label] = [{ALIASES.get(key, key): x for key, x in m.items()} for m in vals]
        else:
            claim(ALIASES.get(label, label), label, where)
            bad = next((x for x in vals if not _is_int(x)), None)
            if bad is not None:
                raise err(where, f"{bad!r} must be an integer (or every value a mapping of config keys)")
            out[label] = list(dict.fromkeys(vals))  # a repeated value is one point
    return out


def _sample(v: Any, err: Any) -> tuple[int, int] | None:
    if v is None:
        return None
    if _is_int(v):
        v = {"count": v}
    if not isinstance(v, dict) or set(v) - {"count", "seed"} or "count" not in v:
        raise err("sample", f"{v!r} must be a count or a mapping {{count: N, seed: S}}")
    return (_int(v["count"], "sample.count", 1, MAX_CONFIGS, err), _int(v.get("seed", 0), "sample.seed", 0,
                                                                         2**32 - 1, err))


def _is(v: Any, *words: Any) -> bool:
    """Whether ``v`` is one of ``words`` by type as well as value (``1 == True`` in Python: a count of 1
    is not "all", nor 0 "none")."""
    return any(type(v) is type(w) and v == w for w in words)


def _rtl(v: Any, err: Any) -> RtlChoice:
    if _is(v, "none", None, False):
        return RtlChoice("none")
    if _is(v, "all", True):
        return RtlChoice("all")
    if _is_int(v):
        v = {"sample": v}
    if not isinstance(v, dict) or set(v) - {"sample", "seed"} or "sample" not in v:
        raise err("rtl", f"{v!r} must be none, all, or {{sample: N, seed: S}}")
    return RtlChoice("sample", _int(v["sample"], "rtl.sample", 1, 1_000_000, err),
                     _int(v.get("seed", 0), "rtl.seed", 0, 2**32 - 1, err))


def _area(v: Any, err: Any) -> AreaChoice:
    if _is(v, "none", False):
        return AreaChoice(enabled=False)
    if v is None:
        return AreaChoice()
    if not isinstance(v, dict) or set(v) - {"target", "metric", "timeout"}:
        raise err("area", f"{v!r} must be none or a mapping with target, metric, timeout")
    target = v.get("target", "ecp5")
    if target not in AREA_TARGETS:
        raise err("area.target", f"{target!r} is not a synthesis target ({', '.join(AREA_TARGETS)})")
    metric = v.get("metric", "luts" if target != "generic" else "cells")
    cols = [metric] if isinstance(metric, str) else list(metric) if isinstance(metric, dict) else [None]
    for c in cols:
        if c not in AREA_COLUMNS:
            raise err("area.metric", f"{c!r} is not an area column ({', '.join(AREA_COLUMNS)}); give one, or a "
                                     f"mapping of columns to weights")
    if target == "generic" and "luts" in cols:
        raise err("area.metric", "the generic target maps to gates, not LUTs: use cells")
    if isinstance(metric, dict):
        for c, w in metric.items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                raise err(f"area.metric.{c}", f"{w!r} must be a non-negative number (a weight)")
        metric = {c: float(w) for c, w in metric.items()}
    return AreaChoice(target, metric, _seconds(v.get("timeout", DEFAULT_AREA_TIMEOUT), "area.timeout", err))


def _workloads(v: Any, err: Any) -> list[Workload]:
    if not isinstance(v, list) or not v:
        raise err("workloads", "must be a non-empty list (each: example:, operator: or network:)")
    out: list[Workload] = []
    for k, w in enumerate(v):
        out.append(_workload(w, f"workloads[{k}]", err))
    labels = [w.label for w in out]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise err("workloads", f"two workloads are labelled '{dup}': give each a distinct 'name:'")
    return out


_KINDS = ("example", "operator", "network")


def _workload(w: Any, where: str, err: Any) -> Workload:
    if not isinstance(w, dict):
        raise err(where, f"must be a mapping with one of {', '.join(_KINDS)}, got {w!r}")
    kinds = [k for k in _KINDS if k in w]
    if len(kinds) != 1:
        raise err(where, f"must have exactly one of {', '.join(_KINDS)} (got {', '.join(kinds) or 'none'})")
    kind = kinds[0]
    allowed = {kind, "name", "params"} | ({"images"} if kind == "network" else set())
    extra = [x for x in w if x not in allowed]
    if extra:
        raise err(f"{where}.{extra[0]}", f"unknown key for a{'n' if kind[0] in 'eo' else ''} {kind} workload "
                                         f"(known: {', '.join(sorted(allowed))})")
    name = w[kind]
    if not isinstance(name, str) or not name:
        raise err(f"{where}.{kind}", f"{name!r} must be a name")
    label = w.get("name", name)
    if "name" not in w and isinstance(label, str) and not _LABEL_RE.match(label):  # a path given as the workload
        raise err(where, f"give it a name: (letters, digits, '.', '-' or '_'; it names a plot file): its {kind} "
                         f"{label!r} cannot be one")
    if not isinstance(label, str) or not _LABEL_RE.match(label):
        raise err(f"{where}.name", f"{label!r} must be letters, digits, '.', '-' or '_' (it names a plot file)")
    params = w.get("params", {})
    if not isinstance(params, dict):
        raise err(f"{where}.params", f"must be a mapping of parameter names to values, got {params!r}")
    images = None
    if kind == "network":
        images = _int(w.get("images", 8), f"{where}.images", 1, 65535, err)
    try:
        return check_workload(Workload(label, kind, name, dict(params), images))
    except ValueError as e:
        raise err(where, str(e).splitlines()[0]) from None
