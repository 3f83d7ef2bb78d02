"""Differential fuzzing and bad-input hardening.

* :mod:`cosim.fuzz.generator` - seeded random *valid* Programs at instruction level
  (``generate(cfg, seed)``) and ``check_program`` (tokens balanced, deadlock-free,
  race-free, reads initialised).
* :mod:`sim.iss` - an independent sequential interpreter of the ISA
  (``run_reference(program) -> RunResult``): the oracle without the RTL.
* :mod:`cosim.fuzz.faults` - one injected fault per Program (``inject``) and
  ``hw.assembler.PatchedProgram`` (raw instruction words that reach the models).
* :mod:`cosim.fuzz.campaign` - ``run_campaign``: run, compare, shrink, save.
* :mod:`cosim.fuzz.corpus` - the invalid-inputs corpus (``write_corpus(folder)``).
"""
