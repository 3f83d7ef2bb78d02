"""The benchmark's clock lines (cosim/bench/clock.py): the ResNet layer's MACs per second come from the
routed Fmax and the RTL's cycles, never from a placement estimate, and the Fmax target has no value
while the Fmax is absent."""

from __future__ import annotations

from typing import Any

import pytest

from cosim.bench import clock
from cosim.bench.suite import RESNET_LAYER
from hw.config import load_config


def _row(config: str, cycles: int, gemm_ops: int) -> dict[str, Any]:
    peak = load_config(config).macs_per_cycle
    util = gemm_ops / cycles
    return {"config": config, "name": RESNET_LAYER, "rtl_cycles": cycles,
            "mac_utilization": {"macs": gemm_ops * peak, "peak_macs_per_cycle": peak,
                                "rtl": {"macs_per_cycle": util * peak, "utilization": util},
                                "tlm": {"macs_per_cycle": util * peak, "utilization": util}}}


def test_macs_per_second_from_a_routed_fmax_only() -> None:
    rows = [_row("small", 4_000_000, 3_000_000), _row("default", 500_000, 450_000),
            {"config": "small", "name": "vadd", "rtl_cycles": 10, "mac_utilization": None}]
    area = {"small": {"fmax": {"mhz": 50.0, "placed_mhz": 60.0}},
            "default": {"fmax": {"mhz": None, "placed_mhz": 40.0, "status": "absent: routing ..."}}}
    rates = clock.resnet_layer_rates(rows, area)
    assert set(rates) == {"small", "default"}
    s, d = rates["small"], rates["default"]
    macs = 3_000_000 * load_config("small").macs_per_cycle
    assert s["macs_per_s"] == pytest.approx(macs / 4_000_000 * 50e6) and s["seconds"] == pytest.approx(0.08)
    assert d["fmax_mhz"] is None and d["macs_per_s"] is None and d["seconds"] is None
    lines = clock.table_lines(rates)
    assert "x 50.0 MHz" in lines[0] and "80.0 ms" in lines[0] and "75.0 %" in lines[0]
    assert "need a routed Fmax of default (none)" in lines[1]


def test_fmax_target_is_absent_without_a_routed_figure() -> None:
    assert clock.verdicts({})["fmax_small_mhz"]["met"] is None
    absent = {"small": {"fmax": {"mhz": None, "placed_mhz": 19.9}}}
    assert clock.verdicts(absent)["fmax_small_mhz"]["value"] is None
    assert clock.verdicts({"small": {"fmax": {"mhz": 99.9}}})["fmax_small_mhz"]["met"] is False
    assert clock.verdicts({"small": {"fmax": {"mhz": 100.0}}})["fmax_small_mhz"]["met"] is True
