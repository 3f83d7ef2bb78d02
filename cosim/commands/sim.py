"""`cosim sim`: the main job. Every example, and every shipped network on a few test images (row
``net:NAME``), on golden, TLM and RTL, one table, non-zero exit on mismatch."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable

from compiler.errors import ConfigFitError
from compiler.networks.network import with_dram
from hw.config import load_config
from hw.program import Program
from hw.result import RunResult
from cosim import models
from cosim.cli import UserError, add_config_arg, add_json_arg, int_arg
from cosim.network_run import get_network, golden_result, judge_net, make_net_case, network_names

NET_PREFIX = "net:"  # a network's row: net:NAME


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("sim", help="run every example on golden, TLM and RTL and print one table",
                       description="Compile the example kernels, run each on the golden path, the TLM and the "
                                   "RTL (Verilator, fast memory back-end), and print one table. Each shipped "
                                   "network (row net:NAME) runs as one Program for its first test images (--net-images), "
                                   "its logits checked against the numpy reference, on the config with its DRAM "
                                   "widened to what the network needs (as cosim net does; the core's timing is "
                                   "the config's).")
    add_config_arg(p)
    p.add_argument("--kernels", nargs="*", metavar="NAME",
                   help="only these examples, and networks given as net:NAME (default: all of both)")
    p.add_argument("--net-images", type=int_arg(1), default=None, metavar="N",
                   help="test images per network row, at most its test split (default: each network's own: 4, "
                        "and 1 for resnet18, about 10 M cycles an image)")
    p.add_argument("--mem", choices=["fast", "protocol"], default=None, help="RTL memory back-end (default: fast)")
    p.add_argument("--no-rtl", action="store_true", help="skip the RTL column (quick check)")
    add_json_arg(p)
    return p


def _fmt(v: object, spec: str = "") -> str:
    return "-" if v is None else format(v, spec)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def run(args: argparse.Namespace) -> int:
    from compiler.examples import get_example, list_examples

    cfg = load_config(args.config)
    wanted = list(dict.fromkeys(args.kernels or [])) or [*list_examples(), *(NET_PREFIX + n for n in network_names())]
    names = [n for n in wanted if not n.startswith(NET_PREFIX)]
    nets = [n[len(NET_PREFIX):] for n in wanted if n.startswith(NET_PREFIX)]
    if args.no_rtl and args.mem is not None:
        raise UserError(f"--mem {args.mem} is an option of the RTL column, and this run is --no-rtl (drop one)")
    if args.net_images is not None and not nets:
        raise UserError(f"--net-images {args.net_images} is the images of a network row, and this run has none "
                        "(add --kernels net:NAME)")
    mem = args.mem or "fast"
    for name in names:  # a mistyped name fails in one line before any progress line is printed
        get_example(name)
    for name in nets:
        get_network(name)
    rows: list[dict] = []
    # each row's Program and how to judge its RTL result, for the RTL column
    pending: list[tuple[dict, Program, Callable[[RunResult], dict]]] = []
    skipped: list[dict[str, str]] = []
    total = len(names) + len(nets)
    for i, name in enumerate(names, 1):
        print(f"[{i}/{total}] {name}: compile + golden + TLM", file=sys.stderr, flush=True)
        job = models.make_job(name, cfg)
        g = models.judge(job, models.run_golden(job))
        t = models.judge(job, models.run_tlm(job))
        rows.append({"kernel": name, "config": cfg.name, "golden": g, "tlm": t, "rtl": None})
        pending.append((rows[-1], job.program, lambda res, job=job: models.judge(job, res)))
    for i, name in enumerate(nets, len(names) + 1):
        label = NET_PREFIX + name
        network = get_network(name)
        images = min(args.net_images or network.sim_images, len(network.dataset("test")[0]))
        net_cfg = with_dram(cfg, network.min_dram_bytes)
        print(f"[{i}/{total}] {label}: compile {images} test image(s) + reference + golden + TLM"
              + (f" (config {net_cfg.name})" if net_cfg is not cfg else ""), file=sys.stderr, flush=True)
        try:
            case = make_net_case(network, net_cfg, images)
        except ConfigFitError as e:  # a network this config cannot hold (buffers, block size): said, not a failure
            skipped.append({"kernel": label, "config": net_cfg.name, "reason": str(e)})
            continue
        g = judge_net(case, golden_result(case), label)
        t = judge_net(case, models.tlm(case.program), label)
        rows.append({"kernel": label, "config": net_cfg.name, "golden": g, "tlm": t, "rtl": None})
        pending.append((rows[-1], case.program, lambda res, case=case, label=label: judge_net(case, res, label)))
    if not args.no_rtl:
        # one simulator process per config: a network whose DRAM was widened has an RTL build of its own
        by_config: dict[str, list[tuple[dict, Program, Callable[[RunResult], dict]]]] = {}
        for item in pending:
            by_config.setdefault(item[1].config.name, []).append(item)
        for group in by_config.values():
            group_cfg = group[0][1].config
            print(f"RTL: {len(group)} Programs on Verilator ({mem} memory, config {group_cfg.name}), one "
                  f"simulator process", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            for (row, _, judge), res in zip(group, models.rtl([p for _, p, _ in group], group_cfg, mem=mem)):
                row["rtl"] = judge(res)
            print(f"RTL done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    ok = True
    for row in rows:
        parts = [row["golden"], row["tlm"]] + ([row["rtl"]] if row["rtl"] else [])
        row["match"] = all(p["match"] for p in parts)
        row["error_pct"] = models.cycle_error_pct(row["tlm"]["cycles"], row["rtl"] and row["rtl"]["cycles"])
        ok &= row["match"]
    # the TLM models the fast back-end's DRAM timing: cycles of the protocol back-end are not its to match
    comparable = mem == "fast" or not any(row["rtl"] for row in rows)
    if args.json:
        extra = {} if comparable else {"cycles_comparable": False, "timing_note": models.PROTOCOL_NOTE}
        print(json.dumps({"config": cfg.name, "match": ok, "kernels": rows, "skipped": skipped, **extra}))
        return 0 if ok else 1
    w = max([17, *(len(r["kernel"]) for r in rows + skipped)]) + 1  # the kernel column, a space after the longest
    head = f"{'kernel':<{w}}{'agree':<7}{'TLM cycles':>11}{'RTL cycles':>11}{'error %':>9}" \
           f"{'golden ms':>11}{'TLM ms':>9}{'RTL ms':>9}"
    print(head)
    print("-" * len(head))
    for row in rows:
        rtl = row["rtl"] or {}
        print(f"{row['kernel']:<{w}}{'yes' if row['match'] else 'NO':<7}{_fmt(row['tlm']['cycles']):>11}"
              f"{_fmt(rtl.get('cycles')):>11}{_fmt(row['error_pct'], '+.2f'):>9}"
              f"{_ms(row['golden']['wall_s']):>11}{_ms(row['tlm']['wall_s']):>9}{_ms(rtl.get('wall_s')):>9}")
        for m in ("golden", "tlm", "rtl"):
            r = row[m]
            if r and not r["match"]:
                why = r.get("mismatch") or r.get("error")
                print(f"    {m}: {why}")
    for row in skipped:
        print(f"{row['kernel']:<{w}}skipped on config {row['config']}: {row['reason']}")
    errs = [abs(r["error_pct"]) for r in rows if r["error_pct"] is not None]
    if not comparable:
        print(f"note: {models.PROTOCOL_NOTE}")
    elif errs:
        print(f"TLM vs RTL cycle error: mean {sum(errs) / len(errs):.2f} %, max {max(errs):.2f} %")
    note = f" ({len(skipped)} skipped: the config cannot hold them)" if skipped else ""
    print(("all models agree" if ok else "MISMATCH: see the rows marked NO") + note)
    return 0 if ok else 1
