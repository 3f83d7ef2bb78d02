"""Cycles at a clock: the ResNet-18 layer's MACs per second where place and route gave an Fmax.

MACs per second = utilization x peak MACs per cycle x Fmax (= the layer's MACs / its RTL cycles x Fmax),
per config that has both the layer's row in the suite and a routed ECP5 Fmax; nothing is shown for a
config without a routed figure (nextpnr's post-placement estimate is not a clock to quote). The target
on Fmax itself is ``fmax_small_mhz``.
"""

from __future__ import annotations

from typing import Any

from cosim.bench.report import verdict
from cosim.bench.suite import RESNET_LAYER

FMAX_TARGET_MHZ = 100.0
FMAX_CONFIG = "small"


def resnet_layer_rates(rows: list[dict[str, Any]], area: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per config: the ResNet layer's RTL cycles, utilization, peak, the Fmax (MHz or None) and, with an
    Fmax, the layer's time and MACs per second."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        u = r.get("mac_utilization")
        if r["name"] != RESNET_LAYER or not u or not r.get("rtl_cycles"):
            continue
        mhz = ((area.get(r["config"]) or {}).get("fmax") or {}).get("mhz")
        util = u["rtl"]["utilization"]
        e: dict[str, Any] = {"rtl_cycles": r["rtl_cycles"], "macs": u["macs"], "utilization": util,
                             "peak_macs_per_cycle": u["peak_macs_per_cycle"], "fmax_mhz": mhz,
                             "seconds": None, "macs_per_s": None}
        if mhz:
            e["seconds"] = r["rtl_cycles"] / (mhz * 1e6)
            e["macs_per_s"] = util * u["peak_macs_per_cycle"] * mhz * 1e6
        out[r["config"]] = e
    return out


def verdicts(area: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Fmax target: a routed ECP5 Fmax of ``small`` at least 100 MHz (no value when it is absent)."""
    f = (area.get(FMAX_CONFIG) or {}).get("fmax") or {}
    return {"fmax_small_mhz": verdict(">=", FMAX_TARGET_MHZ, f.get("mhz"),
                                      f"ECP5 Fmax of {FMAX_CONFIG} (nextpnr, routed) >= {FMAX_TARGET_MHZ:g} MHz")}


def table_lines(rates: dict[str, dict[str, Any]]) -> list[str]:
    """One line per config with the layer: its MACs per second at the routed Fmax, or why there is none."""
    out = []
    for cfg, e in rates.items():
        base = (f"ResNet-18 layer on {cfg}: {e['rtl_cycles']:,} cycles, {100 * e['utilization']:.1f} % of "
                f"{e['peak_macs_per_cycle']} MACs/cycle")
        if e["macs_per_s"] is None:
            out.append(f"{base}; MACs per second need a routed Fmax of {cfg} (none)")
        else:
            out.append(f"{base} x {e['fmax_mhz']:.1f} MHz = {e['macs_per_s'] / 1e9:.2f} GMAC/s "
                       f"({e['seconds'] * 1e3:.1f} ms)")
    return out
