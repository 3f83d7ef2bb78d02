"""`cosim regress`: the cocotb regression (tests/test_rtl_regression.py's full matrix) as engine tasks.

* :mod:`cosim.regress.cells` - the cells (example x config x back-end x seed x simulator, and the unit
  cases per config and back-end) as tasks, and the task function that runs one;
* :mod:`cosim.regress.regression` - run the cells on the engine and join their records into testcases;
* :mod:`cosim.regress.junit` - the JUnit XML, with pytest's testcase names.
"""
