"""The golden path of a kernel on several cores: one run per core, barriers, and the race check.

With ``num_cores > 1`` in the config, calling a kernel runs it once per core (``S.core_id()``
tells the run which one it is, ``S.num_cores()`` how many there are) on the SAME DRAM tensors,
each core with its own on-chip buffers, as the PySim design this follows (one Python thread
per core meeting at a ``threading.Barrier``):

* **threads** (default): each core in a thread named ``core<k>``; ``S.barrier()`` waits until
  every core has reached it. An exception in any core is re-raised in the caller naming the
  core; a barrier that not every core reaches raises (never hangs), naming the cores that were
  waiting and those that had finished.
* **one thread** (``COSIM_SINGLE_THREAD=1``, for pdb): the cores run one after another in the
  caller's thread; a barrier ends the core's *phase* and the next core runs its phase (greenlets
  switch between them), so phase p of every core runs before phase p+1 of any.

**Race check** (both modes): between two barriers, two cores writing the same DRAM bytes, or
one core writing bytes another reads, is a :class:`RaceError` naming both cores, the tensor
and the element (the golden path records each core's DRAM footprint per phase). In one-thread
mode the order of the cores within a phase is fixed, so a race would silently give core order's
result: the check is what finds it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from compiler.context import GoldenContext, active, source_line
from compiler.errors import CompileError, kernel_failure, on_core
from compiler.tensor import Tensor
from hw.config import HwConfig

SINGLE_THREAD_ENV = "COSIM_SINGLE_THREAD"


class RaceError(CompileError):
    """Two cores touching the same DRAM bytes between two barriers, one of them writing."""


class BarrierError(CompileError):
    """A barrier that not every core reaches."""


def single_thread() -> bool:
    """Whether ``COSIM_SINGLE_THREAD`` asks for the one-thread mode."""
    return os.environ.get(SINGLE_THREAD_ENV, "").strip() not in ("", "0", "false", "no")


@dataclass
class Footprint:
    """The DRAM bytes one core read and wrote in one phase, per region: lists of (start byte
    array, length, tensor) runs."""

    reads: dict[str, list[tuple[np.ndarray, int, Tensor]]] = field(default_factory=dict)
    writes: dict[str, list[tuple[np.ndarray, int, Tensor]]] = field(default_factory=dict)
    lines: dict[int, str] = field(default_factory=dict)  # id of a run -> the kernel's line that made it


def _line_at(runs: list[tuple[np.ndarray, int, Tensor]], fp: Footprint, byte: int) -> str:
    """The kernel's line of the first run of ``runs`` (of ``fp``) that covers ``byte``."""
    for run in runs:
        starts, length, _ = run
        if bool(((starts <= byte) & (byte < starts + length)).any()):
            return fp.lines.get(id(run), "?")
    return "?"


def _merged(runs: list[tuple[np.ndarray, int, Tensor]]) -> tuple[np.ndarray, np.ndarray, list[Tensor], np.ndarray]:
    """Sorted byte intervals ``[lo, hi)`` of ``runs`` (not merged across tensors: each keeps the tensor
    that names it), with the index of each interval's tensor."""
    los, his, owner = [], [], []
    tensors: list[Tensor] = []
    for starts, length, t in runs:
        los.append(starts)
        his.append(starts + length)
        owner.append(np.full(starts.size, len(tensors)))
        tensors.append(t)
    lo, hi, who = np.concatenate(los), np.concatenate(his), np.concatenate(owner)
    order = np.argsort(lo, kind="stable")
    return lo[order], hi[order], tensors, who[order]


def first_overlap(a: list[tuple[np.ndarray, int, Tensor]],
                  b: list[tuple[np.ndarray, int, Tensor]]) -> tuple[int, Tensor] | None:
    """The lowest byte both ``a`` and ``b`` cover, with the tensor of ``a`` covering it, or None."""
    if not a or not b:
        return None
    alo, ahi, at, awho = _merged(a)
    blo, bhi, _, _ = _merged(b)
    # the running maximum of b's ends tells, for each a-interval, whether some earlier-starting b reaches in
    reach = np.maximum.accumulate(bhi)
    best: int | None = None
    who = -1
    k = np.searchsorted(blo, ahi, side="left")  # b-intervals starting before a's end
    has = k > 0
    ends = np.where(has, reach[np.maximum(k - 1, 0)], -1)
    hit = has & (ends > alo)
    for i in np.flatnonzero(hit):
        # the first byte of [alo, ahi) inside some b-interval
        j = int(np.searchsorted(blo, alo[i], side="right"))
        cand = int(alo[i]) if j > 0 and reach[j - 1] > alo[i] else int(blo[j])
        if cand < ahi[i] and (best is None or cand < best):
            best, who = cand, int(awho[i])
    return None if best is None else (best, at[who])


