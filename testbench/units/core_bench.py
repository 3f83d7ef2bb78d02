"""cocotb bench of hw/rtl/core.v alone: one core (FETCH, queues, tokens, buffers, the three units)
with everything it sees from outside modelled here in Python, after the contracts of the blocks
that sit around it in accel_top:

* the DRAM port (axi_arbiter.v in front of the fast DRAM model, docs/microarch.md "The DRAM port
  (arbiter)"): in a cycle the port is free and not halted it grants, in the same cycle, the
  highest-priority requester (FETCH > LOAD > STORE) and owns that one burst until it ends. A read
  burst of n beats granted at g has its beats at g+1+Lr .. g+Lr+n (one-cycle ``*_beat`` pulses
  with ``rd_data``), ``*_bdone`` with the last beat, and the port is free again at g+Lr+n+1. A
  write burst takes its W beats at g+1 .. g+n (``s_wdata`` sampled in each ``s_beat`` cycle), its
  ``s_bdone`` at g+n+Lw, and frees the port at g+n+Lw+1. ``port_busy`` is high while the port
  owns a burst;
* the CSR block's run control (csr_block.v): START is a one-cycle ``clr`` + ``start``; ``halt``
  is high while not busy and from the cycle after an error; DONE comes with ``finish`` (cycles:
  from START to that cycle, as CYCLES counts them), or after an error once the port is free; the
  error reported is the fetch error, else the lowest pc of load, compute and store; a deadlock is
  ``stuck`` (with the port free and no request) in two cycles in a row, at ``blocked_pc``.

A job names a pickled Program, a port mode and a seed: ``fast`` is the timing above; ``backpressure``
withholds grants and stretches every burst by seeded random cycles (results must not change, only
the cycle count); ``no_grant`` never grants (the run must end on the watchdog). Every run is bounded
by ``memimg.watchdog_cycles`` of its Program. The bench checks the requests as the arbiter relies on
them (bus-aligned address, 1..MAX_BURST beats, no 4 KiB crossing, held unchanged until granted) and
writes, per job, a JSON result and the final DRAM image: the pytest side compares them with the TLM.

Environment: CORE_BENCH_JOBS, a JSON file holding a list of jobs
``{"program": <pickle>, "mode": ..., "seed": ..., "result": <json>, "dram": <bin>}``.
"""

from __future__ import annotations

import json
import os
import pickle
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from hw import csr
from hw.program import Program
from testbench.memimg import watchdog_cycles
from testbench.units.bench_setup import bench_config, clock_and_reset

CLIENTS = ("f", "l", "s")            # priority order: FETCH > LOAD > STORE
PAGE = 4096
MODES = ("fast", "backpressure", "no_grant")
OUT_ZERO = {f"{c}_{n}": 0 for c in CLIENTS for n in ("gnt", "beat", "bdone")}


@dataclass
class Burst:
    """The burst the port owns: its client, address, beats, and its remaining cycles (one entry a
    cycle from the cycle after the grant: "wait", "beat" (a read or W beat), or "b" (the write
    response))."""

    client: str
    addr: int
    beats: int
    plan: list[str]
    done_beats: int = 0


def burst_plan(read: bool, beats: int, lr: int, lw: int, rng: random.Random | None) -> list[str]:
    """The cycles of one burst after its grant; with ``rng``, random pauses stretch it (the slow
    DRAM and a busy interconnect), never shortening the fast timing."""
    def pause() -> list[str]:
        return ["wait"] * (rng.choice((0, 0, 0, 1, 2, 5)) if rng else 0)

    if read:
        plan = ["wait"] * lr
        for _ in range(beats):
            plan += pause() + ["beat"]
        return plan
    plan = []
    for _ in range(beats):
        plan += pause() + ["beat"]
    return plan + ["wait"] * (lw - 1) + pause() + ["b"]


