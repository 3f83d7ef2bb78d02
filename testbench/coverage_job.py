"""The directed coverage job: the cocotb job of ``testbench.cocotb_job`` with, around each Program's run,
what Programs alone never make the RTL do (``run_programs(..., job_module="testbench.coverage_job")``).

Per Program:

1. its normal run (as the plain job);
2. CSR readback: every word address of the fixed map, of each core's register bank (0x800 + 0x80 * k,
   on one core too) and two unmapped ones is read; every read-write register is written all ones,
   read, written zero, read, and written back with the value first read, through its own address
   (the bank addresses included), each region's base and size are written all ones together (its
   end reaches 2^32) and back, and a read-only one is written (ignored by the RTL); on the fast back-end
   also the bus bits word-wide accesses never set (:func:`bus_bits`: every write strobe, byte offsets,
   AxPROT, an unmapped high word);
3. a soft clear during the fetch: reset, DRAM loaded, the register writes up to START, then
   CTRL.SOFT_RESET at once: STATUS must say not busy within a bound;
4. the same with the clear in the middle of the run (half the cycles of run 1);
5. on the protocol back-end (every signal public to VPI), the counters' carry walk: the Program from
   reset while :func:`counter_walk` presets every event counter of every core and the 64-bit CYCLES
   just below each power of two, from the top bit down (see there); the upper bits that a Program of
   thousands of cycles never reaches carry and wrap for real, and are read back through the CSRs;
6. the Program once more from reset: this run's results are reported (so the caller's checks of the
   outputs, cycles and counters also say that the clears and presets left nothing behind); what 2-5
   saw is in the result's ``directed`` entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cocotb
from cocotb.triggers import ClockCycles, Event, FallingEdge

from hw import csr
from testbench.cocotb_job import Bench, LiteDriver, execute_job

CLEAR_BOUND_READS = 200  # STATUS reads (each several cycles) a soft clear may take to reach idle


async def read_addr(bench: Bench, addr: int) -> int | None:
    """One AXI4-Lite read by address (None: no answer)."""
    if bench.lite is not None:
        return await bench.lite.read(addr)
    return int(await bench.axil.read_dword(addr))


async def write_addr(bench: Bench, addr: int, value: int) -> None:
    """One AXI4-Lite write by address."""
    if bench.lite is not None:
        await bench.lite.write(addr, value)
    else:
        await bench.axil.write_dword(addr, value)


async def csr_readback(bench: Bench) -> dict[str, Any]:
    """Step 2 of the module docstring."""
    ncores = bench.cfg.num_cores
    addrs = list(range(0, 0x100, 4))
    addrs += list(range(csr.CORE_BANK_BASE, csr.CORE_BANK_BASE + csr.CORE_BANK_STRIDE * ncores, 4))
    addrs += [csr.CORE_BANK_BASE - 4, 0xFFC]
    regions = [c.addr for c in csr.region_csrs(bench.cfg.max_regions)]
    addrs = sorted(set(addrs) | set(regions))
    values: dict[int, int | None] = {}
    for a in addrs:
        values[a] = await read_addr(bench, a)
    rw = {c.addr for c in csr.csrs_of(bench.cfg).values() if c.access == "rw"}
    for k in range(ncores):  # the bank registers of every core, by their bank address
        for _, off, access in csr.bank_registers():
            if access == "rw":
                rw.add(csr.CORE_BANK_BASE + csr.CORE_BANK_STRIDE * k + off)
    rewritten = 0
    for a in sorted(rw):
        if values.get(a) is not None:
            # every bit of the register both ways (the upper bits of a region's base and size never move
            # in a Program on a DRAM of some MiB), read back each time, then the value it had
            for pattern in (0xFFFFFFFF, 0):
                await write_addr(bench, a, pattern)
                await read_addr(bench, a)
            await write_addr(bench, a, int(values[a]))  # type: ignore[arg-type]
            rewritten += 1
    # each region's base and size all ones at once: its end (base + size) reaches bit 32, which one
    # register at a time never sets (the other holds its small first value, or 0 in an unused region)
    for k in range(bench.cfg.max_regions):
        base_addr, size_addr = regions[3 * k], regions[3 * k + 1]
        if values.get(base_addr) is not None and values.get(size_addr) is not None:
            await write_addr(bench, base_addr, 0xFFFFFFFF)
            await write_addr(bench, size_addr, 0xFFFFFFFF)
            await write_addr(bench, base_addr, int(values[base_addr]))  # type: ignore[arg-type]
            await write_addr(bench, size_addr, int(values[size_addr]))  # type: ignore[arg-type]
    await write_addr(bench, csr.csrs_of(bench.cfg)["STATUS"].addr, 0xFFFFFFFF)  # read-only: ignored
    bus = await bus_bits(bench, min(a for a in rw if values.get(a) is not None), values) \
        if bench.lite is not None and rw else None
    return {"read": len(addrs), "answered": sum(v is not None for v in values.values()), "rewritten": rewritten,
            "bus": bus}


UNMAPPED_HIGH = 0x7FC  # a word address with bits 2-10 set that no register decodes (writes ignored, reads 0)


async def lite_read(lite: LiteDriver, addr: int, prot: int) -> int | None:
    """One read with ARPROT ``prot`` (the plain driver's read, PROT set around it)."""
    lite.dut.s_axil_arprot.value = prot
    try:
        return await lite.read(addr)
    finally:
        lite.dut.s_axil_arprot.value = 0


async def bus_bits(bench: Bench, addr: int, values: dict[int, int | None]) -> dict[str, Any]:
    """The AXI4-Lite bits that word-wide register accesses never set (the fast back-end's pins): register
    ``addr`` written with each of the 16 byte strobes (a byte offset 0-3 in the address, AWPROT cycling
    through 0-7), read back at the same address with ARPROT set, then written back whole; an unmapped
    high word written and read. Returns what it read."""
    lite = bench.lite
    assert lite is not None
    first = int(values[addr])  # type: ignore[arg-type]
    seen = []
    for strb in range(16):  # byte offset strb // 4, so each offset sees four strobes, ones and zeros
        await lite.write(addr | (strb >> 2), 0xFFFFFFFF if strb & 1 else 0, strb, strb & 7)
        seen.append(await lite_read(lite, addr | (strb >> 2), 7 - (strb & 7)))
    await lite.write(addr, first)
    await lite.write(UNMAPPED_HIGH, 0xFFFFFFFF, 0xF, 7)
    unmapped = await lite_read(lite, UNMAPPED_HIGH, 7)
    # the four at offset 0 must merge their bytes into the register (a read-write word, 32 bits wide)
    want, cur = [], first
    for strb in range(4):
        mask = sum(0xFF << (8 * b) for b in range(4) if strb >> b & 1)
        cur = (cur & ~mask) | ((0xFFFFFFFF if strb & 1 else 0) & mask)
        want.append(cur)
    return {"addr": addr, "strobes": seen, "merged": seen[:4] == want, "restored": await lite.read(addr) == first,
            "unmapped": unmapped}


async def clear_during_run(bench: Bench, entry: dict[str, Any], after_cycles: int) -> dict[str, Any]:
    """Steps 3 and 4: START, ``after_cycles`` cycles, CTRL.SOFT_RESET; STATUS until not busy (bounded)."""
    dut = bench.dut
    img = bytearray(Path(entry["image"]).read_bytes())
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    await bench.load_dram(img)
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    for reg, value in entry["regs"]:
        await bench.write(str(reg), int(value))
    if after_cycles:
        await ClockCycles(dut.clk, after_cycles)
    busy_at_clear = csr.decode_status(await bench.read("STATUS"))["busy"]
    await bench.write("CTRL", csr.CTRL_SOFT_RESET)
    for n in range(CLEAR_BOUND_READS):
        st = await bench.read("STATUS")
        if not csr.decode_status(st)["busy"]:
            return {"after_cycles": after_cycles, "busy_at_clear": busy_at_clear, "idle_after_reads": n + 1,
                    "status": st}
    return {"after_cycles": after_cycles, "busy_at_clear": busy_at_clear, "idle_after_reads": None, "status": st}


WALK_LOW_BIT = 8  # the lowest bit the walk carries into (every run of some thousand cycles moves those below)


def counter_registers(bench: Bench) -> list[tuple[str, Any, int, int]]:
    """(CSR name, handle, width, step) of CYCLES and of every core's event counters, in the CSR block
    (``u_csr``: ``cycles``, and ``g_ctr[core].g_one[k].n`` in COUNTERS order); a ``*_BYTES`` counter adds
    a bus beat's bytes per event, the others one."""
    u = bench.dut.u_csr
    names = csr.counter_reads(bench.cfg.num_cores)
    out: list[tuple[str, Any, int, int]] = [("CYCLES", u.cycles, 64, 1)]
    for k in range(bench.cfg.num_cores):
        for i, name in enumerate(csr.COUNTERS):
            step = bench.cfg.bus_bytes if name.endswith("_BYTES") else 1
            out.append((names[k * len(csr.COUNTERS) + i], u.g_ctr[k].g_one[i].n, 32, step))
    return out


async def counter_walk(bench: Bench, stop: Event) -> dict[str, Any]:
    """Step 5 of the module docstring, while a Program runs: from the first cycle after its START cleared
    the counters until ``stop``, every counter is preset to 2^W - step (W its width, step what one event
    adds) and, after each event that moves it, to 2^b - step for b = W-1, W-2, ..., WALK_LOW_BIT. Each
    such event carries into bit b (the first wraps to 0), so every bit from WALK_LOW_BIT up rises and
    falls by the counter's own adder; a counter with few events gets its top bits first. Presets are
    written at a falling edge (the counters change at rising edges only). Checked: the event after a
    preset gives exactly 2^b mod 2^W. Returns per counter the carries done (``carries``), the
    ``mismatches`` and the values when ``stop`` was set (``final``)."""
    regs = counter_registers(bench)
    todo = [[(1 << b) - step for b in range(width, WALK_LOW_BIT - 1, -1)] for _, _, width, step in regs]
    pending: list[int | None] = [None] * len(regs)
    carries = [0] * len(regs)
    bad: list[str] = []
    busy, clk = bench.dut.u_csr.busy, bench.dut.clk
    while not int(busy.value) and not stop.is_set():
        await FallingEdge(clk)
    active = list(range(len(regs)))
    while active and not stop.is_set():
        await FallingEdge(clk)
        for j in list(active):
            name, h, width, step = regs[j]
            v, p = int(h.value), pending[j]
            if p is not None:
                if v == p:
                    continue  # no event since the preset
                want = (p + step) % (1 << width)
                if v != want:
                    bad.append(f"{name}: preset 0x{p:x}, then 0x{v:x}, expected 0x{want:x}")
                carries[j] += 1
            if todo[j]:
                pending[j] = todo[j].pop(0)
                h.value = pending[j]
            else:
                active.remove(j)
    await stop.wait()
    return {"low_bit": WALK_LOW_BIT, "carries": {regs[j][0]: carries[j] for j in range(len(regs))}, "mismatches": bad,
            "final": {name: int(h.value) for name, h, _, _ in regs}}


async def carry_walk_run(bench: Bench, entry: dict[str, Any]) -> dict[str, Any]:
    """The Program from reset with :func:`counter_walk` beside it; the CSR reads after DONE must equal the
    counters' values (the read path of their upper bits)."""
    stop = Event()
    walk = cocotb.start_soon(counter_walk(bench, stop))
    res = await bench.run(entry, True)
    stop.set()
    info = await walk
    reads = {**res["counters"], "CYCLES": res["cycles"]}
    info["read_back"] = [f"{n}: CSR 0x{reads.get(n, -1):x}, counter 0x{v:x}" for n, v in info["final"].items()
                         if reads.get(n) != v]
    info["status"] = res["status"]
    return info


async def run_directed(bench: Bench, entry: dict[str, Any], first: bool) -> dict[str, Any]:
    """One Program with steps 1-6 of the module docstring; the last run's result, ``directed`` added."""
    plain = await bench.run(entry, first)
    info: dict[str, Any] = {"readback": await csr_readback(bench), "clears": []}
    for after in (0, max(1, int(plain.get("run_sim_cycles", 2)) // 2)):
        info["clears"].append(await clear_during_run(bench, entry, after))
    if not bench.fast:
        info["walk"] = await carry_walk_run(bench, entry)
    res = await bench.run(entry, True)
    res["directed"] = info
    return res


@cocotb.test()
async def run_coverage_job(dut: Any) -> None:
    """The directed coverage job (see the module docstring)."""
    await execute_job(dut, run_directed)
