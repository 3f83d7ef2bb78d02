"""The data of the periods the fast-forward skips (``sim/tlm/fast_forward.py``), applied in bulk
with exactly the buffers and DRAM the instruction-by-instruction run leaves.

A period's data movements are a list of ``(kind, insn)`` (``alu``, ``load``, ``store``) in the
order the model made them, each LOAD's or STORE's DRAM address moving by its own step per
period. Four ways, cheapest first:

* **affine**: a period of ALU immediates ADD/SUB/MUL/MOV only is one affine map per accumulator
  vector, ``x -> A*x + B`` mod 2**32 (lanes alike), raised to the ``R``-th power by squaring;
* **batched**: when the periods are independent of one another (every accumulator vector the
  period writes is first written in it, by a LOAD or by an ALU from vectors already written in
  it (or never written in a period), before any read; no DRAM a LOAD reads is
  written by a STORE of any period; STOREs of different periods and instructions never write
  the same bytes), all ``R`` periods run side by side, one numpy operation per instruction on a
  ``(depth, periods, lanes)`` copy of the buffer, in chunks of bounded memory;
* **gemm**: a period of LOADs into INP and WGT and accumulating GEMMs only (a convolution's or a
  matmul's reduction loop): the GEMMs only add into the accumulator and nothing else in the
  period touches it, so each GEMM of the period runs once for all ``R`` periods, on ``R`` copies
  of INP and WGT as that period's GEMM finds them, its products summed over the periods
  (``hw.gemm_numpy.run_gemm_sum``); the buffers end as the last period's LOADs leave them;
* **replay**: otherwise each skipped instruction's movement in order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hw.alu_numpy import run_alu
from hw.gemm_numpy import gemm_sum_ready, run_gemm_sum
from hw.isa import ALU_OP_NAMES
from hw.isa_semantics import affine_indices, buffer_of, dram_span, load_tile_shape
from sim.tlm.gemm import start_gemm

_MASK = 0xFFFFFFFF
_AFFINE_OPS = ("ADD", "SUB", "MUL", "MOV")
_CHUNK_BYTES = 32 << 20  # the batched copy of the buffer stays below this
_MAX_DEPTH = 3  # the most periods a pipelined tile spans, less one
_ROTATIONS = 4  # LOADs tried as the start of an independent block (the first ones of the period)


def apply_periods(ops: list[tuple[str, Any]], deltas: list[int], R: int, load: Any, store: Any, compute: Any,
                  timing: Any) -> str:
    """Apply ``R`` periods of ``ops`` (period k moves each LOAD/STORE address by ``k * delta``,
    k = 1..R) through the units ``load``, ``store`` and ``compute`` (their buffers and DRAM); returns the way
    taken (``affine``, ``batched``, ``replay``; ``none`` for no data)."""
    if not ops or R < 1:
        return "none"
    if R == 1:  # one period (a crossing replayed): in order, as cheap as any batching and no analysis
        _replay(ops, deltas, 1, load, store, compute)
        return "replay"
    acc = load.acc.mem
    if all(k == "alu" and i.use_imm and ALU_OP_NAMES[i.alu_op] in _AFFINE_OPS for k, i in ops):
        A, B = _power(*_affine(ops, acc.shape[0]), R)
        u = acc.view(np.uint32)
        touched = np.flatnonzero((A != 1) | (B != 0))
        with np.errstate(over="ignore"):
            u[touched] = u[touched] * A[touched, None] + B[touched, None]
        return "affine"
    if _gemm_periods(ops, deltas, R, load, compute, timing):
        return "gemm"
    n = len(ops)
    # the period seen from the boundary may start inside a tile's pipeline (an ALU on vectors the
    # previous period loaded): rotated to start at a LOAD, periods 1..R are a prefix, R - 1
    # rotated blocks (block k: the ops from r on of period k, then the first r of period k + 1)
    # and a suffix
    for r in [0] + [r for r in range(1, n) if ops[r][0] == "load"][:_ROTATIONS]:
        if r and R < 2:
            break
        rot, rd = ops[r:] + ops[:r], deltas[r:] + deltas[:r]
        offs = [0] * (n - r) + [1] * r
        blocks = R if r == 0 else R - 1
        if _independent(rot, rd, offs, blocks, acc.shape[0], timing):
            _replay(ops[:r], deltas[:r], 1, load, store, compute)
            _batched(rot, rd, offs, blocks, load, store, timing)
            _replay(ops[r:] if r else [], deltas[r:] if r else [], R, load, store, compute)
            return "batched"
    # else the tiles of a pipeline several periods deep (a STORE of the tile an earlier period
    # computed, interleaved with this period's LOADs): each op gets the offset that puts it in the
    # block of its producers (:func:`_pipeline_offsets`), op j of block k runs in period k + off[j]
    offs = _pipeline_offsets(ops, acc.shape[0])
    M = max(offs) if offs is not None else 0
    if offs is not None and M >= 1 and R > M:
        order = sorted(range(n), key=lambda j: (offs[j], j))
        rot, rd, ro = [ops[j] for j in order], [deltas[j] for j in order], [offs[j] for j in order]
        if _independent(rot, rd, [0] * n, R, acc.shape[0], timing):  # every op over periods 1..R
            # blocks 1-M..0 end in periods 1..M (begun before the jump), blocks 1..R-M side by side,
            # blocks R-M+1..R begin in periods R-M+1..R (ended after the jump)
            for k in range(1 - M, 1):
                part = [j for j in order if offs[j] >= 1 - k]
                _replay_at([ops[j] for j in part], [deltas[j] for j in part], [k + offs[j] for j in part],
                           load, store, compute)
            _batched(rot, rd, ro, R - M, load, store, timing)
            for k in range(R - M + 1, R + 1):
                part = [j for j in order if offs[j] <= R - k]
                _replay_at([ops[j] for j in part], [deltas[j] for j in part], [k + offs[j] for j in part],
                           load, store, compute)
            return "batched"
    for k in range(1, R + 1):
        _replay(ops, deltas, k, load, store, compute)
    return "replay"


def _acc_reads_writes(kind: str, i: Any) -> tuple[np.ndarray, np.ndarray]:
    """The accumulator vectors a data movement reads and writes."""
    none = np.zeros(0, dtype=np.int64)
    if kind == "alu":
        dst = affine_indices(i.dst_base, i.iter_out, i.iter_in, i.dst_factor_out, i.dst_factor_in)
        reads = [] if ALU_OP_NAMES[i.alu_op] == "MOV" else [dst]
        if not i.use_imm:
            reads.append(affine_indices(i.src_base, i.iter_out, i.iter_in, i.src_factor_out, i.src_factor_in))
        return (np.concatenate(reads) if reads else none), dst
    if kind == "load":
        return none, (_load_rows(i) if buffer_of(i) == "ACC" else none)
    if kind == "store":
        return np.arange(i.sram_base, i.sram_base + i.y_size * i.x_size), none
    return none, none


def _pipeline_offsets(ops: list[tuple[str, Any]], depth: int) -> list[int] | None:
    """Offsets from 0 per op such that every accumulator vector an op reads was last written by an
    op of its own block (op j of block k runs in period ``k + offset[j]``: a producer earlier in the
    period has the reader's offset, one in the previous period an offset one less); None when no
    such offsets exist (a value carried from period to period, a pipeline deeper than
    ``_MAX_DEPTH`` + 1 periods) or when a vector's last write would not be the plain run's."""
    n = len(ops)
    rw = [_acc_reads_writes(k, i) for k, i in ops]
    last = np.full(depth, -1, dtype=np.int64)  # the period's last writer of each vector
    for j, (_, w) in enumerate(rw):
        last[w] = j
    edges: list[tuple[int, int, int]] = []  # (j, j2, c): offset[j] = offset[j2] + c
    cur = np.full(depth, -1, dtype=np.int64)
    for j, (r, w) in enumerate(rw):
        for p in np.unique(cur[r]).tolist():
            if p >= 0:
                edges.append((j, p, 0))
        for p in np.unique(last[r][cur[r] < 0]).tolist():
            if p >= 0:
                edges.append((j, p, 1))
        cur[w] = j
    off: list[int | None] = [None] * n
    adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for j, p, c in edges:
        adj[j].append((p, -c))  # offset[p] = offset[j] - c
        adj[p].append((j, c))
    for root in range(n):
        if off[root] is not None:
            continue
        off[root] = 0
        comp, stack = [root], [root]
        while stack:
            j = stack.pop()
            for p, c in adj[j]:
                want = off[j] + c  # type: ignore[operator]
                if off[p] is None:
                    off[p] = want
                    comp.append(p)
                    stack.append(p)
                elif off[p] != want:
                    return None
        lo = min(off[j] for j in comp)  # type: ignore[type-var]
        for j in comp:
            off[j] -= lo  # type: ignore[operator]
    if max(off) > _MAX_DEPTH:  # type: ignore[type-var]
        return None
    # the last blocks run one after the other: a vector's last writer in a period must have the
    # lowest offset of its writers (its block is the last to write it, as in the plain run)
    lowest = np.full(depth, _MAX_DEPTH + 1, dtype=np.int64)
    for (_, w), o in zip(rw, off):
        lowest[w] = np.minimum(lowest[w], o)
    has = last >= 0
    if (np.array(off)[last[has]] != lowest[has]).any():
        return None
    return off  # type: ignore[return-value]


def _replay_at(ops: list[tuple[str, Any]], deltas: list[int], periods: list[int], load: Any, store: Any,
               compute: Any) -> None:
    """The data movements ``ops``, each of its own period, one by one."""
    for op, d, k in zip(ops, deltas, periods):
        _replay([op], [d], k, load, store, compute)


def _replay(ops: list[tuple[str, Any]], deltas: list[int], k: int, load: Any, store: Any, compute: Any) -> None:
    """The data movements ``ops`` of period ``k``, one by one; but the accumulating GEMMs of a stretch
    of them with only LOADs into INP and WGT in between add their products at the stretch's end,
    one :func:`hw.gemm_numpy.run_gemm_sum` per distinct GEMM on the INP and WGT each one found
    (the additions commute, and nothing else in the stretch touches the accumulator)."""
    acc = load.acc.mem
    bufs = compute.gemm_bufs
    pending: dict[Any, list[tuple[np.ndarray, np.ndarray]]] = {}
    held = 0
    for (kind, insn), d in zip(ops, deltas):
        if kind == "gemm" and gemm_sum_ready(insn, compute.cfg, bufs.uops, bufs.uop_valid, bufs.wgt_valid):
            pending.setdefault(insn, []).append((bufs.inp.copy(), bufs.wgt.copy()))
            held += bufs.inp.nbytes + bufs.wgt.nbytes
            if held > _CHUNK_BYTES:
                _add_gemms(pending, acc, bufs.uops)
                held = 0
            continue
        if kind == "load" and buffer_of(insn) in ("INP", "WGT"):
            load.move_data(insn, insn.dram_base + k * d)
            continue
        _add_gemms(pending, acc, bufs.uops)
        held = 0
        if kind == "alu":
            run_alu(acc, insn)
        elif kind == "gemm":
            start_gemm(insn, acc, bufs, compute.cfg)
        elif kind == "load":
            load.move_data(insn, insn.dram_base + k * d)
        else:
            store.move_data(insn, insn.dram_base + k * d)
    _add_gemms(pending, acc, bufs.uops)


def _add_gemms(pending: dict[Any, list[tuple[np.ndarray, np.ndarray]]], acc: np.ndarray, uops: np.ndarray) -> None:
    """Add the held GEMMs' products to the accumulator (each GEMM once, on the INP and WGT copies
    its instances found) and forget them."""
    for insn, copies in pending.items():
        run_gemm_sum(acc, np.stack([c[0] for c in copies]), np.stack([c[1] for c in copies]), uops, insn)
    pending.clear()


# ---- gemm ------------------------------------------------------------------------------------
def _gemm_periods(ops: list[tuple[str, Any]], deltas: list[int], R: int, load: Any, compute: Any,
                  timing: Any) -> bool:
    """Apply ``R`` periods of LOADs into INP and WGT and accumulating GEMMs (see the module's
    docstring); False (nothing applied) for any other period, or a GEMM that could fault."""
    bufs = compute.gemm_bufs
    if not any(k == "gemm" for k, _ in ops):
        return False
    for kind, i in ops:
        if kind == "gemm":
            # the valid bits only grow in such a period: a GEMM that cannot fault now cannot later
            if not gemm_sum_ready(i, compute.cfg, bufs.uops, bufs.uop_valid, bufs.wgt_valid):
                return False
        elif kind != "load" or buffer_of(i) not in ("INP", "WGT"):
            return False
    loads = [(i, d) for (kind, i), d in zip(ops, deltas) if kind == "load"]
    acc = load.acc.mem
    per_period = bufs.inp.nbytes + bufs.wgt.nbytes + max(
        8 * (i.uop_end - i.uop_begin) * i.iter_out * i.iter_in * (bufs.inp.shape[1] + bufs.wgt[0].size)
        for k, i in ops if k == "gemm")
    chunk = max(1, _CHUNK_BYTES // per_period)
    for k0 in range(1, R + 1, chunk):
        ks = np.arange(k0, min(R, k0 + chunk - 1) + 1, dtype=np.int64)
        inps = np.repeat(bufs.inp[None], len(ks), axis=0)
        wgts = np.repeat(bufs.wgt[None], len(ks), axis=0)
        # each period starts with what the period before left (the first: the buffers as they are)
        later = ks >= 2
        if later.any():
            for i, d in loads:
                _load_periods(i, i.dram_base + (ks[later] - 1) * d, inps, wgts, later, load.dram, timing)
        for (kind, i), d in zip(ops, deltas):
            if kind == "load":
                _load_periods(i, i.dram_base + ks * d, inps, wgts, slice(None), load.dram, timing)
            else:
                run_gemm_sum(acc, inps, wgts, bufs.uops, i)
    for i, d in loads:  # the buffers and their valid bits as the last period leaves them
        load.move_data(i, i.dram_base + R * d)
    return True


def _load_periods(i: Any, bases: np.ndarray, inps: np.ndarray, wgts: np.ndarray, at: Any, dram: Any,
                  timing: Any) -> None:
    """LOAD ``i`` into INP or WGT of the copies ``at`` (one per entry of ``bases``, its DRAM address)."""
    buf = buffer_of(i)
    full = _padded_tiles(i, bases, dram, timing.elem_bytes(buf))
    if full is None:
        return
    n = full.shape[1] * full.shape[2]
    target = inps if buf == "INP" else wgts
    target[at, i.sram_base:i.sram_base + n] = full.view(np.int8).reshape((len(bases), n) + target.shape[2:])


def _padded_tiles(i: Any, bases: np.ndarray, dram: Any, eb: int) -> np.ndarray | None:
    """The tiles LOAD ``i`` writes from each DRAM entry address of ``bases``, padding included:
    ``(K, rows, cols, eb)`` bytes; None for an empty tile."""
    rows, cols = load_tile_shape(i)
    if rows * cols == 0:
        return None
    full = np.zeros((len(bases), rows, cols, eb), dtype=np.uint8)
    if i.y_size * i.x_size:
        idx = _entries(bases, i.y_size, i.x_size, i.x_stride)
        entries = dram.mem[:(int(idx.max()) + 1) * eb].reshape(-1, eb)
        full[:, i.y_pad_0:i.y_pad_0 + i.y_size, i.x_pad_0:i.x_pad_0 + i.x_size] = entries[idx]
    return full


# ---- affine ------------------------------------------------------------------------------
def _affine(ops: list[tuple[str, Any]], depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The period as one affine map per vector, ``x -> A*x + B`` (mod 2**32, every lane alike)."""
    A = np.ones(depth, dtype=np.uint32)
    B = np.zeros(depth, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for _, i in ops:
            idx = affine_indices(i.dst_base, i.iter_out, i.iter_in, i.dst_factor_out, i.dst_factor_in)
            if not len(idx):
                continue
            imm = np.uint32(int(i.imm) & _MASK)
            op = ALU_OP_NAMES[i.alu_op]
            if op == "ADD":
                np.add.at(B, idx, imm)
            elif op == "SUB":
                np.subtract.at(B, idx, imm)
            elif op == "MUL":
                np.multiply.at(A, idx, imm)
                np.multiply.at(B, idx, imm)
            else:  # MOV
                A[idx] = 0
                B[idx] = imm
    return A, B


def _power(A: np.ndarray, B: np.ndarray, R: int) -> tuple[np.ndarray, np.ndarray]:
    """The affine map ``x -> A*x + B`` applied ``R`` times (mod 2**32)."""
    rA = np.ones_like(A)
    rB = np.zeros_like(B)
    with np.errstate(over="ignore"):
        while R:
            if R & 1:
                rA, rB = A * rA, A * rB + B
            R >>= 1
            if R:
                A, B = A * A, A * B + B
    return rA, rB


# ---- batched -----------------------------------------------------------------------------
def _load_rows(i: Any) -> np.ndarray:
    rows, cols = load_tile_shape(i)
    return np.arange(i.sram_base, i.sram_base + rows * cols)


def _independent(ops: list[tuple[str, Any]], deltas: list[int], offs: list[int], R: int, depth: int,
                 timing: Any) -> bool:
    """Blocks 1..R of ``ops`` (op j of block k at period ``k + offs[j]``) do not depend on one
    another (see the module's docstring)."""
    if any(kind == "gemm" for kind, _ in ops):
        return False
    written = np.zeros(depth, dtype=bool)
    for kind, i in ops:
        if kind == "load" and buffer_of(i) == "ACC":
            written[_load_rows(i)] = True
        elif kind == "alu":
            written[affine_indices(i.dst_base, i.iter_out, i.iter_in, i.dst_factor_out, i.dst_factor_in)] = True
    defined = np.zeros(depth, dtype=bool)
    reads: list[tuple[int, int]] = []   # DRAM boxes LOADs read (every period)
    writes: list[tuple[int, int, int, int, int]] = []  # STOREs: box, first span's start and length, step
    for (kind, i), d, off in zip(ops, deltas, offs):
        if kind == "alu":
            dst = affine_indices(i.dst_base, i.iter_out, i.iter_in, i.dst_factor_out, i.dst_factor_in)
            src = _acc_reads_writes(kind, i)[0]  # MOV only writes its destination
            if (written[src] & ~defined[src]).any():
                return False
            # what it writes from values of this period (or never written in it) is of this period too
            defined[dst] = True
            continue
        s1 = dram_span(_at(i, d, 1 + off), timing)
        sR = dram_span(_at(i, d, R + off), timing)
        if kind == "store":
            rows = np.arange(i.sram_base, i.sram_base + i.y_size * i.x_size)
            if (written[rows] & ~defined[rows]).any():
                return False
            if s1 is None:
                continue
            if R > 1 and abs(d) * timing.out_vec_bytes < s1[1] - s1[0]:
                return False  # two periods' STOREs of this instruction overlap
            writes.append((min(s1[0], sR[0]), max(s1[1], sR[1]), s1[0], s1[1] - s1[0], abs(d) * timing.out_vec_bytes))
        else:
            if buffer_of(i) == "ACC":
                defined[_load_rows(i)] = True
            if s1 is not None:
                reads.append((min(s1[0], sR[0]), max(s1[1], sR[1])))
    for k, (lo, hi, a, n, D) in enumerate(writes):
        for lo2, hi2 in reads:
            if lo < hi2 and lo2 < hi:
                return False
        for lo2, hi2, a2, n2, D2 in writes[k + 1:]:
            if not (lo < hi2 and lo2 < hi):
                continue
            # interleaved progressions with one step: disjoint when they are on the circle of D bytes
            if D != D2 or D == 0 or R == 1 or _circle_overlap(a % D, n, a2 % D, n2, D):
                return False
    return True


def _circle_overlap(a: int, n: int, b: int, m: int, D: int) -> bool:
    """Intervals ``[a, a+n)`` and ``[b, b+m)`` (0 <= a, b < D) meet modulo ``D``."""
    for shift in (-D, 0, D):
        if a < b + shift + m and b + shift < a + n:
            return True
    return False


def _at(i: Any, d: int, k: int) -> Any:
    return at_base(i, i.dram_base + k * d) if d else i


def at_base(i: Any, base: int) -> Any:
    """The LOAD or STORE ``i`` with DRAM address ``base``: ``dataclasses.replace(i, dram_base=base)``
    without its cost (instructions are plain frozen dataclasses: no ``__post_init__``, every field in
    ``__dict__``), paid for every moved instruction of a jump or replay."""
    j = object.__new__(type(i))
    d = j.__dict__
    d.update(i.__dict__)
    d["dram_base"] = base
    return j


def _entries(base: np.ndarray, y: int, x: int, stride: int) -> np.ndarray:
    """``(K, y, x)`` DRAM entry indices of K tiles starting at entries ``base``."""
    return (base[:, None, None] + np.arange(y, dtype=np.int64)[None, :, None] * stride
            + np.arange(x, dtype=np.int64)[None, None, :])


def _batched(ops: list[tuple[str, Any]], deltas: list[int], offs: list[int], R: int, load: Any, store: Any,
             timing: Any) -> None:
    """Blocks 1..R of ``ops`` side by side (op j of block k at period ``k + offs[j]``)."""
    acc = load.acc.mem
    depth, lanes = acc.shape
    dram = load.dram
    chunk = max(1, _CHUNK_BYTES // (depth * lanes * 4))
    for k0 in range(1, R + 1, chunk):
        ks = np.arange(k0, min(R, k0 + chunk - 1) + 1, dtype=np.int64)
        K = len(ks)
        b = np.repeat(acc[:, None, :], K, axis=1)  # (depth, K, lanes): period k0 + j in column j
        for (kind, i), d, off in zip(ops, deltas, offs):
            if kind == "alu":
                run_alu(b, i)
                continue
            base = i.dram_base + (ks + off) * d
            if kind == "load":
                buf = buffer_of(i)
                if buf != "ACC":  # nothing in the period reads it: the last period's write stays
                    load.move_data(i, int(base[-1]))
                    continue
                eb = timing.elem_bytes(buf)
                full = _padded_tiles(i, base, dram, eb)
                if full is None:
                    continue
                n = full.shape[1] * full.shape[2]
                vec = full.reshape(K, n, eb).view("<i4")  # (K, n, lanes)
                b[i.sram_base:i.sram_base + n] = vec.transpose(1, 0, 2)
            else:
                n = i.y_size * i.x_size
                if n == 0:
                    continue
                tile = b[i.sram_base:i.sram_base + n].transpose(1, 0, 2).astype(dram.out_dtype)  # (K, n, lanes)
                idx = _entries(base, i.y_size, i.x_size, i.x_stride)
                vecs = dram.mem[:(int(idx.max()) + 1) * dram.out_vec_bytes].view(dram.out_dtype).reshape(-1, lanes)
                vecs[idx] = tile.reshape(K, i.y_size, i.x_size, lanes)
        acc[:] = b[:, -1, :]
