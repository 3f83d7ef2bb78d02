"""cocotb test module: run the Programs of a job file on the RTL and write a result JSON.

Runs inside the simulator process (started by :mod:`testbench.rtl_model`). The job file
(path in env ``COSIM_JOB``) says what to run::

    {"config": "<config.json>", "mem": "fast"|"protocol", "seed": 0, "pause_prob": 0.3,
     "between": "rst"|"soft", "dram_in": "<hex file>", "dram_out": "<hex file>",
     "result": "<result.json>",
     "programs": [{"dir": "<Program folder>", "dram_bin": "<out .bin>", "timeout_cycles": N,
                   "image": "<dram.bin>", "regs": [[name, value], ...], "dram_end": n}, ...]}

``image``/``regs``/``dram_end`` are optional: without them the Program folder is
loaded and its ``dram_image()``/``regs`` used (with them, deliberately corrupt
instruction streams can be run, which a Program folder refuses to load).

A waves job also has ``"waves": {"file": <vcd>, "max_bytes": N, "window": [first, last] | null,
"trace_control": bool}``. With ``trace_control`` (the fast main, ``hdl/cocotb_fast_main.cpp``)
the job opens the VCD itself through the main's ``cosim_trace_*`` functions: at the start
(no window, or one starting at cycle 0) or ``first`` cycles after START, and closes it
``last`` cycles after START or at the end; the main cuts the file at ``max_bytes``.
Without it (Icarus) the simulator traces from time 0 and :class:`SizeWatch` stops the run
when the file nears ``max_bytes``. Each result gets ``"waves"``: the cycles after START
traced (``from_cycle``/``to_cycle``, negative before START) and whether the cap cut it.

For each Program: reset (``rst``, or only ``CTRL.SOFT_RESET`` when ``between`` is
``soft``), load the DRAM image, play the register writes over AXI4-Lite (CTRL START
last), wait for ``irq`` under a watchdog, read STATUS, ERR_PC, CYCLES and every
counter of ``hw.csr.COUNTERS``, dump DRAM to ``dram_bin``; with ``soft_reset_check``
also write CTRL.SOFT_RESET afterwards and record STATUS/CYCLES/counters. Python is off the
per-cycle path on the fast back-end: the clock is cocotb's GPI clock and DRAM is a
Verilog model loaded/dumped in bulk. A faulting Program is a *result*, not a test
failure; the test fails only when the testbench itself cannot go on.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import random
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Event, First, ReadOnly, RisingEdge, Timer, with_timeout
from cocotb.utils import get_sim_steps, get_sim_time

try:  # cocotb 2.x
    from cocotb.triggers import SimTimeoutError
except ImportError:  # pragma: no cover
    from cocotb.result import SimTimeoutError  # type: ignore

from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam

from hw import csr
from hw.config import parse_config
from hw.program import Program
from testbench.memimg import from_hex_words, to_hex_words

CLK_NS = 10
START_LOOK_CYCLES = 4  # edges after the register writes within which the CYCLES counter shows START's cycle
# A --waves-window that begins sooner after START than this starts tracing before the register writes
# (START's cycle is timed only a few cycles after it): the file then holds the writes too.
WINDOW_FROM_WRITES = 16
# Cycles one AXI-Lite access may take before the testbench gives up (x8 on the
# protocol back-end, whose pause generators stretch every handshake).
CSR_TIMEOUT_CYCLES = 2000


class CsrTimeout(Exception):
    """An AXI4-Lite access got no response: the DUT's CSR slave is stuck."""


