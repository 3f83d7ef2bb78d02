"""cocotb bench of hw/rtl/axi_arbiter.v: three clients (FETCH and LOAD read, STORE writes) on one
AXI4 master port, against a Python model of the arbitration and an AXI4 slave with
random back-pressure.

Every cycle (driven at the falling edge, sampled settled before the rising one) the
bench checks:

* the grant: in a cycle the port is IDLE and not halted, exactly the highest-priority
  requester (FETCH > LOAD > STORE) is granted, else nobody;
* one burst at a time: the AR/AW the port issues carries the granted request's address
  and length, and nothing else is on the bus until that burst's last R beat or its B;
* routing: R beats reach only the owner (``*_beat``), with the slave's data; W beats
  carry the store's ``s_wdata`` beat by beat, full strobes, WLAST on the last; ``*_done``
  pulses once, for the owner, at the last R beat or at B;
* error responses: a SLVERR beat or B raises ``resp_err`` with the owner's number.

Clients ask for random bursts (bus aligned, 1..MAX_BURST beats, never across 4 KiB, as
burst_calc makes them), with random gaps; the slave pauses ARREADY, AWREADY, WREADY,
RVALID and BVALID at random and answers SLVERR in one address window; ``halt`` comes
in random stretches. A directed test checks ``abort`` (soft reset): the burst in flight
still completes on the bus, its read data is dropped and its remaining W beats carry no
strobes. At the end every store's data must be in the slave's memory.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from testbench.units.bench_setup import bench_config, bench_rng, clock_and_reset

PAGE = 4096
OWNER = {"f": 1, "l": 2, "s": 3}          # err_owner numbers
ERR_LO, ERR_HI = 0xF000, 0x10000          # the slave answers SLVERR here
INPUTS = {"halt": 0, "abort": 0, "f_req": 0, "f_addr": 0, "f_len": 0, "l_req": 0, "l_addr": 0, "l_len": 0,
          "s_req": 0, "s_addr": 0, "s_len": 0, "s_wdata": 0, "m_axi_awready": 0, "m_axi_wready": 0,
          "m_axi_bid": 0, "m_axi_bresp": 0, "m_axi_bvalid": 0, "m_axi_arready": 0, "m_axi_rid": 0,
          "m_axi_rdata": 0, "m_axi_rresp": 0, "m_axi_rlast": 0, "m_axi_rvalid": 0}


def sig(dut: Any, name: str) -> int:
    return int(getattr(dut, name).value)


@dataclass
class Burst:
    addr: int
    beats: int
    data: list[int] = field(default_factory=list)   # store: what to write; reads: what arrived


@dataclass
class Client:
    """One requester: a list of bursts to do, one at a time, holding ``req`` until granted."""

    name: str                          # f, l or s
    todo: list[Burst]
    busy: Burst | None = None          # granted, waiting for done
    beats: int = 0                     # beats of the busy burst so far
    done: list[Burst] = field(default_factory=list)
    wait: int = 0                      # idle cycles before the next request

    def request(self) -> Burst | None:
        return self.todo[0] if self.busy is None and self.todo and self.wait == 0 else None


class Slave:
    """An AXI4 slave over a word memory: random ready/valid pauses, SLVERR in [ERR_LO, ERR_HI)."""

    def __init__(self, rng: random.Random, bus: int, pause: float):
        self.rng, self.bus, self.pause = rng, bus, pause
        self.mem: dict[int, int] = {}
        self.read: list[int] | None = None      # [addr, beats left, beats sent]
        self.write: list[int] | None = None     # [addr, beats, beats received, aw seen]
        self.b_due = False
        self.latency = 0

    def word(self, addr: int) -> int:
        return self.mem.setdefault(addr, self.rng.getrandbits(8 * self.bus))

    def go(self) -> bool:
        return self.rng.random() >= self.pause

    @staticmethod
    def resp(addr: int) -> int:
        return 2 if ERR_LO <= addr < ERR_HI else 0


def make_bursts(rng: random.Random, n: int, bus: int, max_burst: int, store: bool) -> list[Burst]:
    out = []
    for _ in range(n):
        beats = rng.choice([1, max_burst, rng.randint(1, max_burst)])
        page = rng.choice([rng.randrange(1, ERR_LO // PAGE), ERR_LO // PAGE]) if rng.random() < 0.1 else \
            rng.randrange(1, ERR_LO // PAGE)
        off = rng.randrange(0, PAGE // bus - beats + 1) * bus
        data = [rng.getrandbits(8 * bus) for _ in range(beats)] if store else []
        out.append(Burst(page * PAGE + off, beats, data))
    return out


class Bench:
    """The clients, the slave and the per-cycle checks around one DUT."""

    def __init__(self, dut: Any, rng: random.Random, n_bursts: int, pause: float, p_halt: float):
        cfg = bench_config()
        self.dut, self.rng, self.bus, self.mb = dut, rng, cfg.bus_bytes, cfg.max_burst
        self.clients = {k: Client(k, make_bursts(rng, n_bursts, self.bus, self.mb, k == "s")) for k in "fls"}
        self.slave = Slave(rng, self.bus, pause)
        self.p_halt = p_halt
        self.halt = 0
        self.owner: str | None = None         # the model's owner of the port
        self.pending: Burst | None = None      # the granted burst, until its AR/AW
        self.cycle = 0
        self.stats = {"grants": 0, "contended": 0, "halted_requests": 0, "resp_err": 0, "w_beats": 0,
                      "r_beats": 0, "w_before_aw": 0}
        self.written: dict[int, int] = {}      # store data by address, in grant order

    # ---- one cycle: drive at the falling edge, check the settled values, update the models
    async def cycle_step(self) -> None:
        d, s = self.dut, self.slave
        # halt comes in stretches of a few cycles
        self.halt = int(self.rng.random() < 0.7) if self.halt else int(self.rng.random() < self.p_halt)
        d.halt.value = self.halt
        reqs = {}
        for k, c in self.clients.items():
            c.wait = max(0, c.wait - 1)
            b = c.request()
            reqs[k] = b
            getattr(d, f"{k}_req").value = int(b is not None)
            getattr(d, f"{k}_addr").value = b.addr if b else 0
            getattr(d, f"{k}_len").value = b.beats if b else 0
        st = self.clients["s"]
        d.s_wdata.value = st.busy.data[st.beats] if st.busy is not None and st.beats < st.busy.beats else 0
        # slave: registered master outputs are stable now
        arvalid, awvalid, wvalid = sig(d, "m_axi_arvalid"), sig(d, "m_axi_awvalid"), sig(d, "m_axi_wvalid")
        d.m_axi_arready.value = int(arvalid and s.read is None and s.go())
        d.m_axi_awready.value = int(awvalid and s.go())
        d.m_axi_wready.value = int(wvalid and s.go())
        rv = s.read is not None and s.latency == 0 and s.go()
        if rv:
            addr = s.read[0] + s.read[2] * self.bus
            d.m_axi_rdata.value = s.word(addr)
            d.m_axi_rresp.value = s.resp(s.read[0])
            d.m_axi_rlast.value = int(s.read[1] == 1)
        d.m_axi_rvalid.value = int(rv)
        bv = s.b_due and s.latency == 0 and s.go()
        d.m_axi_bvalid.value = int(bv)
        d.m_axi_bresp.value = s.resp(s.write[0]) if bv else 0
        await ReadOnly()
        self.check_grant(reqs)
        self.check_bus(reqs)
        await FallingEdge(d.clk)
        self.cycle += 1
        if s.latency:
            s.latency -= 1

    def check_grant(self, reqs: dict[str, Burst | None]) -> None:
        d = self.dut
        gnt = {k: sig(d, f"{k}_gnt") for k in "fls"}
        idle = sig(d, "idle")
        assert idle == (self.owner is None and self.pending is None), \
            f"cycle {self.cycle}: idle={idle} but the model's port owner is {self.owner}"
        want = None
        if idle and not self.halt:
            want = next((k for k in "fls" if reqs[k] is not None), None)
        elif any(reqs.values()):
            self.stats["halted_requests"] += bool(self.halt)
        got = [k for k in "fls" if gnt[k]]
        assert got == ([want] if want else []), f"cycle {self.cycle}: granted {got}, want {want} (requests " \
                                                f"{[k for k in 'fls' if reqs[k]]}, halt {self.halt})"
        if want:
            self.stats["grants"] += 1
            self.stats["contended"] += sum(r is not None for r in reqs.values()) > 1
            c = self.clients[want]
            c.busy, c.beats = c.todo.pop(0), 0
            self.owner, self.pending = want, c.busy
            if want == "s":
                for k, w in enumerate(c.busy.data):
                    self.written[c.busy.addr + k * self.bus] = w

    def check_bus(self, reqs: dict[str, Burst | None]) -> None:
        d, s, bus = self.dut, self.slave, self.bus
        cyc = self.cycle
        ar = sig(d, "m_axi_arvalid") and sig(d, "m_axi_arready")
        aw = sig(d, "m_axi_awvalid") and sig(d, "m_axi_awready")
        w = sig(d, "m_axi_wvalid") and sig(d, "m_axi_wready")
        r = sig(d, "m_axi_rvalid") and sig(d, "m_axi_rready")
        b = sig(d, "m_axi_bvalid") and sig(d, "m_axi_bready")
        beats = {k: sig(d, f"{k}_beat") for k in "fls"}
        dones = {k: sig(d, f"{k}_done") for k in "fls"}
        err = sig(d, "resp_err")
        if err:  # before a done below hands the port back
            self.stats["resp_err"] += 1
            assert self.owner is not None and sig(d, "err_owner") == OWNER[self.owner], \
                f"cycle {cyc}: resp_err for owner {sig(d, 'err_owner')}, the port's owner is {self.owner}"
        for k in "fls":
            if k != self.owner:
                assert not beats[k] and not dones[k], f"cycle {cyc}: {k} got a beat/done while {self.owner} owns"
        if sig(d, "m_axi_arvalid") or sig(d, "m_axi_awvalid"):
            p = self.pending
            assert p is not None, f"cycle {cyc}: AR/AW valid with no grant pending"
            kind = "ar" if sig(d, "m_axi_arvalid") else "aw"
            assert (self.owner == "s") == (kind == "aw"), f"cycle {cyc}: {kind.upper()} for owner {self.owner}"
            assert (sig(d, f"m_axi_{kind}addr"), sig(d, f"m_axi_{kind}len") + 1) == (p.addr, p.beats), \
                f"cycle {cyc}: {kind.upper()} 0x{sig(d, f'm_axi_{kind}addr'):x}/{sig(d, f'm_axi_{kind}len') + 1}" \
                f" for a grant of 0x{p.addr:x}/{p.beats}"
            assert sig(d, f"m_axi_{kind}size") == (bus - 1).bit_length() and sig(d, f"m_axi_{kind}burst") == 1
        if ar:
            s.read, s.latency, self.pending = [self.pending.addr, self.pending.beats, 0], self.rng.randrange(4), None
        if aw:  # AXI lets W beats come before AW: the write burst starts at whichever is first
            s.write = s.write or [self.pending.addr, self.pending.beats, 0, 0]
            s.write[3] = 1
            self.pending = None
        if w:
            assert self.owner == "s", f"cycle {cyc}: W beat with no write burst"
            c = self.clients["s"]
            if s.write is None:
                s.write = [c.busy.addr, c.busy.beats, 0, 0]
                self.stats["w_before_aw"] += 1
            k = s.write[2]
            assert beats["s"], f"cycle {cyc}: W handshake without s_beat"
            assert sig(d, "m_axi_wdata") == c.busy.data[k], f"cycle {cyc}: W beat {k} carries other data"
            assert sig(d, "m_axi_wstrb") == (1 << bus) - 1 and sig(d, "m_axi_wlast") == (k == s.write[1] - 1)
            addr = s.write[0] + k * bus
            if not s.resp(s.write[0]):
                s.mem[addr] = c.busy.data[k]
            s.write[2] += 1
            c.beats += 1
            self.stats["w_beats"] += 1
        if s.write and s.write[2] == s.write[1] and s.write[3] and not s.b_due:
            s.b_due, s.latency = True, self.rng.randrange(4)
        if r:
            assert self.owner in ("f", "l") and s.read is not None, f"cycle {cyc}: R beat with no read burst"
            c = self.clients[self.owner]
            assert beats[self.owner], f"cycle {cyc}: R handshake not routed to {self.owner}"
            assert sig(d, "rd_data") == sig(d, "m_axi_rdata")
            c.beats += 1
            self.stats["r_beats"] += 1
            s.read[1] -= 1
            s.read[2] += 1
            last = s.read[1] == 0
            assert dones[self.owner] == last, f"cycle {cyc}: {self.owner}_done={dones[self.owner]} at beat " \
                                              f"{s.read[2]} of {c.busy.beats}"
            assert err == bool(s.resp(s.read[0])), f"cycle {cyc}: resp_err {err} for a read at 0x{s.read[0]:x}"
            if last:
                s.read = None
                self.finish(c)
        elif b:
            assert self.owner == "s" and s.b_due, f"cycle {cyc}: B with no write burst done"
            assert dones["s"], f"cycle {cyc}: B without s_done"
            assert err == bool(s.resp(s.write[0])), f"cycle {cyc}: resp_err {err} for a write at 0x{s.write[0]:x}"
            s.b_due, s.write = False, None
            self.finish(self.clients["s"])
        else:
            assert not any(dones.values()) and not err, f"cycle {cyc}: done/resp_err without R or B"

    def finish(self, c: Client) -> None:
        assert c.beats == c.busy.beats, f"cycle {self.cycle}: {c.name} done after {c.beats} of {c.busy.beats}"
        c.done.append(c.busy)
        c.busy = None
        c.wait = self.rng.choice([0, 0, 0, 1, 2, 5])
        self.owner = None

    def all_done(self) -> bool:
        return all(not c.todo and c.busy is None for c in self.clients.values())


async def run_random(dut: Any, test: str, n_bursts: int, pause: float, p_halt: float) -> dict[str, int]:
    rng = bench_rng(test)
    await clock_and_reset(dut, INPUTS)
    tb = Bench(dut, rng, n_bursts, pause, p_halt)
    limit = 400 * n_bursts
    while not tb.all_done():
        await tb.cycle_step()
        assert tb.cycle < limit, f"no progress after {limit} cycles: {tb.stats}"
    for addr, w in tb.written.items():
        if not Slave.resp(addr - addr % PAGE):
            assert tb.slave.mem[addr] == w, f"store data at 0x{addr:x} lost"
    return tb.stats


@cocotb.test()
async def random_traffic_with_backpressure(dut: Any) -> None:
    stats = await run_random(dut, "random_traffic_with_backpressure", 60, pause=0.3, p_halt=0.02)
    missing = [k for k, v in stats.items() if not v]
    assert not missing, f"never happened: {missing} ({stats})"


@cocotb.test()
async def contention_without_pauses(dut: Any) -> None:
    """A ready slave and eager clients: the port is always contended, grants follow priority."""
    stats = await run_random(dut, "contention_without_pauses", 60, pause=0.0, p_halt=0.0)
    assert stats["contended"] > stats["grants"] // 3, stats


@cocotb.test()
async def abort_orphans_the_burst(dut: Any) -> None:
    """``abort`` mid-burst: no more beats or done for the old owner, the bus still completes the
    burst (read data dropped, W beats without strobes), then the port is idle and grants again."""
    cfg = bench_config()
    bus, mb = cfg.bus_bytes, cfg.max_burst
    await clock_and_reset(dut, INPUTS)
    for kind in ("s", "l"):
        beats = max(2, mb)
        getattr(dut, f"{kind}_req").value = 1
        getattr(dut, f"{kind}_addr").value = 0x2000
        getattr(dut, f"{kind}_len").value = beats
        dut.m_axi_awready.value = dut.m_axi_arready.value = 1
        dut.m_axi_wready.value = 0
        await ReadOnly()
        assert sig(dut, f"{kind}_gnt") == 1
        await FallingEdge(dut.clk)
        getattr(dut, f"{kind}_req").value = 0
        await FallingEdge(dut.clk)          # AR/AW handshaken at the edge before
        dut.abort.value = 1
        await FallingEdge(dut.clk)
        dut.abort.value = 0
        seen, cycles = 0, 0
        while not sig(dut, "idle"):
            dut.m_axi_wready.value = 1
            dut.m_axi_rvalid.value = int(kind == "l")
            dut.m_axi_rlast.value = int(kind == "l" and seen == beats - 1)
            dut.m_axi_bvalid.value = int(kind == "s" and seen == beats)
            await ReadOnly()
            assert not any(sig(dut, f"{k}_beat") or sig(dut, f"{k}_done") for k in "fls"), "a beat after abort"
            if kind == "s" and sig(dut, "m_axi_wvalid"):
                assert sig(dut, "m_axi_wstrb") == 0, "an orphaned W beat with strobes"
            hs = (sig(dut, "m_axi_wvalid") and kind == "s") or (sig(dut, "m_axi_rready") and kind == "l")
            seen += bool(hs)
            await FallingEdge(dut.clk)
            cycles += 1
            assert cycles < 4 * beats + 10, "the orphaned burst never completed"
        for n in ("m_axi_wready", "m_axi_rvalid", "m_axi_rlast", "m_axi_bvalid"):
            getattr(dut, n).value = 0
        assert seen == beats, f"{kind}: {seen} beats of {beats} on the bus after abort"
        dut.f_req.value, dut.f_addr.value, dut.f_len.value = 1, 0x100 * bus, 1
        await ReadOnly()
        assert sig(dut, "f_gnt") == 1, "no grant after the orphaned burst"
        await FallingEdge(dut.clk)
        dut.f_req.value = 0
        dut.m_axi_arready.value = dut.m_axi_rvalid.value = dut.m_axi_rlast.value = 1
        while not sig(dut, "idle"):
            await FallingEdge(dut.clk)
        dut.m_axi_rvalid.value = dut.m_axi_rlast.value = 0