class Port:
    """The arbiter and the DRAM behind it, for one core."""

    def __init__(self, dram: bytearray, bus_bytes: int, max_burst: int, lr: int, lw: int, mode: str,
                 rng: random.Random):
        self.dram, self.bb, self.max_burst, self.lr, self.lw = dram, bus_bytes, max_burst, lr, lw
        self.mode, self.rng = mode, rng
        self.burst: Burst | None = None
        self.waiting: dict[str, tuple[int, int]] = {}   # client -> (addr, len) requested, not yet granted
        self.bursts = 0
        self.stretch = 0    # cycles of back-pressure: grants withheld and pauses inside bursts

    def busy(self) -> bool:
        return self.burst is not None

    def this_cycle(self) -> dict[str, int]:
        """The port's outputs this cycle that follow from its state (not the grant)."""
        out = dict(OUT_ZERO)
        out["port_busy"] = int(self.burst is not None)
        out["rd_data"] = 0
        b = self.burst
        if b is not None and b.plan[0] == "beat":
            out[f"{b.client}_beat"] = 1
            if b.client != "s":
                a = b.addr + b.done_beats * self.bb
                out["rd_data"] = int.from_bytes(self.read(a, self.bb), "little")
                out[f"{b.client}_bdone"] = int(b.done_beats == b.beats - 1)
        if b is not None and b.plan[0] == "b":
            out["s_bdone"] = 1
        return out

    def read(self, addr: int, n: int) -> bytes:
        return bytes(self.dram[addr:addr + n]).ljust(n, b"\0")

    def write(self, addr: int, data: bytes) -> None:
        if len(self.dram) < addr + len(data):
            self.dram.extend(bytes(addr + len(data) - len(self.dram)))
        self.dram[addr:addr + len(data)] = data

    def check_requests(self, req: dict[str, tuple[int, int] | None], halt: bool, cycle: int) -> None:
        """What the arbiter relies on: a request is a bus-aligned burst of 1..MAX_BURST beats inside one
        4 KiB page, held unchanged until it is granted (while the core is not halted)."""
        for c, r in req.items():
            if r is None:
                if c in self.waiting and not halt:
                    raise AssertionError(f"cycle {cycle}: {c}_req dropped before its grant {self.waiting[c]}")
                self.waiting.pop(c, None)
                continue
            addr, n = r
            assert addr % self.bb == 0, f"cycle {cycle}: {c}_addr {addr:#x} is not bus aligned"
            assert 1 <= n <= self.max_burst, f"cycle {cycle}: {c}_len {n} outside 1..{self.max_burst}"
            assert addr // PAGE == (addr + n * self.bb - 1) // PAGE, \
                f"cycle {cycle}: {c} burst {addr:#x}+{n} beats crosses a 4 KiB boundary"
            if c in self.waiting and not halt:
                assert self.waiting[c] == r, f"cycle {cycle}: {c} request changed from {self.waiting[c]} to {r} " \
                                             "before its grant"
            self.waiting[c] = r

    def grant(self, req: dict[str, tuple[int, int] | None], halt: bool) -> str | None:
        """The client granted this cycle (the port free, not halted), or None."""
        if self.burst is not None or halt or self.mode == "no_grant":
            return None
        if self.mode == "backpressure" and any(r is not None for r in req.values()) and self.rng.random() < 0.4:
            self.stretch += 1
            return None
        for c in CLIENTS:
            if req[c] is not None:
                addr, n = req[c]
                rng = self.rng if self.mode == "backpressure" else None
                self.burst = Burst(c, addr, n, burst_plan(c != "s", n, self.lr, self.lw, rng))
                fast = (self.lr + n) if c != "s" else (n + self.lw)
                self.stretch += len(self.burst.plan) - fast
                self.waiting.pop(c, None)
                self.bursts += 1
                return c
        return None

    def edge(self, granted_now: bool, wdata: int) -> None:
        """The clock edge: the burst advances by one cycle (not in its grant cycle)."""
        b = self.burst
        if b is None or granted_now:
            return
        step = b.plan.pop(0)
        if step == "beat":
            if b.client == "s":
                self.write(b.addr + b.done_beats * self.bb, wdata.to_bytes(self.bb, "little"))
            b.done_beats += 1
        if not b.plan:
            assert b.done_beats == b.beats, f"burst {b} ended after {b.done_beats} beats"
            self.burst = None


def sig(dut: Any, name: str) -> int:
    return int(getattr(dut, name).value)


def region_inputs(program: Program) -> dict[str, int]:
    """The core's static inputs from the Program's register config (one core: the fixed map's INSN_*)."""
    regs = dict(program.regs)
    cfg = program.config
    rbase = rsize = rattr = 0
    for i in range(cfg.max_regions):
        rbase |= regs.get(f"REGION{i}_BASE", 0) << (32 * i)
        rsize |= regs.get(f"REGION{i}_SIZE", 0) << (32 * i)
        rattr |= regs.get(f"REGION{i}_ATTR", 0) << (2 * i)
    return {"insn_addr_lo": regs["INSN_ADDR_LO"], "insn_addr_hi": regs["INSN_ADDR_HI"],
            "insn_count": regs["INSN_COUNT"], "rbase": rbase, "rsize": rsize, "rattr": rattr}


