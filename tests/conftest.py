"""Shared fixtures: the shipped configs."""

from __future__ import annotations

import pytest

from hw.config import list_configs, load_config

CONFIG_NAMES = list_configs()
# the configs of one core: the tests that build one instruction stream by hand run on these; the
# several-core configs (quad, small2) run the compiled examples (test_tlm_examples, test_tlm_vs_rtl,
# the regression) and the tests of several cores (tests/test_cores*.py)
SINGLE_CORE = [n for n in CONFIG_NAMES if load_config(n).num_cores == 1]


@pytest.fixture(params=SINGLE_CORE)
def cfg(request):
    """Every shipped one-core hardware config in turn."""
    return load_config(request.param)
