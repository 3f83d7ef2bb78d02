"""The compute unit's vector ALU datapath: the fast numpy engine shared with the golden path.

The TLM applies one ALU instruction as a whole with :func:`hw.alu_numpy.run_alu`
(vectorised when the loop has no read-after-write hazard, else strictly in loop order,
as the hardware's sequential semantics require), so a long ALU instruction costs a few
numpy calls and no index arrays: the TLM's cost per instruction, not per vector.
"""

from __future__ import annotations

from hw.alu_numpy import alu_op, run_alu

__all__ = ["alu_op", "run_alu"]
