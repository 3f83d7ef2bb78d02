"""cocotb unit test of the fast DRAM model (testbench/hdl/dram_model.v) on its own.

Checks the timing contract of docs/microarch.md cycle by cycle: the first R beat
handshakes exactly RD_LAT cycles after AR, then one beat per cycle; B handshakes
exactly WR_LAT cycles after the last W; AW and the first W may handshake together;
RREADY backpressure holds data; byte strobes; SLVERR beyond the array; the bulk
load/dump/clear pulses; and the protocol checker. The parameters come from env
``DRAM_TEST_PARAMS`` (JSON) set by tests/test_dram_model.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from testbench.memimg import from_hex_words, to_hex_words


class Axi:
    """A per-cycle AXI4 master driver: cycle n is the interval after rising edge n."""

    def __init__(self, dut: Any, prm: dict[str, int]):
        self.dut = dut
        self.cycle = 0
        self.bb = prm["DATA_W"] // 8
        for n in ("awvalid", "wvalid", "arvalid", "bready", "rready", "awid", "arid", "awaddr", "araddr",
                  "awlen", "arlen", "wdata", "wstrb", "wlast"):
            getattr(dut, f"s_axi_{n}").value = 0
        for n in ("awsize", "arsize"):
            getattr(dut, f"s_axi_{n}").value = (self.bb - 1).bit_length()
        dut.s_axi_awburst.value = 1
        dut.s_axi_arburst.value = 1

    async def step(self) -> None:
        await RisingEdge(self.dut.clk)
        self.cycle += 1

    async def sample(self, *names: str) -> dict[str, int]:
        """Settled values of this cycle; -1 for a value with X/Z (Icarus: unloaded memory)."""
        await ReadOnly()
        out = {}
        for n in names:
            v = getattr(self.dut, f"s_axi_{n}").value
            out[n] = int(v) if v.is_resolvable else -1
        return out

    async def read_burst(self, addr: int, beats: int, stall: set[int] | None = None) -> dict[str, Any]:
        """Issue AR; return the handshake cycles of AR and every R beat, the data and responses."""
        d = self.dut
        await self.step()
        d.s_axi_araddr.value = addr
        d.s_axi_arlen.value = beats - 1
        d.s_axi_arvalid.value = 1
        d.s_axi_rready.value = 1
        ar_cycle, r_cycles, data, resp, last = None, [], [], [], []
        k = 0
        while len(r_cycles) < beats:
            s = await self.sample("arready", "rvalid", "rdata", "rresp", "rlast")
            if ar_cycle is None and s["arready"]:
                ar_cycle = self.cycle
            ready = int(d.s_axi_rready.value)
            if s["rvalid"] and ready:
                r_cycles.append(self.cycle)
                data.append(s["rdata"])
                resp.append(s["rresp"])
                last.append(s["rlast"])
            await self.step()
            k += 1
            if ar_cycle is not None:
                d.s_axi_arvalid.value = 0
            d.s_axi_rready.value = 0 if stall and k in stall else 1
            assert k < 2000, "read burst never completed"
        d.s_axi_rready.value = 0
        return {"ar": ar_cycle, "r": r_cycles, "data": data, "resp": resp, "last": last}

    async def read_bursts(self, bursts: list[tuple[int, int, int]]) -> dict[str, Any]:
        """Offer the ARs ``(addr, beats, id)`` back to back (one a cycle while ARREADY), RREADY
        always high; return the AR handshake cycles and every R beat as (cycle, rid, data, rlast)."""
        d = self.dut
        await self.step()
        d.s_axi_rready.value = 1
        total = sum(b for _, b, _ in bursts)
        ars: list[int] = []
        beats: list[tuple[int, int, int, int]] = []
        k = 0
        while len(beats) < total:
            i = len(ars)
            if i < len(bursts):
                d.s_axi_araddr.value, d.s_axi_arlen.value, d.s_axi_arid.value = \
                    bursts[i][0], bursts[i][1] - 1, bursts[i][2]
            d.s_axi_arvalid.value = int(i < len(bursts))
            s = await self.sample("arready", "rvalid", "rdata", "rlast", "rid")
            if i < len(bursts) and s["arready"]:
                ars.append(self.cycle)
            if s["rvalid"]:
                beats.append((self.cycle, s["rid"], s["rdata"], s["rlast"]))
            await self.step()
            k += 1
            assert k < 4000, "pipelined reads never completed"
        d.s_axi_arvalid.value = 0
        d.s_axi_rready.value = 0
        return {"ar": ars, "beats": beats}

    async def write_burst(self, addr: int, words: list[int], strb: int | None = None) -> dict[str, Any]:
        """AW and the first W offered together; return handshake cycles of AW, W beats and B."""
        d = self.dut
        await self.step()
        d.s_axi_awaddr.value = addr
        d.s_axi_awlen.value = len(words) - 1
        d.s_axi_awvalid.value = 1
        d.s_axi_bready.value = 1
        full = (1 << self.bb) - 1
        aw_cycle, w_cycles, b_cycle, bresp = None, [], None, None
        i = 0
        k = 0
        while b_cycle is None:
            if i < len(words):
                d.s_axi_wdata.value = words[i]
                d.s_axi_wstrb.value = full if strb is None else strb
                d.s_axi_wlast.value = int(i == len(words) - 1)
                d.s_axi_wvalid.value = 1
            else:
                d.s_axi_wvalid.value = 0
            s = await self.sample("awready", "wready", "bvalid", "bresp")
            if aw_cycle is None and s["awready"]:
                aw_cycle = self.cycle
            if i < len(words) and s["wready"]:
                w_cycles.append(self.cycle)
                i += 1
            if s["bvalid"]:
                b_cycle, bresp = self.cycle, s["bresp"]
            await self.step()
            k += 1
            if aw_cycle is not None:
                d.s_axi_awvalid.value = 0
            assert k < 2000, "write burst never completed"
        d.s_axi_wvalid.value = 0
        d.s_axi_bready.value = 0
        return {"aw": aw_cycle, "w": w_cycles, "b": b_cycle, "bresp": bresp}

    async def write_bursts(self, bursts: list[tuple[int, list[int], int]]) -> dict[str, Any]:
        """Offer the AWs ``(addr, words, id)`` back to back and every W beat of them in order (WVALID
        always high), BREADY always high; return the AW and W handshake cycles and the B handshakes
        as (cycle, bid, bresp)."""
        d = self.dut
        await self.step()
        d.s_axi_bready.value = 1
        beats = [(w, int(j == len(ws) - 1)) for _, ws, _ in bursts for j, w in enumerate(ws)]
        full = (1 << self.bb) - 1
        aws: list[int] = []
        ws_: list[int] = []
        bs: list[tuple[int, int, int]] = []
        k = 0
        while len(bs) < len(bursts):
            i, j = len(aws), len(ws_)
            if i < len(bursts):
                d.s_axi_awaddr.value, d.s_axi_awlen.value, d.s_axi_awid.value = \
                    bursts[i][0], len(bursts[i][1]) - 1, bursts[i][2]
            d.s_axi_awvalid.value = int(i < len(bursts))
            if j < len(beats):
                d.s_axi_wdata.value, d.s_axi_wlast.value = beats[j]
                d.s_axi_wstrb.value = full
            d.s_axi_wvalid.value = int(j < len(beats))
            s = await self.sample("awready", "wready", "bvalid", "bid", "bresp")
            if i < len(bursts) and s["awready"]:
                aws.append(self.cycle)
            if j < len(beats) and s["wready"]:
                ws_.append(self.cycle)
            if s["bvalid"]:
                bs.append((self.cycle, s["bid"], s["bresp"]))
            await self.step()
            k += 1
            assert k < 4000, "pipelined writes never completed"
        d.s_axi_awvalid.value = 0
        d.s_axi_wvalid.value = 0
        d.s_axi_bready.value = 0
        return {"aw": aws, "w": ws_, "b": bs}

    async def pulse(self, name: str, words: int = 0) -> None:
        await self.step()
        self.dut.tb_words.value = words
        getattr(self.dut, name).value = 1
        await self.step()
        getattr(self.dut, name).value = 0
        await self.step()


@cocotb.test()
async def dram_model_timing(dut: Any) -> None:
    prm = json.loads(os.environ["DRAM_TEST_PARAMS"])
    rd_lat, wr_lat, bb = prm["RD_LAT"], prm["WR_LAT"], prm["DATA_W"] // 8
    mem_bytes = prm["MEM_BYTES"]
    in_file, out_file = Path("dram_in.hex").resolve(), Path("dram_out.hex").resolve()
    dut.rst.value = 1
    for n in ("tb_load", "tb_dump", "tb_clear", "tb_words"):
        getattr(dut, n).value = 0
    Clock(dut.clk, 10, unit="ns").start()
    axi = Axi(dut, prm)
    for _ in range(3):
        await axi.step()
    dut.rst.value = 0

    # bulk load: word k holds a pattern derived from k
    words = 64
    img = b"".join(((k * 0x0101010101010101 + 0x1122334455667788) & ((1 << (8 * bb)) - 1))
                   .to_bytes(bb, "little") for k in range(words))
    in_file.write_text(to_hex_words(img, bb))
    await axi.pulse("tb_load")

    def word(k: int) -> int:
        return int.from_bytes(img[k * bb:(k + 1) * bb], "little")

    # read: exact latency, one beat per cycle, data, RLAST
    r = await axi.read_burst(4 * bb, 4)
    assert r["r"][0] - r["ar"] == rd_lat, f"first R {r['r'][0] - r['ar']} cycles after AR, want {rd_lat}"
    assert r["r"] == list(range(r["r"][0], r["r"][0] + 4)), f"R beats not back to back: {r['r']}"
    assert r["data"] == [word(k) for k in range(4, 8)]
    assert r["last"] == [0, 0, 0, 1] and r["resp"] == [0] * 4

    # bursts in flight: an AR every cycle while earlier bursts are outstanding; each burst's first
    # beat RD_LAT after its AR or right after the previous burst's last beat; RID per burst
    bursts = [(0, 3, 5), (8 * bb, 1, 2), (12 * bb, 2, 9), (20 * bb, 4, 5)]
    # (with RD_QUEUE bursts outstanding, the next AR waits until the oldest one's last beat)
    rq, wq = prm.get("RD_QUEUE", 8), prm.get("WR_QUEUE", 8)
    p = await axi.read_bursts(bursts)
    want, want_ar, free, ends = [], [], 0, []
    for i, (addr, n, rid) in enumerate(bursts):
        ar = p["ar"][0] + i if i < rq else max(want_ar[-1] + 1, ends[i - rq] + 1)
        want_ar.append(ar)
        first = max(ar + rd_lat, free)
        want += [(first + j, rid, word(addr // bb + j), int(j == n - 1)) for j in range(n)]
        free = first + n
        ends.append(free - 1)
    assert p["ar"] == want_ar, f"AR handshakes {p['ar']}, want {want_ar} (at most {rq} outstanding)"
    assert p["beats"] == want, f"pipelined reads: {p['beats']} want {want}"

    # read with RREADY backpressure: data held, order kept
    n = min(5, prm["MAX_BURST"])
    r = await axi.read_burst(0, n, stall={rd_lat + 1, rd_lat + 2})
    assert r["data"] == [word(k) for k in range(n)], "backpressure lost or repeated a beat"

    # write: AW + first W together, B exactly WR_LAT after the last W
    new = [0xA0A0_0000 + k for k in range(3)]
    w = await axi.write_burst(8 * bb, new)
    assert w["aw"] == w["w"][0], f"AW at {w['aw']}, first W at {w['w'][0]}: not accepted together"
    assert w["w"] == list(range(w["w"][0], w["w"][0] + 3)), f"W not accepted every cycle: {w['w']}"
    assert w["b"] - w["w"][-1] == wr_lat, f"B {w['b'] - w['w'][-1]} cycles after last W, want {wr_lat}"
    assert w["bresp"] == 0
    r = await axi.read_burst(8 * bb, 3)
    assert r["data"] == new

    # writes in flight (beyond the words the dump below checks): AWs taken every cycle while earlier bursts await data or B, W beats every
    # cycle in AW order, each B WR_LAT after its last W or right after the previous B; BID per burst
    wb = [(70 * bb, [0xB000 + k for k in range(3)], 3), (74 * bb, [0xB100], 7), (76 * bb, [0xB200, 0xB201], 3)]
    # (with WR_QUEUE bursts unanswered, the next AW, and its W beats, wait until the oldest one's B)
    p = await axi.write_bursts(wb)
    want_aw, want_w, want_b, prev = [], [], [], -1
    for i, (_, words_, wid) in enumerate(wb):
        aw = p["aw"][0] + i if i < wq else max(want_aw[-1] + 1, want_b[i - wq][0] + 1)
        want_aw.append(aw)
        w0 = max(aw, want_w[-1] + 1) if want_w else aw
        want_w += list(range(w0, w0 + len(words_)))
        prev = max(want_w[-1] + wr_lat, prev + 1)
        want_b.append((prev, wid, 0))
    assert p["aw"] == want_aw, f"AW handshakes {p['aw']}, want {want_aw} (at most {wq} outstanding)"
    assert p["w"] == want_w, f"W handshakes {p['w']}, want {want_w}"
    assert p["b"] == want_b, f"pipelined writes: B {p['b']} want {want_b}"
    for addr, words_, _ in wb:
        r = await axi.read_burst(addr, len(words_))
        assert r["data"] == words_, f"pipelined write at {addr}: read back {r['data']}"

    # byte strobes: only byte 0 written
    w = await axi.write_burst(16 * bb, [0xFF], strb=0x1)
    r = await axi.read_burst(16 * bb, 1)
    assert r["data"][0] == (word(16) & ~0xFF) | 0xFF

    # SLVERR beyond the array
    r = await axi.read_burst(mem_bytes, 2)
    assert r["resp"] == [2, 2], f"read beyond the memory answered {r['resp']}"
    w = await axi.write_burst(mem_bytes, [1, 2])
    assert w["bresp"] == 2, f"write beyond the memory answered {w['bresp']}"
    assert int(dut.proto_err.value) == 0

    # bulk dump and clear
    await axi.pulse("tb_dump", words)
    data, unknown = from_hex_words(out_file.read_text(), bb)
    assert unknown == 0 and len(data) == words * bb
    assert data[8 * bb:11 * bb] == b"".join(v.to_bytes(bb, "little") for v in new)
    assert data[:8 * bb] == img[:8 * bb]
    await axi.pulse("tb_clear", 16)
    await axi.pulse("tb_dump", words)
    data, _ = from_hex_words(out_file.read_text(), bb)
    assert data[:16 * bb] == bytes(16 * bb) and data[16 * bb + 1:] == img[16 * bb + 1:]

    # protocol checker: a burst crossing 4 KiB sets proto_err
    r = await axi.read_burst(4096 - bb, 2)
    assert int(dut.proto_err.value) == 1, "4 KiB crossing not flagged"
