"""What users type: the `cosim` command and the tools around the models.

It stands above the models (``sim/``: ISS and TLM; ``testbench/``: the RTL) and reaches
them only through :mod:`cosim.models`, the one model registry (golden, iss, tlm, rtl).
"""
