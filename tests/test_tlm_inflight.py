"""The TLM's port with read bursts in flight (``sim/tlm/axi_inflight.py``) against the timing
contract of docs/microarch.md ("Read bursts in flight"), request by request; the whole model
against the RTL is in ``tests/test_tlm_vs_rtl.py``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hw.config import load_config
from sim.tlm import Timing, run_program
from sim.tlm.axi_arbiter import Segment
from sim.tlm.axi_inflight import AxiArbiterInFlight
from sim.tlm.scheduler import Scheduler

LR, LW = 16, 8


TIMING = Timing.from_config(dataclasses.replace(load_config("default"), dram_read_latency=LR, dram_write_latency=LW))


def _port(reads: int, cores: int = 1) -> tuple[Scheduler, AxiArbiterInFlight]:
    sim = Scheduler()
    return sim, AxiArbiterInFlight(sim, TIMING, reads, cores=cores)


def _ask(sim: Scheduler, port: AxiArbiterInFlight, t: int, client: str, beats: list[int], done: dict,
         core: int = 0) -> None:
    """``client`` of ``core`` asks for ``beats`` bursts back to back at ``t``; ``done`` gets its end."""
    T = TIMING
    write = client == "store"
    dur = np.array([(T.write_burst_cycles(n) if write else T.read_burst_cycles(n)) for n in beats], dtype=np.int64)

    def go(t: int) -> None:
        seg = Segment(client, write, np.array(beats, dtype=np.int64), dur, lambda e: done.__setitem__((core, client), e))
        seg.core = core
        port.request(t, seg)
    sim.at(t, go)


def test_reads_overlap_and_share_the_r_channel():
    """FETCH and LOAD ask together: FETCH is granted at 0, LOAD at 1; LOAD's beats follow FETCH's."""
    sim, port = _port(2)
    done: dict = {}
    _ask(sim, port, 0, "fetch", [4], done)
    _ask(sim, port, 0, "load", [8], done)
    sim.run()
    # fetch: AR at 1, beats 17..20, done seen at 21; load: AR at 2, due at 18, after fetch's: 21..28
    assert done == {(0, "fetch"): 21, (0, "load"): 29}
    assert port.max_reads_seen == 2
    assert port.core_beats[0] == {"fetch": 4, "load": 8, "store": 0}


def test_one_read_at_a_time_with_a_limit_of_one():
    sim, port = _port(1)
    done: dict = {}
    _ask(sim, port, 0, "fetch", [4], done)
    _ask(sim, port, 0, "load", [8], done)
    sim.run()
    assert done == {(0, "fetch"): 21, (0, "load"): 21 + 8 + LR + 1}


def test_a_write_waits_for_every_read_and_reads_wait_for_it():
    """The round robin picks core 0's STORE: nothing is granted until the read in flight ends (not
    core 1's FETCH either), then the write holds the port alone and the FETCH follows it."""
    sim, port = _port(4, cores=2)
    done: dict = {}
    _ask(sim, port, 0, "load", [2], done, core=1)    # granted at 0: beats 17, 18, done at 19
    _ask(sim, port, 1, "store", [2], done, core=0)   # picked from 1 on, granted at 19
    _ask(sim, port, 3, "fetch", [2], done, core=1)   # waits behind the picked write
    sim.run()
    assert done[(1, "load")] == 19
    assert done[(0, "store")] == 19 + 2 + LW + 1
    assert done[(1, "fetch")] == 30 + 1 + LR + 2


def test_more_reads_than_the_limit_wait_for_a_slot():
    """Four cores' LOADs ask at once with a limit of 2: two granted at 0 and 1 (the second's beats
    after the first's), the third when the first ends, the fourth when the second ends."""
    sim, port = _port(2, cores=4)
    done: dict = {}
    for c in range(4):
        _ask(sim, port, 0, "load", [4], done, core=c)
    sim.run()
    assert [done[(c, "load")] for c in range(4)] == [21, 25, 21 + 1 + LR + 4, 25 + 1 + LR + 4]
    assert port.max_reads_seen == 2


@pytest.mark.parametrize("example", ["vadd", "conv3x3", "residual_add"])
def test_model_runs_with_reads_in_flight_and_gains_on_quad(example):
    """The whole TLM with reads in flight on ``quad``: right outputs, no more cycles than one at a time."""
    from cosim import models
    cycles = []
    for rif in (1, 4):
        cfg = dataclasses.replace(load_config("quad"), dram_reads_in_flight=rif)
        job = models.make_job(example, cfg)
        r = run_program(job.program, timing=Timing.from_config(cfg), raise_on_error=False)
        assert r.error is None
        for k, v in job.expected.items():
            assert np.array_equal(r.outputs[k], v), k
        cycles.append(r.cycles)
    assert cycles[1] <= cycles[0]
