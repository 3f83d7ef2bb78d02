"""`cosim conformance`: ONNX's own node test cases run through the importer on the accelerator's
models and compared with ``onnx.reference.ReferenceEvaluator``; and the digits CNN quantized by
onnxruntime, its accuracy beside onnxruntime's."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cosim.cli import UserError, add_config_arg, add_json_arg, claim_outputs, config_file_of, output_arg

MODEL_CHOICES = ("golden", "iss", "tlm")


def _models(text: str) -> tuple[str, ...]:
    ms = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in ms if m not in MODEL_CHOICES]
    if bad or not ms:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {', '.join(MODEL_CHOICES)}, not {text!r}")
    return ms


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("conformance", help="run ONNX's node test cases and the onnxruntime-quantized digits model",
                       description="nodes: every selected ONNX node test case (onnx.backend.test.case.node; float "
                                   "cases wrapped in QuantizeLinear/DequantizeLinear with scales from their data) is "
                                   "imported and run on the models, and compared with onnx.reference."
                                   "ReferenceEvaluator: passed, refused (one line: why) or failed. digits: the shipped "
                                   "digits CNN exported to float ONNX, quantized by onnxruntime's quantize_static (QDQ "
                                   "and QOperator, per-channel, calibrated on the train split), its test accuracy on "
                                   "the models beside onnxruntime's float and int8 accuracy. Exit 1 when a case fails "
                                   "or the digits model misses its bounds.")
    p.add_argument("suite", nargs="?", choices=("nodes", "digits", "all"), default="all",
                   help="what to run (default: all)")
    p.add_argument("--models", type=_models, default=MODEL_CHOICES, metavar="LIST",
                   help="models to run the node cases on (default: golden,iss,tlm)")
    p.add_argument("--case", action="append", default=[], metavar="PATTERN",
                   help="run only the node cases matching this fnmatch pattern (repeatable; default: the whole selection)")
    p.add_argument("--rtl", action="store_true",
                   help="also run on the RTL: two node cases, and the digits test split")
    p.add_argument("--markdown", type=output_arg, metavar="FILE",
                   help="write the node-case table as markdown, between the table's markers (as in docs/onnx.md; "
                        "a new file gets them; a file with other text and no markers is refused)")
    p.add_argument("--out-json", type=output_arg, metavar="FILE", help="write the whole result as JSON")
    add_config_arg(p)
    add_json_arg(p)
    return p


def run(args: argparse.Namespace) -> int:
    from cosim.onnx_conformance import digits as digits_suite
    from cosim.onnx_conformance import cases, runner, table

    rep: dict[str, Any] = {}
    ok = True
    if args.markdown and (why := table.markdown_problem(args.markdown)) is not None:  # before the runs: nothing lost
        raise UserError(f"--markdown {args.markdown}: {why}")
    claim_outputs([("--markdown", args.markdown), ("--out-json", args.out_json)],
                  [("--config", config_file_of(args.config))])
    if args.suite in ("nodes", "all"):
        every = cases.collect()
        selected = [c for c in every if cases.selected(c.name, tuple(args.case))] if args.case else every
        if not selected:
            raise UserError(f"--case {' '.join(args.case)}: no node case of the selection matches (the names are "
                            f"ONNX's without its test_ prefix, e.g. {_case_examples(every)})")
        rtl = tuple(c.name for c in selected if c.name in runner.RTL_SAMPLE) if args.rtl else ()
        if args.rtl and not rtl and not args.json:  # said, not refused: --rtl also covers the digits suite
            print(f"note: --rtl: the selection holds none of the RTL sample's node cases "
                  f"({', '.join(runner.RTL_SAMPLE)}); the node cases run without the RTL", file=sys.stderr)
        say = (lambda r: None) if args.json else (lambda r: print(f"  {r.case:48s} {r.status:8s} {r.reason}",
                                                                   file=sys.stderr, flush=True))
        results = runner.run_suite(selected, args.models, args.config, rtl, progress=say)
        meta = {"models": list(args.models) + (["rtl"] if rtl else []), "config": args.config}
        rep["nodes"] = table.to_json(results, meta)
        ok = ok and table.counts(results)["failed"] == 0
        if args.markdown:
            try:
                table.write_markdown(args.markdown, results)
            except OSError as e:
                raise UserError(f"--markdown {args.markdown}: cannot write ({e.strerror or e})") from None
        if not args.json:
            print(table.summary(results))
    if args.suite in ("digits", "all"):
        d = digits_suite.evaluate(args.config, rtl=args.rtl, log=None if args.json else print)
        rep["digits"] = d
        ok = ok and d["ok"]
    if args.out_json:
        _write(args.out_json, json.dumps(rep, indent=1) + "\n")
    if args.json:
        print(json.dumps(rep))
    return 0 if ok else 1


def _case_examples(all_cases: list[Any]) -> str:
    """A few case names of the selection, for an error line."""
    names = [c.name for c in all_cases]
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise UserError(f"{path}: cannot write ({e.strerror or e})") from None
