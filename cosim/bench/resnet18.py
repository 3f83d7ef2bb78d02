"""The benchmark's ResNet-18 section: the whole ImageNet-size network (``cosim net resnet18``), one image,
as one Program on one core and on several: the per-layer table by VTA workload, VTA's offloaded body and
the whole network against their cycle targets, the speed-up on several cores, and the wall time per image
of the TLM and of the RTL (cocotb fast back-end) next to VTA's published simulator times.

VTA's figures come from another machine and another simulator: they are shown as a reference, never as a
ratio of wall times."""

from __future__ import annotations

import sys
from typing import Any

from hw.config import load_config
from hw.result import byte_size
from cosim.bench.report import verdict

# Targets of the benchmark (not of a test): the body 9 % under VTA's pipelined tsim, the whole network with
# its real stem and head, and the speed-up of a several-core config over one core.
BODY_TARGET = 7_000_000
WHOLE_TARGET = 8_000_000
SCALING_TARGET = 3.0
# VTA's published wall times for one ResNet-18 image: its cycle-level (tsim) and functional (fsim) simulators.
VTA_WALL_S = {"tsim": 227.73, "fsim": 1.01}


def measure_resnet18(network: Any, base: str = "default", several: str | None = "quad",
                     rtl: bool = True) -> dict[str, Any]:
    """One image of ``network`` (a ResNet-18 :class:`compiler.networks.Network`) on config ``base`` (TLM, and
    the RTL when ``rtl``) and on ``several`` cores (TLM; None skips it). Returns the rows, the totals, the
    verdicts against the targets and the walls; ``agree`` is False when a model disagrees with the
    reference or the TLM's cycles differ from the RTL's."""
    from compiler.networks.network import with_dram
    from cosim.network_run import make_net_case, run_network

    def one(config: str, models: list[str]) -> dict[str, Any]:
        cfg = with_dram(load_config(config), network.min_dram_bytes)
        print(f"[{cfg.name}] {network.name}: one image on {', '.join(models)}", file=sys.stderr, flush=True)
        rep, _ = run_network(make_net_case(network, cfg, 1), models)
        return rep

    rep = one(base, ["tlm", "rtl"] if rtl else ["tlm"])
    problems = [f"{m}: {why}" for m, why in rep["mismatch"].items()]
    cyc = rep["cycles"]
    if rtl and not cyc.get("tlm_equals_rtl"):
        problems.append(f"TLM {cyc.get('tlm')} cycles, RTL {cyc.get('rtl')}")
    summary = network.summarize(rep.get("layers") or [], 1)
    body, whole = summary["vta_body"]["cycles"], summary["whole"]["cycles"]
    out: dict[str, Any] = {
        "network": network.name, "config": rep["config"], "rows": summary["rows"],
        "body_cycles": body, "whole_cycles": whole, "vta_body_cycles": summary["vta_body"]["vta_cycles"],
        "peak_macs_per_cycle": rep.get("peak_macs_per_cycle"),
        "wall_s_per_image": {"tlm": rep["wall_s"].get("tlm"), "rtl": rep["wall_s"].get("rtl")},
        "vta_wall_s_per_image": VTA_WALL_S, "cycles": {"tlm": cyc.get("tlm"), "rtl": cyc.get("rtl")},
    }
    targets = {"body_cycles": ("<=", BODY_TARGET, body, "ResNet-18 VTA-offloaded body, cycles, one image"),
               "whole_cycles": ("<=", WHOLE_TARGET, whole, "ResNet-18 whole network, cycles, one image")}
    if several is not None:
        rq = one(several, ["tlm"])
        problems += [f"{rq['config']} {m}: {why}" for m, why in rq["mismatch"].items()]
        out["several"] = {"config": rq["config"], "cores": len(rq["program"].get("cores") or [1]),
                          "cycles": rq["cycles"].get("tlm"), "wall_s": rq["wall_s"].get("tlm")}
        speedup = whole / rq["cycles"]["tlm"] if rq["cycles"].get("tlm") else None
        out["several"]["speedup"] = speedup
        targets["speedup_several_cores"] = (">=", SCALING_TARGET, speedup,
                                            f"ResNet-18 whole network on {rq['config']} vs one core")
    out["targets"] = {k: verdict(op, bound, v, what) for k, (op, bound, v, what) in targets.items()}
    out["problems"] = problems
    out["agree"] = not problems and rep["match"]
    return out


def verdicts(res: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The section's targets named for the benchmark's list of targets (none without the section)."""
    return {f"resnet18_{k}": t for k, t in (res or {}).get("targets", {}).items()}


def table_lines(res: dict[str, Any] | None) -> list[str]:
    """The ResNet-18 section for people: the per-layer rows, the totals against their targets, the walls."""
    if not res:
        return []
    peak = res.get("peak_macs_per_cycle") or 0
    head = f"{'layer':<22}{'VTA':<5}{'cycles':>11}{'% peak':>8}{'DMA rd':>11}{'DMA wr':>11}  bound"
    out = [f"ResNet-18 ({res['network']}, one image, config {res['config']}, TLM; peak {peak} MACs/cycle)",
           head, "-" * len(head)]
    for r in res["rows"]:
        out.append(f"{r['layer']:<22}{r['vta'] or '-':<5}{r['cycles']:>11,}{r['peak_pct'] or 0:>8.1f}"
                   f"{byte_size(r['dma_rd_bytes'] or 0):>11}{byte_size(r['dma_wr_bytes'] or 0):>11}  {r['bound']}")
    t = res["targets"]

    def verdict(key: str) -> str:
        met = t[key]["met"]
        return f"target {t[key]['target']}: " + ("n/a" if met is None else ("MET" if met else "NOT MET"))

    vta = res["vta_body_cycles"]
    out.append(f"VTA's offloaded body: {res['body_cycles']:,} cycles ({verdict('body_cycles')}; VTA tsim "
               f"{vta['pipelined_gemm']:,} pipelined GEMM, {vta['baseline']:,} baseline)")
    out.append(f"whole network: {res['whole_cycles']:,} cycles ({verdict('whole_cycles')})")
    s = res.get("several")
    if s:
        sp = "-" if s["speedup"] is None else f"{s['speedup']:.2f}x"
        out.append(f"whole network on {s['config']} ({s['cores']} cores): {s['cycles'] or 0:,} cycles, {sp} "
                   f"one core ({verdict('speedup_several_cores')})")
    w, v = res["wall_s_per_image"], res["vta_wall_s_per_image"]
    walls = ", ".join(f"{m.upper()} {w[m]:.1f} s" for m in ("tlm", "rtl") if w.get(m) is not None)
    out.append(f"wall per image: {walls} (VTA's published, on its machine: tsim {v['tsim']} s, fsim {v['fsim']} s)")
    out += [f"  {p}" for p in res["problems"]]
    return out
