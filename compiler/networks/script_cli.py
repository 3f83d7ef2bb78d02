"""The command line of the network scripts (``python -m compiler.networks.<name>_onnx`` and the training
scripts): an argparse parser whose errors are one line and exit 2, as the ``cosim`` commands' are."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Callable, NoReturn

import numpy as np


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser that reports a bad argument in one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def train_main(argv: list[str] | None, prog: str, description: str, default_out: Path, default_epochs: int,
               build: Callable[[int], dict[str, np.ndarray]], summary: Callable[[dict[str, Any]], str]) -> int:
    """The command line of a shipped network's training script: ``--out PATH`` (default ``default_out``)
    and ``--epochs N``; ``build(epochs)`` gives the weights file's arrays (``meta`` a JSON string among
    them), written compressed; prints ``wrote PATH in S s: <summary(meta)>``. Exit 2 with one line on
    bad input."""
    parser = OneLineParser(prog=prog, description=description)
    parser.add_argument("--out", type=Path, default=default_out, help="the .npz to write (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=default_epochs,
                        help="training epochs (default: %(default)s; the committed file uses the default)")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error(f"--epochs {args.epochs} must be at least 1")
    if not args.out.parent.is_dir():
        parser.error(f"--out {args.out}: folder {args.out.parent} does not exist")
    if args.out.is_dir():
        parser.error(f"--out {args.out} is a folder")
    t0 = time.perf_counter()
    weights = build(args.epochs)
    try:
        with open(args.out, "wb") as f:  # a file object: numpy would append .npz to a bare name
            np.savez_compressed(f, **weights)
    except OSError as exc:
        parser.error(f"--out {args.out}: cannot write ({exc.strerror or exc})")
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s: {summary(json.loads(str(weights['meta'])))}")
    return 0
