"""`cosim list`: the registered example kernels with their parameters, and the shipped networks."""

from __future__ import annotations

import argparse
import json

from compiler.dynamic_examples import DYNAMIC_EXAMPLES
from compiler.examples import get_example, list_examples
from compiler.params import param_text
from cosim.cli import add_json_arg
from cosim.network_run import get_network, network_names


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("list", help="list the example kernels and their parameters, the dynamic-shape examples and "
                                    "the networks",
                       description="List the example kernels registered in compiler/examples.py with their "
                                   "default parameters (override them with `cosim compile NAME -p key=value`), "
                                   "the dynamic-shape examples with their run-time variable (`cosim run NAME --set "
                                   "VAR=N`), then the shipped networks (compiler/networks; run one with `cosim net "
                                   "NAME`).")
    add_json_arg(p)
    return p


def run(args: argparse.Namespace) -> int:
    exs = [get_example(n) for n in list_examples()]
    nets = [get_network(n) for n in network_names()]
    if args.json:
        print(json.dumps({"examples": [{"name": e.name, "description": e.description, "operator": e.operator or e.gemm,
                                        "params": {k: list(v) if isinstance(v, tuple) else v
                                                   for k, v in e.params.items()}} for e in exs],
                          "networks": [{"name": n.name, "description": n.description} for n in nets],
                          "dynamic": [{"name": d.name, "description": d.description,
                                       "variables": {d.var.name: d.var.to_json()}}
                                      for d in DYNAMIC_EXAMPLES.values()]}))
        return 0
    width = max(len(x.name) for x in [*exs, *nets, *DYNAMIC_EXAMPLES.values()])
    for e in exs:
        params = " ".join(f"{k}={param_text(v)}" for k, v in e.params.items())
        print(f"{e.name:<{width}}  {params}")
        print(f"{'':<{width}}  {e.description}")
    print("\ndynamic shapes (cosim run NAME --set VAR=N; cosim compile NAME -o DIR writes the folder and its "
          "drivers; --var VAR=MAX narrows the range):")
    for d in DYNAMIC_EXAMPLES.values():
        print(f"{d.name:<{width}}  {d.var.name} in {d.var.min}..{d.var.max}")
        print(f"{'':<{width}}  {d.description}")
    if nets:
        print("\nnetworks (cosim net NAME):")
        for n in nets:
            print(f"{n.name:<{width}}  {n.description}")
    return 0
