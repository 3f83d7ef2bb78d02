"""cocotb bench of hw/rtl/axi_arbiter.v with read bursts in flight (parameter RIF > 1, N cores)
and, with parameter WIF > 1, write bursts in flight:
every core's FETCH and LOAD read and STORE writes, against a Python model of the arbitration
and an AXI4 slave that answers the reads in flight in random order, interleaving their beats
across IDs, with random pauses on every channel.

Every cycle (driven at the falling edge, sampled settled before the rising one) the bench
checks:

* the grant: the core round robin after the core granted last, inside it FETCH > LOAD > STORE,
  granted in that cycle only when the port can take it (a read: no write under way, fewer than
  RIF reads in flight, the AR register free or handshaking, its ID idle; a write: nothing in
  flight), else nobody; never while ``halt``;
* the AR / AW: address, length and the read's ID (2 x core + 1 for LOAD), in grant order;
* routing: an R beat reaches only the client its RID names (``*_beat``, ``rd_data``), RLAST gives
  that client's ``*_done``; W beats carry the store's data; B gives the store's ``s_done``;
* error responses: a SLVERR beat or B raises ``resp_err`` with that burst's owner and core;
* never more than RIF reads in flight, and a write never overlaps another burst.

With WIF > 1 the read and write sides are independent: a read is granted whatever the writes do,
a write when no write is in its AW/W phase and fewer than WIF writes await their B; the STORE
clients post (they may ask again after their last W beat, before the B); AWID is the core, the
slave answers B's in any order across IDs (in order within one) and ``s_done`` goes to the core
BID names; an R and a B error in one cycle report the read's. The run must see WIF writes in
flight, B's out of AW order and a read granted while a write is in flight.

Clients ask for random bursts with random gaps; the slave answers SLVERR in one address
window; ``halt`` comes in stretches. The run must see RIF reads in flight at once, bursts
completing out of AR order, beats of different bursts interleaved and reads waiting for a slot.
Directed tests check ``abort`` (soft reset) with two reads in flight and, with WIF > 1, two writes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from testbench.units.axi_arbiter_bench import ERR_HI, ERR_LO, Burst, make_bursts, sig
from testbench.units.bench_setup import bench_config, bench_params, bench_rng, clock_and_reset

OWNER = {"f": 1, "l": 2, "s": 3}
PRIO = "fls"


@dataclass
class Client:
    core: int
    kind: str                       # f, l or s
    todo: list[Burst]
    busy: Burst | None = None
    beats: int = 0
    wait: int = 0
    done: int = 0

    def request(self) -> Burst | None:
        return self.todo[0] if self.busy is None and self.todo and self.wait == 0 else None


@dataclass
class Read:
    """A read burst at the slave: its ID, address, beats, beats sent, first cycle it may answer."""

    rid: int
    addr: int
    beats: int
    seq: int                        # its AR order
    sent: int = 0
    due: int = 0
    data: list[int] = field(default_factory=list)


def vec(dut: Any, name: str, k: int) -> int:
    return (sig(dut, name) >> k) & 1


class Bench:
    def __init__(self, dut: Any, rng: random.Random, n_bursts: int, pause: float, p_halt: float):
        cfg, prm = bench_config(), bench_params()
        self.dut, self.rng, self.bus = dut, rng, cfg.bus_bytes
        self.n, self.rif, self.wif = prm["N"], prm["RIF"], prm.get("WIF", 1)
        self.wq: list[list[Any]] = []              # WIF > 1: writes granted, B not yet: [client, burst, b_due]
        self.clients = {(c, k): Client(c, k, make_bursts(rng, n_bursts, self.bus, cfg.max_burst, k == "s"))
                        for c in range(self.n) for k in PRIO}
        self.pause, self.p_halt, self.halt = pause, p_halt, 0
        self.last = self.n - 1
        self.reads: dict[int, Client] = {}        # ID -> client, granted and not ended
        self.ar_fifo: list[tuple[int, Burst]] = []  # granted reads before their AR handshake
        self.slave_reads: list[Read] = []
        self.write: Client | None = None           # the write under way (grant to B)
        self.aw_pending = False
        self.w_sent, self.aw_seen, self.b_due = 0, False, -1
        self.mem: dict[int, int] = {}
        self.cycle, self.seq = 0, 0
        self.stats = {"grants": 0, "max_reads": 0, "out_of_order": 0, "interleaved": 0, "slot_waits": 0,
                      "write_waits": 0, "resp_err": 0, "w_beats": 0}
        if self.wif > 1:
            self.stats.update(max_writes=0, b_out_of_order=0, read_beside_write=0)
        self.last_rid = -1

    def go(self) -> bool:
        return self.rng.random() >= self.pause

    def word(self, addr: int) -> int:
        return self.mem.setdefault(addr, self.rng.getrandbits(8 * self.bus))

    @staticmethod
    def resp(addr: int) -> int:
        return 2 if ERR_LO <= addr < ERR_HI else 0

    async def cycle_step(self) -> None:
        d = self.dut
        self.halt = int(self.rng.random() < 0.7) if self.halt else int(self.rng.random() < self.p_halt)
        d.halt.value = self.halt
        reqs: dict[tuple[int, str], Burst | None] = {}
        for name in PRIO:
            req = addr = length = 0
            for c in range(self.n):
                cl = self.clients[(c, name)]
                cl.wait = max(0, cl.wait - 1)
                b = cl.request()
                reqs[(c, name)] = b
                if b is not None:
                    req |= 1 << c
                    addr |= b.addr << (32 * c)
                    length |= b.beats << (9 * c)
            getattr(d, f"{name}_req").value = req
            getattr(d, f"{name}_addr").value = addr
            getattr(d, f"{name}_len").value = length
        wdata = 0
        if self.write is not None and self.w_sent < self.wburst.beats:
            wdata = self.wburst.data[self.w_sent] << (8 * self.bus * self.write.core)
        d.s_wdata.value = wdata
        # slave: ready signals and at most one R beat, from any read in flight that is due
        arready = int(sig(d, "m_axi_arvalid") and self.go())
        d.m_axi_arready.value = arready
        d.m_axi_awready.value = int(sig(d, "m_axi_awvalid") and self.go())
        d.m_axi_wready.value = int(sig(d, "m_axi_wvalid") and self.go())
        due = [r for r in self.slave_reads if r.due <= self.cycle]
        beat = self.rng.choice(due) if due and self.go() else None
        if beat is not None:
            addr = beat.addr + beat.sent * self.bus
            d.m_axi_rid.value = beat.rid
            d.m_axi_rdata.value = self.word(addr)
            d.m_axi_rresp.value = self.resp(beat.addr)
            d.m_axi_rlast.value = int(beat.sent == beat.beats - 1)
        d.m_axi_rvalid.value = int(beat is not None)
        self.bw = None
        if self.wif > 1:  # any core's oldest write whose B is due (in order within an ID)
            heads = [w for i, w in enumerate(self.wq)
                     if 0 <= w[2] <= self.cycle and not any(v[0].core == w[0].core for v in self.wq[:i])]
            self.bw = self.rng.choice(heads) if heads and self.go() else None
            bv = self.bw is not None
            d.m_axi_bid.value = self.bw[0].core if bv else 0
            d.m_axi_bresp.value = self.resp(self.bw[1].addr) if bv else 0
        else:
            bv = self.b_due >= 0 and self.b_due <= self.cycle and self.go()
            d.m_axi_bresp.value = self.resp(self.write.busy.addr) if bv and self.write else 0
        d.m_axi_bvalid.value = int(bv)
        await ReadOnly()
        self.check_grant(reqs, arready)
        self.check_bus(beat)
        await FallingEdge(d.clk)
        self.cycle += 1

    def check_grant(self, reqs: dict[tuple[int, str], Burst | None], arready: int) -> None:
        d, cyc = self.dut, self.cycle
        want = None
        waiting = [c for c in range(self.n) if any(reqs[(c, k)] for k in PRIO)]
        if waiting and not self.halt:
            core = next((self.last + i) % self.n for i in range(1, self.n + 1) if (self.last + i) % self.n in waiting)
            kind = next(k for k in PRIO if reqs[(core, k)])
            if kind == "s" and self.wif > 1:
                ok = self.write is None and len(self.wq) < self.wif
                self.stats["write_waits"] += not ok
            elif kind == "s":
                ok = not self.reads and self.write is None
                self.stats["write_waits"] += not ok
            else:
                rid = 2 * core + (kind == "l")
                ar_free = not sig(d, "m_axi_arvalid") or arready
                free = self.wif > 1 or self.write is None  # with writes in flight the sides are independent
                ok = free and len(self.reads) < self.rif and ar_free and rid not in self.reads
                self.stats["slot_waits"] += free and len(self.reads) >= self.rif
                if ok and self.wif > 1 and self.wq:
                    self.stats["read_beside_write"] += 1
            want = (core, kind) if ok else None
        got = [(c, k) for k in PRIO for c in range(self.n) if vec(d, f"{k}_gnt", c)]
        assert got == ([want] if want else []), f"cycle {cyc}: granted {got}, want {want} " \
                                                f"(reads {sorted(self.reads)}, write {self.write is not None})"
        if want is None:
            return
        self.stats["grants"] += 1
        self.last = want[0]
        cl = self.clients[want]
        cl.busy, cl.beats = cl.todo.pop(0), 0
        if want[1] == "s":
            self.write, self.w_sent, self.aw_seen, self.aw_pending = cl, 0, False, True
            self.wburst = cl.busy
            if self.wif > 1:
                self.wq.append([cl, cl.busy, -1])
                self.stats["max_writes"] = max(self.stats["max_writes"], len(self.wq))
        else:
            rid = 2 * want[0] + (want[1] == "l")
            self.reads[rid] = cl
            self.ar_fifo.append((rid, cl.busy))
            self.stats["max_reads"] = max(self.stats["max_reads"], len(self.reads))

    def check_bus(self, beat: Read | None) -> None:
        d, cyc, bus = self.dut, self.cycle, self.bus
        if sig(d, "m_axi_arvalid"):
            assert self.ar_fifo, f"cycle {cyc}: ARVALID with no read granted"
            rid, b = self.ar_fifo[0]
            assert (sig(d, "m_axi_araddr"), sig(d, "m_axi_arlen") + 1, sig(d, "m_axi_arid")) == (b.addr, b.beats, rid), \
                f"cycle {cyc}: AR 0x{sig(d, 'm_axi_araddr'):x}/{sig(d, 'm_axi_arlen') + 1} id {sig(d, 'm_axi_arid')}" \
                f" for a grant of 0x{b.addr:x}/{b.beats} id {rid}"
            if sig(d, "m_axi_arready"):
                self.ar_fifo.pop(0)
                self.slave_reads.append(Read(rid, b.addr, b.beats, self.seq, due=cyc + 1 + self.rng.randrange(6)))
                self.seq += 1
        err = sig(d, "resp_err")
        b_hs = bool(sig(d, "m_axi_bvalid") and sig(d, "m_axi_bready"))
        b_err = b_hs and bool(self.resp(self.bw[1].addr if self.wif > 1 else self.wburst.addr))
        routed = {(c, k) for k in PRIO for c in range(self.n) if vec(d, f"{k}_beat", c)}
        dones = {(c, k) for k in PRIO for c in range(self.n) if vec(d, f"{k}_done", c)}
        if beat is not None:  # RREADY is 1 while reads are in flight
            assert sig(d, "m_axi_rready"), f"cycle {cyc}: RREADY low with reads in flight"
            cl = self.reads[beat.rid]
            key = (cl.core, cl.kind)
            assert key in routed and sig(d, "rd_data") == sig(d, "m_axi_rdata"), \
                f"cycle {cyc}: R beat of ID {beat.rid} routed to {routed}, not {key}"
            if self.last_rid not in (-1, beat.rid) and any(r.rid == self.last_rid for r in self.slave_reads):
                self.stats["interleaved"] += 1
            self.last_rid = beat.rid
            beat.sent += 1
            cl.beats += 1
            last = beat.sent == beat.beats
            assert (key in dones) == last, f"cycle {cyc}: {key} done={key in dones} at beat {beat.sent}/{beat.beats}"
            assert err == bool(self.resp(beat.addr) or b_err), f"cycle {cyc}: resp_err {err} for a read at 0x{beat.addr:x}"
            if self.resp(beat.addr):  # an R and a B error in one cycle: the read's is reported
                self.stats["resp_err"] += 1
                assert (sig(d, "err_owner"), sig(d, "err_core")) == (OWNER[cl.kind], cl.core), \
                    f"cycle {cyc}: error reported for {sig(d, 'err_owner')}/{sig(d, 'err_core')}, not {key}"
            if last:
                if any(r.seq < beat.seq for r in self.slave_reads):
                    self.stats["out_of_order"] += 1
                self.slave_reads.remove(beat)
                del self.reads[beat.rid]
                self.finish(cl)
        w = self.write
        if sig(d, "m_axi_awvalid") or sig(d, "m_axi_wvalid"):
            assert w is not None and (self.wif > 1 or not self.reads), \
                f"cycle {cyc}: AW/W with no write (alone) on the port"
        if sig(d, "m_axi_awvalid") and sig(d, "m_axi_awready"):
            assert (sig(d, "m_axi_awaddr"), sig(d, "m_axi_awlen") + 1) == (self.wburst.addr, self.wburst.beats)
            assert sig(d, "m_axi_awid") == (w.core if self.wif > 1 else 0), f"cycle {cyc}: AWID {sig(d, 'm_axi_awid')}"
            self.aw_seen = True
        if sig(d, "m_axi_wvalid") and sig(d, "m_axi_wready"):
            k, wb = self.w_sent, self.wburst
            assert (w.core, "s") in routed, f"cycle {cyc}: W handshake not routed to core {w.core}'s store"
            assert sig(d, "m_axi_wdata") == wb.data[k] and sig(d, "m_axi_wlast") == (k == wb.beats - 1)
            if not self.resp(wb.addr):
                self.mem[wb.addr + k * bus] = wb.data[k]
            self.w_sent += 1
            self.stats["w_beats"] += 1
        if self.wif > 1:
            self.check_writes_in_flight(routed, dones, err, b_hs, beat)
            return
        if w is not None and self.w_sent == w.busy.beats and self.aw_seen and self.b_due < 0:
            self.b_due = cyc + 1 + self.rng.randrange(4)
        if sig(d, "m_axi_bvalid") and sig(d, "m_axi_bready"):
            assert (w.core, "s") in dones, f"cycle {cyc}: B without core {w.core}'s s_done"
            assert err == bool(self.resp(w.busy.addr))
            if err:
                self.stats["resp_err"] += 1
                assert (sig(d, "err_owner"), sig(d, "err_core")) == (3, w.core)
            w.beats = w.busy.beats
            self.write, self.b_due = None, -1
            self.finish(w)
        if beat is None and not (sig(d, "m_axi_bvalid") and sig(d, "m_axi_bready")):
            assert not dones and not err, f"cycle {cyc}: done/resp_err without R or B"

    def check_writes_in_flight(self, routed: set[tuple[int, str]], dones: set[tuple[int, str]], err: int,
                               b_hs: bool, beat: Read | None) -> None:
        """WIF > 1: the W phase ends with its last beat (the STORE may ask again), B's come in any
        order across IDs and reach the core BID names."""
        d, cyc, w = self.dut, self.cycle, self.write
        if w is not None and self.w_sent == self.wburst.beats and self.aw_seen:
            entry = next(e for e in self.wq if e[1] is self.wburst)
            entry[2] = cyc + 1 + self.rng.randrange(4)
            w.beats, w.busy, w.wait = 0, None, self.rng.choice([0, 0, 1, 3])  # posted: free to ask again
            self.write = None
        stores = {c for c, k in dones if k == "s"}
        if b_hs:
            cl, b, _ = self.bw
            assert sig(d, "m_axi_bready") and stores == {cl.core}, \
                f"cycle {cyc}: B of core {cl.core} gave s_done to {stores}"
            if any(e[0].core != cl.core for e in self.wq[:self.wq.index(self.bw)]):
                self.stats["b_out_of_order"] += 1
            if beat is None or not self.resp(beat.addr):
                assert err == bool(self.resp(b.addr)), f"cycle {cyc}: resp_err {err} for a write at 0x{b.addr:x}"
                if err:
                    self.stats["resp_err"] += 1
                    assert (sig(d, "err_owner"), sig(d, "err_core")) == (3, cl.core)
            self.wq.remove(self.bw)
            cl.done += 1
        else:
            assert not stores, f"cycle {cyc}: s_done without a B"
        if beat is None and not b_hs:
            assert not dones and not err, f"cycle {cyc}: done/resp_err without R or B"

    def finish(self, cl: Client) -> None:
        assert cl.beats == cl.busy.beats, f"cycle {self.cycle}: done after {cl.beats} of {cl.busy.beats} beats"
        cl.busy = None
        cl.done += 1
        cl.wait = self.rng.choice([0, 0, 0, 1, 3])

    def all_done(self) -> bool:
        return all(not c.todo and c.busy is None for c in self.clients.values())


async def run_random(dut: Any, test: str, n_bursts: int, pause: float, p_halt: float) -> dict[str, int]:
    rng = bench_rng(test)
    inputs = {n: 0 for n in ("halt", "abort", "f_req", "f_addr", "f_len", "l_req", "l_addr", "l_len", "s_req",
                             "s_addr", "s_len", "s_wdata", "m_axi_awready", "m_axi_wready", "m_axi_bid",
                             "m_axi_bresp", "m_axi_bvalid", "m_axi_arready", "m_axi_rid", "m_axi_rdata",
                             "m_axi_rresp", "m_axi_rlast", "m_axi_rvalid")}
    await clock_and_reset(dut, inputs)
    tb = Bench(dut, rng, n_bursts, pause, p_halt)
    limit = 300 * n_bursts * tb.n
    while not tb.all_done() or tb.wq:
        await tb.cycle_step()
        assert tb.cycle < limit, f"no progress after {limit} cycles: {tb.stats}"
    assert not tb.reads and tb.write is None and not tb.slave_reads and not tb.wq
    return tb.stats


@cocotb.test()
async def reads_in_flight_out_of_order(dut: Any) -> None:
    """Random traffic, a slave answering in any order across IDs with pauses: every check holds
    and the interesting cases happen."""
    stats = await run_random(dut, "reads_in_flight_out_of_order", 50, pause=0.2, p_halt=0.02)
    prm = bench_params()
    assert stats["max_reads"] == prm["RIF"], stats
    if prm.get("WIF", 1) > 1:
        assert stats["max_writes"] == prm["WIF"], stats
        if prm["N"] == 1:  # one ID: B's come in order
            del stats["b_out_of_order"]
    if 2 * prm["N"] <= prm["RIF"]:  # a slot for every read client: none ever waits for one
        del stats["slot_waits"]
    missing = [k for k, v in stats.items() if not v]
    assert not missing, f"never happened: {missing} ({stats})"


@cocotb.test()
async def eager_clients_fill_every_slot(dut: Any) -> None:
    """A ready slave and clients that ask at once: reads wait for a slot, writes for the port."""
    stats = await run_random(dut, "eager_clients_fill_every_slot", 40, pause=0.0, p_halt=0.0)
    prm = bench_params()
    assert stats["slot_waits"] > 0 or 2 * prm["N"] <= prm["RIF"], stats
    assert stats["write_waits"] > 0, stats



@cocotb.test()
async def abort_orphans_every_read_in_flight(dut: Any) -> None:
    """``abort`` with two reads in flight (core 0's FETCH and LOAD): their beats still come and are
    dropped (no ``*_beat`` / ``*_done``), the port stays busy until both ended, and LOAD's ID is not
    granted again while its orphaned burst is in flight."""
    inputs = {n: 0 for n in ("halt", "abort", "f_req", "f_addr", "f_len", "l_req", "l_addr", "l_len", "s_req",
                             "s_addr", "s_len", "s_wdata", "m_axi_awready", "m_axi_wready", "m_axi_bid",
                             "m_axi_bresp", "m_axi_bvalid", "m_axi_arready", "m_axi_rid", "m_axi_rdata",
                             "m_axi_rresp", "m_axi_rlast", "m_axi_rvalid")}
    await clock_and_reset(dut, inputs)
    dut.m_axi_arready.value = 1
    dut.f_req.value, dut.f_addr.value, dut.f_len.value = 1, 0x1000, 2
    dut.l_req.value, dut.l_addr.value, dut.l_len.value = 1, 0x2000, 3
    await ReadOnly()
    assert vec(dut, "f_gnt", 0) and not vec(dut, "l_gnt", 0), "FETCH first"
    await FallingEdge(dut.clk)
    dut.f_req.value = 0
    await ReadOnly()
    assert vec(dut, "l_gnt", 0), "LOAD granted the next cycle, FETCH's read in flight"
    await FallingEdge(dut.clk)
    dut.l_req.value = 0
    await FallingEdge(dut.clk)          # both ARs handshaken
    dut.abort.value = 1
    await FallingEdge(dut.clk)
    dut.abort.value = 0
    # LOAD asks again at once: its ID still has the orphaned burst in flight
    dut.l_req.value, dut.l_addr.value, dut.l_len.value = 1, 0x3000, 1
    beats = [(1, 0), (0, 0), (1, 1), (0, 1), (1, 2)]  # (ID, beat): LOAD and FETCH interleaved, FETCH ends first
    lens = {0: 2, 1: 3}
    for rid, k in beats:
        dut.m_axi_rvalid.value, dut.m_axi_rid.value = 1, rid
        dut.m_axi_rlast.value = int(k == lens[rid] - 1)
        dut.m_axi_rdata.value = 0x55
        await ReadOnly()
        assert sig(dut, "m_axi_rready"), "RREADY low with orphaned reads in flight"
        for name in ("f_beat", "l_beat", "f_done", "l_done", "resp_err"):
            assert not sig(dut, name), f"{name} for an orphaned burst"
        assert not sig(dut, "idle") and not vec(dut, "l_gnt", 0), "LOAD granted while its ID is in flight"
        await FallingEdge(dut.clk)
    dut.m_axi_rvalid.value = dut.m_axi_rlast.value = 0
    await ReadOnly()
    assert vec(dut, "l_gnt", 0), "LOAD not granted once its orphaned burst ended"
    await FallingEdge(dut.clk)
    dut.l_req.value = 0
    await FallingEdge(dut.clk)
    dut.m_axi_rvalid.value, dut.m_axi_rid.value, dut.m_axi_rlast.value = 1, 1, 1
    await ReadOnly()
    assert vec(dut, "l_beat", 0) and vec(dut, "l_done", 0), "the new LOAD burst's beat is routed again"
    await FallingEdge(dut.clk)
    dut.m_axi_rvalid.value = dut.m_axi_rlast.value = 0
    await ReadOnly()
    assert sig(dut, "idle")


@cocotb.test(skip=bench_params().get("WIF", 1) == 1)
async def abort_orphans_every_write_in_flight(dut: Any) -> None:
    """WIF > 1: core 0's STORE posts two writes, ``abort`` comes while both await their B: the B's
    still come and are dropped (no ``s_done``, no ``resp_err``), the port stays busy, and the STORE is
    not granted again before the last orphaned B; then a new write is granted and answered as usual."""
    inputs = {n: 0 for n in ("halt", "abort", "f_req", "f_addr", "f_len", "l_req", "l_addr", "l_len", "s_req",
                             "s_addr", "s_len", "s_wdata", "m_axi_awready", "m_axi_wready", "m_axi_bid",
                             "m_axi_bresp", "m_axi_bvalid", "m_axi_arready", "m_axi_rid", "m_axi_rdata",
                             "m_axi_rresp", "m_axi_rlast", "m_axi_rvalid")}
    await clock_and_reset(dut, inputs)
    dut.m_axi_awready.value = dut.m_axi_wready.value = 1
    for addr, beats in ((0x1000, 2), (0x2000, 1)):
        dut.s_req.value, dut.s_addr.value, dut.s_len.value = 1, addr, beats
        await ReadOnly()
        assert vec(dut, "s_gnt", 0), f"write 0x{addr:x} not granted (fewer than WIF in flight)"
        await FallingEdge(dut.clk)
        dut.s_req.value = 0
        for _ in range(beats):  # its W beats, the last one ending the W phase
            await ReadOnly()
            assert sig(dut, "m_axi_wvalid") and sig(dut, "m_axi_wstrb"), "W beat of a granted write"
            await FallingEdge(dut.clk)
    dut.abort.value = 1
    await FallingEdge(dut.clk)
    dut.abort.value = 0
    dut.s_req.value, dut.s_addr.value, dut.s_len.value = 1, 0x3000, 1
    for _ in range(2):  # the two orphaned B's
        dut.m_axi_bvalid.value, dut.m_axi_bid.value, dut.m_axi_bresp.value = 1, 0, 2
        await ReadOnly()
        assert sig(dut, "m_axi_bready"), "BREADY low with orphaned writes in flight"
        assert not sig(dut, "s_done") and not sig(dut, "resp_err"), "s_done/resp_err for an orphaned write"
        assert not sig(dut, "idle") and not vec(dut, "s_gnt", 0), "STORE granted while its writes are orphaned"
        await FallingEdge(dut.clk)
    dut.m_axi_bvalid.value = dut.m_axi_bresp.value = 0
    await ReadOnly()
    assert vec(dut, "s_gnt", 0), "STORE not granted once its orphaned writes ended"
    await FallingEdge(dut.clk)
    dut.s_req.value = 0
    await ReadOnly()
    assert sig(dut, "m_axi_awvalid") and sig(dut, "m_axi_awid") == 0 and sig(dut, "m_axi_wstrb")
    await FallingEdge(dut.clk)
    dut.m_axi_bvalid.value = 1
    await ReadOnly()
    assert vec(dut, "s_done", 0) and not sig(dut, "resp_err"), "the new write's B is routed again"
    await FallingEdge(dut.clk)
    dut.m_axi_bvalid.value = 0
    await ReadOnly()
    assert sig(dut, "idle")
