"""The suite's own scheduling (tests/conftest.py): the longest tests are collected first, and every
entry of the list still names a test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import SLOW_FIRST, slow_first

REPO = Path(__file__).resolve().parents[1]


class _Item:
    """What slow_first reads of a pytest item."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_slow_tests_move_first_in_list_order_and_the_rest_keep_theirs():
    ids = ["tests/a.py::test_1", "tests/b.py::test_slow[x]", "tests/a.py::test_2", "tests/c.py::test_slower",
           "tests/b.py::test_slow[y]"]
    got = [i.nodeid for i in slow_first([_Item(n) for n in ids], ("tests/c.py::test_slower", "tests/b.py::test_slow"))]
    assert got == ["tests/c.py::test_slower", "tests/b.py::test_slow[x]", "tests/b.py::test_slow[y]",
                   "tests/a.py::test_1", "tests/a.py::test_2"]


@pytest.mark.parametrize("prefix", SLOW_FIRST)
def test_every_slow_first_entry_names_a_test(prefix):
    path, _, rest = prefix.partition("::")
    source = REPO / path
    assert source.is_file(), f"{path}: no such test file"
    name = re.match(r"[A-Za-z_0-9]*", rest).group(0)
    assert re.search(rf"^def {name}\(", source.read_text(), re.M), f"{path} has no test {name}"
