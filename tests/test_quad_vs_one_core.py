"""Four cores are never slower than one: every example takes no more TLM cycles on ``quad`` (four
default cores on one AXI port) than on ``default`` (one), with outputs bit-exact to the golden path on
both, and the digits CNN on a small batch takes no more cycles per image on ``quad`` than on one core
(TLM only: tests/test_tlm_vs_rtl.py holds the TLM to the RTL's cycles on ``quad``)."""

from __future__ import annotations

import numpy as np

from compiler.examples import list_examples, make_case
from hw.config import load_config
from sim.tlm import run_program

DIGITS_SMALL_BATCH = 8  # the batch docs/network.md quotes: barriers between layers weigh most on few images


def _tlm_cycles(name: str, config: str) -> int:
    """TLM cycles of example ``name`` with its default parameters on ``config``, outputs checked."""
    case = make_case(name, load_config(config), None, 0)
    r = run_program(case.program, raise_on_error=False)
    assert r.error is None, f"{name} on {config}: {r.error}"
    for k, want in case.program.expected.items():
        assert np.array_equal(r.outputs[k], want), f"{name} on {config}: output {k} differs from golden"
    return int(r.cycles)


def test_no_example_is_slower_on_quad_than_on_one_core() -> None:
    names = [e if isinstance(e, str) else e.name for e in list_examples()]
    slower = []
    for name in names:
        one, quad = _tlm_cycles(name, "default"), _tlm_cycles(name, "quad")
        if quad > one:
            slower.append(f"{name}: {quad} cycles on quad, {one} on one core")
    assert not slower, "slower on quad than on one core:\n" + "\n".join(slower)


def test_digits_small_batch_per_image_on_quad_is_at_most_one_core() -> None:
    from compiler.networks import NETWORKS, digits
    from compiler.network import compile_network

    batch = DIGITS_SMALL_BATCH
    images = digits.dataset("test")[0][:batch]
    graph = NETWORKS["digits"].graph()
    per_image = {}
    logits = {}
    for config in ("default", "quad"):
        net = compile_network(graph, config, batch=batch)
        net.set_inputs({"image": images})
        r = run_program(net.program)
        got = net.outputs(r.outputs)
        gold = net.run_golden({"image": images})
        assert got.keys() == gold.keys() and all(np.array_equal(got[k], gold[k]) for k in gold), config
        per_image[config] = r.cycles / batch
        logits[config] = got
    assert all(np.array_equal(logits["quad"][k], logits["default"][k]) for k in logits["default"])
    assert per_image["quad"] <= per_image["default"], per_image
