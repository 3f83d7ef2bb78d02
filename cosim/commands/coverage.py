"""`cosim coverage`: RTL code coverage of the regression (every back-end), merged and reported."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hw.config import list_configs, load_config
from cosim.cli import add_json_arg, config_arg, folder_arg, int_arg
from cosim.cluster.options import add_cluster_args, cluster_kwargs

# RTL fuzz Programs per config at most: a task builds its Programs in memory (about 17 KB each).
MAX_FUZZ = 10_000

BACKENDS = ("fast", "protocol", "raw")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("coverage", help="RTL code coverage (line, branch, toggle, FSM) of the regression on every back-end",
                       description="Build the RTL with Verilator coverage (line with its branch points, toggle) in "
                                   "separate build folders, run the regression on them as engine tasks: every "
                                   "example on every config and back-end (the cocotb fast and protocol back-ends and "
                                   "the raw C++ harness), the unit cases of tests/units/, the directed coverage "
                                   "tests and --fuzz N RTL fuzz Programs per config, and every example on an FSM "
                                   "coverage build of the raw harness per config; merge the coverage files, apply "
                                   "the waivers (hw/rtl/coverage_waivers.json; a waiver matching nothing is an "
                                   "error) and print line/branch/toggle/FSM figures per module and in total, and the "
                                   "uncovered lines. Writes OUT/coverage.dat (merged), OUT/coverage.info (lcov), "
                                   "OUT/html/index.html and OUT/summary.json. Exit 1 when a task failed.")
    p.add_argument("--configs", type=config_arg, nargs="+", metavar="NAME|PATH", default=None,
                   help="hardware configs: names from hw/configs or JSON paths (default: every shipped config)")
    p.add_argument("--backends", nargs="+", choices=BACKENDS, default=None,
                   help="back-ends (default: all three)")
    p.add_argument("--examples", nargs="+", metavar="NAME", default=None, help="only these examples (default: all)")
    p.add_argument("--no-examples", action="store_true", help="leave out the examples (every back-end)")
    p.add_argument("--no-units", action="store_true", help="leave out the unit cases of tests/units/")
    p.add_argument("--no-directed", action="store_true", help="leave out the directed coverage tests")
    p.add_argument("--no-fsm", action="store_true",
                   help="leave out the FSM coverage runs (every example on an FSM build of the raw harness, "
                        "per config)")
    p.add_argument("--long-log2", type=int_arg(0), default=None, metavar="N",
                   help="the directed long-counter Program's GEMM: 2^N block operations per core on the fast "
                        "back-end (default 24: about a minute per core of a coverage build; 31 moves every bit of the 32-bit event "
                        "counters; 0 leaves it out)")
    p.add_argument("--fuzz", type=int_arg(0, MAX_FUZZ), default=0, metavar="N",
                   help=f"RTL fuzz Programs per config (default 0, at most {MAX_FUZZ:,})")
    p.add_argument("--fuzz-seed", type=int_arg(0), default=1, metavar="S", help="fuzz campaign seed (default 1)")
    p.add_argument("--quick", action="store_true",
                   help="a small run: config small, fast back-end, examples vadd and matmul, no fuzz, units, "
                        "directed tests or FSM runs "
                        "(options given as well still apply)")
    p.add_argument("--examples-per-task", type=int_arg(0), default=0, metavar="N",
                   help="split each cell's examples into tasks of N (default 0: one task per cell)")
    p.add_argument("--out", type=folder_arg, default="build/coverage", metavar="DIR",
                   help="output folder (default build/coverage); its dat/ keeps every run's coverage file")
    p.add_argument("--waivers", type=folder_arg, default=None, metavar="FILE.json",
                   help="waiver file (default hw/rtl/coverage_waivers.json)")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: report the coverage files already in OUT/dat")
    p.add_argument("--keep-dat", action="store_true",
                   help="keep the coverage files of an earlier run in OUT/dat and merge them too (default: the "
                        "report merges this run's tasks' files, those resumed from --results included, and the "
                        "others are removed first)")
    p.add_argument("--max-uncovered", type=int_arg(0), default=40, metavar="N",
                   help="uncovered lines, toggle signals and waivers printed, each (default 40; all are in the JSON "
                        "and the HTML)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_json_arg(p)
    add_cluster_args(p)
    return p


def run(args: argparse.Namespace) -> int:
    from compiler.examples import list_examples
    from cosim.cluster import run_tasks
    from cosim.coverage.campaign import Plan, plan_tasks
    from cosim.coverage.directed import long_log2_max
    from cosim.coverage.report import DEFAULT_WAIVERS, build_report
    from cosim.coverage.summary import format_table

    configs = args.configs or (["small"] if args.quick else list_configs())
    for c in configs:
        cfg = load_config(c)  # a bad name fails here, in one line
        most = long_log2_max(cfg)
        if args.long_log2 is not None and args.long_log2 > most:
            raise ValueError(f"--long-log2 {args.long_log2}: config '{cfg.name}' runs at most 2^{most} block "
                             f"operations in one GEMM")
    backends = chosen_backends(args)
    examples = args.examples or (["vadd", "matmul"] if args.quick else None)
    if examples:
        bad = [n for n in examples if n not in list_examples()]
        if bad:
            raise ValueError(f"--examples: no example named {', '.join(bad)} (see `cosim list`)")
    waivers = Path(args.waivers) if args.waivers else DEFAULT_WAIVERS
    if args.waivers and not waivers.is_file():
        raise ValueError(f"--waivers {args.waivers}: no such file")
    out = Path(args.out).resolve()
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {args.out}: not a folder")
    dat = out / "dat"
    engine = cluster_kwargs(args) if not args.report_only else {}
    keep = resumed_coverage_files(engine.get("results"))
    # --report-only and --keep-dat remove no coverage file: only the report's files must be a coverage run's
    claim_coverage_folder(out, args.out, dat_files=not (args.report_only or args.keep_dat), known=keep)
    failed: list[str] = []
    named: set[Path] = set()  # the coverage files of this run's tasks (resumed ones included)
    if not args.report_only:
        plan = Plan(tuple(configs), tuple(backends), tuple(examples) if examples else None,
                    examples_on=not args.no_examples,
                    units=not (args.no_units or args.quick), fuzz=args.fuzz, fuzz_seed=args.fuzz_seed,
                    directed=not (args.no_directed or args.quick), examples_per_task=args.examples_per_task,
                    long_log2=args.long_log2,
                    fsm=not (args.no_fsm or args.quick))
        tasks = plan_tasks(plan, dat)
        if not tasks:
            raise ValueError("nothing to run: the options leave no task")
        dat.mkdir(parents=True, exist_ok=True)
        (dat / MARKER).touch()
        if not args.keep_dat:  # the earlier run's files go first (a run stopped midway merges none of them)
            for f in dat.glob("*.dat"):
                if f.resolve() not in keep:
                    f.unlink()
        for rec in run_tasks(tasks, progress=not args.quiet, desc="coverage", **engine):
            res = rec.get("result") or {}
            cov = res.get("coverage_file") if isinstance(res, dict) else None
            if rec["ok"] and cov and not Path(cov).is_file():  # a task read back from --results whose file went
                raise ValueError(f"{engine.get('results') or 'results'}: task {rec['key']!r} ran, but its coverage "
                                 f"file {cov} is gone (the figures would be lower); drop its record to run it again")
            if rec["ok"] and cov:
                named.add(Path(cov).resolve())
            if not rec["ok"]:
                failed.append(f"{rec['key']}: {rec.get('error')}")
            elif res.get("outcome") != "passed":
                failed.append(f"{rec['key']}: {(res.get('message') or '').splitlines()[0] if res.get('message') else ''}")
    if args.report_only or args.keep_dat:
        files = sorted(dat.glob("*.dat")) if dat.is_dir() else []
    else:  # this run's files only: an earlier run's (another selection) would raise the figures
        files = sorted(named)
    if not files:
        why = f"every task failed; the first: {failed[0]}" if failed else "nothing ran on a coverage build"
        raise ValueError(f"{dat}: no coverage files ({why})")
    doc, summary, _ = build_report(files, out, waivers if waivers.is_file() else None)
    doc["failed_tasks"] = failed
    if args.json:
        print(json.dumps(doc))
    else:
        print(format_table(summary))
        unc = doc["uncovered"]
        more = out / "summary.json"
        print(f"\n{len(unc)} uncovered lines" + (":" if unc else ""))
        _print_capped([f"  {u}" for u in unc], args.max_uncovered, more)
        tog = doc["uncovered_toggles"]
        if tog:
            print(f"\n{sum(tog.values())} toggle points never seen, in {len(tog)} signals; the most:")
            _print_capped([f"  {sig}: {n}" for sig, n in tog.items()], args.max_uncovered, more)
        for f in doc["uncovered_fsm"]:
            print(f"FSM point never seen: {f}")
        _print_capped([f"waived: {w['waiver']}: {w['points']} points ({w['hit']} of them hit) - {w['reason']}"
                       for w in doc["waived"]], args.max_uncovered, more)
        print(f"\nhtml: {doc['html']}\nlcov: {doc['lcov']}\nmerged: {doc['merged']} ({len(files)} files)")
        for f in failed:
            print(f"FAILED {f}")
    if failed and args.json:
        print(f"{len(failed)} task(s) failed", file=sys.stderr)
    return 1 if failed else 0


def chosen_backends(args: argparse.Namespace) -> list[str]:
    """--backends as given (once each), else the fast one for --quick, else all three."""
    return list(dict.fromkeys(args.backends or (["fast"] if args.quick else BACKENDS)))


# Written in OUT/dat by every run: the folder is a coverage one (its files may be replaced and removed).
MARKER = ".cosim-coverage"
REPORT_FILES = ("summary.json", "coverage.info", "coverage.dat", "html")


def resumed_coverage_files(results: str | None) -> set[Path]:
    """The coverage files the records of ``results`` (a --results file to resume) name."""
    from cosim.cluster.results_file import ResultsFile

    if not results or not Path(results).is_file():
        return set()
    out = set()
    for rec in ResultsFile(results).load().values():
        res = rec.get("result")
        if rec.get("ok") and isinstance(res, dict) and isinstance(res.get("coverage_file"), str):
            out.add(Path(res["coverage_file"]).resolve())
    return out


def claim_coverage_folder(out: Path, given: str, dat_files: bool = True, known: set[Path] | None = None) -> None:
    """Refuse (ValueError) an ``out`` holding files of a coverage report's names, or (``dat_files``) coverage
    files in its dat/ other than ``known`` (those a resumed run's records name), that no coverage run wrote
    (they would be replaced or removed): a folder is a coverage one by the marker in its dat/ or a coverage
    summary.json."""
    if (out / "dat" / MARKER).is_file():
        return
    try:
        doc = json.loads((out / "summary.json").read_text())
        if isinstance(doc, dict) and {"total", "modules"} <= set(doc):
            return
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        pass
    clash = [n for n in REPORT_FILES if (out / n).exists()]
    if dat_files and (out / "dat").is_dir():
        clash += [f"dat/{f.name}" for f in sorted((out / "dat").glob("*.dat")) if f.resolve() not in (known or ())][:3]
    if clash:
        raise ValueError(f"--out {given}: {', '.join(clash)} {'is' if len(clash) == 1 else 'are'} there and the folder "
                         f"is not a coverage run's (they would be replaced); choose another --out")


def _print_capped(lines: list[str], cap: int, rest_in: Path) -> None:
    """The first ``cap`` of ``lines``, then how many more there are and where."""
    for line in lines[:cap]:
        print(line)
    if len(lines) > cap:
        print(f"  ... {len(lines) - cap} more in {rest_in}")