class TraceControl:
    """The fast main's VCD window (``cosim_trace_start/stop/info`` of ``hdl/cocotb_fast_main.cpp``)."""

    def __init__(self, path: str, max_bytes: int):
        lib = ctypes.CDLL(None)  # the simulator executable, linked with -rdynamic
        self._start, self._stop, self._info = lib.cosim_trace_start, lib.cosim_trace_stop, lib.cosim_trace_info
        self._start.argtypes = [ctypes.c_char_p, ctypes.c_ulonglong]
        self._info.argtypes = [ctypes.POINTER(ctypes.c_ulonglong)] * 3 + [ctypes.POINTER(ctypes.c_int)]
        self.path, self.max_bytes = path, max_bytes

    def start(self) -> None:
        """Write the VCD from the next time step on (once per process)."""
        self._start(self.path.encode(), self.max_bytes)

    def stop(self) -> None:
        """Close the VCD at the next time step."""
        self._stop()

    async def window(self, first_ns: float, last_ns: float) -> None:
        """Trace ``[first_ns, last_ns]`` of simulated time, counted from now (a start in the past: now, or
        the trace already started)."""
        if first_ns > 0:
            await Timer(first_ns, "ns")
        self.start()  # once per process: a trace started already goes on
        await Timer(max(last_ns - max(first_ns, 0.0), CLK_NS / 2), "ns")
        self.stop()

    def last_written_ns(self, fallback: float) -> float:
        """The time of the file's last time stamp: when the cap cut the file, the steps after it were dumped
        but dropped, so the last dump's time (``fallback``) is later than what the file holds."""
        try:
            with open(self.path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.path) - (1 << 16)))
                tail = f.read()
        except OSError:
            return fallback
        stamps = [ln for ln in tail.split(b"\n") if ln[1:].isdigit() and ln.startswith(b"#")]
        return int(stamps[-1][1:]) / get_sim_steps(1, "ns") if stamps else fallback

    def info(self) -> dict[str, Any]:
        """Times (in ns) of the first and last time step written, bytes, and whether the cap cut the file."""
        first, last, nbytes, capped = ctypes.c_ulonglong(), ctypes.c_ulonglong(), ctypes.c_ulonglong(), ctypes.c_int()
        wrote = self._info(ctypes.byref(first), ctypes.byref(last), ctypes.byref(nbytes), ctypes.byref(capped))
        scale = 1.0 / get_sim_steps(1, "ns")  # the main's times are simulator steps
        return {"written": bool(wrote), "first_ns": first.value * scale, "last_ns": last.value * scale,
                "bytes": nbytes.value, "capped": bool(capped.value)}


class SizeWatch:
    """For simulators that trace from time 0 on their own: sets ``reached`` when the waveform file comes
    within a margin of ``max_bytes`` (checked every CHECK_CYCLES), so the job can stop the run there."""

    CHECK_CYCLES = 64  # Python is awake every cycle on these back-ends anyway: checking often is cheap

    def __init__(self, path: str, max_bytes: int):
        self.path, self.max_bytes = path, max_bytes
        # what the simulator may still buffer, and write at the end, after the last check (a fraction
        # of the cap: a floor would exceed a small cap; rtl_model truncates what still overflows)
        self.margin = max_bytes // 8
        self.reached = Event()
        self.grown = 0  # the largest growth seen between two checks

    async def watch(self) -> None:
        last = 0
        while True:
            await Timer(self.CHECK_CYCLES * CLK_NS, "ns")
            size = os.path.getsize(self.path) if os.path.exists(self.path) else 0
            self.grown = max(self.grown, size - last)
            last = size
            if size + 2 * self.grown + self.margin >= self.max_bytes:
                self.reached.set()
                return


class PortMonitor:
    """The DRAM port's bursts outstanding on the protocol back-end (``"port_monitor": true`` in the job),
    sampled at every rising edge as cocotbext-axi's own channels sample their handshakes: reads from an
    accepted AR to its last R beat, writes from an accepted AW to its B. It shows that the AXI memory
    model really holds several bursts of each kind at once when the config lets the port issue them (a
    per-cycle coroutine: opt-in, it slows the back-end)."""

    def __init__(self, dut: Any):
        self.dut = dut
        self.reset()

    def reset(self) -> None:
        self.reads = self.writes = self.max_reads = self.max_writes = 0

    async def watch(self) -> None:
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            if int(d.rst.value):
                self.reads = self.writes = 0
                continue
            if int(d.m_axi_arvalid.value) and int(d.m_axi_arready.value):
                self.reads += 1
            if int(d.m_axi_rvalid.value) and int(d.m_axi_rready.value) and int(d.m_axi_rlast.value):
                self.reads -= 1
            if int(d.m_axi_awvalid.value) and int(d.m_axi_awready.value):
                self.writes += 1
            if int(d.m_axi_bvalid.value) and int(d.m_axi_bready.value):
                self.writes -= 1
            self.max_reads = max(self.max_reads, self.reads)
            self.max_writes = max(self.max_writes, self.writes)

    def info(self) -> dict[str, int]:
        return {"max_reads_outstanding": self.max_reads, "max_writes_outstanding": self.max_writes}


