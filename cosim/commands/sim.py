"""`cosim sim`: the main job. Every example, and every shipped network on a few test images (row
``net:NAME``), on golden, TLM and RTL, one table, non-zero exit on mismatch."""

from __future__ import annotations

import argparse
import json
import sys
import time

from hw.config import load_config
from cosim import models
from cosim.cli import add_config_arg, add_json_arg, int_arg
from cosim.commands.run import PROTOCOL_NOTE
from cosim.network_run import get_network, golden_result, judge_net, make_net_case, network_names

NET_PREFIX = "net:"  # a network's row: net:NAME


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("sim", help="run every example on golden, TLM and RTL and print one table",
                       description="Compile the example kernels, run each on the golden path, the TLM and the "
                                   "RTL (Verilator, fast memory back-end), and print one table. Each shipped "
                                   "network (row net:NAME) runs as one Program for the first --net-images test "
                                   "images, its logits checked against the numpy reference.")
    add_config_arg(p)
    p.add_argument("--kernels", nargs="*", metavar="NAME",
                   help="only these examples, and networks given as net:NAME (default: all of both)")
    p.add_argument("--net-images", type=int_arg(1), default=4, metavar="N",
                   help="test images per network row (default 4)")
    p.add_argument("--mem", choices=["fast", "protocol"], default="fast", help="RTL memory back-end")
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
    wanted = args.kernels or [*list_examples(), *(NET_PREFIX + n for n in network_names())]
    names = [n for n in wanted if not n.startswith(NET_PREFIX)]
    nets = [n[len(NET_PREFIX):] for n in wanted if n.startswith(NET_PREFIX)]
    for name in names:  # a mistyped name fails in one line before any progress line is printed
        get_example(name)
    for name in nets:
        get_network(name)
    jobs, rows, cases = [], [], []
    total = len(names) + len(nets)
    for i, name in enumerate(names, 1):
        print(f"[{i}/{total}] {name}: compile + golden + TLM", file=sys.stderr, flush=True)
        job = models.make_job(name, cfg)
        jobs.append(job)
        g = models.judge(job, models.run_golden(job))
        t = models.judge(job, models.run_tlm(job))
        rows.append({"kernel": name, "config": cfg.name, "golden": g, "tlm": t, "rtl": None})
    for i, name in enumerate(nets, len(names) + 1):
        label = NET_PREFIX + name
        print(f"[{i}/{total}] {label}: compile {args.net_images} test image(s) + reference + golden + TLM",
              file=sys.stderr, flush=True)
        case = make_net_case(get_network(name), cfg, args.net_images)
        cases.append(case)
        g = judge_net(case, golden_result(case), label)
        t = judge_net(case, models.tlm(case.program), label)
        rows.append({"kernel": label, "config": cfg.name, "golden": g, "tlm": t, "rtl": None})
    if not args.no_rtl:
        progs = [j.program for j in jobs] + [c.program for c in cases]
        print(f"RTL: {len(progs)} Programs on Verilator ({args.mem} memory), one simulator process",
              file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        results = models.rtl(progs, cfg, mem=args.mem) if progs else []
        for row, job, res in zip(rows, jobs, results):
            row["rtl"] = models.judge(job, res)
        for row, case, res in zip(rows[len(jobs):], cases, results[len(jobs):]):
            row["rtl"] = judge_net(case, res, row["kernel"])
        print(f"RTL done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    ok = True
    for row in rows:
        parts = [row["golden"], row["tlm"]] + ([row["rtl"]] if row["rtl"] else [])
        row["match"] = all(p["match"] for p in parts)
        row["error_pct"] = models.cycle_error_pct(row["tlm"]["cycles"], row["rtl"] and row["rtl"]["cycles"])
        ok &= row["match"]
    # the TLM models the fast back-end's DRAM timing: cycles of the protocol back-end are not its to match
    comparable = args.mem == "fast" or not any(row["rtl"] for row in rows)
    if args.json:
        extra = {} if comparable else {"cycles_comparable": False, "timing_note": PROTOCOL_NOTE}
        print(json.dumps({"config": cfg.name, "match": ok, "kernels": rows, **extra}))
        return 0 if ok else 1
    head = f"{'kernel':<18}{'agree':<7}{'TLM cycles':>11}{'RTL cycles':>11}{'error %':>9}" \
           f"{'golden ms':>11}{'TLM ms':>9}{'RTL ms':>9}"
    print(head)
    print("-" * len(head))
    for row in rows:
        rtl = row["rtl"] or {}
        print(f"{row['kernel']:<18}{'yes' if row['match'] else 'NO':<7}{_fmt(row['tlm']['cycles']):>11}"
              f"{_fmt(rtl.get('cycles')):>11}{_fmt(row['error_pct'], '+.2f'):>9}"
              f"{_ms(row['golden']['wall_s']):>11}{_ms(row['tlm']['wall_s']):>9}{_ms(rtl.get('wall_s')):>9}")
        for m in ("golden", "tlm", "rtl"):
            r = row[m]
            if r and not r["match"]:
                why = r.get("mismatch") or r.get("error")
                print(f"    {m}: {why}")
    errs = [abs(r["error_pct"]) for r in rows if r["error_pct"] is not None]
    if not comparable:
        print(f"note: {PROTOCOL_NOTE}")
    elif errs:
        print(f"TLM vs RTL cycle error: mean {sum(errs) / len(errs):.2f} %, max {max(errs):.2f} %")
    print("all models agree" if ok else "MISMATCH: see the rows marked NO")
    return 0 if ok else 1
