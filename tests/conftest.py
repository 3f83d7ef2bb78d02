"""Shared fixtures (the shipped configs) and the ``long`` marker."""

from __future__ import annotations

import os

import pytest

from hw.config import HwConfig, list_configs, load_config

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


# The longest tests of `make test` (a whole-design Verilator build of their own, or minutes of RTL
# simulation), longest first, as node-id prefixes. They run first so that none starts near the end
# and leaves one worker running alone (xdist's work-stealing, `--dist worksteal` in the Makefile,
# balances the rest). Only the order changes: a stale entry moves nothing.
SLOW_FIRST = (
    "tests/test_coverage.py::test_cosim_coverage_small_run",      # two coverage builds (cocotb, raw FSM)
    "tests/test_rtl_regression.py::test_examples[small2-protocol",
    "tests/test_cores_hw.py::test_phases_give_the_neighbours_data_on_every_model",
    "tests/test_tlm_vs_rtl.py::test_cycles_and_counters[quad]",
    "tests/test_cli_hardening.py::test_long_program_runs_to_done_and_failing_waves_stay_bounded",
    "tests/test_rtl_smoke.py::test_examples[protocol]",
    "tests/test_rtl_regression.py::test_examples[wide-fast",
    "tests/test_conv_rows.py::test_the_odd_row_split_takes_as_many_cycles_on_the_rtl_as_on_the_tlm",
    "tests/test_fuzz_multicore.py::test_tlm_vs_rtl_small2",
    "tests/test_fuzz_campaign.py::test_tlm_vs_rtl_fixed_seed",
    "tests/test_alu_pipeline.py::test_rtl_matches_golden_and_tlm_cycles",
    "tests/test_raw_harness.py::test_raw_matches_expected_and_cocotb_cycles",
    "tests/test_mutation.py::test_original_reproduces_golden_and_tlm_and_the_chosen_mutants_die",
    "tests/test_mutation.py::test_directed_variants_kill_the_survivors",
    "tests/test_sweep.py::test_sweep_writes_table_front_and_plots",
)


def slow_first(items: list[pytest.Item], prefixes: tuple[str, ...] = SLOW_FIRST) -> list[pytest.Item]:
    """``items`` with those whose node id starts with one of ``prefixes`` first (in the prefixes' order,
    then collection order), the others after them in collection order."""
    def rank(item: pytest.Item) -> int:
        return next((k for k, p in enumerate(prefixes) if item.nodeid.startswith(p)), len(prefixes))
    return sorted(items, key=rank)  # stable: collection order within a rank


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the :data:`SLOW_FIRST` tests first; skip the ``long`` tests, with their reason, unless COSIM_LONG is set."""
    items[:] = slow_first(items)
    if long_tests_enabled():
        return
    for item in items:
        mark = item.get_closest_marker("long")
        if mark is not None:
            why = mark.args[0] if mark.args else "long"
            item.add_marker(pytest.mark.skip(reason=f"{why}; runs with {LONG_ENV}=1 (make test-long)"))


def posted_writes_config() -> HwConfig:
    """``small`` with 2 read and 3 write bursts in flight: the one-core config of the tests of posted STOREs
    (its builds are shared by the tests that use it; a shipped one-core config holds one burst at a time)."""
    from hw.config import parse_config

    data = {k: v for k, v in load_config("small").to_dict().items() if k != "source"}
    return parse_config({**data, "name": "small-w3", "description": "small with writes in flight",
                         "dram_reads_in_flight": 2, "dram_writes_in_flight": 3})


@pytest.fixture(params=SINGLE_CORE)
def cfg(request):
    """Every shipped one-core hardware config in turn."""
    return load_config(request.param)
