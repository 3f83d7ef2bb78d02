"""Shared fixtures (the shipped configs) and the ``long`` marker."""

from __future__ import annotations

import os

import pytest

from hw.config import list_configs, load_config

CONFIG_NAMES = list_configs()
# the configs of one core: the tests that build one instruction stream by hand run on these; the
# several-core configs (quad, small2) run the compiled examples (test_tlm_examples, test_tlm_vs_rtl,
# the regression) and the tests of several cores (tests/test_cores*.py)
SINGLE_CORE = [n for n in CONFIG_NAMES if load_config(n).num_cores == 1]

# `make test` must stay well under 20 minutes on 2 cores: a test that needs a simulator build of its own
# or minutes of simulation is marked ``@pytest.mark.long("why")`` and runs with COSIM_LONG=1 (`make test-long`).
LONG_ENV = "COSIM_LONG"


def long_tests_enabled() -> bool:
    """Whether this run includes the tests marked ``long`` (env COSIM_LONG set and not "0")."""
    return os.environ.get(LONG_ENV, "") not in ("", "0")


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``long`` marker."""
    config.addinivalue_line("markers", f"long(why): too long for `make test`; runs with {LONG_ENV}=1 (make test-long)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``long`` tests, with their reason, unless COSIM_LONG is set."""
    if long_tests_enabled():
        return
    for item in items:
        mark = item.get_closest_marker("long")
        if mark is not None:
            why = mark.args[0] if mark.args else "long"
            item.add_marker(pytest.mark.skip(reason=f"{why}; runs with {LONG_ENV}=1 (make test-long)"))


@pytest.fixture(params=SINGLE_CORE)
def cfg(request):
    """Every shipped one-core hardware config in turn."""
    return load_config(request.param)
