"""Differential fuzzing and bad-input hardening.

* :mod:`sim.fuzz.generator` - seeded random *valid* Programs at instruction level
  (``generate(cfg, seed)``) and ``check_program`` (tokens balanced, deadlock-free,
  race-free, reads initialised).
* :mod:`sim.fuzz.reference` - an independent sequential interpreter of the ISA
  (``run_reference(program) -> RunResult``): the oracle without the RTL.
* :mod:`sim.fuzz.faults` - one injected fault per Program (``inject``) and
  ``PatchedProgram`` (raw instruction words that reach the models).
* :mod:`sim.fuzz.campaign` - ``run_campaign``: run, compare, shrink, save.
* :mod:`sim.fuzz.corpus` - the invalid-inputs corpus (``write_corpus(folder)``).
"""
