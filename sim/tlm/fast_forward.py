"""The TLM's fast-forward: a repeating steady state is advanced in bulk, time and data together,
with exactly the result of the event-by-event run (no RTL block: a speed-up of the model only).

At an *instruction boundary* (the end of a cycle in which an instruction retired: every event of
that cycle has run) the model's whole timing state is summarised as a *signature* relative to the
cycle ``t`` and to FETCH's position: the scheduler's pending events, each unit's state and
instruction, the instruction queues, the token counts and their not-yet-visible changes, the port's
burst under way and requests, FETCH's buffer, and the accumulator port uses that can still matter.
A time in the future (``> t``) enters it relative to ``t``; a time in the past and every pc enter
only a side vector, since the model uses them only in arithmetic (counters, the error's pc), never
in a decision about the future. Each block shows its own state and moves it on by whole periods
(its ``walk_state``, ``sim/tlm/steady_state.py``); this module composes them and touches no private
name of a block. Timing never depends on data here (GEMM, whose fault depends on
micro-op contents, is excluded), so equal signatures mean equal futures as long as the instruction
words FETCH will read repeat.

A LOAD or STORE enters the signature with its fields but the DRAM address, and with where the 4 KiB
boundaries cut its rows (``row_cut_marks``: a cut a whole number of full bursts into a row changes
nothing), which with the fields decides its bursts; the address itself goes to the side vector.

When one signature is seen three times at equal spacing (``T`` cycles, ``P`` instructions
fetched), with equal counter deltas and the same data movements in both periods, and every past
value of the side vector either constant or advancing by ``T`` (a pc: by ``P``; a DMA address: by
one step per period, any step), the run jumps ``R`` periods at once: every future time and
advancing value moves by ``R`` times its step, every counter by ``R`` times its delta, and the data
movements of the skipped instructions are applied in bulk (``sim/tlm/bulk_data.py``). ``R`` is the
largest number of periods whose instruction words repeat the observed ones (a LOAD's or STORE's
address moving by its step), whose LOADs and STOREs are cut by 4 KiB boundaries exactly where
their instances in the observed period are (so their bursts, hence the timing, are the observed
ones), and that FETCH reads with the same bursts (a burst short of INSN_COUNT at least). The
skipped part cannot fault: the checks are per instruction word, the words are the observed ones,
and every skipped DMA's region is checked.

A step that is no multiple of 4 KiB moves the cuts from period to period: every so many periods a
row straddles a boundary at another offset. The jump then ends before that DMA, which runs event
by event with whatever follows from it, and what the periods showed is kept (a *template*: the
period, the changes per period, the data movements, the words scanned ahead and which of their
DMAs are cut otherwise). When the same signature comes back at the same phase of the loop and one
period from there moves time, counters, side vector and data exactly as the template's did, the
run jumps again from there (two observations in all, as the three-fold repeat gives), up to the
next DMA cut otherwise; in another pass of an outer loop, where the template's scan does not
reach, it does so after scanning the words ahead afresh, each DMA of the period stepping to its
instance a period later as the template's did. The sampling rests until the DMA cut otherwise
has left the state.

The event-by-event stretch after a jump (a crossing: from the boundary where the jump ended,
before a DMA cut otherwise or where the words stop repeating at the end of an inner loop, to the
boundary of the same signature where the run jumped again) is recorded once
(``sim/tlm/crossing_replay.py``): its change of time, pcs, counters and side vector, its data
movements, and the words it read (DMA addresses aside, with every DMA's cut marks). When a later
jump ends at the same signature with the same words ahead (each DMA cut as its counterpart was,
inside a region that allows it, with the same micro-ops), the crossing is replayed in one move
(the walk in shift mode, the segment as one period) and the run jumps at once from its end with
the template the recorded run used there; in another pass of an outer loop, whose words the
template's scan does not reach, the words ahead are scanned afresh (the state at the end is the
recorded one moved, whose periods the recorded run saw repeat, and the window's last periods
moved their DMA addresses alike, so each steps as it did there). A chain of jumps and replays
whose crossings move whole periods of the template in its order applies its data in one bulk step
at the end of the chain. So that an inner loop's passes jump at one phase (and the stretch between
two passes is recorded and replayed), a jump at another signature waits a few samples while the
signature the last jump ended at has come back.

Sampling (a walk of the state at each retirement, less often while nothing repeats) starts after
a warm-up: 1,000 events, or from 200 on once the words FETCH has read end in two equal periods
(DMA addresses aside) with at least 1,000 instructions still ahead, so a long loop is sampled from
its first periods while a short Program costs no sampling.

Not covered (the run simply proceeds event by event): GEMM's micro-ops reloaded in a period (its
faults depend on micro-op contents), FINISH, faults, a STORE into the instruction window, several
cores (the walk covers core 0's blocks only and refuses when another core has an event pending),
and tracing (the fast-forward is off while a VCD or Perfetto trace is recorded, so the trace is the
plain run's). Switch: ``TlmModel(fast_forward=...)`` / ``run_program(fast_forward=...)``; the
default comes from ``COSIM_TLM_FAST_FORWARD`` (``0`` turns it off). ``RunResult.extra["events"]``
counts the skipped events too, so it stays the same.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Iterator

import numpy as np

from hw import csr
from hw.isa import INSN_BYTES, OPCODE_BITS, OPCODES
from hw.isa_semantics import buffer_of, dram_span
from sim.tlm.bulk_data import apply_periods, at_base
from sim.tlm.burst_calc import PAGE, row_cut_marks
from sim.tlm.crossing_replay import DmaGroup, Segment, group_dmas, group_marks, new_vector, op_rows, shift_of
from sim.tlm.steady_state import Unsupported, event_mark
from sim.tlm.unit_shell import EXEC

ENV_SWITCH = "COSIM_TLM_FAST_FORWARD"
_HISTORY_CAP = 4096     # signatures kept before starting over
_LOG_CAP = 200_000      # data movements recorded before starting over
_PATIENCE = 64          # samples without a repeat before sampling less often
_MAX_SKIP = 63
_KEY_CACHE = 4096       # instructions whose part of the signature is remembered
_TEMPLATES = 16         # signatures whose periods are kept for jumping again
_SEGMENTS = 64          # crossings kept for replay
_ALIGN_WAIT = 24        # samples a jump may wait for the signature the last jump ended at


def enabled_by_default() -> bool:
    """The fast-forward's default: on unless ``COSIM_TLM_FAST_FORWARD`` is ``0`` (or off/false/no)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "off", "false", "no")