def first_error(dut: Any) -> tuple[int, int] | None:
    """The error csr_block would report from this cycle's sources (one core): fetch first, then the
    lowest pc of load, compute, store."""
    if sig(dut, "f_err"):
        return sig(dut, "f_err_code"), sig(dut, "f_err_pc")
    got = [(sig(dut, f"{u}_pc"), sig(dut, f"{u}_err_code")) for u in ("ld", "cu", "st") if sig(dut, f"{u}_err")]
    if not got:
        return None
    pc, code = min(got, key=lambda t: t[0])
    return code, pc


async def reset(dut: Any, inputs: dict[str, int], first: bool) -> None:
    """Hold reset for 3 cycles with ``inputs`` driven (the first time starting the clock too) and
    return at the falling edge after it."""
    if first:
        await clock_and_reset(dut, inputs)
        return
    for name, value in inputs.items():
        getattr(dut, name).value = value
    dut.rst.value = 1
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await FallingEdge(dut.clk)


async def run_job(dut: Any, job: dict[str, Any], first: bool) -> dict[str, Any]:
    """One Program on the core from reset and START to DONE (or the watchdog); its result as JSON-able
    data (the final DRAM image into the job's ``dram`` file)."""
    program: Program = pickle.loads(Path(job["program"]).read_bytes())
    cfg = program.config
    assert cfg.num_cores == 1, "the core bench runs one-core Programs"
    mode = job["mode"]
    assert mode in MODES, f"unknown mode {mode!r}"
    port = Port(bytearray(program.dram_image()), cfg.bus_bytes, cfg.max_burst, cfg.dram_read_latency,
                cfg.dram_write_latency, mode, random.Random(f"core-{job['seed']}-{program.name}"))
    bound = watchdog_cycles(program, "protocol" if mode == "backpressure" else "fast")
    ins = {"clr": 0, "start": 0, "halt": 1, "bar_go": 0, "f_gnt": 0, "l_gnt": 0, "s_gnt": 0, **OUT_ZERO,
           "rd_data": 0, "port_busy": 0, **region_inputs(program)}
    await reset(dut, ins, first)
    error: tuple[int, int] | None = None
    stuck_prev = False
    done_cycle: int | None = None
    cycle = 0
    while cycle <= bound:
        halt = cycle == 0 or error is not None
        drive = {**port.this_cycle(), "clr": int(cycle == 0), "start": int(cycle == 0), "halt": int(halt),
                 "f_gnt": 0, "l_gnt": 0, "s_gnt": 0}
        for name, v in drive.items():
            getattr(dut, name).value = v
        await Timer(1, unit="ns")
        if sig(dut, "arrived") != sig(dut, "bar_go"):
            # one core: the barrier's bar_go is its every-core-arrived, combinational, as in accel_top
            dut.bar_go.value = sig(dut, "arrived")
            await Timer(1, unit="ns")
        req = {c: (sig(dut, f"{c}_addr"), sig(dut, f"{c}_len")) if sig(dut, f"{c}_req") else None for c in CLIENTS}
        if cycle > 0 and error is None:
            port.check_requests(req, halt, cycle)
            e = first_error(dut)
            stuck = bool(sig(dut, "stuck")) and not port.busy() and all(r is None for r in req.values())
            if e is not None:
                error = e
            elif stuck and stuck_prev:
                error = (csr.ERR_DEADLOCK, sig(dut, "blocked_pc"))
            elif sig(dut, "finish"):
                done_cycle = cycle
                break
            stuck_prev = stuck
        elif error is not None and not port.busy():
            done_cycle = cycle
            break
        granted = port.grant(req, halt)
        if granted is not None:
            getattr(dut, f"{granted}_gnt").value = 1
        wdata = sig(dut, "s_wdata")
        await FallingEdge(dut.clk)
        port.edge(granted is not None, wdata)
        cycle += 1
    if done_cycle is None:
        return {"name": program.name, "mode": mode, "watchdog": bound, "cycles": None, "error": None,
                "bursts": port.bursts, "stretch": port.stretch}
    Path(job["dram"]).write_bytes(bytes(port.dram))
    return {"name": program.name, "mode": mode, "watchdog": None, "cycles": done_cycle, "bursts": port.bursts,
            "stretch": port.stretch,
            "error": None if error is None else {"name": csr.ERROR_NAMES.get(error[0], str(error[0])),
                                                 "pc": error[1]}}


@cocotb.test()
async def programs_on_one_core(dut: Any) -> None:
    """Every job of CORE_BENCH_JOBS in turn, each from a reset."""
    jobs = json.loads(Path(os.environ["CORE_BENCH_JOBS"]).read_text())
    cfg = bench_config()
    for k, job in enumerate(jobs):
        res = await run_job(dut, job, first=k == 0)
        Path(job["result"]).write_text(json.dumps(res))
    assert jobs, "no jobs"
    assert cfg.num_cores == 1
