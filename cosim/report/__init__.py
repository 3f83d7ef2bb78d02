"""The verification report: one static HTML page from whatever result files exist (`cosim report`).

* :mod:`cosim.report.tables` - result files to tables: the JUnit XML of ``make regress`` (one row
  per testcase), and any JSON (its top-level numbers as a summary, each list or dict of items as a
  table of rows), rendered generically, so a producer may add fields without touching the report;
* :mod:`cosim.report.page` - the inputs (their default paths and the command that makes each) and
  the page: a section per input, "not run" with that command when its file is missing.
"""

from cosim.report.page import INPUTS, Input, write_report

__all__ = ["INPUTS", "Input", "write_report"]