def element_of(t: Tensor, byte: int) -> tuple[int, ...]:
    """The index in ``t``'s shape of the element holding region byte ``byte``."""
    flat = (byte - t.region_offset) // (t.bits // 8)
    flat = min(max(flat, 0), t.size - 1)
    return tuple(int(i) for i in np.unravel_index(flat, t.shape))


class Cores:
    """What the cores of one run share: the barrier state and every core's footprint per phase."""

    def __init__(self, cfg: HwConfig, kernel: str, n: int):
        self.cfg = cfg
        self.kernel = kernel
        self.n = n
        self.phase = [0] * n
        self.footprints: list[list[Footprint]] = [[Footprint()] for _ in range(n)]
        self.cond = threading.Condition()
        self.arrived: set[int] = set()
        self.finished: set[int] = set()
        self.generation = 0
        self.broken: BaseException | None = None
        self.where = ""  # source line of the first core at the current barrier
        self.switch: Callable[[int], None] | None = None  # one-thread mode: hand over to the scheduler
        self.scratch: list[Tensor] = []      # the scratch tensors, shared by the cores in request order
        self.scratch_calls = [0] * n

    # ---- shared DRAM the kernel allocates ---------------------------------------------------------------
    def shared_scratch(self, core: int, req: Any, make: Callable[[], Tensor]) -> Tensor:
        """The scratch tensor of ``S.scratch`` request ``req``: every core's k-th request is one tensor (the
        DRAM is shared; a kernel allocates the same scratch on every core), made by the first core to ask."""
        with self.cond:
            k = self.scratch_calls[core]
            self.scratch_calls[core] += 1
            if k == len(self.scratch):
                self.scratch.append(make())
            t = self.scratch[k]
        if (t.name, t.shape, t.dtype) != (req.name, req.shape, req.dtype):
            raise CompileError(f"kernel '{self.kernel}': core {core}: S.scratch #{k} is '{req.name}' {req.dtype} "
                               f"{req.shape}, another core's is '{t.name}' {t.dtype} {t.shape} (every core must "
                               f"allocate the same scratch tensors in the same order)")
        return t

    # ---- footprints ------------------------------------------------------------------------------
    def record(self, core: int, t: Tensor, write: bool, first: int, rows: int, cols: int, stride: int,
               entry_bytes: int) -> None:
        """Core ``core`` reads (writes) ``rows`` runs of ``cols`` entries of ``entry_bytes`` bytes of
        ``t``, run r starting at entry ``first + r*stride``."""
        starts = t.region_offset + (first + np.arange(rows, dtype=np.int64) * stride) * entry_bytes
        fp = self.footprints[core][self.phase[core]]
        run = (starts, cols * entry_bytes, t)
        (fp.writes if write else fp.reads).setdefault(t.region, []).append(run)
        fp.lines[id(run)] = source_line()  # a race names the lines of both accesses

    def check_phase(self, p: int) -> None:
        """Raise RaceError for the first conflict between two cores in phase ``p``."""
        fps = [self.footprints[k][p] if p < len(self.footprints[k]) else Footprint() for k in range(self.n)]
        for a in range(self.n):
            for region, wa in fps[a].writes.items():
                for b in range(self.n):
                    if b == a:
                        continue
                    for other, verb in ((fps[b].writes.get(region, []), "writes"),
                                        (fps[b].reads.get(region, []), "reads")):
                        if verb == "writes" and b < a:
                            continue  # that pair was reported from b's side
                        hit = first_overlap(wa, other)
                        if hit is not None:
                            byte, t = hit
                            when = f"between barriers {p} and {p + 1}" if p else "before the first barrier"
                            raise RaceError(
                                f"kernel '{self.kernel}': race {when}: core {a} writes ({_line_at(wa, fps[a], byte)}) "
                                f"and core {b} {verb} ({_line_at(other, fps[b], byte)}) tensor '{t.name}' element "
                                f"{list(element_of(t, byte))} (no barrier orders them)")

    # ---- the barrier -------------------------------------------------------------------------------
    def barrier(self, core: int) -> None:
        """Core ``core`` reached a barrier: wait for the others (threads) or hand over (one thread)."""
        if self.switch is not None:
            if not self.where:
                self.where = source_line()
            self.phase[core] += 1
            self.footprints[core].append(Footprint())
            self.switch(core)
            return
        with self.cond:
            if self.broken is not None:
                raise _Aborted()
            if not self.arrived:
                self.where = source_line()
            self.arrived.add(core)
            gen = self.generation
            self._settle()
            while self.generation == gen and self.broken is None:
                self.cond.wait(timeout=1.0)
            if self.broken is not None and self.generation == gen:
                raise _Aborted()
        self.phase[core] += 1

    def _settle(self) -> None:
        """With the lock held: release the barrier when every core arrived (after the race check of the
        phase), or break it when the cores that did not arrive have all finished."""
        if len(self.arrived) + len(self.finished) < self.n:
            return
        if self.finished:
            waiting = ", ".join(str(k) for k in sorted(self.arrived))
            done = ", ".join(str(k) for k in sorted(self.finished))
            self.broken = BarrierError(
                f"kernel '{self.kernel}': barrier at {self.where}: core(s) {waiting} waited, core(s) {done} "
                f"finished without reaching it")
        else:
            try:
                self.check_phase(self.generation)
            except RaceError as e:
                self.broken = e
                self.cond.notify_all()
                return
            for k in range(self.n):
                self.footprints[k].append(Footprint())
            self.arrived.clear()
            self.generation += 1
        self.cond.notify_all()

    def done(self, core: int) -> None:
        """Core ``core`` returned from the kernel."""
        with self.cond:
            self.finished.add(core)
            if self.arrived:
                self._settle()

    def fail(self, e: BaseException) -> None:
        """A core raised: release everyone waiting."""
        with self.cond:
            if self.broken is None:
                self.broken = e
            self.cond.notify_all()


