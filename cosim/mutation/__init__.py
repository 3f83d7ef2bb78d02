"""Mutation testing of the RTL: how many single-change mutants of hw/rtl the checks kill.

* :mod:`cosim.mutation.verilog_tokens` - Verilog tokens with their source spans;
* :mod:`cosim.mutation.points` - the mutants a scan of each module finds;
* :mod:`cosim.mutation.schemata` - one RTL copy holding the chosen mutants behind ``+MUT=K``;
* :mod:`cosim.mutation.campaign` - sampling, the regression per mutant, the score;
* :mod:`cosim.mutation.edge_programs` - hand-built Programs aimed at edges generated ones rarely reach;
* :mod:`cosim.mutation.equivalents` - the reviewed list of equivalent mutants.
"""
