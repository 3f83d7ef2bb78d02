"""Several cores against one: every example's TLM cycles on ``quad`` (four default cores on one AXI port)
and on ``default`` (one), and the digits CNN on a small batch, cycles per image on both; the benchmark's
targets "no example slower on quad than on one core" and "digits on quad at most one core's cycles per
image". The TLM is cycle-exact to the RTL on every example of ``quad`` (tests/test_tlm_vs_rtl.py), so the
cycles are the RTL's too; outputs are checked against the golden path."""

from __future__ import annotations

import sys
from typing import Any

from hw.config import load_config

ONE, SEVERAL = "default", "quad"
DIGITS_BATCH = 8  # a small batch: the barriers between the layers weigh most on few images


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _example(name: str, config: str) -> tuple[int, str]:
    """TLM cycles of example ``name`` on ``config`` and what disagrees with golden ("" when nothing)."""
    from cosim import models
    job = models.make_job(name, load_config(config))
    res = models.run_tlm(job)
    if res.error is not None:
        return int(res.cycles or 0), f"{res.error.get('name')}: {res.error.get('message')}"
    mm = models.first_mismatch(job.expected, res.outputs)
    return int(res.cycles), str(mm) if mm else ""


def _digits(config: str, images: int) -> dict[str, Any]:
    """The digits CNN on its first ``images`` test images as one Program: TLM cycles per image, and whether
    golden and the TLM give the reference logits."""
    from cosim.network_run import get_network, make_net_case, run_network
    case = make_net_case(get_network("digits"), load_config(config), images)
    rep, _sections = run_network(case, ["golden", "tlm"])
    return {"cycles": rep["cycles"]["tlm"], "per_image": rep["cycles"]["per_image"], "agree": bool(rep["match"])}


def measure_quad_vs_one(digits_batch: int = DIGITS_BATCH) -> dict[str, Any]:
    """The rows (one per example), the digits batch on both configs and the two targets."""
    from compiler.examples import list_examples
    rows = []
    for name in [e if isinstance(e, str) else e.name for e in list_examples()]:
        _log(f"[quad vs one] {name}")
        one, why_one = _example(name, ONE)
        several, why_several = _example(name, SEVERAL)
        problems = [f"{c}: {w}" for c, w in ((ONE, why_one), (SEVERAL, why_several)) if w]
        rows.append({"example": name, "one": one, "quad": several,
                     "ratio": several / one if one else float("inf"), "agree": not problems, "problems": problems})
    _log(f"[quad vs one] digits, {digits_batch} images")
    digits = {"images": digits_batch, ONE: _digits(ONE, digits_batch), SEVERAL: _digits(SEVERAL, digits_batch)}
    worst = max(rows, key=lambda r: r["ratio"])
    digits_ratio = digits[SEVERAL]["per_image"] / digits[ONE]["per_image"]
    return {"rows": rows, "digits": digits, "worst": worst["example"],
            "agree": all(r["agree"] for r in rows) and digits[ONE]["agree"] and digits[SEVERAL]["agree"],
            "targets": {
                "quad_vs_one_core_worst": _verdict(worst["ratio"], "no example slower on quad than on one core "
                                                   f"(worst quad / one core cycles, {worst['example']})"),
                "digits_quad_vs_one_core": _verdict(digits_ratio, f"digits on quad <= one core's cycles per "
                                                    f"image ({digits_batch} images)")}}


def _verdict(value: float, what: str) -> dict[str, Any]:
    return {"value": value, "target": "<= 1.0", "met": value <= 1.0, "what": what}


def verdicts(res: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The section's targets for the benchmark's list of targets (none without the section)."""
    return dict((res or {}).get("targets", {}))


def table_lines(res: dict[str, Any] | None) -> list[str]:
    """Every example on one core and on quad, and the digits batch per image."""
    if not res:
        return []
    head = f"{'example':<16}{'one core':>11}{'quad':>11}{'quad/one':>10}"
    out = [f"several cores: every example on {SEVERAL} against {ONE} (TLM cycles = RTL cycles)", head,
           "-" * len(head)]
    for r in res["rows"]:
        out.append(f"{r['example']:<16}{r['one']:>11,}{r['quad']:>11,}{r['ratio']:>10.3f}"
                   + ("" if r["agree"] else "  DISAGREES: " + "; ".join(r["problems"])))
    d = res["digits"]
    out.append(f"digits CNN, {d['images']} images: {d[SEVERAL]['per_image']:,.0f} cycles per image on {SEVERAL}, "
               f"{d[ONE]['per_image']:,.0f} on {ONE}")
    return out

