"""cocotb bench of hw/rtl/unit_shell.v (the IDLE -> WAIT -> EXEC -> PUSH shell of every unit)
against a Python model of the rule in its header: IDLE pops a non-empty queue; WAIT raises ``err``
on a range fault and otherwise takes the tokens its flags name together once all are available;
EXEC lasts until ``exec_done`` (PUSH next) or ``exec_stop`` (IDLE next); PUSH pushes its tokens
together once none is full; a halt sends WAIT and PUSH back to IDLE; a unit without a previous
(next) stage ignores those flags. Every output is checked in every cycle, on random stimulus.
"""

from __future__ import annotations

from typing import Any

import cocotb
from cocotb.triggers import FallingEdge, Timer

from hw.isa import INSN_BITS, Isa
from testbench.units.bench_setup import bench_config, bench_params, bench_rng, clock_and_reset

IDLE, WAIT, EXEC, PUSH = range(4)
INPUTS = ("clr", "halt", "q_empty", "q_dout", "prev_avail", "prev_full", "next_avail", "next_full", "range_bad",
          "exec_done", "exec_stop", "exec_stuck")


class ShellModel:
    """The shell's state and what its outputs are for given inputs."""

    def __init__(self, flag_bits: dict[str, int], has_prev: bool, has_next: bool):
        self.bits, self.has = flag_bits, {"prev": has_prev, "next": has_next}
        self.state, self.insn, self.pc = IDLE, 0, 0

    def flag(self, name: str) -> bool:
        return self.has[name.split("_")[1]] and bool(self.insn >> self.bits[name] & 1)

    def outputs(self, i: dict[str, int]) -> dict[str, int]:
        st, halt = self.state, i["halt"]
        tok_ok = (not self.flag("pop_prev") or i["prev_avail"]) and (not self.flag("pop_next") or i["next_avail"])
        blocked = (self.flag("push_prev") and i["prev_full"]) or (self.flag("push_next") and i["next_full"])
        wait_go = st == WAIT and not halt and not i["range_bad"] and tok_ok
        push_go = st == PUSH and not halt and not blocked
        stall = (st == WAIT and not tok_ok) or (st == PUSH and blocked)
        return {"q_pop": int(st == IDLE and not halt and not i["q_empty"]),
                "prev_pop": int(wait_go and self.flag("pop_prev")), "next_pop": int(wait_go and self.flag("pop_next")),
                "prev_push": int(push_go and self.flag("push_prev")),
                "next_push": int(push_go and self.flag("push_next")),
                "insn": self.insn, "start": int(wait_go), "err": int(st == WAIT and not halt and i["range_bad"]),
                "pc_out": 0xFFFFFFFF if st == IDLE else self.pc, "idle": int(st == IDLE), "exec": int(st == EXEC),
                "stall": int(stall),
                "stuck": int((st == IDLE and i["q_empty"]) or stall or (st == EXEC and i["exec_stuck"])),
                "insn_done": int(push_go)}

    def edge(self, i: dict[str, int], out: dict[str, int]) -> None:
        """The clock edge: the next state."""
        if i["clr"]:
            self.state, self.insn, self.pc = IDLE, 0, 0
        elif self.state == IDLE and out["q_pop"]:
            self.state = WAIT
            self.insn, self.pc = i["q_dout"] & ((1 << INSN_BITS) - 1), i["q_dout"] >> INSN_BITS
        elif self.state == WAIT:
            self.state = IDLE if i["halt"] else EXEC if out["start"] else WAIT
        elif self.state == EXEC:
            self.state = IDLE if i["exec_stop"] else PUSH if i["exec_done"] else EXEC
        elif self.state == PUSH and (i["halt"] or out["insn_done"]):
            self.state = IDLE


@cocotb.test()
async def random_instructions_tokens_and_halts(dut: Any) -> None:
    prm = bench_params()
    isa = Isa(bench_config())
    bits = {n: isa.field("ALU", n).lo for n in ("pop_prev", "pop_next", "push_prev", "push_next")}
    model = ShellModel(bits, bool(prm["HAS_PREV"]), bool(prm["HAS_NEXT"]))
    rng = bench_rng("random_instructions_tokens_and_halts")
    await clock_and_reset(dut, {n: 0 for n in INPUTS})
    visits = [0, 0, 0, 0]
    for cycle in range(5000):
        i = {"clr": int(rng.random() < 0.005), "halt": int(rng.random() < 0.03), "q_empty": int(rng.random() < 0.3),
             "q_dout": rng.randrange(1 << (INSN_BITS + 32)), "range_bad": int(rng.random() < 0.05),
             "exec_done": int(rng.random() < 0.3), "exec_stop": int(rng.random() < 0.03),
             "exec_stuck": int(rng.random() < 0.5)}
        for side in ("prev", "next"):  # tokens mostly there, room mostly free
            i[f"{side}_avail"], i[f"{side}_full"] = int(rng.random() < 0.7), int(rng.random() < 0.3)
        for name, v in i.items():
            getattr(dut, name).value = v
        await Timer(1, unit="ns")
        want = model.outputs(i)
        got = {name: int(getattr(dut, name).value) for name in want}
        assert got == want, f"cycle {cycle} in state {model.state}, inputs {i}: " + ", ".join(
            f"{k} {got[k]:x} want {want[k]:x}" for k in want if got[k] != want[k])
        visits[model.state] += 1
        await FallingEdge(dut.clk)
        model.edge(i, want)
    assert all(visits), f"a state never reached: {visits}"
