"""The transaction-level model (TLM) of the accelerator.

Public API: :func:`run_program` (Program -> ``hw.result.RunResult``), :class:`TlmModel`
(the model behind a CSR interface), :class:`Timing` (its one timing object) and
:class:`TlmError`. The TLM imports only ``hw.*``.

The TLM mirrors the RTL file for file: each block of ``hw/rtl`` has the module of the
same name here, and no block holds a pointer to the whole model (the top wires each one
to the queues, port, timing, DRAM and callbacks it needs).

======================  ===========================  =========================================
RTL block (hw/rtl)      TLM module (sim/tlm)         what it holds
======================  ===========================  =========================================
accel_top.v             accel_top.py                 TlmModel, run_program: wiring, run control
                                                     (error arbitration, deadlock, DONE)
csr_block.v             csr_block.py                 register file, CTRL/STATUS/counter decode
fetch.v                 fetch.py (+ decode.py)       burst reads, dispatch (decode.py: its
                                                     decoder and dispatch checks)
insn_queue.v            insn_queue.py                the three instruction queues
unit_shell.v            unit_shell.py                IDLE/WAIT/EXEC/PUSH, tokens, counters
load_unit.v             load_unit.py                 LOAD's checks, EXECUTE, data movement (every
                                                     buffer)
compute_unit.v          compute_unit.py              ALU, GEMM and FINISH's EXECUTE (the port plan's
                                                     replanning of their ends)
gemm.v                  gemm.py                      one GEMM: data (hw.gemm_numpy), fault, the free
                                                     cycles its EXECUTE needs
alu.v                   alu.py                       the vector ALU's arithmetic (numpy)
store_unit.v            store_unit.py                STORE's checks, EXECUTE, narrowing
token_queue.v           token_queue.py               the four dependency-token queues
axi_arbiter.v           axi_arbiter.py               port arbitration, DMA segments
axi_arbiter.v (RIF > 1) axi_inflight.py              the port with read bursts in flight
burst_calc.v            burst_calc.py                the burst plan (4 KiB, MAX_BURST)
region_check.v          region_check.py              DRAM region windows and their check
acc_buffer.v            acc_buffer.py                the accumulator buffer
(the INP/WGT/UOP srams) gemm_buffers.py              GEMM's operand buffers and valid bits
======================  ===========================  =========================================

Infrastructure with no RTL block: ``scheduler.py`` (the event heap; the RTL's clock),
``timing.py`` (the timing model's constants), ``fast_forward.py`` and ``bulk_data.py`` (advancing a
repeating steady state in bulk, time and data, with the plain run's exact results), ``trace.py`` (timeline recording, VCD and
Perfetto writers; the RTL's probes and Verilator tracing), ``errors.py`` (TlmError; the
RTL's STATUS.error / ERR_PC) and ``dram.py`` (the DRAM's bytes; the testbench's
``testbench/hdl/dram_model.v`` for the RTL).
"""

from sim.tlm.accel_top import TlmModel, result_of, run_program, simulate
from sim.tlm.errors import TlmError
from sim.tlm.timing import Timing, TimingError, calibration_path

__all__ = ["TlmError", "TlmModel", "Timing", "TimingError", "calibration_path", "result_of", "run_program"]
