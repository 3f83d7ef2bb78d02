"""`cosim net NAME`: a shipped int8 network on the accelerator: accuracy next to the float model's,
bit-exact logits on every model, cycles, and where they go layer by layer."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hw.config import load_config
from hw.result import byte_size
from cosim.cli import (UserError, add_config_arg, add_json_arg, claim_outputs, config_file_of, folder_arg, int_arg,
                       output_arg, settle_rtl_options)
from cosim.network_run import (NET_MODELS, count_test_images, draws_random_samples, get_network, load_inputs,
                               make_net_case, network_names, run_network, with_samples_from)


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("net", help="classify a shipped network's test images on golden, TLM or RTL: accuracy, "
                                   "per-layer cycles",
                       description="Compile network NAME (compiler.networks: "
                                   f"{', '.join(network_names()) or 'none'}) for a batch of its test images as ONE "
                                   "Program, run it, check every model's int8 logits bit for bit against the plain "
                                   "numpy reference (compiler.graph_reference), and print the accuracy of each model "
                                   "next to the float model's on the same images, the total cycles and cycles per "
                                   "image, and the per-layer table of the traced TLM run (cycles that sum to "
                                   "CYCLES, MACs, MACs per cycle against the peak, DMA bytes, busy/stall cycles "
                                   "per unit). The TLM is cycle-exact to the RTL: with --model rtl the table is "
                                   "the TLM's, and the totals are checked against the RTL's. Exit 1 when a model "
                                   "disagrees.")
    p.add_argument("name", metavar="NAME",
                   help="network name (`cosim list` shows them), or path.py:function for your own: a function of no "
                        "arguments returning a compiler.graph.Graph (one input, one output; docs/network.md) or a "
                        "compiler.networks.Network, or a quantized MODEL.onnx (its graph, on seeded random "
                        "inputs; see cosim import)")
    p.add_argument("--model", choices=[*NET_MODELS, "all"], default="tlm",
                   help="model to run (default: tlm; all = golden, iss, tlm and rtl)")
    p.add_argument("--images", type=int_arg(1), default=None, metavar="N",
                   help="the first N test images, one batch (default: the whole test split; measured: the "
                        "digits' 359 images are 394k cycles, under a second on the TLM and on the RTL's cocotb "
                        "fast back-end)")
    p.add_argument("--input", type=folder_arg, metavar="FILE.npy|FILE.npz[:NAME]",
                   help="run these int8 samples, (N, *input shape), instead of the test split (no labels: no "
                        "accuracy); a user graph without it runs seeded random samples")
    p.add_argument("--seed", type=int_arg(0), default=None,
                   help="seed of the random samples of a user graph or ONNX model without --input (default 0)")
    add_config_arg(p)
    p.add_argument("--trace", type=output_arg, metavar="FILE",
                   help="write the TLM run's Chrome/Perfetto trace JSON here, one span per layer on the "
                        "'sections' track (needs the TLM: --model tlm, rtl or all)")
    p.add_argument("--sim", choices=["verilator", "icarus"], default=None,
                   help="RTL simulator (default verilator)")
    p.add_argument("--mem", choices=["fast", "protocol"], default=None,
                   help="RTL memory back-end (default fast)")
    add_json_arg(p)
    return p


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f} %"


def run(args: argparse.Namespace) -> int:
    network = get_network(args.name, args.seed or 0)
    if args.seed is not None and (args.input or not draws_random_samples(network)):
        raise UserError(f"--seed draws the random samples of a user graph or ONNX model; "
                        f"{'--input gives the samples' if args.input else f'{args.name} has its own'}: drop --seed")
    from compiler.networks.network import with_dram

    cfg = with_dram(load_config(args.config), getattr(network, "min_dram_bytes", 0))
    chosen = list(NET_MODELS) if args.model == "all" else [args.model]
    settle_rtl_options(args, chosen)
    if args.trace and not {"tlm", "rtl"} & set(chosen):
        raise UserError("--trace needs a TLM run: use --model tlm, rtl or all")
    path_given = ":" in args.name or args.name.endswith(".onnx")  # else a shipped network's name, not a file
    claim_outputs([("--trace", args.trace)], [("NAME", args.name if path_given else None), ("--input", args.input),
                                              ("--config", config_file_of(args.config))])
    data = load_inputs(args.input, network) if args.input else None
    if args.input:
        network = with_samples_from(network, args.input)
    split = count_test_images(network, data)
    images = args.images if args.images is not None else split
    if images > split:  # before any progress line: a bad argument is one line
        raise UserError(f"--images {images}: network '{network.name}' has {split} samples (give 1..{split})")
    from compiler.network import MAX_BATCH

    if images > MAX_BATCH:  # one Program holds one batch
        what = f"--input {args.input} holds" if data is not None else f"network '{network.name}' has"
        raise UserError(f"{what} {images} samples; one run takes at most {MAX_BATCH} (give --images N)")
    case = make_net_case(network, cfg, images, data)
    if not args.json:  # after the compile, which may refuse the network for this config: a refusal is one line
        print(f"cosim net {network.name}: {images} image(s) compiled as one Program for config {cfg.name}; "
              f"running {', '.join(chosen)}", file=sys.stderr, flush=True)
    rep, sections = run_network(case, chosen, trace=args.trace, mem=args.mem, simulator=args.sim)
    summarize = getattr(network, "summarize", None)
    if summarize is not None and rep.get("layers"):
        rep["summary"] = summarize(rep["layers"], rep["images"])
    ok = rep["match"] and rep.get("layers_match_counters", True) and rep["cycles"].get("tlm_equals_rtl", True)
    if args.json:
        print(json.dumps(rep))
        return 0 if ok else 1
    _print(rep, sections, network)
    return 0 if ok else 1


def _print(rep: dict[str, Any], sections: Any, network: Any) -> None:
    acc, cyc, d = rep["accuracy"], rep["cycles"], rep["dram"]
    print(f"network {rep['network']} ({network.description.splitlines()[0] if network.description else ''})")
    cores = rep["program"].get("cores")
    per_core = f" on {len(cores)} cores ({', '.join(f'{c:,}' for c in cores)} per core)" if cores else ""
    print(f"config {rep['config']}: {rep['images']} sample(s) in one Program of {rep['program']['insns']:,} "
          f"instructions{per_core}")
    if d:
        print(f"DRAM: weights {byte_size(d['weights_bytes'])}, biases {byte_size(d['bias_bytes'])}, activations "
              f"{byte_size(d['activation_bytes_with_reuse'])} with reuse "
              f"({byte_size(d['activation_bytes_without_reuse'])} without), {byte_size(d['total_bytes'])} in all")
    models = rep["models"]
    if acc.get("reference") is None:
        print("accuracy: - (the samples have no labels)")
    else:
        print("accuracy: " + ", ".join([f"float {_pct(acc['float'])}", f"int8 reference {_pct(acc['reference'])}"]
                                        + [f"{m} {_pct(acc.get(m))}" for m in models]))
    for m in models:
        why = rep["mismatch"].get(m)
        print(f"  {m:<7} {'bit-exact with the reference' if why is None else 'MISMATCH: ' + why}")
    if cyc.get("total"):
        parts = [f"{m.upper()} {cyc[m]:,}" for m in ("tlm", "rtl") if cyc.get(m) is not None]
        agree = cyc.get("tlm_equals_rtl")
        tail = "" if agree is None else ("; TLM = RTL (cycles and counters)" if agree else "; TLM != RTL")
        print(f"cycles: {', '.join(parts)} ({cyc['per_image']:,.1f} per image){tail}")
        if cyc.get("timing_note"):
            print(f"note: {cyc['timing_note']}")
    if rep.get("layers_note"):
        print(f"per layer: {rep['layers_note']}")
    if sections is not None:
        note = " (the TLM's table: the TLM is cycle-exact to the RTL)" if "rtl" in models and "tlm" not in models \
            else ""
        print(f"per layer{note}:")
        print("\n".join(sections.table_lines("layer")))
        if not rep["layers_match_counters"]:
            for pr in rep.get("layer_sum_problems", []):
                print(f"  layer sums do not match the run: {pr}")
    summ = rep.get("summary")
    if summ:
        peak = rep.get("peak_macs_per_cycle") or 0
        print("per layer, by VTA workload (bound = the unit busiest in the layer):")
        for r in summ["rows"]:
            print(f"  {r['layer']:<22} {r['vta'] or '-':<4} {r['cycles']:>10,} cycles  {r['peak_pct'] or 0:5.1f} % peak  "
                  f"DMA {byte_size(r['dma_rd_bytes'] or 0)} rd / {byte_size(r['dma_wr_bytes'] or 0)} wr  "
                  f"{r['bound']}-bound")
        b, w = summ["vta_body"], summ["whole"]
        pct = f", {100 * b['macs'] / (b['cycles'] * peak):.1f} % of peak" if peak and b["cycles"] else ""
        per = "" if summ["images"] == 1 else (f" ({b['cycles_per_image']:,.0f} per image; whole "
                                               f"{w['cycles_per_image']:,.0f})")
        print(f"VTA's offloaded body ({b['layers']} layers): {b['cycles']:,} cycles{pct}{per} (VTA tsim, one image: "
              f"{b['vta_cycles']['pipelined_gemm']:,} pipelined GEMM, {b['vta_cycles']['baseline']:,} baseline); "
              f"whole network: {w['cycles']:,} cycles")
    walls = ", ".join(f"{k} {v:.2f} s" for k, v in rep["wall_s"].items())
    print(f"wall: {walls}")
    if rep.get("trace"):
        print(f"trace: {rep['trace']} (one span per layer on the 'sections' track; ui.perfetto.dev)")
    print("all models agree with the reference" if rep["match"] else "MISMATCH: see the lines above")
