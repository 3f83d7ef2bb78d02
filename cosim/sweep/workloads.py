"""A sweep's workloads compiled for one config: the Program, how to check its outputs, its MACs.

Three kinds (:class:`cosim.sweep.spec.Workload`):

* ``example``: a registered example kernel (``compiler.examples``) with params over its defaults;
* ``operator``: a GEMM operator (``compiler.gemm_ops.GEMM_OPERATORS``) with its shape params,
  compiled through the first example of that operator (which gives the defaults of the params
  not given, the random inputs and the golden outputs);
* ``network``: a shipped network (``compiler.networks``) on its first N test images, one batch
  (``cosim.network_run.make_net_case``), checked against the plain numpy reference logits.

``macs`` is the useful work by the operator's definition (M*K*N, or per output pixel C*k*k, the
network's layers), not what the MAC array did on padded blocks (``gemm_ops`` x peak, from the
counters); None for an elementwise kernel. A workload that cannot be compiled for a config
(tiles that do not fit its buffers, tensors that do not fit its DRAM) raises a ValueError
(``compiler.errors.CompileError``): the point is invalid.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from hw.config import HwConfig
from hw.program import Program


@dataclass(frozen=True)
class Workload:
    """One workload: an example kernel, a GEMM operator or a network, with its parameters."""

    label: str
    kind: str  # "example", "operator" or "network"
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    images: int | None = None  # networks: the batch
    # params set from the base config's defaults, not by the user (a default that follows the point's
    # config, e.g. a row operator's shape from n, still follows them)
    pinned: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"label": self.label, "kind": self.kind, "name": self.name, "params": self.params}
        if self.images is not None:
            d["images"] = self.images
        if self.pinned:
            d["from_base"] = list(self.pinned)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Workload:
        """The workload :meth:`to_dict` wrote."""
        return cls(d["label"], d["kind"], d["name"], dict(d.get("params") or {}), d.get("images"),
                   tuple(d.get("from_base") or ()))

    @property
    def given(self) -> dict[str, Any]:
        """The params the user gave."""
        return {k: v for k, v in self.params.items() if k not in self.pinned}

    @property
    def digest(self) -> str:
        """A short hash of what the workload is (a changed param gives a new resume key)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:8]


@dataclass
class BuiltWorkload:
    """A workload compiled for one config."""

    program: Program
    check: Callable[[dict[str, np.ndarray]], str | None]  # a run's output regions -> first mismatch or None
    macs: int | None
    params: dict[str, Any] | None = None  # an example's every param on this config (JSON values); None: a network


def operator_example(op: str) -> str:
    """The first registered example of GEMM operator ``op`` (its params are the operator's)."""
    from compiler.examples import EXAMPLES
    from compiler.gemm_ops import GEMM_OPERATORS

    if op not in GEMM_OPERATORS:
        raise ValueError(f"unknown GEMM operator '{op}' (operators: {', '.join(GEMM_OPERATORS)})")
    for ex in EXAMPLES.values():
        if ex.gemm == op:
            return ex.name
    raise ValueError(f"GEMM operator '{op}' has no registered example to take its params from")


def check_workload(w: Workload) -> Workload:
    """``w`` with its params typed, or a ValueError (one line) for a workload whose name, parameter names or
    a value's type is wrong (before any point runs); a value that does not fit a config is checked per point
    (an invalid point rather than a bad spec)."""
    if w.kind == "network":
        from cosim.network_run import count_test_images, get_network

        net = get_network(w.name)
        if w.params:
            raise ValueError(f"network '{w.name}' takes no params (only images:)")
        n = count_test_images(net)
        if w.images is not None and w.images > n:
            raise ValueError(f"images: network '{w.name}' has {n} test images (give 1..{n})")
        return w
    from compiler.examples import EXAMPLES, check_gemm_params, get_example
    from compiler.params import typed_value

    name = operator_example(w.name) if w.kind == "operator" else w.name
    if w.kind == "example" and (":" in name or name not in EXAMPLES):
        why = "not a path.py:function kernel" if ":" in name else f"not '{name}' (examples: {', '.join(EXAMPLES)})"
        raise ValueError(f"a sweep takes a registered example (cosim list), {why}")
    ex = get_example(name)
    unknown = [k for k in w.params if k not in ex.params]
    if unknown:
        what = f"operator '{w.name}'" if w.kind == "operator" else f"example '{name}'"
        raise ValueError(f"{what} has no param '{unknown[0]}' (params: {', '.join(ex.params)})")
    typed = {k: typed_value(k, v, ex.params[k]) for k, v in w.params.items()}
    if ex.gemm:
        check_gemm_params(typed)
    return replace(w, params={k: _json(v) for k, v in typed.items()})


