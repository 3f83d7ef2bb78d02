"""The transaction-level model (TLM) of the accelerator.

Public API: :func:`run_program` (Program -> ``hw.result.RunResult``), :class:`TlmModel`
(the model behind a CSR interface), :class:`Timing` (its one timing object) and
:class:`TlmError`. The TLM imports only ``hw.*``.
"""

from sim.tlm.errors import TlmError
from sim.tlm.model import TlmModel, run_program
from sim.tlm.timing import Timing, TimingError, calibration_path

__all__ = ["TlmError", "TlmModel", "Timing", "TimingError", "calibration_path", "run_program"]
