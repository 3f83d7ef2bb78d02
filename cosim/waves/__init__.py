"""Waveform tools on vcdvcd: list and show signals, extract per-instruction timelines
from the dbg_* probes, and diff two timelines (TLM vs RTL, or two RTL runs).

* :mod:`cosim.waves.vcd_reader`: the header, name resolution and selective streaming;
* :mod:`cosim.waves.timeline`: time -> cycles, timelines, diffs;
* :mod:`cosim.waves.render`: tables, ASCII waveforms, reports.
"""

from cosim.waves.render import Trace, ascii_waves, diff_text, table, timeline_text
from cosim.waves.timeline import (Clock, Entry, Timeline, detect_clock, diff_timelines, diff_values,
                                extract_timeline, read_window, to_cycles)
from cosim.waves.vcd_reader import SignalInfo, VcdFile, WavesError, fmt_value

__all__ = ["Clock", "Entry", "SignalInfo", "Timeline", "Trace", "VcdFile", "WavesError", "ascii_waves",
           "detect_clock", "diff_text", "diff_timelines", "diff_values", "extract_timeline", "fmt_value",
           "read_window", "table", "timeline_text", "to_cycles"]