def with_base_defaults(w: Workload, base: HwConfig) -> Workload:
    """``w`` with the example's defaults for the base config made explicit where an example sets them per
    config (vadd's smaller tile on ``small``, ...): a default chosen by each point's config would make the
    points run different work, so every point gets the base's."""
    if w.kind == "network":
        return w
    from compiler.examples import get_example

    ex = get_example(operator_example(w.name) if w.kind == "operator" else w.name)
    # the base's defaults as they are set, not as they follow the base (a tile shrunk to fit its accumulator):
    # each point resolves that for itself; a default that follows a given param (rows from a given shape)
    # follows it on every point, unpinned
    on_base = ex.defaults_on(base)
    given = _typed(w.params)
    with_given, alone = ex.resolve({**on_base, **given}, given, base), ex.resolve(dict(on_base), {}, base)
    extra = {k: _json(on_base[k]) for k in ex.per_config_keys if k not in w.params and with_given[k] == alone[k]}
    return replace(w, params={**w.params, **extra}, pinned=tuple(extra)) if extra else w


def _json(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _typed(params: dict[str, Any]) -> dict[str, Any]:
    """JSON values as the examples take them: a list (a shape) becomes a tuple."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}


def operator_macs(op: str, p: dict[str, Any]) -> int | None:
    """Useful multiply-accumulates of GEMM operator ``op`` with params ``p`` (None: it multiplies
    nothing, e.g. a residual add through identity weights)."""
    if op in ("matmul", "dense"):
        return int(p["M"]) * int(p["K"]) * int(p["N"])
    if op == "conv2d":
        ho = (p["H"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1
        wo = (p["W"] + 2 * p["pad"] - p["kernel"]) // p["stride"] + 1
        return int(p["batch"] * p["O"] * ho * wo * p["C"] * p["kernel"] ** 2)
    if op == "resnet_block":  # two convolutions C -> C, stride 1, 'same' padding
        return int(2 * p["batch"] * p["C"] * p["H"] * p["W"] * p["C"] * p["kernel"] ** 2)
    return None


def build_workload(w: Workload, cfg: HwConfig, seed: int) -> BuiltWorkload:
    """Compile ``w`` for ``cfg`` with seeded random inputs (a ValueError: it does not fit)."""
    from cosim import models

    if w.kind == "network":
        from cosim.network_run import get_network, make_net_case

        case = make_net_case(get_network(w.name), cfg, int(w.images or 1))
        layers = case.program.meta.get("network", {}).get("layers", [])
        return BuiltWorkload(case.program, lambda outs: case.mismatch(case.logits(outs)),
                             sum(int(ly["macs"]) for ly in layers) or None)
    from compiler.examples import get_example

    name = operator_example(w.name) if w.kind == "operator" else w.name
    ex = get_example(name)
    # every param set here (the given and the pinned), those that follow the config resolved for this point
    params = ex.resolve({**ex.defaults_on(cfg), **_typed(w.params)}, _typed(w.given), cfg)
    job = models.make_job(name, cfg, params, seed)
    macs = operator_macs(ex.gemm, params) if ex.gemm else None

    def check(outs: dict[str, np.ndarray]) -> str | None:
        mm = models.first_mismatch(job.expected, outs)
        return None if mm is None else str(mm)

    return BuiltWorkload(job.program, check, macs, {k: _json(v) for k, v in params.items()})
