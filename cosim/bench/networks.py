"""The benchmark's network rows: every shipped network over its whole test split as one Program, on the
TLM (median wall of ``reps`` runs: images per second) and, for the RTL's cycles, once on the raw C++
Verilator harness; the logits of both checked against the numpy reference, the int8 accuracy next
to the float model's. Networks whose samples have no labels (resnet18: seeded random weights and
images) have no accuracy to measure and are left out: ``cosim net resnet18`` measures them."""

from __future__ import annotations

import statistics
import sys
from typing import Any

from hw.config import HwConfig
from cosim import models
from cosim.network_run import count_test_images, get_network, make_net_case, network_names


def measure_networks(cfg: HwConfig, reps: int, names: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per shipped network on ``cfg`` (module docstring), or per network of ``names``."""
    rows = []
    for name in network_names() if names is None else names:
        network = get_network(name)
        if network.dataset("test")[1] is None:
            continue
        n = count_test_images(network)
        print(f"[{cfg.name}] network {name}: {n} test images on the TLM ({reps} runs) and the raw harness",
              file=sys.stderr, flush=True)
        case = make_net_case(network, cfg, n)
        walls, tlm = [], None
        for _ in range(reps):
            tlm = models.tlm(case.program)
            walls.append(tlm.wall_s)
        assert tlm is not None
        raw = models.raw(case.program, cfg)
        wall = statistics.median(walls)
        problems = []
        for side, res in (("tlm", tlm), ("rtl", raw)):
            why = f"{res.error.get('name')}" if res.error else case.mismatch(case.logits(res.outputs))
            if why:
                problems.append(f"{side}: {why}")
        if tlm.cycles != raw.cycles:
            problems.append(f"TLM {tlm.cycles} cycles, RTL {raw.cycles}")
        rows.append({"network": name, "config": cfg.name, "images": n, "insns": len(case.program.insns),
                     "tlm_cycles": tlm.cycles, "rtl_cycles": raw.cycles, "cycles_per_image": (tlm.cycles or 0) / n,
                     "compile_s": case.compile_s, "tlm_wall_s": wall, "images_per_s": n / wall if wall else None,
                     "tlm_cycles_per_s": (tlm.cycles or 0) / wall if wall else None,
                     "accuracy": {"float": case.float_accuracy(),
                                  "int8": None if tlm.error else case.accuracy(case.logits(tlm.outputs))},
                     "agree": not problems, "problems": problems})
    return rows


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The network rows for people."""
    if not rows:
        return []
    head = (f"{'network':<10}{'config':<9}{'images':>7}{'insns':>7}{'TLM cycles':>12}{'RTL cycles':>12}{'cyc/img':>9}"
            f"{'TLM s':>8}{'img/s':>9}{'float acc':>11}{'int8 acc':>10}{'ok':>4}")
    out = ["networks: the whole test split as one Program (TLM wall: median; RTL cycles: raw harness)", head,
           "-" * len(head)]
    for r in rows:
        a = r["accuracy"]
        i8 = "-" if a["int8"] is None else f"{100 * a['int8']:.2f} %"
        out.append(f"{r['network']:<10}{r['config']:<9}{r['images']:>7}{r['insns']:>7}{r['tlm_cycles'] or 0:>12}"
                   f"{r['rtl_cycles'] or 0:>12}{r['cycles_per_image']:>9.1f}{r['tlm_wall_s']:>8.3f}"
                   f"{r['images_per_s'] or 0:>9.0f}{100 * a['float']:>9.2f} %{i8:>10}"
                   f"{'yes' if r['agree'] else 'NO':>4}")
        out += [f"  {p}" for p in r["problems"]]
    return out
