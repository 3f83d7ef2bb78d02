"""`cosim list`: the registered example kernels with their parameters."""

from __future__ import annotations

import argparse
import json
from typing import Any

from compiler.examples import get_example, list_examples
from cosim.cli import add_json_arg


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("list", help="list the example kernels and their parameters",
                       description="List the example kernels registered in compiler/examples.py with their "
                                   "default parameters (override them with `cosim compile NAME -p key=value`).")
    add_json_arg(p)
    return p


def _fmt(v: Any) -> str:
    if isinstance(v, tuple):
        return "x".join(str(s) for s in v)
    return "auto" if v is None else str(v)


def run(args: argparse.Namespace) -> int:
    exs = [get_example(n) for n in list_examples()]
    if args.json:
        print(json.dumps({"examples": [{"name": e.name, "description": e.description, "operator": e.operator or e.gemm,
                                        "params": {k: list(v) if isinstance(v, tuple) else v
                                                   for k, v in e.params.items()}} for e in exs]}))
        return 0
    width = max(len(e.name) for e in exs)
    for e in exs:
        params = " ".join(f"{k}={_fmt(v)}" for k, v in e.params.items())
        print(f"{e.name:<{width}}  {params}")
        print(f"{'':<{width}}  {e.description}")
    return 0
