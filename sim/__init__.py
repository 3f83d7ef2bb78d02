"""The Python models that run a Program: the instruction-set simulator (``sim.iss``, the
plain sequential oracle: outputs and errors, no time) and the transaction-level model
(``sim.tlm``: cycles, outputs and a trace). Neither imports the other."""
