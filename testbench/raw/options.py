"""Verilator and C++ option sets of the raw harness build: a ladder, each step adding one option.

``cosim bench`` builds every step (each in its own folder), runs a >= 1 M-cycle Program on each, and
reports what each option buys; the fastest step whose outputs, cycles and counters equal the first
step's is the raw build the benchmark's TLM ratios are measured against. The test suite keeps
:data:`DEFAULT` (the harness's long-standing flags, no training run, one thread).

The steps, in order (each keeps everything before it):

* ``plain``: Verilator's and verilated.mk's defaults (C++ ``-Os``), X handling ``unique``;
* ``O3``: Verilator ``-O3`` and C++ ``-O3`` (OPT_FAST, OPT_SLOW, OPT_GLOBAL);
* ``x-assign``: ``--x-assign fast`` (X assignments become whatever is cheapest);
* ``x-initial``: ``--x-initial fast`` (initial values too): the harness's long-standing build;
* ``march``: C++ ``-march=native`` (the build machine's vector units);
* ``threads``: ``--threads 2`` (Verilator's multi-threaded model on the two cores);
* ``pgo``: g++ profile-guided optimisation: built with ``-fprofile-generate``, run on training
  Programs (not the measured one), rebuilt with ``-fprofile-use``. On top of the fastest of the
  steps before it, so a thread step that loses does not drag it down.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class RawOptions:
    """One raw harness build's options: extra Verilator flags, the C++ optimisation flags, threads,
    and whether g++ gets a profile of training runs."""

    name: str
    verilator: tuple[str, ...]
    cxx: str
    threads: int = 1
    pgo: bool = False
    what: str = ""

    @property
    def folder_suffix(self) -> str:
        """The build folder's suffix ("" for :data:`DEFAULT`, whose folder the test suite shares)."""
        return "" if self == DEFAULT else f"-opt-{self.name}"

    def verilator_flags(self) -> list[str]:
        """The Verilator command-line flags of this set (threads included)."""
        return [*self.verilator, "--timescale", "1ns/1ps", "-Wno-fatal"] + \
            (["--threads", str(self.threads)] if self.threads > 1 else [])


_FAST_X = ("--x-assign", "fast", "--x-initial", "fast")
PLAIN = RawOptions("plain", (), "-Os", what="Verilator and verilated.mk defaults (C++ -Os)")
O3 = RawOptions("O3", ("-O3",), "-O3", what="+ Verilator -O3, C++ -O3")
X_ASSIGN = RawOptions("x-assign", ("-O3", "--x-assign", "fast"), "-O3", what="+ --x-assign fast")
DEFAULT = RawOptions("x-initial", ("-O3",) + _FAST_X, "-O3", what="+ --x-initial fast (the test suite's build)")
MARCH = RawOptions("march", ("-O3",) + _FAST_X, "-O3 -march=native", what="+ C++ -march=native")
THREADS = replace(MARCH, name="threads", threads=2, what="+ --threads 2")
LADDER: tuple[RawOptions, ...] = (PLAIN, O3, X_ASSIGN, DEFAULT, MARCH, THREADS)


def with_pgo(base: RawOptions) -> RawOptions:
    """``base`` plus g++ profile-guided optimisation (trained by the builder on Programs it is given)."""
    return replace(base, name=f"{base.name}+pgo", pgo=True, what=f"+ g++ PGO (on {base.name})")
