"""Four cores are never slower than one (the benchmark's section, cosim/bench/quad_vs_one.py): every
example takes no more TLM cycles on ``quad`` (four default cores on one AXI port) than on ``default``
(one), with outputs bit-exact to the golden path on both, and the digits CNN on a small batch takes no
more cycles per image on ``quad`` than on one core, golden and the TLM giving the reference logits
(TLM only: tests/test_tlm_vs_rtl.py holds the TLM to the RTL's cycles on ``quad``)."""

from __future__ import annotations

from cosim.bench.quad_vs_one import DIGITS_BATCH, ONE, SEVERAL, measure_quad_vs_one, table_lines


def test_no_example_and_no_small_digits_batch_is_slower_on_quad_than_on_one_core() -> None:
    res = measure_quad_vs_one()
    table = "\n".join(table_lines(res))
    assert len(res["rows"]) >= 20, table  # every example, not a sample
    assert res["agree"], table
    slower = [r["example"] for r in res["rows"] if r["quad"] > r["one"]]
    assert not slower, f"slower on {SEVERAL} than on one core: {', '.join(slower)}\n{table}"
    d = res["digits"]
    assert d["images"] == DIGITS_BATCH and d[SEVERAL]["per_image"] <= d[ONE]["per_image"], table
    assert all(t["met"] for t in res["targets"].values()), res["targets"]