def _pause_gen(rng: random.Random, p: float) -> Iterator[bool]:
    """Seeded random pause pattern: True (pause) with probability ``p`` per cycle, with bursts."""
    while True:
        if rng.random() < p:
            for _ in range(rng.randint(1, 4)):
                yield True
        else:
            for _ in range(rng.randint(1, 8)):
                yield False


class LiteDriver:
    """A minimal AXI4-Lite master for the fast back-end: one access at a time, Python awake
    only for the few cycles of each access (cocotbext-axi's agents stay off the clock).

    Each access starts in a normal (writable) phase after a clock edge; per cycle it samples
    the handshakes in ReadOnly (the values the next rising edge sees) and updates its
    outputs after that edge. Returns None when ``timeout`` cycles pass without a response.
    """

    def __init__(self, dut: Any, timeout: int):
        self.dut, self.clk, self.timeout = dut, dut.clk, timeout
        for n in ("awvalid", "wvalid", "bready", "arvalid", "rready", "awprot", "arprot", "awaddr", "araddr",
                  "wdata"):
            getattr(dut, f"s_axil_{n}").value = 0
        dut.s_axil_wstrb.value = 0xF

    async def write(self, addr: int, value: int, strb: int = 0xF, prot: int = 0) -> bool:
        """One write of ``value`` with byte strobes ``strb`` and AWPROT ``prot``; False when no B came."""
        d = self.dut
        d.s_axil_awaddr.value = addr
        d.s_axil_awprot.value = prot
        d.s_axil_wdata.value = value
        d.s_axil_wstrb.value = strb
        d.s_axil_awvalid.value = d.s_axil_wvalid.value = d.s_axil_bready.value = 1
        aw = w = True  # still offered
        ok = False
        for _ in range(self.timeout):
            await ReadOnly()
            aw_hs = aw and bool(d.s_axil_awready.value)
            w_hs = w and bool(d.s_axil_wready.value)
            b_hs = bool(d.s_axil_bvalid.value)
            await RisingEdge(self.clk)
            if aw_hs:
                aw = False
                d.s_axil_awvalid.value = 0
            if w_hs:
                w = False
                d.s_axil_wvalid.value = 0
            if b_hs:
                ok = True
                break
        d.s_axil_awvalid.value = d.s_axil_wvalid.value = d.s_axil_bready.value = 0
        d.s_axil_awprot.value = 0
        return ok

    async def read(self, addr: int) -> int | None:
        d = self.dut
        d.s_axil_araddr.value = addr
        d.s_axil_arvalid.value = 1
        d.s_axil_rready.value = 1
        ar = True
        for _ in range(self.timeout):
            await ReadOnly()
            ar_hs = ar and bool(d.s_axil_arready.value)
            r_hs = bool(d.s_axil_rvalid.value)
            data = int(d.s_axil_rdata.value) if r_hs else 0
            await RisingEdge(self.clk)
            if ar_hs:
                ar = False
                d.s_axil_arvalid.value = 0
            if r_hs:
                d.s_axil_rready.value = 0
                return data
        d.s_axil_arvalid.value = d.s_axil_rready.value = 0
        return None