class _Sign:
    """Signature mode of the walk (a snapshot): future times relative to ``t`` in the key, past
    times, pcs and the DRAM addresses of DMA instructions in the side vector (with their kind)."""

    shifting = False

    def __init__(self, t: int, dma: "_DmaFields", owners: dict[int, str]):
        self.t = t
        self.dma = dma
        self.owners = owners
        self.key: list[Any] = []
        self.vec: list[tuple[Any, int]] = []

    def time(self, v: int | None) -> int | None:
        if v is None:
            self.key.append(None)
        elif v > self.t:
            self.key.append(v - self.t)
        else:
            self.key.append("past")
            self.vec.append(("t", v))
        return v

    def pc(self, v: int | None) -> int | None:
        if v is None:
            self.key.append(None)
        else:
            self.key.append("pc")
            self.vec.append(("p", v))
        return v

    def val(self, x: Any) -> Any:
        self.key.append(x)
        return x

    def insn(self, i: Any) -> Any:
        """An instruction: a LOAD's or STORE's DRAM address goes to the side vector (where 4 KiB
        boundaries cut its rows, which decides its bursts, stays in the key)."""
        eb = self.dma.elem_bytes(i)
        if eb is None:
            self.key.append(i)
        else:
            self.key.append(self.dma.insn_key(i))
            self.vec.append((("d", eb), i.dram_base))
        return i

    def word(self, word: int) -> int:
        """An instruction word in FETCH's buffer (the same as :meth:`insn`)."""
        i = self.dma.decode(word)
        eb = self.dma.elem_bytes(i)
        if eb is None:
            self.key.append(word)
        else:
            self.key.append(self.dma.word_key(word, i))
            self.vec.append((("d", eb), i.dram_base))
        return word

    def callback(self, fn: Callable[..., Any] | None) -> None:
        """A method a block will call: its owner's role and the method (another callable: not covered)."""
        self.key.append(None if fn is None else _bound(fn, self.owners))


class _Shift:
    """Shift mode of the walk (an advance by ``R`` periods): future times move by ``dt``; the side
    vector's values (past times, pcs, DRAM addresses) by ``R`` times their change per period (in
    walk order)."""

    shifting = True

    def __init__(self, t: int, dt: int, R: int, deltas: list[int], dma: "_DmaFields"):
        self.t, self.dt, self.R, self.dma = t, dt, R, dma
        self.deltas: Iterator[int] = iter(deltas)

    def time(self, v: int | None) -> int | None:
        if v is None:
            return None
        if v > self.t:
            return v + self.dt
        return v + self.R * next(self.deltas)

    def pc(self, v: int | None) -> int | None:
        if v is None:
            return None
        return v + self.R * next(self.deltas)

    def val(self, x: Any) -> Any:
        return x

    def insn(self, i: Any) -> Any:
        if self.dma.elem_bytes(i) is None:
            return i
        d = next(self.deltas)
        return at_base(i, i.dram_base + self.R * d) if d else i

    def word(self, word: int) -> int:
        i = self.dma.decode(word)
        if self.dma.elem_bytes(i) is None:
            return word
        d = next(self.deltas)
        return self.dma.with_base(word, i, i.dram_base + self.R * d) if d else word

    def callback(self, fn: Callable[..., Any] | None) -> None:
        return None


def _bound(fn: Callable[..., Any], owners: dict[int, str]) -> tuple[str, Any]:
    """``(role of its object, function)`` of a bound method of a walked block (else not covered)."""
    owner = owners.get(id(getattr(fn, "__self__", None)))
    if owner is None:
        raise Unsupported
    return owner, getattr(fn, "__func__", fn)


class _DmaFields:
    """What the walk needs of LOAD and STORE: their DRAM unit and the ``dram_base`` field."""

    def __init__(self, model: Any):
        self.T = model.timing
        self.isa = model.isa
        self.decoder = model.fetch.decoder
        self._insn_keys: dict[int, tuple[Any, tuple[Any, tuple[int, ...]]]] = {}
        self._word_keys: dict[int, tuple[int, tuple[int, ...]]] = {}
        self._decoded: dict[int, Any] = {}

    def elem_bytes(self, i: Any) -> int | None:
        """The DRAM unit of a LOAD or STORE (None for any other instruction)."""
        if i is None:
            return None
        if i.MNEMONIC == "LOAD":
            return self.T.elem_bytes(buffer_of(i))
        if i.MNEMONIC == "STORE":
            return self.T.out_vec_bytes
        return None

    def insn_key(self, i: Any) -> tuple[Any, tuple[int, ...]]:
        """A LOAD's or STORE's part of the signature: its fields but the DRAM address, and where
        4 KiB boundaries cut its rows (remembered: the same instructions come back every period)."""
        hit = self._insn_keys.get(id(i))  # by identity (the entry holds the object, so its id stays its own)
        if hit is not None and hit[0] is i:
            return hit[1]
        if len(self._insn_keys) >= _KEY_CACHE:
            self._insn_keys.clear()
        k = (dataclasses.replace(i, dram_base=0), self.cuts(i))
        self._insn_keys[id(i)] = (i, k)
        return k

    def word_key(self, word: int, i: Any) -> tuple[int, tuple[int, ...]]:
        """The same for an instruction word not yet dispatched (``i``: its instruction)."""
        k = self._word_keys.get(word)
        if k is None:
            if len(self._word_keys) >= _KEY_CACHE:
                self._word_keys.clear()
            k = self._word_keys[word] = (self.with_base(word, i, 0), self.cuts(i))
        return k

    def cuts(self, i: Any) -> tuple[int, ...]:
        """Where 4 KiB boundaries cut the rows of a LOAD or STORE (``row_cut_marks``): with the
        other fields, all of the address that decides its bursts."""
        if i.y_size * i.x_size == 0:
            return ()
        eb = self.elem_bytes(i)
        addrs = (i.dram_base + np.arange(i.y_size, dtype=np.int64) * i.x_stride) * eb
        return tuple(row_cut_marks(addrs, i.x_size * eb, self.T.bus_bytes, self.T.max_burst).tolist())

    def decode(self, word: int) -> Any:
        """The instruction of a word FETCH will dispatch (a word that faults: not covered)."""
        insn = self._decoded.get(word)
        if insn is None:
            insn, code, _ = self.decoder.decode(word)
            if code:
                raise Unsupported
            if len(self._decoded) >= _KEY_CACHE:
                self._decoded.clear()
            self._decoded[word] = insn
        return insn

    def with_base(self, word: int, i: Any, base: int) -> int:
        return self.isa.set_field(word, i.MNEMONIC, "dram_base", base)


class _Snap:
    __slots__ = ("t", "ref", "vec", "counters", "port_version", "plan_version", "log_len")

    def __init__(self, t: int, ref: int, vec: list[tuple[str, int]], counters: tuple[int, ...],
                 port_version: int, plan_version: int, log_len: int):
        self.t, self.ref, self.vec, self.counters = t, ref, vec, counters
        self.port_version, self.plan_version, self.log_len = port_version, plan_version, log_len

    def oldest_pc(self) -> int:
        """The oldest instruction the state holds (the smallest pc of its side vector), else ``ref``."""
        return min((v for kind, v in self.vec if kind == "p"), default=self.ref)


def _moved_as(tpl: "_Template", b: _Snap, c: _Snap) -> bool:
    """Whether the period from ``b`` to ``c`` moved time, pcs, counters, event versions and the side
    vector exactly as ``tpl``'s period did."""
    return (c.t - b.t == tpl.T and c.ref - b.ref == tpl.P
            and [y - x for x, y in zip(b.counters, c.counters)] == tpl.d2
            and (c.port_version - b.port_version, c.plan_version - b.plan_version) == tpl.steps
            and len(c.vec) == len(tpl.deltas)
            and all(vc - vb == d for (_, vb), (_, vc), d in zip(b.vec, c.vec, tpl.deltas)))


@dataclasses.dataclass
class _Template:
    """What the periods of one signature showed at a jump, to jump again from the same signature
    later (:meth:`FastForward._jump_again`): the period (``T`` cycles, ``P`` instructions, the
    boundary's ``ref`` pc), the words scanned (periodic from pc ``start`` to ``words_end``, with
    the pcs of the DMAs whose 4 KiB cuts differ from the period's), the changes per period
    (counters, side vector, event versions) and the period's data movements."""

    T: int
    P: int
    ref: int
    start: int
    words_end: int
    anomalies: np.ndarray
    d2: list[int]
    deltas: list[int]
    steps: tuple[int, int]
    ops: list[tuple[str, Any]]
    op_deltas: list[int]


