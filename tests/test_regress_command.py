"""`cosim regress`: cells of the cocotb regression as engine tasks, JUnit XML with pytest's testcase names.

A small slice (two examples and the unit cases on 'small', fast back-end) on a one-worker embedded cluster;
run again with the same results file, nothing runs and the same XML comes out. The full matrix is
`make regress`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from cosim.models import design_digest, rtl_available, rtl_digest
from cosim.regress.cells import regression_cells

COSIM = [sys.executable, "-m", "cosim.cli"]


def test_cells_are_the_pytest_matrix():
    """Default axes: the test module's full matrix (Icarus rows included), testcase names as pytest's ids."""
    cells = regression_cells(["default", "small"], ["fast", "protocol"], 3, ["verilator", "icarus"])
    names = [c.testcase for c in cells]
    assert len(names) == len(set(names)) == 2 * 2 * 3 + 2 + 1 + 4
    assert names[0] == "test_examples[default-fast-0-verilator]"
    assert "test_examples[default-protocol-0-icarus]" in names and "test_unit_cases[small-protocol]" in names
    proto = next(c for c in cells if c.testcase == "test_examples[small-protocol-1-verilator]")
    fast = next(c for c in cells if c.testcase == "test_examples[small-fast-1-verilator]")
    assert set(proto.names) < set(fast.names)  # the large examples run on the fast back-end only
    split = regression_cells(["small"], ["fast"], 1, ["verilator"], examples_per_task=4, units=False)
    assert {c.testcase for c in split} == {"test_examples[small-fast-0-verilator]"} and len(split) > 1
    assert [n for c in split for n in c.names] == list(fast.names)
    assert len({c.key for c in split}) == len(split)
    whole = regression_cells(["small"], ["fast"], 1, ["verilator"], units=False)[0]
    some = regression_cells(["small"], ["fast"], 1, ["verilator"], examples=["vadd"], units=False)[0]
    # a selection resumes as itself only; a result of another design (the RTL edited since) is not one
    assert whole.key == f"{whole.testcase} rtl={whole.design}" and whole.testcase == some.testcase
    assert some.key == f"{some.testcase} vadd rtl={some.design}" and whole.design == design_digest(["small"])
    assert whole.design.startswith(rtl_digest() + "-")
    # another hardware of one name (a config file edited since) is another design
    other = regression_cells(["default"], ["fast"], 1, ["verilator"], units=False)[0]
    assert other.design.split("-")[0] == whole.design.split("-")[0] and other.design != whole.design
    assert rtl_digest() != "none" and len(rtl_digest()) == 10


@pytest.mark.skipif(rtl_available() is not None, reason=f"no RTL: {rtl_available()}")
def test_regress_slice_junit_and_resume(tmp_path):
    junit, results = tmp_path / "regress.xml", tmp_path / "regress.jsonl"
    cmd = [*COSIM, "regress", "--configs", "small", "--backends", "fast", "--seeds", "1", "--examples", "vadd",
           "relu", "--workers", "1", "--junit", str(junit), "--results", str(results), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert (j["passed"], j["failed"], j["error"]) == (3, 0, 0), j  # Verilator x2 (examples, units) + Icarus
    cycles = next(t for t in j["testcases"] if t["name"] == "test_examples[small-fast-0-verilator]")["detail"]
    assert set(cycles) == {"vadd", "relu"} and all(c > 0 for c in cycles.values())
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "0" and suite.get("errors") == "0"
    names = [(tc.get("classname"), tc.get("name")) for tc in suite.iter("testcase")]
    assert names == [("tests.test_rtl_regression", "test_examples[small-fast-0-verilator]"),
                     ("tests.test_rtl_regression", "test_examples[small-fast-0-icarus]"),
                     ("tests.test_rtl_regression", "test_unit_cases[small-fast]")]
    assert len(results.read_text().splitlines()) == 3
    junit.unlink()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and json.loads(again.stdout)["passed"] == 3, again.stderr
    assert [tc.get("name") for tc in ET.parse(junit).getroot().iter("testcase")] == [n for _, n in names]
    assert len(results.read_text().splitlines()) == 3  # nothing ran again


def test_regress_bad_input_one_line():
    r = subprocess.run([*COSIM, "regress", "--examples", "nosuch", "--workers", "0"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "no example named nosuch" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([*COSIM, "regress", "--configs", "nosuch"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nosuch" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = subprocess.run([*COSIM, "regress", "--configs", "small", "small", "--examples", "vadd", "--workers", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == "cosim regress: error: --configs: small given twice", r.stderr


@pytest.mark.parametrize("result, why", [(None, "its result is not a mapping"),
                                         ({"outcome": "bogus"}, "outcome 'bogus' is not one of passed"),
                                         ({"outcome": "passed", "time": "abc"}, "time 'abc' is not a number")])
def test_regress_resumed_from_a_record_that_is_not_a_cell_s_result_is_one_line(tmp_path, result, why):
    cell = regression_cells(["small"], ["fast"], 1, ["verilator"], examples=["vadd"], units=False)[0]
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps({"key": cell.key, "ok": True, "result": result}) + "\n")
    r = subprocess.run([*COSIM, "regress", "--configs", "small", "--backends", "fast", "--seeds", "1", "--examples",
                        "vadd", "--no-units", "--simulators", "verilator", "--workers", "0", "--results", str(results)],
                       capture_output=True, text=True, timeout=120)
    last = r.stderr.strip().splitlines()[-1]  # after the progress line
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert last.startswith(f"cosim regress: error: {results}: the record of {cell.key} is not a regression cell's "
                           f"result ({why}"), r.stderr