class Bench:
    """The DUT plus its AXI agents for one back-end."""

    def __init__(self, dut: Any, job: dict[str, Any]):
        self.dut = dut
        self.job = job
        w = job.get("waves")
        self.trace: TraceControl | None = None
        self.watch: SizeWatch | None = None
        if w and w.get("trace_control"):
            self.trace = TraceControl(w["file"], int(w["max_bytes"]))
            if not w.get("window"):
                self.trace.start()  # the whole run, reset and register writes included
        elif w:
            self.watch = SizeWatch(w["file"], int(w["max_bytes"]))
            cocotb.start_soon(self.watch.watch())
        self.cfg = parse_config(json.loads(Path(job["config"]).read_text()), job["config"])
        self.fast = job["mem"] == "fast"
        self.csr = csr.csrs_of(self.cfg)
        self.dirty_words = 0  # DRAM words a previous Program may have touched
        self.csr_timeout_ns = CSR_TIMEOUT_CYCLES * CLK_NS * (1 if self.fast else 8)
        dut.rst.value = 1
        if self.fast:
            dut.tb_load.value = 0
            dut.tb_dump.value = 0
            dut.tb_clear.value = 0
            dut.tb_words.value = 0
        # The fast back-end without waves makes its own clock, period CLK_NS (runner.sim_clock).
        if not job.get("sim_clock"):
            Clock(dut.clk, CLK_NS, unit="ns", impl="gpi").start()

    async def start(self) -> None:
        """Hold reset for a few cycles (so Icarus has no X on the handshakes), then attach the agents."""
        dut, job = self.dut, self.job
        self.lite: LiteDriver | None = LiteDriver(dut, CSR_TIMEOUT_CYCLES) if self.fast else None
        await ClockCycles(dut.clk, 3)
        self.ram: AxiRam | None = None
        self.port: PortMonitor | None = None
        if not self.fast:
            self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
            self.axil.write_if.log.setLevel(logging.WARNING)  # per-reset chatter drowns sim.log
            self.axil.read_if.log.setLevel(logging.WARNING)
            self.ram = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=self.cfg.dram_bytes)
            self.ram.write_if.log.setLevel(logging.WARNING)
            self.ram.read_if.log.setLevel(logging.WARNING)
            rng = random.Random(int(job.get("seed", 0)))
            p = float(job.get("pause_prob", 0.3))
            if job.get("port_monitor"):
                self.port = PortMonitor(dut)
                cocotb.start_soon(self.port.watch())
            for ch in (self.ram.write_if.aw_channel, self.ram.write_if.w_channel, self.ram.write_if.b_channel,
                       self.ram.read_if.ar_channel, self.ram.read_if.r_channel,
                       self.axil.write_if.aw_channel, self.axil.write_if.w_channel,
                       self.axil.write_if.b_channel, self.axil.read_if.ar_channel,
                       self.axil.read_if.r_channel):
                ch.set_pause_generator(_pause_gen(random.Random(rng.getrandbits(32)), p))

    # ---- AXI4-Lite ------------------------------------------------------------
    async def write(self, name: str, value: int) -> None:
        addr = self.csr[name].addr
        if self.lite is not None:
            ok = await self.lite.write(addr, value)
        else:
            try:
                await with_timeout(self.axil.write_dword(addr, value), self.csr_timeout_ns, "ns")
                ok = True
            except SimTimeoutError:
                ok = False
        if not ok:
            raise CsrTimeout(f"AXI-Lite write of {name} (0x{addr:03x}) got no response")

    async def read(self, name: str) -> int:
        addr = self.csr[name].addr
        v: int | None = None
        if self.lite is not None:
            v = await self.lite.read(addr)
        else:
            try:
                v = int(await with_timeout(self.axil.read_dword(addr), self.csr_timeout_ns, "ns"))
            except SimTimeoutError:
                pass
        if v is None:
            raise CsrTimeout(f"AXI-Lite read of {name} (0x{addr:03x}) got no response")
        return v

    # ---- DRAM -----------------------------------------------------------------
    async def _pulse(self, sig: Any) -> None:
        sig.value = 1
        await RisingEdge(self.dut.clk)
        sig.value = 0
        await RisingEdge(self.dut.clk)

    async def load_dram(self, img: bytearray) -> None:
        """Clear what the previous Program may have written beyond this image, then load it."""
        bb = self.cfg.bus_bytes
        words = (len(img) + bb - 1) // bb
        if self.fast:
            if self.dirty_words > words:
                self.dut.tb_words.value = self.dirty_words
                await self._pulse(self.dut.tb_clear)
            Path(self.job["dram_in"]).write_text(to_hex_words(img, bb))
            await self._pulse(self.dut.tb_load)
        else:
            assert self.ram is not None
            if self.dirty_words > words:
                self.ram.write(0, bytes(self.dirty_words * bb))
            self.ram.write(0, bytes(img))
        self.dirty_words = max(self.dirty_words, words)

    async def dump_dram(self, nbytes: int) -> tuple[bytes, int]:
        """DRAM bytes [0, nbytes) and the count of words holding X (Icarus only)."""
        bb = self.cfg.bus_bytes
        words = (nbytes + bb - 1) // bb
        if not self.fast:
            assert self.ram is not None
            return bytes(self.ram.read(0, words * bb)), 0
        self.dut.tb_words.value = words
        await self._pulse(self.dut.tb_dump)
        data, unknown = from_hex_words(Path(self.job["dram_out"]).read_text(), bb)
        return data[:words * bb].ljust(words * bb, b"\0"), unknown

    # ---- one Program ------------------------------------------------------------
    def waves_report(self, start_ns: float, res: dict[str, Any]) -> dict[str, Any]:
        """What the waveform file holds: cycles after START (negative: before it), and the cap."""
        cap = int(self.job["waves"]["max_bytes"])
        if self.trace is not None:
            i = self.trace.info()
            if not i["written"]:
                return {"from_cycle": None, "to_cycle": None, "max_bytes": cap, "capped": False}
            last_ns = self.trace.last_written_ns(i["last_ns"]) if i["capped"] else i["last_ns"]
            return {"from_cycle": int((i["first_ns"] - start_ns) // CLK_NS),
                    "to_cycle": int((last_ns - start_ns) // CLK_NS), "max_bytes": cap, "capped": i["capped"]}
        return {"from_cycle": int(-start_ns // CLK_NS), "to_cycle": res["run_sim_cycles"], "max_bytes": cap,
                "capped": bool(res.get("waves_capped"))}

    @property
    def accel(self) -> Any:
        """The accelerator's top (accel_top): under the fast back-end's test bench, or the DUT itself."""
        return self.dut.u_accel if self.fast else self.dut

    def probes(self) -> dict[str, Any]:
        """The accelerator's debug probes, for a watchdog report."""
        top = self.accel
        out: dict[str, Any] = {}
        for n in ("dbg_load_busy", "dbg_compute_busy", "dbg_gemm_busy", "dbg_store_busy", "dbg_load_pc",
                  "dbg_compute_pc", "dbg_store_pc", "dbg_load_q", "dbg_compute_q", "dbg_store_q", "dbg_dma_rd",
                  "dbg_dma_wr", "dbg_cycles"):
            try:
                out[n] = int(getattr(top, n).value)
            except (AttributeError, ValueError):
                out[n] = None
        return out

    async def run(self, entry: dict[str, Any], first: bool) -> dict[str, Any]:
        dut = self.dut
        if "image" in entry:
            name, img = entry.get("name", "program"), bytearray(Path(entry["image"]).read_bytes())
            regs, dram_end = [(str(n), int(v)) for n, v in entry["regs"]], int(entry["dram_end"])
        else:
            prog = Program.load(entry["dir"], self.cfg)
            name, img, regs, dram_end = prog.name, prog.dram_image(), prog.regs, prog.dram_end
        res: dict[str, Any] = {"name": name, "timeout": False}
        if first or self.job.get("between", "rst") == "rst":
            dut.rst.value = 1
            await ClockCycles(dut.clk, 2)
            await self.load_dram(img)
            await ClockCycles(dut.clk, 2)
            dut.rst.value = 0
            await ClockCycles(dut.clk, 2)
        else:  # soft reset only: the accelerator must return to idle by itself
            await self.write("CTRL", csr.CTRL_SOFT_RESET)
            await self.load_dram(img)
        res["version"] = await self.read("VERSION")
        res["config_id"] = await self.read("CONFIG_ID")
        window = (self.job.get("waves") or {}).get("window")
        if self.trace is not None and window and int(window[0]) < WINDOW_FROM_WRITES:
            self.trace.start()  # the window's first cycles come before START can be timed: from the writes on
        t0 = time.perf_counter()
        for reg, value in regs:
            await self.write(reg, value)
        start_ns = await self.start_time_ns(get_sim_time("ns"))
        if self.port is not None:
            self.port.reset()
        limit = int(entry["timeout_cycles"])
        window_task = None
        now = get_sim_time("ns")
        if self.trace is not None and window:  # an early window is traced already: it only stops
            first = start_ns + int(window[0]) * CLK_NS - now if int(window[0]) >= WINDOW_FROM_WRITES else 0.0
            window_task = cocotb.start_soon(self.trace.window(first, start_ns + (int(window[1]) + 0.5) * CLK_NS - now))
        if not int(dut.irq.value):
            waits = [RisingEdge(dut.irq), Timer(max(CLK_NS, start_ns + limit * CLK_NS - now), "ns")]
            if self.watch is not None:
                waits.append(self.watch.reached.wait())
            fired = await First(*waits)
            if fired is waits[1]:
                res["timeout"] = True
                res["probes"] = self.probes()
            elif fired is not waits[0]:
                res["waves_capped"] = True
                res["probes"] = self.probes()
        if window_task is not None and not window_task.done():
            window_task.cancel()
        if self.trace is not None:
            self.trace.stop()
        res["run_wall_s"] = time.perf_counter() - t0
        res["run_sim_cycles"] = int((get_sim_time("ns") - start_ns) // CLK_NS)
        res["timeout_cycles"] = limit
        res["status"] = await self.read("STATUS")
        res["err_pc"] = await self.read("ERR_PC")
        res["cycles"] = await self.read("CYCLES_LO") | (await self.read("CYCLES_HI") << 32)
        res["counters"] = await self.read_counters()
        data, unknown = await self.dump_dram(dram_end)
        Path(entry["dram_bin"]).write_bytes(data)
        res["x_words"] = unknown
        res["proto_err"] = bool(int(dut.proto_err.value)) if self.fast else False
        if self.port is not None:
            res["port"] = self.port.info()
        res["wall_s"] = time.perf_counter() - t0
        if self.trace is not None or self.watch is not None:
            res["waves"] = self.waves_report(start_ns, res)
        if self.job.get("soft_reset_check"):
            await self.write("CTRL", csr.CTRL_SOFT_RESET)
            await ClockCycles(dut.clk, 2)
            res["after_soft_reset"] = {"status": await self.read("STATUS"), "err_pc": await self.read("ERR_PC"),
                                       "cycles": await self.read("CYCLES_LO") | (await self.read("CYCLES_HI") << 32),
                                       "irq": int(dut.irq.value),
                                       "counters": await self.read_counters()}
        return res

    async def start_time_ns(self, fallback: float) -> float:
        """The simulated time of START's cycle, read from the CYCLES counter (``dbg_cycles``: 0 in START's
        cycle and the next, then c - 1 in cycle c after START) at the first edges after the register
        writes; ``fallback`` (the writes' end) when it does not move within :data:`START_LOOK_CYCLES`
        or the run has ended already (its counter stopped)."""
        probe = getattr(self.accel, "dbg_cycles", None)
        found = fallback
        for _ in range(START_LOOK_CYCLES):
            await ReadOnly()
            n = int(probe.value) if probe is not None and probe.value.is_resolvable else 0
            done = bool(int(self.dut.irq.value))
            await RisingEdge(self.dut.clk)  # leave ReadOnly: the caller may drive the CSR bus next
            if n and not done:
                found = get_sim_time("ns") - (n + 2) * CLK_NS  # read one edge ago
            if n or done:
                break
        return found

    async def read_counters(self) -> dict[str, Any]:
        """Every counter CSR (each core's bank on several cores), by CSR name."""
        return {n: await self.read(n) for n in csr.counter_reads(self.cfg.num_cores)}


async def _run_plain(bench: "Bench", entry: dict[str, Any], first: bool) -> dict[str, Any]:
    return await bench.run(entry, first)


async def execute_job(dut: Any, run_one: Callable[["Bench", dict[str, Any], bool], Awaitable[dict[str, Any]]]
                      = _run_plain) -> None:
    """Run every Program of the job file (env ``COSIM_JOB``); write the result JSON after each one.

    The body of the cocotb test, public so that another test module (the bench's profiled
    job, the directed coverage job) can run the very same job under a wrapper of its own;
    ``run_one(bench, entry, first)`` runs one Program and returns its result (default: its plain run)."""
    job = json.loads(Path(os.environ["COSIM_JOB"]).read_text())
    bench = Bench(dut, job)
    await bench.start()
    results: list[dict[str, Any]] = []
    out = Path(job["result"])
    for k, entry in enumerate(job["programs"]):
        try:
            results.append(await run_one(bench, entry, k == 0))
        except CsrTimeout as e:
            # The CSR slave is stuck; the agents cannot be trusted for the rest of the job.
            results.append({"name": entry.get("name", f"p{k}"), "tb_error": str(e), "probes": bench.probes()})
            for rest in job["programs"][k + 1:]:
                results.append({"name": rest.get("name", "?"), "tb_error": "not run: an earlier Program "
                                "left the AXI-Lite slave stuck"})
            break
        finally:
            out.write_text(json.dumps({"results": results}, indent=1))
    out.write_text(json.dumps({"results": results, "done": True}, indent=1))


@cocotb.test()
async def run_job(dut: Any) -> None:
    """The cocotb job: :func:`execute_job`."""
    await execute_job(dut)
