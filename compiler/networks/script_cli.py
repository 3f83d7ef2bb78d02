"""The command line of the ONNX model scripts (``python -m compiler.networks.<name>_onnx``): an argparse
parser whose errors are one line and exit 2, as the ``cosim`` commands' are."""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser that reports a bad argument in one line (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")
