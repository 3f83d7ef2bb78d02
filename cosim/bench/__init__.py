"""Benchmarks (``cosim bench``): model speeds, TLM-vs-RTL cycle error, TLM growth, profiles.

One idea per module: ``suite`` (the Programs), ``measure`` (timing runs, alternating
sides, medians), ``growth`` (TLM cost against instructions and bytes), ``correlate``
(TLM vs RTL cycles and the per-unit breakdown), ``profiler`` (cProfile of the TLM and
the cocotb fast back-end; ``cocotb_profiled`` is the cocotb test module it runs),
``scaling`` (cycles on 1, 2, 4 cores against the DRAM bound), ``quad_vs_one`` (every example on ``quad``
against one core, the digits small batch), ``report`` (summary numbers, targets, the table), ``run`` (the whole benchmark and
``bench/results.json``).
"""
