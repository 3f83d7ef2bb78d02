"""RTL code coverage: Verilator's coverage files read and merged once (``coverage_data``), waivers
(``waivers``), the summary per module (``summary``), lcov and HTML reports (``lcov``, ``html_report``),
and the regression run on coverage builds that feeds them (``campaign``)."""
