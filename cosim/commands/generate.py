"""`cosim generate charlm`: greedy text from the int8 character model, one decode-step Program per
token (the one compiled artifact, specialised per step), on golden, ISS, TLM and RTL."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hw.result import byte_size
from cosim.cli import (UserError, add_config_arg, add_json_arg, claim_outputs, config_file_of, int_arg, output_arg,
                       settle_rtl_options)

NETWORKS = ("charlm",)


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from cosim.generate_run import CLOCK_MHZ, GEN_MODELS

    p = sub.add_parser("generate", help="generate text with charlm's decode step (KV cache) on the models",
                       description="Greedy continuation of PROMPT by charlm (the Zen of Python, int8): prefill is "
                                   "the prompt's decode steps one by one, then one step per new character; every "
                                   "step is the ONE decode Program compiled for 1..128 tokens, specialised by its "
                                   "host driver (no recompilation), with the KV cache in DRAM. Prints the text of "
                                   "each model (it must equal the int8 reference's), the cycles of the prefill and "
                                   "of each decoded token (the TLM's, checked against the RTL's when it runs), "
                                   f"tokens/s at {CLOCK_MHZ} MHz and DRAM bytes per token. Exit 1 when a model "
                                   "disagrees.")
    p.add_argument("name", choices=NETWORKS, help="the network (charlm)")
    p.add_argument("--prompt", required=True, help="the prompt (characters of the Zen of Python's vocabulary)")
    # one new character per position but the last predicted (never fed back): a 1-character prompt takes 128
    p.add_argument("--max-new", type=int_arg(1, 128), default=32, metavar="N",
                   help="characters to generate (default 32; prompt + N - 1 positions must fit the context of 128)")
    p.add_argument("--model", choices=[*GEN_MODELS, "all"], default="tlm",
                   help="model to run (default: tlm; all = golden, iss, tlm and rtl)")
    add_config_arg(p)
    p.add_argument("--trace", type=output_arg, metavar="FILE",
                   help="write a Perfetto trace JSON here: one span per step and one per layer of each step "
                        "(the TLM's cycles; runs the TLM)")
    p.add_argument("--sim", choices=["verilator", "icarus"], default=None,
                   help="RTL simulator (default verilator)")
    p.add_argument("--mem", choices=["fast", "protocol"], default=None,
                   help="RTL memory back-end (default fast)")
    add_json_arg(p)
    return p


def run(args: argparse.Namespace) -> int:
    from cosim.generate_run import GEN_MODELS, GenerateError, generate

    chosen = list(GEN_MODELS) if args.model == "all" else [args.model]
    settle_rtl_options(args, chosen)
    claim_outputs([("--trace", args.trace)], [("--config", config_file_of(args.config))])
    try:
        def progress() -> None:  # once the arguments are accepted: a refusal is one line
            if not args.json:
                print(f"cosim generate {args.name}: {len(args.prompt)} prompt + {args.max_new} new characters on "
                      f"{', '.join(chosen)}", file=sys.stderr, flush=True)

        rep = generate(args.prompt, args.max_new, chosen, args.config, args.trace, args.mem, args.sim,
                       on_start=progress)
    except GenerateError as e:
        raise UserError(str(e)) from None
    if args.json:
        print(json.dumps(rep))
    else:
        _print(rep)
    return 0 if rep["match"] else 1


def _print(rep: dict[str, Any]) -> None:
    print(f"{rep['network']} on config {rep['config']}: prompt {rep['prompt']!r} ({rep['prompt_tokens']} tokens), "
          f"{rep['max_new']} new; one Program for 1..128 tokens in {len(rep['pieces'])} driver pieces")
    print(f"  reference  {rep['text']['reference']!r}")
    for m, text in rep["text"].items():
        if m != "reference":
            why = rep["mismatch"].get(m)
            print(f"  {m:<10} {text!r}  {'same as the reference' if why is None else 'MISMATCH: ' + why}")
    cyc = rep.get("cycles")
    if cyc:
        per = cyc["per_token"]
        steps = f"{rep['prompt_tokens']} step{'s' if rep['prompt_tokens'] != 1 else ''}"
        print(f"cycles (TLM): prefill {cyc['prefill']:,} ({steps}), decode "
              + (f"{per[0]:,} .. {per[-1]:,} per token, mean {cyc['mean_per_token']:,.0f}" if per else "none")
              + f"; total {cyc['total']:,}")
        if per:
            new = rep["text"].get("tlm") or rep["text"]["reference"]
            items = [f"{c!r}:{n:,}" for c, n in zip(new[1:], per)]   # the first new character is the prefill's
            for k in range(0, len(items), 8):
                print(("  per token " if k == 0 else "            ") + "  ".join(items[k:k + 8]))
        if "tlm_equals_rtl" in rep:
            print(f"  RTL cycles {'equal the TLM' if rep['tlm_equals_rtl'] else 'DIFFER from the TLM'} at every step")
        if rep.get("timing_note"):
            print(f"  note: {rep['timing_note']}")
        if per:
            print(f"  {rep['tokens_per_s']:,.0f} tokens/s at {rep['clock_mhz']} MHz; DRAM "
                  f"{byte_size(int(rep['dram_bytes_per_token']))} per token")
    if rep.get("trace"):
        print(f"trace: {rep['trace']}")
    print("wall: " + ", ".join(f"{k} {v:.2f} s" for k, v in rep["wall_s"].items()))
