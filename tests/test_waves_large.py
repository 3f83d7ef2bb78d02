"""A ~1 M-cycle VCD is read for two signals without loading the rest.

The trace is TLM-style (one time unit per cycle): a 64-bit counter changes every
second cycle (500 k value changes of a signal nobody asked for), the load unit's pc
and busy change a few times per 100 cycles. Memory is measured with tracemalloc and
compared with what vcdvcd's full load needs, estimated from loading 5 % of the file.
"""

from __future__ import annotations

import tracemalloc

from vcdvcd import VCDVCD

from cosim.waves import VcdFile, detect_clock, extract_timeline

N_CYCLES = 1_000_000
INSN_LEN = 100  # cycles per load instruction: pc changes at 0, busy rises at 10 and falls at 90


def write_big_vcd(path, n: int = N_CYCLES, step: int = 2) -> int:
    """Write the trace in large chunks (about 0.3 s); returns the number of value changes."""
    head = ("$timescale 1ns $end\n$scope module accel $end\n$var wire 1 ! dbg_load_busy $end\n"
            "$var wire 32 \" dbg_load_pc $end\n$var wire 64 $ dbg_cycles $end\n$upscope $end\n"
            "$enddefinitions $end\n#0\n0!\nb11111111111111111111111111111111 \"\nb0 $\n")
    extra = {0: "b{} \"\n", 10: "1!\n", 90: "0!\n"}
    changes = 3
    with open(path, "w") as f:
        f.write(head)
        for base in range(0, n, 100_000):
            parts = []
            for c in range(max(step, base), min(n, base + 100_000), step):
                parts.append(f"#{c}\nb{c - 1:b} $\n")  # CYCLES: c - 1 in cycle c after START (0)
                e = extra.get(c % INSN_LEN)
                changes += 1
                if e:
                    parts.append(e.format(f"{c // INSN_LEN:b}"))
                    changes += 1
            f.write("".join(parts))
        f.write(f"#{n}\n")
    return changes


def test_two_signals_of_a_million_cycles(tmp_path):
    path = tmp_path / "big.vcd"
    total_changes = write_big_vcd(path)
    tracemalloc.start()
    try:
        vcd = VcdFile(path)
        busy, pc = vcd.resolve("dbg_load_busy"), vcd.resolve("dbg_load_pc")
        _, ch = vcd.stream([busy, pc])
        ours = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        VCDVCD(str(path), to_time=N_CYCLES // 20)  # everything, for 5 % of the cycles
        full_estimate = tracemalloc.get_traced_memory()[1] * 20
    finally:
        tracemalloc.stop()
    n_insns = N_CYCLES // INSN_LEN - 1
    assert len(ch[pc.name]) == n_insns + 1 and len(ch[busy.name]) == 2 * (n_insns + 1) + 1  # (+ the values at #0)
    assert ch[busy.name][1] == (10, "1") and ch[pc.name][-1] == (N_CYCLES - INSN_LEN, format(n_insns, "b"))
    assert total_changes > 500_000
    assert ours < full_estimate / 10, (ours, full_estimate)


def test_timeline_of_a_million_cycles(tmp_path):
    path = tmp_path / "big.vcd"
    write_big_vcd(path)
    vcd = VcdFile(path)
    clock = detect_clock(vcd)  # stops after two dbg_cycles changes
    assert (clock.period, clock.source, clock.origin) == (1, "dbg_cycles", 0)
    tl = extract_timeline(vcd, clock)
    assert len(tl.entries) == N_CYCLES // INSN_LEN - 1
    e = tl.entries[-1]
    assert (e.index, e.start, e.end, e.held_start, e.held_end) == (9999, 999_910, 999_990, 999_900, None)
