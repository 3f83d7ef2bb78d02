"""TLM outputs equal the golden outputs for every example kernel on every config."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from hw.config import list_configs, load_config

if importlib.util.find_spec("compiler.examples") is None:  # written in parallel by the compiler engineer
    pytest.skip("compiler/examples.py is not there yet: no example kernels to compare", allow_module_level=True)

from compiler.examples import list_examples, make_case  # noqa: E402
from sim.tlm import run_program  # noqa: E402


def _names() -> list[str]:
    return [e if isinstance(e, str) else getattr(e, "name", str(e)) for e in list_examples()]


@pytest.mark.parametrize("config", list_configs())
@pytest.mark.parametrize("name", _names())
def test_example_matches_golden(name: str, config: str) -> None:
    cfg = load_config(config)
    case = make_case(name, cfg, None, 0)
    prog = case.program
    assert prog.expected, f"{name}: the case carries no golden outputs"
    r = run_program(prog, raise_on_error=False)
    assert r.error is None, r.error
    assert r.cycles and r.cycles > 0
    for k, exp in prog.expected.items():
        got = r.outputs[k]
        assert got.shape == np.asarray(exp).shape and got.dtype == np.asarray(exp).dtype, k
        bad = np.argwhere(got != exp)
        assert len(bad) == 0, f"{name}/{config} output {k}: {len(bad)} elements differ, first at {bad[0].tolist()}"