class _Aborted(Exception):
    """Raised in a core waiting at a barrier that another core's failure broke (not reported)."""


def _label(kernel: str, core: int, e: BaseException, fn: Callable[..., Any]) -> CompileError:
    """The one line of core ``core``'s exception ``e``: the kernel, the core, and for an exception of the
    kernel's own code (``fn``'s) its file and line."""
    if not isinstance(e, CompileError):
        e = kernel_failure(fn, f"kernel '{kernel}'", e)
    return on_core(e, kernel, core)


def run_cores(cfg: HwConfig, name: str, fn: Callable[..., Any], bound: dict[str, Any]) -> None:
    """Run ``fn(**bound)`` once per core of ``cfg`` (module docstring)."""
    n = cfg.num_cores
    cores = Cores(cfg, name, n)
    if single_thread():
        _run_one_thread(cores, name, fn, bound)
    else:
        _run_threads(cores, name, fn, bound)


def _run_threads(cores: Cores, name: str, fn: Callable[..., Any], bound: dict[str, Any]) -> None:
    errors: dict[int, BaseException] = {}

    def body(k: int) -> None:
        try:
            with active(GoldenContext(cores.cfg, name, core_id=k, cores=cores)):
                fn(**bound)
        except _Aborted:
            pass
        except BaseException as e:  # re-raised in the caller, naming the core
            errors[k] = e
            cores.fail(e)
        else:
            cores.done(k)

    threads = [threading.Thread(target=body, args=(k,), name=f"core{k}", daemon=True) for k in range(cores.n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        k = min(errors)
        raise _label(name, k, errors[k], fn) from errors[k]
    if isinstance(cores.broken, CompileError):
        raise cores.broken
    cores.check_phase(cores.generation)


def _run_one_thread(cores: Cores, name: str, fn: Callable[..., Any], bound: dict[str, Any]) -> None:
    from greenlet import GreenletExit, getcurrent, greenlet

    from compiler import context

    main = getcurrent()
    stacks = [[GoldenContext(cores.cfg, name, core_id=k, cores=cores)] for k in range(cores.n)]
    state: dict[int, str] = {}  # core -> "barrier" | "done"

    def body(k: int) -> None:
        fn(**bound)
        state[k] = "done"

    def switch(core: int) -> None:
        state[core] = "barrier"
        main.switch()

    cores.switch = switch
    lets = [greenlet(lambda k=k: body(k)) for k in range(cores.n)]
    saved = getattr(context._local, "stack", None)
    phase = 0
    try:
        while True:
            for k, g in enumerate(lets):
                if g.dead:
                    continue
                context._local.stack = stacks[k]
                try:
                    g.switch()
                except BaseException as e:
                    raise _label(name, k, e, fn) from e
            at = sorted(k for k, s in state.items() if s == "barrier")
            gone = sorted(k for k, s in state.items() if s == "done")
            cores.check_phase(phase)
            if not at:
                return
            if gone:
                raise BarrierError(
                    f"kernel '{name}': barrier at {cores.where}: core(s) {', '.join(map(str, at))} waited, core(s) "
                    f"{', '.join(map(str, gone))} finished without reaching it")
            cores.where = ""
            phase += 1
    finally:
        context._local.stack = saved
        for g in lets:
            if not g.dead:
                g.throw(GreenletExit)  # ends an unfinished core after a failure
