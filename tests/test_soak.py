"""`make soak` (cosim/soak.py): what it reads from a run's JUnit XML and how it names flaky tests.

The soak itself (a clone, a venv, the suite several times under load) is far too long for the
suite; docs/verification.md says how it was run on a reduced selection.
"""

from __future__ import annotations

from cosim.soak import failed_tests, tally

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.test_a" name="test_fails" time="0.2"><failure message="assert 1 == 2"/></testcase>
<testcase classname="tests.test_b" name="test_errors[x]" time="0.0"><error message="fixture"/></testcase>
<testcase classname="tests.test_b" name="test_skipped" time="0.0"><skipped message="no chromium"/></testcase>
</testsuite></testsuites>"""


def test_failed_tests_of_a_junit_file(tmp_path):
    p = tmp_path / "run.xml"
    p.write_text(JUNIT)
    assert failed_tests(p) == ["tests.test_a::test_fails", "tests.test_b::test_errors[x]"]
    assert failed_tests(tmp_path / "none.xml") == []
    p.write_text("<testsuites><testcase")
    assert failed_tests(p) == ["<the JUnit XML of this run is not readable>"]


def test_flaky_is_failed_in_some_runs_not_all():
    runs = [{"run": 1, "failed": ["t::a", "t::b"]}, {"run": 2, "failed": ["t::a"]}, {"run": 3, "failed": ["t::a"]}]
    failures, flaky = tally(runs, 3)
    assert failures == {"t::a": [1, 2, 3], "t::b": [1]} and flaky == ["t::b"]