class FastForward:
    """The fast-forward of one run of ``model`` (a ``TlmModel`` with its run wired: fetch set)."""

    # a run this short is fast anyway: no sampling before (no cost on it) ...
    warmup_events = 1000
    # ... unless the words FETCH has read already repeat (a loop has begun): then from this many on
    warmup_floor = 200
    _REPEAT_MIN = 16  # instructions the words' two repeated periods must cover to end the warm-up
    _AHEAD_MIN = 1000  # ... and instructions still ahead of FETCH (else a jump could save little)

    def __init__(self, model: Any):
        self.m = model
        self.log: list[tuple[str, Any]] = []
        self.history: dict[tuple[Any, ...], list[_Snap]] = {}
        self.skip = 0          # boundaries to let pass before the next sample
        self.every = 0         # boundaries skipped between samples (grows while nothing repeats)
        self.misses = 0
        self.refusals = 0      # jumps refused in a row
        self.holdoff = 0       # repeats to let pass before trying to jump again
        self.jumps = 0
        self.ways: dict[str, int] = {}  # how the skipped data was applied (bulk_data), per jump
        self.skipped_cycles = 0
        self.skipped_insns = 0
        # no sampling before FETCH reaches this pc: the periods up to a DMA whose 4 KiB cuts change
        # (the last jump ended before it) cannot repeat the ones before; the sampling resumes after
        self.quiet_until = 0
        self.cut_pc: int | None = None  # where the last jump's periods ended: a DMA with other cuts
        self._scan: tuple[int, int, np.ndarray] | None = None  # the last scan of the words ahead
        self.templates: dict[tuple[Any, ...], _Template] = {}  # periods seen, by signature
        self.jumps_again = 0  # jumps made from a template
        self.replays = 0      # crossings replayed (``sim/tlm/crossing_replay.py``)
        self.segments: dict[tuple[Any, ...], list[Segment]] = {}  # crossings recorded, by signature
        self.n_segments = 0
        self.restarts = 0
        # micro-op LOADs run so far (GEMM's faults depend on the micro-ops: a crossing is replayed
        # only with the micro-ops it was recorded with)
        self.uop_loads = 0
        self._end_t = 0  # the boundary the last jump ended at
        self._last_tpl: _Template | None = None  # the template the last first jump made
        self._replayed_deltas: list[int] = []  # the address shifts of the last replay's data movements
        # the last replay's window: its first pc and each word's DMA address shift from the recorded one
        self._replayed_rows: tuple[int, np.ndarray] = (0, np.zeros(0, dtype=np.int64))
        self.jumps_after_replay = 0  # jumps from a replayed crossing's end in another pass (a fresh scan)
        self.jumps_other_pass = 0    # jumps from a template kept in another pass (a fresh scan)
        self._align_waits = 0  # jumps let pass to jump at the signature a crossing started at
        self._pending: tuple[_Template, int, int] | None = None  # data deferred in a chain of replays
        # where the last jump ended before a DMA cut otherwise: (signature, boundary, restarts then)
        self._seg_start: tuple[tuple[Any, ...], _Snap, int] | None = None
        # the version steps a versioned event's argument moves by in a jump, by its owner's id
        self.version_steps: dict[int, int] = {}
        for u in model.units.values():
            u.data_log = self.log
        model.sim.probe = self.probe
        self.dma = _DmaFields(model)
        self.warm = False        # the warm-up is over (sampling may start)
        self._warm_checked = -1  # FETCH's pc at the last look at its words during the warm-up

    # ---- sampling ------------------------------------------------------------------------
    def probe(self, t: int) -> None:
        """An instruction retired in cycle ``t`` and every event of ``t`` has run."""
        if self.skip:
            self.skip -= 1
            return
        if self.m.fetch.next_pc < self.quiet_until:
            return
        if not self.warm and not self._warmed_up():
            return
        self.skip = self.every
        signed = self._sign(t)
        if signed is None:
            self._miss()
            return
        key, snap = signed
        if len(self.history) > _HISTORY_CAP or len(self.log) > _LOG_CAP:
            self._restart()  # memory stays bounded; the snapshots kept name log positions
            snap.log_len = 0
        seen = self.history.setdefault(key, [])
        seen.append(snap)
        if len(seen) == 1:
            self._miss()
            return
        b = seen[-2]
        a = next((s for s in seen[-3::-1] if s.t == 2 * b.t - t and s.ref == 2 * b.ref - snap.ref), None)
        tpl = self.templates.get(key) if a is None else None
        if (a is not None or tpl is not None) and self._wait_for_crossing(key):
            a = tpl = None
        if tpl is not None:
            b2 = next((x for x in seen[-2::-1] if x.t == t - tpl.T and x.ref == snap.ref - tpl.P), None)
            if b2 is not None:
                self.cut_pc = None
                seg = self._segment(key, b2, snap)
                if self._jump_again(tpl, b2, snap) or self._jump_in_another_pass(key, tpl, b2, snap):
                    tpl = self.templates.get(key, tpl)
                    self._restart()
                    self._succeeded()
                    self.jumps_again += 1
                    self._record(key, seg, tpl)
                    if self.cut_pc is not None:  # a period past the changed cuts before sampling again
                        self.quiet_until = self.cut_pc + tpl.P + _span(snap) + 1
                    self._after_jump(self._end_t)
                    return
        if a is not None and self.holdoff:
            self.holdoff -= 1
        elif a is not None:
            self.cut_pc = None
            self._scan = None
            seg = self._segment(key, b, snap)
            self._last_tpl = None
            jumped = self._jump(a, b, snap, key)
            if jumped and self._last_tpl is not None:
                self._record(key, seg, self._last_tpl)
            if self.cut_pc is not None:
                # sample again when the oldest instruction of the state two periods back is a
                # period past the changed cuts (the observed periods must not hold them)
                self.quiet_until = self.cut_pc + 3 * (snap.ref - b.ref) + _span(snap) + 1
            if jumped:
                self._restart()
                self._succeeded()
                self._after_jump(self._end_t)
                return
            if self.cut_pc is not None:
                self._miss()  # not a refusal: the jump was fine up to the changed cuts
                return
            # a refused jump costs a scan of the period: back off exponentially
            self.refusals += 1
            self.holdoff = (1 << min(self.refusals, 12)) - 1
        self._miss()  # a repeat that proves nothing yet costs like a miss (else sampling never thins out)
        if len(seen) > 8:
            del seen[:-8]

    def _wait_for_crossing(self, key: tuple[Any, ...]) -> bool:
        """Whether to let a jump at signature ``key`` pass: the signature the last jump ended at has
        come back since (the run is in the same loop again) and is not ``key``. The jump then
        comes at that signature, a few samples later, and the stretch from the last jump's end is
        recorded as a crossing, to be replayed where it comes back (a loop's passes jump at one
        phase). At most ``_ALIGN_WAIT`` samples are let pass so."""
        start = self._seg_start
        if start is None or start[0] == key or start[2] != self.restarts or start[0] not in self.history:
            return False
        if self._align_waits >= _ALIGN_WAIT:
            return False
        self._align_waits += 1
        return True

    def _warmed_up(self) -> bool:
        """Whether the warm-up is over: ``warmup_events`` events ran, or ``warmup_floor`` did and
        the words FETCH read end in two equal periods (DMA addresses aside) covering at least
        ``_REPEAT_MIN`` instructions with at least ``_AHEAD_MIN`` instructions still to fetch. A
        long run that loops from early on is then sampled from early on, while a prologue,
        straight-line code or a short Program costs no sampling."""
        events = self.m.sim.events
        if events >= self.warmup_events:
            self.warm = True
        elif events >= self.warmup_floor and self.m.fetch.count - self.m.fetch.next_pc >= self._AHEAD_MIN:
            n = self.m.fetch.next_pc
            if n != self._warm_checked:  # the words seen change only when FETCH moves on
                self._warm_checked = n
                self.warm = _tail_repeats(self._window(0, n)[1], self._REPEAT_MIN)
        return self.warm

    def _succeeded(self) -> None:
        """A jump was made: sample densely again, with no back-off left from refusals before it."""
        self.every = self.skip = self.misses = self.refusals = self.holdoff = 0

    def _miss(self) -> None:
        self.misses += 1
        if self.misses >= _PATIENCE:
            self.misses = 0
            self.every = min(2 * self.every + 1, _MAX_SKIP)

    def _restart(self) -> None:
        self.uop_loads += _uop_loads(self.log)
        self.history.clear()
        self.log.clear()
        self.restarts += 1

    def _sign(self, t: int) -> tuple[tuple[Any, ...], _Snap] | None:
        """The signature and snapshot of the boundary at cycle ``t`` (None: not covered)."""
        try:
            sign = _Sign(t, self.dma, self._owners())
            self._walk(sign, t)
        except Unsupported:
            return None
        m = self.m
        return tuple(sign.key), _Snap(t, m.fetch.next_pc, sign.vec, self._counters(), m.port.event_version,
                                      m.compute.event_version, len(self.log))

    def _counters(self) -> tuple[int, ...]:
        m = self.m
        b = m.port.beats
        return (*m.load.counter_values(), *m.compute.counter_values(), *m.store.counter_values(),
                b["fetch"], b["load"], b["store"], m.sim.events)

    def _set_counters(self, values: tuple[int, ...]) -> None:
        m = self.m
        rest = list(values)
        for u in (m.load, m.compute, m.store):
            n = len(u.COUNTERS)
            u.set_counter_values(tuple(rest[:n]))
            del rest[:n]
        m.port.beats["fetch"], m.port.beats["load"], m.port.beats["store"], m.sim.events = rest

    # ---- the state, walked once to sign it and once to shift it ---------------------------
    def _owners(self) -> dict[int, str]:
        """The blocks whose methods may be pending or waiting, by id: their roles."""
        m = self.m
        owners: dict[int, str] = {id(m.load): "load", id(m.compute): "compute", id(m.store): "store",
                                  id(m.fetch): "fetch", id(m.port): "port"}
        for u in (m.load, m.store):
            if u.state == EXEC and u.dma is not None:
                owners[id(u.dma)] = u.name + ".dma"
        return owners

    def _walk(self, w: _Sign | _Shift, t: int) -> None:
        """Visit every block's timing state in a fixed order (each block's own ``walk_state``); in
        shift mode, each writes its state back moved."""
        m = self.m
        f, c = m.fetch, m.compute
        if not m.in_steady_run() or f is None:
            raise Unsupported
        owners = self._owners()
        # the pending events, in the order they will run: only those their blocks mark as steady
        events = []
        for et, ph, seq, fn, args in m.sim.pending():
            versioned = event_mark(fn)
            if versioned is None:
                raise Unsupported
            owner, func = _bound(fn, owners)
            if versioned:
                block = getattr(fn, "__self__")
                w.val((owner, func, ph, args[0] - block.event_version))
                if w.shifting:
                    args = (args[0] + self.version_steps[id(block)],)
            elif args:
                raise Unsupported
            else:
                w.val((owner, func, ph))
            events.append((w.time(et), ph, seq, fn, args))
        for u in (m.load, c, m.store):
            u.walk_state(w)
        for q in m.queues.values():
            q.walk_state(w)
        for tq in m.tokens.values():
            tq.walk_state(w)
        m.port.walk_state(w)
        f.walk_state(w)
        # the accumulator's port uses that a present or future ALU can still meet
        m.acc_buffer.ports.walk_state(w, min(t + 1, c.t_exec) if c.state == EXEC else t + 1)
        if w.shifting:
            m.sim.replace_pending(events)

    # ---- the jump -------------------------------------------------------------------------
    def _jump(self, a: _Snap, b: _Snap, c: _Snap, key: tuple[Any, ...]) -> bool:
        """Three equal signatures at equal spacing: jump as many whole periods as provably repeat
        (and keep what the periods showed, for :meth:`_jump_again`)."""
        T, P = c.t - b.t, c.ref - b.ref
        if T <= 0 or P <= 0:
            return False
        d1 = [y - x for x, y in zip(a.counters, b.counters)]
        d2 = [y - x for x, y in zip(b.counters, c.counters)]
        if d1 != d2 or b.port_version - a.port_version != c.port_version - b.port_version \
                or b.plan_version - a.plan_version != c.plan_version - b.plan_version:
            return False
        deltas = []
        for (kind, va), (_, vb), (_, vc) in zip(a.vec, b.vec, c.vec):
            d = vc - vb
            if vb - va != d:
                return False
            if kind == "t" and d not in (0, T) or kind == "p" and d not in (0, P):
                return False
            deltas.append(d)
        ops = self.log[b.log_len:c.log_len]
        op_deltas = self._op_deltas(self.log[a.log_len:b.log_len], ops)
        if op_deltas is None:
            return False
        # the oldest instruction the state holds now: what ran before it moves no future time or data
        lo_pc = c.oldest_pc()
        try:
            R = self._periods(c.ref, P, ops, op_deltas, lo_pc)
        except Unsupported:
            return False
        steps = (c.port_version - b.port_version, c.plan_version - b.plan_version)
        if self._scan is not None:
            s, words_end, anomalies = self._scan
            self._last_tpl = _Template(T, P, c.ref, s, words_end, anomalies, d2, deltas, steps, list(ops), op_deltas)
            if len(self.templates) < _TEMPLATES:
                self.templates[key] = self._last_tpl
        if R < 1:
            return False
        self._advance(c, T, P, R, deltas, d2, steps, ops, op_deltas)
        return True

    def _jump_again(self, tpl: "_Template", b: _Snap, c: _Snap) -> bool:
        """A signature whose periods were seen before (``tpl``, kept at an earlier jump from it) seen
        again a period apart after the run went on event by event (a DMA whose 4 KiB cuts differ
        from the period's came in between): when this period moved time, counters, side vector and
        data exactly as the template's did, jump from here without three fresh observations."""
        P = tpl.P
        n = (c.ref - tpl.ref) // P
        if n < 1 or (c.ref - tpl.ref) % P or not _moved_as(tpl, b, c):
            return False
        ops = self.log[b.log_len:c.log_len]
        if len(ops) != len(tpl.ops):
            return False
        for (k1, i1), (k0, i0), d in zip(ops, tpl.ops, tpl.op_deltas):
            if k1 != k0:
                return False
            if d == 0:
                if i1 != i0:
                    return False
            elif _without_base(i1) != _without_base(i0) or i1.dram_base != i0.dram_base + n * d:
                return False
        lo_b = b.oldest_pc()
        return self._template_jump(tpl, c, lo_b, ops)

    def _jump_in_another_pass(self, key: tuple[Any, ...], tpl: "_Template", b: _Snap, c: _Snap) -> bool:
        """:meth:`_jump_again` where the template's scan does not reach (another pass of an outer
        loop): the period ``b`` to ``c`` moved time, counters, side vector and event versions as the
        template's did, and its data movements are the template's but for DMA addresses; each of
        those DMAs' words steps to its instance a period later as the template's movement did (read
        from the words); the words ahead are scanned afresh (:meth:`_periods`). The template is
        kept for this pass."""
        P = tpl.P
        if c.ref - tpl.ref >= P and not (c.ref - tpl.ref) % P and c.ref <= tpl.words_end:
            return False  # the template's own scan covers it (refused there for a reason)
        if not _moved_as(tpl, b, c):
            return False
        ops = self.log[b.log_len:c.log_len]
        if len(ops) != len(tpl.ops) or c.ref + P + self.m.timing.insns_per_fetch_burst > self.m.fetch.count:
            return False
        for (k1, i1), (k0, i0), d in zip(ops, tpl.ops, tpl.op_deltas):
            if k1 != k0 or (i1 != i0 if k1 not in ("load", "store") else _without_base(i1) != _without_base(i0)):
                return False
        lo_b = b.oldest_pc()
        lo_c = c.oldest_pc()
        w, _, dma, bases = self._window(lo_b, c.ref + P)
        insns = {r: self.dma.decode(self._row_word(w, r)) for r in np.flatnonzero(dma[:c.ref - lo_b]).tolist()}
        rows = op_rows(ops, insns)
        if rows is None:
            return False
        for r, d in zip(rows, tpl.op_deltas):
            for x in r:  # the word a period later: the same DMA, its address moved by the template's step
                if not dma[x + P] or bases[x + P] - bases[x] != d:
                    return False
        kept = self._jump_afresh(tpl, c, ops, lo_c)
        if kept is None:
            return False
        self.templates[key] = kept
        self.jumps_other_pass += 1
        return True

    def _jump_afresh(self, tpl: "_Template", c: _Snap, ops: list[tuple[str, Any]], lo_c: int) -> "_Template | None":
        """Jump from the boundary ``c`` by ``tpl``'s periods (``ops`` the last period's data movements,
        ``lo_c`` the oldest instruction the state holds), as far as a fresh scan of the words ahead
        allows (:meth:`_periods`), the data deferred before applied first; the template of this pass
        (the fresh scan), or None when not one period can be jumped."""
        P = tpl.P
        self._scan = None
        try:
            R = self._periods(c.ref, P, ops, tpl.op_deltas, lo_c)
        except Unsupported:
            return None
        if R < 1 or self._scan is None:
            return None
        self._flush_data()
        self._advance(c, tpl.T, P, R, tpl.deltas, tpl.d2, tpl.steps, ops, tpl.op_deltas)
        s, words_end, anomalies = self._scan
        return _Template(tpl.T, P, c.ref, s, words_end, anomalies, tpl.d2, tpl.deltas, tpl.steps, list(ops),
                         tpl.op_deltas)

    def _template_jump(self, tpl: "_Template", c: _Snap, lo_b: int, ops: list[tuple[str, Any]]) -> bool:
        """Jump from the boundary ``c`` by the periods of ``tpl`` (its last period checked equal to
        the template's, its oldest instruction a period before at pc ``lo_b``, ``ops`` its data
        movements), up to the next DMA cut otherwise."""
        T, P = tpl.T, tpl.P
        if lo_b < tpl.start or c.ref <= tpl.ref or (c.ref - tpl.ref) % P:
            return False
        m, f = self.m, self.m.fetch
        R = min((f.count - c.ref - m.timing.insns_per_fetch_burst) // P, (tpl.words_end - c.ref) // P)
        k = int(np.searchsorted(tpl.anomalies, lo_b))
        if k < len(tpl.anomalies):
            cut = int(tpl.anomalies[k])
            if cut < c.ref:
                return False
            if (cut - c.ref) // P < R:
                R = (cut - c.ref) // P
                self.cut_pc = cut
        if R < 1 or not self._dma_checks(c.ref, P, R, ops, tpl.op_deltas):
            return False
        chained = self._pending is not None and self._pending[0] is tpl
        self._advance(c, T, P, R, tpl.deltas, tpl.d2, tpl.steps, ops, tpl.op_deltas, data=not chained)
        if chained:
            self._defer(tpl, (c.ref - tpl.ref) // P, R)
        return True

    # ---- crossings: recorded once, replayed (sim/tlm/crossing_replay.py) -----------------
    def _after_jump(self, t: int) -> None:
        """A jump ended at the boundary of cycle ``t`` (before a DMA cut otherwise, or where the
        words stop repeating: the end of an inner loop): while a recorded crossing matches from
        here, replay it and jump again from its end; else keep this boundary as the start of the
        crossing to record when the run jumps again from the same signature."""
        self._seg_start = None
        try:
            self._replay_chain(t)
        finally:
            self._flush_data()

    def _replay_chain(self, t: int) -> None:
        while True:
            signed = self._sign(t)
            if signed is None:
                return
            key, s1 = signed
            replayed = None
            for seg in self.segments.get(key, ()):
                c3 = self._replay(seg, s1)
                if c3 is not None:
                    replayed = seg, c3
                    break
            if replayed is None:
                self._seg_start = (key, s1, self.restarts)
                self._align_waits = 0
                return
            seg, c3 = replayed
            self.replays += 1
            self.quiet_until = 0
            # the snapshots kept and the data log are from before the replay: start over
            self._restart()
            self._succeeded()
            # the recorded run jumped from the segment's end with the template ``seg.tpl``, its last
            # period equal to the template's: the replayed one is that period moved
            tpl = seg.tpl
            shifts = self._replayed_deltas
            n, phase = divmod(c3.ref - tpl.ref, tpl.P)
            if phase or not self._defer_segment(tpl, n, seg, shifts):
                self._apply_now(seg.ops, shifts)
            first = len(seg.ops) - seg.last_ops
            last = [(k, at_base(i, i.dram_base + d)) if d else (k, i)
                    for (k, i), d in zip(seg.ops[first:], shifts[first:])]  # the period before the end
            self.cut_pc = None
            if not phase and last == _instance(tpl, n) and self._template_jump(tpl, c3, c3.ref + seg.lo_end, last):
                self.jumps_again += 1
            elif self._jump_after_replay(key, seg, c3, last):  # another pass: the words scanned afresh
                self.jumps_after_replay += 1
            else:
                return
            self._restart()
            if self.cut_pc is not None:
                self.quiet_until = self.cut_pc + tpl.P + _span(c3) + 1
            t = self._end_t

    def _jump_after_replay(self, key: tuple[Any, ...], seg: Segment, c3: _Snap, last: list[tuple[str, Any]]) -> bool:
        """Jump from the end ``c3`` of the replayed crossing ``seg`` with the template its recorded
        run jumped with there, where that template's scan does not reach (another pass of an outer
        loop): the state at ``c3`` is the recorded one moved, whose periods the recorded run saw
        repeat; the DMA addresses of the window's last periods moved alike (so each steps per
        period as it did there, and as the template's changes per period say); the words ahead are
        scanned as for a first jump (:meth:`_periods`). The template is kept for this pass."""
        tpl = seg.tpl
        P = tpl.P
        lo_c = c3.oldest_pc()
        first = min(lo_c, c3.ref + seg.lo_end)  # the oldest instruction now or a period before
        win_lo, shifts = self._replayed_rows
        if first - P < win_lo or c3.ref - win_lo != len(shifts):
            return False
        r = np.arange(first, c3.ref) - win_lo
        if not np.array_equal(shifts[r], shifts[r - P]):
            return False
        kept = self._jump_afresh(tpl, c3, last, lo_c)  # the replayed data applied first
        if kept is None:
            return False
        if key in self.templates or len(self.templates) < _TEMPLATES:
            self.templates[key] = kept
        return True

    # the data of a chain of replays and jumps, applied at once where the segments' movements are
    # whole periods of one template in its order: (template, last instance applied, instances to apply)
    def _defer_segment(self, tpl: "_Template", n: int, seg: Segment, shifts: list[int]) -> bool:
        """The data movements of the replayed crossing ``seg`` (addresses moved by ``shifts``), which
        ends at instance ``n`` of ``tpl``: deferred when they are the template's periods up to ``n``
        in its order (True; else the caller applies them)."""
        k = seg.P // tpl.P
        if seg.P % tpl.P == 0 and k >= 1 and _periods_of(tpl, seg.ops, shifts, n - k + 1):
            self._defer(tpl, n - k, k)
            return True
        return False

    def _apply_now(self, ops: list[tuple[str, Any]], shifts: list[int]) -> None:
        """Apply data movements (DMA addresses moved by ``shifts``) now, after those deferred."""
        self._flush_data()
        way = apply_periods(ops, shifts, 1, self.m.load, self.m.store, self.m.compute, self.m.timing)
        self.ways[way] = self.ways.get(way, 0) + 1

    def _defer(self, tpl: "_Template", base: int, R: int) -> None:
        """Instances ``base + 1`` .. ``base + R`` of ``tpl``'s period: deferred (after those already)."""
        p = self._pending
        if p is not None and p[0] is tpl and p[1] + p[2] == base:
            self._pending = (tpl, p[1], p[2] + R)
            return
        self._flush_data()
        self._pending = (tpl, base, R)

    def _flush_data(self) -> None:
        p, self._pending = self._pending, None
        if p is not None:
            tpl, base, R = p
            self._apply_data(_instance(tpl, base), tpl.op_deltas, R)

    def _window(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The instruction words of pcs ``lo`` .. ``hi``: the rows, the rows with the DMA address
        masked out, which are LOADs or STOREs, and their DRAM addresses."""
        f = self.m.fetch
        w = self.m.dram[f.addr + INSN_BYTES * lo:f.addr + INSN_BYTES * hi].reshape(-1, INSN_BYTES)
        dma = _dma_rows(w)
        masked = np.where(dma[:, None], w & ~self._base_mask(), w)
        return w, masked, dma, np.where(dma, self._dram_bases(w), 0)

    def _base_mask(self) -> np.ndarray:
        fld = self.m.isa.field("LOAD", "dram_base")
        mask = np.zeros(INSN_BYTES, dtype=np.uint8)
        for bit in range(fld.lo, fld.lo + fld.width):
            mask[bit // 8] |= 1 << (bit % 8)
        return mask

    def _row_word(self, w: np.ndarray, r: int) -> int:
        return int.from_bytes(w[r].tobytes(), "little")

    def _segment(self, key: tuple[Any, ...], b: _Snap, c: _Snap) -> Segment | None:
        """The crossing from the boundary the last jump ended at (same signature ``key``, no
        restart since) to ``c`` (``b``: a period before ``c``), to record; None if there is none
        or it cannot be replayed (GEMM's micro-ops loaded, a DMA not found in the words)."""
        start = self._seg_start
        if start is None or start[0] != key or start[2] != self.restarts or c.ref <= start[1].ref:
            return None
        s1 = start[1]
        m, f = self.m, self.m.fetch
        if c.ref + m.timing.insns_per_fetch_burst > f.count or self.m.error is not None:
            return None
        lo = s1.oldest_pc()
        w, masked, dma, bases = self._window(lo, c.ref)
        insns = {r: self.dma.decode(self._row_word(w, r)) for r in np.flatnonzero(dma).tolist()}
        T = m.timing
        groups = []
        for rows, i in group_dmas(insns):
            unit = self.dma.elem_bytes(i)
            g = DmaGroup(np.array(rows, dtype=np.int64), i.y_size if i.x_size else 0, i.x_size * unit,
                         i.x_stride * unit, unit, i.MNEMONIC == "STORE", np.zeros(0))
            g.marks = group_marks(g, bases[g.rows], T.bus_bytes, T.max_burst)
            groups.append(g)
        ops = self.log[s1.log_len:c.log_len]
        rows = op_rows(ops, insns)
        if rows is None:
            return None
        lo_b = b.oldest_pc()
        seg_uops = self.uop_loads + _uop_loads(self.log[:s1.log_len])
        return Segment(s1.t, s1.ref, c.t - s1.t, c.ref - s1.ref, lo - s1.ref, c.ref - s1.ref, masked, dma, bases,
                       groups, list(s1.vec), list(c.vec), [y - x for x, y in zip(s1.counters, c.counters)],
                       (c.port_version - s1.port_version, c.plan_version - s1.plan_version), list(ops), rows,
                       lo_b - c.ref, c.log_len - b.log_len, seg_uops)

    def _record(self, key: tuple[Any, ...], seg: Segment | None, tpl: _Template) -> None:
        """Keep the crossing ``seg`` (None: nothing to keep), which the run ended by a jump with ``tpl``."""
        if seg is not None and self.n_segments < _SEGMENTS and seg.last_ops <= len(seg.ops):
            seg.tpl = tpl
            self.segments.setdefault(key, []).append(seg)
            self.n_segments += 1

    def _replay(self, seg: Segment, c: _Snap) -> _Snap | None:
        """Replay the crossing ``seg`` from the boundary ``c`` (its signature is the segment's) when
        the words ahead match the recorded ones: the boundary at its end, else None (nothing moved)."""
        m, f = self.m, self.m.fetch
        if self.uop_loads + _uop_loads(self.log[:c.log_len]) != seg.uop_loads:
            return None
        dt, dref = c.t - seg.t0, c.ref - seg.ref0
        lo, hi = c.ref + seg.lo, c.ref + seg.hi
        burst = m.timing.insns_per_fetch_burst
        if dref <= 0 or lo < 0 or hi + burst > f.count:
            return None
        # FETCH's bursts stop at 4 KiB boundaries: they must fall where they did
        if (INSN_BYTES * dref) % PAGE and (PAGE % (burst * INSN_BYTES) or f.addr % (burst * INSN_BYTES)):
            return None
        w, masked, dma, bases = self._window(lo, hi)
        if not np.array_equal(masked, seg.masked):
            return None
        shifts = bases - seg.bases
        self._replayed_rows = (lo, shifts)
        T = m.timing
        for g in seg.groups:  # every DMA cut as its counterpart was, inside a region that allows it
            b = bases[g.rows]
            if not np.array_equal(group_marks(g, b, T.bus_bytes, T.max_burst), g.marks):
                return None
            if g.y_size and not m.regions.ok(int(b.min()) * g.unit, int(b.max()) * g.unit + (g.y_size - 1) * g.stride_bytes
                                             + g.row_bytes, csr.ATTR_WRITE if g.write else csr.ATTR_READ):
                return None
        vec1 = new_vector(seg, c.vec, dt, dref, shifts)
        if vec1 is None:
            return None
        op_deltas = []
        for (kind, i), rows in zip(seg.ops, seg.op_rows):
            d = shift_of(rows, shifts) if rows else 0
            if d is None:
                return None
            op_deltas.append(d)
        win_lo, win_hi = f.addr, f.addr + INSN_BYTES * f.count
        for (kind, i), d in zip(seg.ops, op_deltas):  # the recorded movements, moved by their shifts
            if kind == "store":
                span = dram_span(at_base(i, i.dram_base + d), m.timing)
                if span is not None and span[0] < win_hi and win_lo < span[1]:
                    return None
        self._replayed_deltas = op_deltas
        deltas = [v1 - v for (_, v), v1 in zip(c.vec, vec1)]
        counters = tuple(x + d for x, d in zip(c.counters, seg.counters))
        self._advance(c, seg.T, seg.P, 1, deltas, seg.counters, seg.steps, seg.ops, op_deltas, data=False)
        self.jumps -= 1  # a replay, not a jump (its data: the caller's)
        return _Snap(c.t + seg.T, c.ref + seg.P, [(k, v) for (k, _), v in zip(seg.vec1, vec1)], counters,
                     m.port.event_version, m.compute.event_version, 0)

    def _advance(self, c: _Snap, T: int, P: int, R: int, deltas: list[int], d2: list[int],
                 steps: tuple[int, int], ops: list[tuple[str, Any]], op_deltas: list[int], data: bool = True) -> None:
        """Move the model from the boundary ``c`` on by ``R`` periods of ``T`` cycles and ``P``
        instructions: times, pcs, addresses, counters, event versions, and the skipped data (unless
        ``data`` is False: the caller applies it)."""
        m = self.m
        dt, dp = R * T, R * P
        # the version an event carries moves with its owner's
        self.version_steps = {id(m.port): R * steps[0], id(m.compute): R * steps[1]}
        self._walk(_Shift(c.t, dt, R, deltas, self.dma), c.t)
        for block, step in ((m.port, self.version_steps[id(m.port)]), (m.compute, self.version_steps[id(m.compute)])):
            block.advance_event_version(step)
        m.fetch.next_pc += dp
        self._set_counters(tuple(x + R * d for x, d in zip(c.counters, d2)))
        m.sim.advance_clock(dt)
        if data:
            self._apply_data(ops, op_deltas, R)
        self.jumps += 1
        self._end_t = c.t + dt
        self.skipped_cycles += dt
        self.skipped_insns += dp

    @staticmethod
    def _op_deltas(before: list[tuple[str, Any]], ops: list[tuple[str, Any]]) -> list[int] | None:
        """The change per period of each data movement's DRAM address (0 but for LOAD and STORE),
        when the two periods moved the same data but for those addresses; else None (GEMM too)."""
        if len(before) != len(ops):
            return None
        out = []
        if any(k == "load" and buffer_of(i) == "UOP" for k, i in ops):
            return None  # a GEMM's indices (and faults) come from the micro-ops: they must not change
        for (k0, i0), (k1, i1) in zip(before, ops):
            if k0 != k1:
                return None
            if i0 == i1:
                out.append(0)
            elif k1 in ("load", "store"):
                if _without_base(i0) != _without_base(i1):
                    return None
                out.append(i1.dram_base - i0.dram_base)
            else:
                return None
        return out

    def _periods(self, ref: int, P: int, ops: list[tuple[str, Any]], op_deltas: list[int],
                 lo_pc: int) -> int:
        """How many whole periods of ``P`` instructions from ``ref`` repeat the observed ones: every
        word from ``lo_pc`` (the oldest instruction the state holds at ``ref``) on equals the word
        ``P`` before it, but for the DRAM address of a LOAD or STORE, which moves by the same step
        every period, a multiple of 4 KiB (so its bursts are the same); every DMA of the skipped
        periods passes its region check and no STORE writes the instruction window."""
        m, f = self.m, self.m.fetch
        # FETCH's burst under way (or requested) was sized for the words left at its request: after
        # the jump it must still find a whole burst's worth, as it would have in the plain run
        room = (f.count - ref - m.timing.insns_per_fetch_burst) // P
        s = max(2 * P, lo_pc)
        if room < 1 or s > ref:
            return 0
        full_end = ref + room * P
        end = min(full_end, ref + P)  # one period first: a refusal costs little
        while True:
            R = self._repeats(ref, P, s, end)
            if R < (end - ref) // P or end == full_end:
                break
            end = min(full_end, ref + 8 * (end - ref))
        if R >= 1:
            R = self._uncut_repeats(ref, P, s, R)
        if R < 1 or not self._dma_checks(ref, P, R, ops, op_deltas):
            return 0
        return R

    def _dma_checks(self, ref: int, P: int, R: int, ops: list[tuple[str, Any]], op_deltas: list[int]) -> bool:
        """Every LOAD and STORE of the ``R`` periods from ``ref`` passes its region check, and no
        STORE writes the instruction window."""
        m, f = self.m, self.m.fetch
        w = m.dram[f.addr + INSN_BYTES * (ref - P):f.addr + INSN_BYTES * ref].reshape(-1, INSN_BYTES)
        for j in np.flatnonzero(_dma_rows(w)) + (ref - P):
            if not self._regions_ok(int(j), int(j) + R * P):
                return False
        lo, hi = f.addr, f.addr + INSN_BYTES * f.count
        for (kind, i), dd in zip(ops, op_deltas):
            if kind == "store":
                for k in (1, R):
                    span = dram_span(at_base(i, i.dram_base + k * dd), m.timing)
                    if span is not None and span[0] < hi and lo < span[1]:
                        return False
        return True

    def _uncut_repeats(self, ref: int, P: int, s: int, R: int) -> int:
        """Of the ``R`` periods from ``ref`` whose words repeat, how many in a row have every LOAD
        and STORE cut by 4 KiB boundaries exactly where the same instruction a period before is
        (``row_cut_marks``), from pc ``s`` on: those DMAs have the observed bursts, so the observed
        timing, whatever step their addresses move by. A period whose cuts change (a row that
        straddles a boundary at another offset) ends the jump before it; it runs event by event."""
        m, f, T = self.m, self.m.fetch, self.m.timing
        o, end = s - P, ref + R * P
        w = m.dram[f.addr + INSN_BYTES * o:f.addr + INSN_BYTES * end].reshape(-1, INSN_BYTES)
        base = self._dram_bases(w)
        odd: list[np.ndarray] = []  # pcs whose cuts are not those of the observed period's instance
        for j in np.flatnonzero(_dma_rows(w[ref - P - o:ref - o])) + (ref - P):
            i = self.dma.decode(self._word(int(j)))
            if i.y_size * i.x_size == 0:
                continue
            eb = self.dma.elem_bytes(i)
            q = np.arange(j - (j - o) // P * P, end, P)  # the pcs of this position of the period, from o on
            rows = (base[q - o][:, None] + np.arange(i.y_size, dtype=np.int64)[None, :] * i.x_stride) * eb
            marks = row_cut_marks(rows, i.x_size * eb, T.bus_bytes, T.max_burst)
            seen = marks[np.searchsorted(q, j)]
            odd.append(q[(marks != seen[None, :]).any(axis=1)])
        anomalies = np.sort(np.concatenate(odd)) if odd else np.zeros(0, dtype=np.int64)
        self._scan = (s, end, anomalies)
        bad = int(anomalies[0]) if len(anomalies) else end
        self.cut_pc = bad if bad < end else None
        return max(0, (bad - ref) // P) if bad >= ref else 0

    def _dram_bases(self, w: np.ndarray) -> np.ndarray:
        """The ``dram_base`` field of each instruction word (rows of ``w``; meaningful for LOAD and STORE)."""
        fld = self.m.isa.field("LOAD", "dram_base")
        base = np.zeros(len(w), dtype=np.int64)
        for k in range(fld.lo // 8, (fld.lo + fld.width - 1) // 8 + 1):
            base |= w[:, k].astype(np.int64) << (8 * k)
        return (base >> fld.lo) & ((1 << fld.width) - 1)

    def _repeats(self, ref: int, P: int, s: int, end: int) -> int:
        """Whole periods from ``ref`` up to pc ``end`` whose words repeat (see :meth:`_periods`)."""
        m, f = self.m, self.m.fetch
        o = s - 2 * P  # the words from pc o on (pc p is row p - o)
        w = m.dram[f.addr + INSN_BYTES * o:f.addr + INSN_BYTES * end].reshape(-1, INSN_BYTES)
        opc = w[:, 0] & ((1 << OPCODE_BITS) - 1)
        dma = (opc == OPCODES["LOAD"]) | (opc == OPCODES["STORE"])
        fld = m.isa.field("LOAD", "dram_base")
        mask = np.zeros(INSN_BYTES, dtype=np.uint8)
        for bit in range(fld.lo, fld.lo + fld.width):
            mask[bit // 8] |= 1 << (bit % 8)
        keep = np.where(dma[:, None], ~mask, np.uint8(0xFF))
        q = np.arange(P, end - o)  # pcs s - P .. end - 1
        ok = ((w[q] & keep[q]) == (w[q - P] & keep[q - P])).all(axis=1) & (opc[q] == opc[q - P])
        base = self._dram_bases(w)
        r = q[P:]  # pcs s .. end - 1: the DRAM address moves by the same step as a period before
        step_ok = ~dma[r] | ((base[r] - base[r - P] == base[r - P] - base[r - 2 * P]) & (opc[r - 2 * P] == opc[r]))
        ok[P:] &= step_ok
        bad = np.flatnonzero(~ok)
        first_bad = int(q[bad[0]]) + o if len(bad) else end
        return (first_bad - ref) // P if first_bad >= ref else 0

    def _word(self, pc: int) -> int:
        a = self.m.fetch.addr + INSN_BYTES * pc
        return int.from_bytes(self.m.dram[a:a + INSN_BYTES].tobytes(), "little")

    def _regions_ok(self, first: int, last: int) -> bool:
        """The DMA words at ``first`` and ``last`` (one position of the period, addresses moving
        by equal steps in between) and every instance between them pass the region check."""
        i0, i1 = self.dma.decode(self._word(first)), self.dma.decode(self._word(last))
        s0, s1 = dram_span(i0, self.m.timing), dram_span(i1, self.m.timing)
        if s0 is None or s1 is None:
            return s0 is None and s1 is None
        attr = csr.ATTR_READ if i0.MNEMONIC == "LOAD" else csr.ATTR_WRITE
        return self.m.regions.ok(min(s0[0], s1[0]), max(s0[1], s1[1]), attr)

    def _apply_data(self, ops: list[tuple[str, Any]], op_deltas: list[int], R: int) -> None:
        """Apply the period's data movements ``ops`` for the ``R`` periods skipped, in order (a
        LOAD's or STORE's address moved by its step each period): ``sim/tlm/bulk_data.py``."""
        way = apply_periods(ops, op_deltas, R, self.m.load, self.m.store, self.m.compute, self.m.timing)
        self.ways[way] = self.ways.get(way, 0) + 1


def _instance(tpl: _Template, n: int) -> list[tuple[str, Any]]:
    """The data movements of the ``n``-th period after the one ``tpl`` observed (DMA addresses moved)."""
    return [(k, at_base(i, i.dram_base + n * d)) if d else (k, i)
            for (k, i), d in zip(tpl.ops, tpl.op_deltas)]


def _periods_of(tpl: _Template, ops: list[tuple[str, Any]], shifts: list[int], first: int) -> bool:
    """``ops`` (DMA addresses moved by ``shifts``) are whole periods of ``tpl``, instances ``first``
    on, in the template's order."""
    L = len(tpl.ops)
    if not L or len(ops) % L or len(shifts) != len(ops):
        return False
    for x, ((k, i), d) in enumerate(zip(ops, shifts)):
        kt, it = tpl.ops[x % L]
        if k != kt:
            return False
        dt = tpl.op_deltas[x % L]
        if k in ("load", "store"):
            if i.dram_base + d != it.dram_base + (first + x // L) * dt or _without_base(i) != _without_base(it):
                return False
        elif d or dt or i != it:
            return False
    return True


def _tail_repeats(masked: np.ndarray, min_span: int) -> bool:
    """Whether the rows of ``masked`` (instruction words, DMA addresses masked) end in two equal
    periods of ``P`` rows, ``2 * P >= min_span``."""
    n = len(masked)
    if n < min_span:
        return False
    words = np.ascontiguousarray(masked).view(np.dtype((np.void, masked.shape[1]))).ravel()
    for j in np.flatnonzero(words[:-1] == words[-1])[::-1].tolist():  # shortest period first
        P = n - 1 - j
        if 2 * P > n:
            break
        if 2 * P >= min_span and np.array_equal(words[n - P:], words[n - 2 * P:n - P]):
            return True
    return False


def _uop_loads(log: list[tuple[str, Any]]) -> int:
    """How many of the data movements ``log`` are LOADs of micro-ops."""
    return sum(1 for k, i in log if k == "load" and buffer_of(i) == "UOP")


def _span(c: _Snap) -> int:
    """How many instructions before FETCH's pc the oldest instruction of the state at ``c`` is."""
    return c.ref - c.oldest_pc()


def _dma_rows(w: np.ndarray) -> np.ndarray:
    """Which instruction words (rows of ``w``) are LOADs or STOREs."""
    opc = w[:, 0] & ((1 << OPCODE_BITS) - 1)
    return (opc == OPCODES["LOAD"]) | (opc == OPCODES["STORE"])


_FIELDS: dict[type, tuple[str, ...]] = {}
_WITHOUT_BASE: dict[int, tuple[Any, tuple[Any, ...]]] = {}  # by identity: the same objects come back


def _without_base(i: Any) -> tuple[Any, ...]:
    """A LOAD's or STORE's fields but its DRAM address (remembered per object: the recorded
    movements of templates and crossings are compared again at every jump and replay)."""
    hit = _WITHOUT_BASE.get(id(i))
    if hit is not None and hit[0] is i:  # the entry holds the object, so its id stays its own
        return hit[1]
    names = _FIELDS.get(type(i))
    if names is None:
        names = _FIELDS[type(i)] = tuple(f.name for f in dataclasses.fields(i) if f.name != "dram_base")
    out = (type(i), *(getattr(i, n) for n in names))
    if len(_WITHOUT_BASE) >= _KEY_CACHE:
        _WITHOUT_BASE.clear()
    _WITHOUT_BASE[id(i)] = (i, out)
    return out


__all__ = ["ENV_SWITCH", "FastForward", "enabled_by_default"]
