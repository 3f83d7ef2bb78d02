"""A GTKWave save file (``.gtkw``) for a VCD of this accelerator, written beside the VCD.

``gtkwave run.vcd run.gtkw`` (or Surfer, which reads the same file) then opens with the
signals an RTL engineer looks at first, in named groups and sensible radixes: the clock and
the ``dbg_*`` probes (the same names in the RTL's and the TLM's VCDs), then for core 0 each
unit's state, the instruction and token queues, the on-chip buffers' ports, and the AXI4 and
AXI4-Lite channels. Signals are picked from the VCD's own header, so the file names only what
the trace holds. The format is GTKWave's: ``[dumpfile]``, ``[timestart]``, ``@FLAGS`` lines
setting the radix of the names after them, and groups opened by ``@800200`` / ``-NAME`` and
closed by ``@1000200`` / ``-NAME``.
"""

from __future__ import annotations

import re
from pathlib import Path

from cosim.waves.vcd_reader import SignalInfo, VcdFile, WavesError

# GTKWave trace flags (gtkwave's analyzer.h): right-justified names (0x20) plus a radix.
BIN, HEX, DEC, SIGNED_DEC = "@28", "@22", "@24", "@424"
GROUP_BEGIN, GROUP_END = "@800200", "@1000200"

# (group, scope components any of which the signal's path must contain, leaf pattern)
UNIT_GROUPS: list[tuple[str, tuple[str, ...], str]] = [
    ("fetch", ("u_fetch",), r"state|pc|count|addr|valid|ready|err|stuck|busy"),
    ("load", ("u_load",), r"state|pc|busy|err|valid|ready|addr|len|row|col|pad|insn"),
    ("compute", ("u_compute",), r"state|pc|busy|err|valid|ready|iter|dst|src|op|freeze|wait|insn"),
    ("gemm", ("u_gemm",), r"state|busy|err|valid|iter|uop|acc_idx|inp_idx|wgt_idx|reset"),
    ("store", ("u_store",), r"state|pc|busy|err|valid|ready|addr|len|row|insn"),
    ("instruction queues", ("u_load_q", "u_compute_q", "u_store_q"), r"count|full|empty|push|pop|head|tail"),
    ("token queues", ("u_l2c", "u_c2l", "u_c2s", "u_s2c"), r"count|full|empty|push|pop"),
    ("accumulator ports", ("u_acc",), r"we|re|waddr|raddr|addr|wdata|rdata"),
    ("input, weight, micro-op ports", ("u_inp", "u_wgt", "u_uop"), r"we|re|waddr|raddr|addr"),
    ("arbiter", ("u_arb",), r"state|grant|owner|req"),
]
AXI_LEAF = re.compile(r"^(m_axi_|s_axil_|axi_)?(ar|aw|w|r|b)_?(valid|ready|addr|len|size|burst|data|strb|last|"
                      r"resp|id)$")
DECIMAL_LEAF = re.compile(r"(pc|count|len|iter\w*|state|cycles|row|col|idx)$")
MAX_PER_GROUP = 48


HEADER = "[*] GTKWave save file written by cosim (cosim/waves/gtkw.py)"  # how a file of ours begins


def _radix(s: SignalInfo) -> str:
    if s.width <= 1:
        return BIN
    return DEC if DECIMAL_LEAF.search(s.leaf) else HEX


def _core0(s: SignalInfo) -> bool:
    """Not a signal of core 1, 2, ...: generate blocks name the cores' scopes by index."""
    return not re.search(r"(core|g_core\w*)\[?([1-9]\d*)\]?\b", s.name.replace("(", "[").replace(")", "]"))


def groups(vcd: VcdFile) -> list[tuple[str, list[SignalInfo]]]:
    """The groups of the save file, each a name and its signals in VCD order (empty groups dropped)."""
    sigs = [s for s in vcd.signals if s.var_type != "parameter"]
    taken: set[str] = set()
    out: list[tuple[str, list[SignalInfo]]] = []

    def add(name: str, chosen: list[SignalInfo]) -> None:
        fresh = [s for s in chosen if s.name not in taken][:MAX_PER_GROUP]
        taken.update(s.name for s in fresh)
        if fresh:
            out.append((name, fresh))

    probes = []
    for leaf in ["clk", "rst", "irq"] + sorted({s.leaf for s in sigs if s.leaf.startswith("dbg_")}):
        p = vcd.find_probe(leaf)
        if p is not None:
            probes.append(p)
    add("clock and probes", probes)
    for name, scopes, leaf_re in UNIT_GROUPS:
        pat = re.compile(leaf_re)
        add(name, [s for s in sigs if _core0(s) and any(sc in s.name.split(".")[:-1] for sc in scopes)
                   and pat.search(s.leaf)])
    top_depth = min((s.depth for s in sigs if AXI_LEAF.match(s.leaf)), default=None)
    add("AXI", [s for s in sigs if AXI_LEAF.match(s.leaf) and s.depth == top_depth])
    return out


def gtkw_name(s: SignalInfo) -> str:
    """The name GTKWave gives ``s``: a bus declared without a range (the TLM's VCD) gets ``[W-1:0]``, and a
    one-bit range ``[n:n]`` is the bit ``[n]``."""
    if s.width > 1 and not s.ref.endswith("]"):
        return f"{s.ref}[{s.width - 1}:0]"
    one = re.search(r"\[(\d+):(\d+)\]$", s.ref)
    if one and one.group(1) == one.group(2):
        return f"{s.ref[:one.start()]}[{one.group(1)}]"
    return s.ref


def gtkw_text(vcd: VcdFile, dumpfile: Path) -> str:
    """The save file's text for ``vcd`` (``dumpfile`` as it should be named inside)."""
    lines = [HEADER, f'[dumpfile] "{dumpfile}"',
             "[timestart] 0", "[size] 1600 900", "[signals_width] 320", "[sst_expanded] 1"]
    for name, sigs in groups(vcd):
        lines += [GROUP_BEGIN, f"-{name}"]
        radix = None
        for s in sigs:
            r = _radix(s)
            if r != radix:
                lines.append(r)
                radix = r
            lines.append(gtkw_name(s))
        lines += [GROUP_END, f"-{name}"]
    return "\n".join(lines) + "\n"


class GtkwKept(WavesError):
    """A save file that is not cosim's stands where ``write_gtkw`` would write."""


def write_gtkw(vcd_path: str | Path) -> Path:
    """Write ``<vcd>.gtkw`` beside the VCD (the dump file named by its absolute path) and return its path.
    A save file there that cosim did not write (the user's own layout) is kept: :class:`GtkwKept`."""
    vcd_path = Path(vcd_path).resolve()
    out = vcd_path.with_suffix(".gtkw")
    if out.exists() and not _ours(out):
        raise GtkwKept(f"no .gtkw: {out} is not one cosim wrote, so it is left as it is")
    out.write_text(gtkw_text(VcdFile(vcd_path), vcd_path))
    return out


def _ours(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(HEADER)) == HEADER.encode()
    except OSError:
        return False
