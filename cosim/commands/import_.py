"""`cosim import MODEL.onnx -o DIR`: a quantized ONNX model -> a Program folder that `cosim run DIR`
runs on every model (golden, ISS, TLM, RTL)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cosim.cli import UserError, add_config_arg, add_json_arg, claim_program_folder, folder_arg, int_arg


def _ops_epilog() -> str:
    from compiler.onnx_import import SUPPORTED_OPS

    import textwrap

    lines = ["supported ops:"]
    for form, ops in SUPPORTED_OPS.items():
        lines += textwrap.wrap(", ".join(ops), 100, initial_indent=f"  {form + ':':<11}", subsequent_indent=" " * 13)
    lines += ["int8 and uint8 (uint8 is shifted by 128 on the host and in the zero points), per-tensor and per-channel",
              "weight scales, zero points folded at compile time, pads (asymmetric too), strides and auto_pad of Conv",
              "and MaxPool (and its ceil_mode); Conv and the pools on (N, C, H, W), the other ops on (N, C, H, W),",
              "(N, C, L) and (N, F) tensors. A float input is quantized and a float output dequantized on the host.",
              "Refused, in one line naming the node, among others: group != 1, dilation != 1, strides or pooling",
              "windows that differ between height and width, dynamic dimensions, AveragePool padding that is not",
              "counted, weights whose zero point does not leave them in int8, per-channel activation quantization,",
              "a graph input the accelerator does not use, any other op."]
    return "\n".join(lines)


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The `cosim import` parser."""
    p = sub.add_parser("import", help="import a quantized ONNX model into a Program folder",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Import MODEL.onnx (QDQ or QOperator, as onnxruntime.quantization.quantize_static "
                                   "writes it) into ONE Program for its batch (the inputs' first dimension) and write "
                                   "the Program folder DIR: the Program's files, model.onnx, inputs.npz (keyed by the "
                                   "ONNX input names: --input's arrays, or seeded random values in each input's range) "
                                   "and expected.npz (keyed by the ONNX output names, in each output's dtype and "
                                   "layout). Then `cosim run DIR --model all` runs it. A model that cannot be mapped "
                                   "is one line naming the node, its op type and why (exit 2).",
                       epilog=_ops_epilog())
    p.add_argument("model", metavar="MODEL.onnx", help="the quantized ONNX model")
    p.add_argument("-o", "--out", type=folder_arg, required=True, metavar="DIR", help="Program folder to write")
    add_config_arg(p)
    p.add_argument("--input", metavar="FILE.npz", help="the inputs, keyed by ONNX input name (default: seeded random)")
    p.add_argument("--seed", type=int_arg(0), default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--batch", type=int_arg(1), default=None, metavar="N",
                   help="fix a symbolic batch dimension (an exported model's 'N') to N")
    p.add_argument("--check", action="store_true",
                   help="also run onnxruntime on the same inputs and print the difference in output LSBs (exit 1 "
                        "when fewer than 99%% of an output's elements are within 1 LSB, both with onnxruntime's "
                        "graph optimizations, which may drop a requantization, and without; the figures without "
                        "them are printed too whenever an output is not equal with them)")
    add_json_arg(p)
    return p


# The share of an output's elements that must be within one step of onnxruntime's for --check to pass.
CHECK_WITHIN_ONE = 0.99


def run(args: argparse.Namespace) -> int:
    """Import, write the folder, check against onnxruntime (--check)."""
    from compiler.onnx_import import import_onnx
    from compiler.onnx_import.imported import load_npz
    from hw.config import load_config

    cfg = load_config(args.config)
    _spares_the_user_s_model(args.model, args.out)
    claim_program_folder(args.out)
    imported = import_onnx(args.model, cfg, batch=args.batch)
    inputs = load_npz(_existing(args.input)) if args.input else imported.random_inputs(args.seed)
    if args.input:
        try:
            imported.graph_inputs(inputs)
        except ValueError as e:  # an input the model does not have, a shape or range it does not take
            raise UserError(f"{args.input}: {e}") from None
    d = imported.write_folder(args.out, inputs)
    rep: dict[str, Any] = {"model": args.model, "dir": str(d), "config": cfg.name, "batch": imported.batch,
                           "layers": len(imported.graph.layers), "insns": len(imported.network.program.insns),
                           "inputs": imported.describe()["inputs"], "outputs": imported.describe()["outputs"],
                           "host_ops": [{"node": h.node, "op": h.op_type, "what": h.what} for h in imported.host_ops]}
    ok = True
    if args.check:
        from compiler.onnx_import.agreement import agreement, onnxruntime_outputs

        ours = imported.run_golden(inputs)
        feeds = {k: imported.inputs[i].check(inputs[k]) for i, k in enumerate(imported.input_names)}
        lsb = {n: imported.output_lsb(n) for n in ours}
        try:
            agr = agreement(ours, onnxruntime_outputs(imported.model, feeds), lsb)
            rep["check"] = [a.to_json() for a in agr]
            ok = all(a.within_one >= CHECK_WITHIN_ONE for a in agr)
            if any(a.exact < 1 for a in agr):  # its graph optimizations may drop a requantization the graph asks for
                literal = agreement(ours, onnxruntime_outputs(imported.model, feeds, optimized=False), lsb)
                rep["check_unoptimized"] = [a.to_json() for a in literal]
                ok = ok or all(a.within_one >= CHECK_WITHIN_ONE for a in literal)
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
            why = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise UserError(f"--check: onnxruntime cannot run {args.model} ({why}); the folder {d} is written, "
                            f"unchecked against onnxruntime") from None
    if args.json:
        print(json.dumps(rep))
    else:
        print(f"{args.model}: {rep['layers']} layers, {rep['insns']:,} instructions, batch {imported.batch}, config "
              f"{cfg.name} -> {d}")
        print("\n".join("  " + line for line in imported.summary().splitlines()))
        for a in rep.get("check", []):
            print(f"  onnxruntime: {_check_line(a)}")
        for a in rep.get("check_unoptimized", []):
            print(f"  onnxruntime, graph optimizations off (the graph as written): {_check_line(a)}")
    if not ok:
        print(f"cosim import: {args.model}: the outputs are more than 1 LSB from onnxruntime's on over "
              f"{100 * (1 - CHECK_WITHIN_ONE):.0f} % of the elements (with its graph optimizations and without)",
              file=sys.stderr)
    return 0 if ok else 1


def _check_line(a: dict[str, Any]) -> str:
    return (f"output '{a['output']}': {a['elements']} elements, {100 * a['equal']:.2f} % equal, "
            f"{100 * a['within_one_lsb']:.2f} % within 1 LSB, at most {a['max_lsb']:.3g} LSB apart")


def _spares_the_user_s_model(model: str, out: str) -> None:
    """Refuse a folder whose ``model.onnx`` the import would replace while it is not an earlier import's
    copy: the model being imported itself (``-o`` its own folder), or a file of the user's."""
    import os
    from pathlib import Path

    from compiler.onnx_import.folder import is_imported_folder
    from compiler.onnx_import.imported import MODEL_FILE

    target = Path(out) / MODEL_FILE
    if not target.exists():
        return
    if Path(model).exists() and os.path.samefile(model, target):
        raise UserError(f"-o {out}: {target} is the model being imported (the folder keeps its own copy under that "
                        f"name): write the folder elsewhere")
    if not is_imported_folder(out):
        raise UserError(f"-o {out}: {target} exists and the folder is not one cosim import wrote (the import would "
                        f"replace it): write the folder elsewhere")


def _existing(path: str) -> str:
    from pathlib import Path

    if not Path(path).is_file():
        raise UserError(f"--input {path}: no such file")
    return path
