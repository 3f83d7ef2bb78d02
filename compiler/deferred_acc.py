"""Deferred accumulator writes on the golden path: a tile's intrinsic calls fused into one numpy expression.

Why: a tile's chain LOAD A, LOAD B, ADD, MOV, STORE run call by call makes five passes over its data
(two copies into the accumulator, the ADD, the MOV, the narrowing STORE) where numpy makes two. Here
the calls of the fusable forms are *recorded* instead: each accumulator interval a call writes maps to
an expression of what it now holds (a DRAM tile, a materialised accumulator tile, an immediate, an ALU
op of two expressions). A STORE evaluates its interval's expression straight into the DRAM tensor (the
last ufunc writes the narrowed lanes itself), so the chain above is one ``np.add(A, B, out=C,
casting="unsafe")``. The accumulator itself is written only when something reads it whole
(:meth:`DeferredAcc.flush`): an intrinsic call outside the fusable forms, GEMM, or ``ctx.acc`` read
after the run. Intervals a later call overwrites before anyone reads them are never written at all.

The fusable forms are those whose plain effect is a function of the state *before* the call, over
whole contiguous tiles (so recording the function is the same as running it):

* LOAD into the accumulator of one contiguous DRAM run (one row, or rows packed with stride = cols; no
  padding);
* an ALU op whose destinations are consecutive vectors and whose source is an immediate, a run of as
  many vectors at or after the destination or disjoint from it, or one broadcast vector not written
  before the last iteration reads it (exactly the cases :func:`hw.alu_numpy.run_alu_loop` vectorises
  with a source slice);
* STORE of one contiguous run of vectors.

Everything else writes every pending interval (:meth:`DeferredAcc.flush`, through ``ctx.acc``), then
runs the plain Python half. The invariants that make the results the plain path's, bit for bit:

* the accumulator's state is the materialised array overlaid with the pending intervals (disjoint);
* every recorded op is row-wise: row k of its result reads row k of each operand (or the one row of a
  uniform operand, a broadcast vector). So rows of a pending interval are the same expression over its
  leaves' rows: a call that writes part of an interval keeps the rest as that slice, and a call that
  reads a run inside one interval reads the slice (:func:`_slice`);
* a pending expression reads only DRAM tiles and materialised vectors outside every interval pending
  when it was made. The materialised array changes only when pending intervals are written: all of
  them (a flush), or those a read spans in part (``_settle``; everything when another pending
  expression reads the vectors they cover), every value evaluated before any is written; the plain
  path runs only after a flush. DRAM changes only by STORE, which flushes first when its destination
  may share memory with a tile a pending expression reads. (Kernel code that writes a tensor's
  ``data`` directly, outside STORE, is outside the DSL; the plain path would see its writes, a
  deferred LOAD would not. ``S.const`` copies the array it is given for that reason: the kernel may
  change its own array after the LOAD.)
* an expression grows to at most ``MAX_NODES`` nodes and at most ``MAX_PENDING`` intervals wait, else
  a flush, so evaluation cost and recursion stay bounded;
* each op is evaluated with the shared engine's lane functions (:data:`hw.alu_numpy.ALU_NUMPY`,
  :data:`hw.alu_numpy.ALU_INPLACE`, :func:`hw.alu_numpy.apply_imm`), 32-bit as on the plain path; a
  temporary is updated in place only when the expression uses it once.

Argument checks stay in each intrinsic's interface, so errors are raised at the same call as before.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hw.alu_numpy import ALU_INPLACE, ALU_NUMPY, apply_imm

# An expression with more nodes than this flushes first (a long in-place loop over one tile would
# otherwise build a chain as long as the loop).
MAX_NODES = 24
# At most this many intervals wait; one more flushes (a call scans them all).
MAX_PENDING = 32


def _ufunc(name: str) -> np.ufunc | None:
    """The op's lane function when it is one numpy ufunc (ADD .. MAX: evaluated in one call, which can
    also write the narrowed STORE output itself), else None. Looked up in the shared table on every use,
    so the golden path runs whatever the engine's table holds."""
    f = ALU_NUMPY.get(name)
    return f if isinstance(f, np.ufunc) else None


# numpy's int32 minimum/maximum with a scalar take a slow loop: big tiles compare against a full array.
_FILL_MIN = 4096


class _Leaf:
    """An array the expression reads as it is: a DRAM tile, or the materialised accumulator vectors
    ``acc_base ..`` (``acc_base`` None for DRAM)."""

    __slots__ = ("value", "acc_base", "rows", "size")

    def __init__(self, value: np.ndarray, acc_base: int | None = None):
        self.value = value
        self.acc_base = acc_base
        self.rows = value.shape[0]
        self.size = 1


class _Fill:
    """Every vector of the interval holds the immediate ``value`` in every lane (MOV of an immediate)."""

    __slots__ = ("value", "rows", "size")

    def __init__(self, value: int):
        self.value = value
        self.rows = 1
        self.size = 1


class _Op:
    """ALU op ``name`` of destination expression ``x`` (None when the op ignores it) and source ``y`` (an
    expression, or the immediate as an int)."""

    __slots__ = ("name", "x", "y", "rows", "size")

    def __init__(self, name: str, x: Any, y: Any):
        self.name = name
        self.x = x
        self.y = y
        yr, ys = (1, 0) if type(y) is int else (y.rows, y.size)
        self.rows = yr if x is None else (x.rows if x.rows > yr else yr)
        self.size = 1 + ys + (0 if x is None else x.size)


Node = Any  # _Leaf | _Fill | _Op
Filled = Callable[[tuple[int, ...], int], np.ndarray]


def _leaves(roots: list[Node]) -> list[_Leaf]:
    """The leaves of the expressions ``roots`` (each once)."""
    out, seen, stack = [], set(), list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        t = type(node)
        if t is _Leaf:
            out.append(node)
        elif t is _Op:
            if node.x is not None:
                stack.append(node.x)
            if type(node.y) is not int:
                stack.append(node.y)
    return out


class DeferredAcc:
    """The pending writes of one golden context's accumulator ``acc`` (``(depth, lanes)`` or
    ``(depth, batch, lanes)`` int32); ``filled`` is the context's cache of full arrays."""

    def __init__(self, acc: np.ndarray, filled: Filled):
        self.acc = acc
        self.filled = filled
        self.row_shape = acc.shape[1:]
        # base -> (vectors, expression): disjoint intervals of the accumulator not yet written
        self.pending: dict[int, tuple[int, Node]] = {}
        # the DRAM tensors' arrays pending expressions have read since the last flush, by id (a STORE into
        # one of them looks for a pending tile it overlaps)
        self.dram_read: dict[int, np.ndarray] = {}
        self.dram_version = 0  # counts the arrays added to dram_read
        # DRAM tensors found sharing no memory with any of dram_read: id -> (array, dram_version then)
        self._store_clear: dict[int, tuple[np.ndarray, int]] = {}
        # accumulator leaves made since the last flush (none: writing one interval early is always safe)
        self.acc_leaves = 0
        # one past the highest accumulator vector written so far (what a kept buffer must clear)
        self.written_high = 0

    # ---- the recorded calls ---------------------------------------------------------------------------
    def load(self, tensor_data: np.ndarray, offset: int, base: int, n: int) -> None:
        """LOAD of DRAM vectors ``offset .. offset+n`` into ``acc[base:base+n]`` (contiguous, no padding)."""
        if len(self.pending) > MAX_PENDING - 2:  # a write inside an interval splits it in two
            self.flush()
        self._write(base, n, _Leaf(tensor_data[offset:offset + n]))
        if id(tensor_data) not in self.dram_read:
            self.dram_read[id(tensor_data)] = tensor_data
            self.dram_version += 1

    def alu_loop(self, opname: str, dst_base: int, src_base: int, iter_out: int, iter_in: int, dst_factor_out: int,
                 dst_factor_in: int, src_factor_out: int, src_factor_in: int, imm: int | None) -> bool:
        """An ALU instruction's loop (``iter_out * iter_in`` > 0 iterations, range checked), recorded when its
        destinations are consecutive vectors and its source an immediate, as many consecutive vectors or
        one broadcast vector (see :meth:`alu`); False otherwise (nothing recorded, nothing flushed)."""
        n = iter_out * iter_in
        if n > 1:
            if iter_in == 1:
                dstep, sstep = dst_factor_out, src_factor_out
            elif iter_out == 1 or (dst_factor_out == iter_in * dst_factor_in
                                   and (imm is not None or src_factor_out == iter_in * src_factor_in)):
                dstep, sstep = dst_factor_in, src_factor_in
            else:
                return False
            if dstep != 1 or (imm is None and sstep not in (0, 1)):
                return False
        else:
            sstep = 1
        return self.alu(opname, dst_base, src_base, n, sstep, imm)

    def alu(self, opname: str, dst: int, src: int, n: int, src_step: int, imm: int | None) -> bool:
        """ALU ``opname`` over ``acc[dst:dst+n]`` with the immediate ``imm`` or the source vectors
        ``src + k*src_step`` (``src_step`` 1, or 0 for one broadcast vector). False (nothing recorded)
        when a later iteration could read an earlier one's write (the plain engine runs it in order), or
        the interval map is full."""
        if imm is None:
            if src_step == 1:
                if not (src >= dst or src + n <= dst):
                    return False
            elif dst <= src < dst + n - 1:
                return False
        reads_dst = opname not in ("MOV", "CLZ")
        sn = n if src_step else 1
        for attempt in (0, 1):
            x = self._read(dst, n) if reads_dst else None
            y: Any = imm if imm is not None else self._read(src, sn)
            if y is not None and (x is not None or not reads_dst) and len(self.pending) <= MAX_PENDING - 2:
                if opname == "MOV":
                    node = _Fill(y) if type(y) is int else y
                else:
                    node = _Op(opname, x, y)
                if node.size <= MAX_NODES:
                    self._write(dst, n, node)
                    return True
                self.flush()
            elif attempt == 0:  # write the intervals in the way early; then the runs read as materialised
                if len(self.pending) > MAX_PENDING - 2:
                    self.flush()
                if x is None and reads_dst:
                    self._settle(dst, n)
                if y is None:
                    self._settle(src, sn)
        return False

    def store(self, tensor_data: np.ndarray, offset: int, base: int, n: int) -> None:
        """STORE of ``acc[base:base+n]`` into DRAM vectors ``offset .. offset+n`` of ``tensor_data``,
        narrowing like a C cast: what the interval holds is evaluated straight into DRAM. When the vectors
        may share memory with a DRAM tile a pending expression reads, everything pending is written first."""
        out = tensor_data[offset:offset + n]
        clear = self._store_clear.get(id(tensor_data))
        if clear is None or clear[1] != self.dram_version:
            if any(np.may_share_memory(a, tensor_data) for a in self.dram_read.values()):
                if any(np.may_share_memory(leaf.value, out) for leaf in _leaves([e for _, e in self.pending.values()])):
                    self.flush()
            else:
                self._store_clear[id(tensor_data)] = (tensor_data, self.dram_version)
        node = self._read(base, n)
        if node is None:
            self._settle(base, n)
            node = self._read(base, n)
        self._evaluate_into(node, out)

    # ---- the interval map -----------------------------------------------------------------------------
    def _read(self, base: int, n: int) -> Node | None:
        """The expression of what ``acc[base:base+n]`` holds, or None when the run covers a pending
        interval only in part (or several)."""
        hit = self.pending.get(base)
        if hit is not None and hit[0] == n:
            return hit[1]
        end = base + n
        for b, (m, node) in self.pending.items():
            if b < end and base < b + m:
                if b <= base and end <= b + m:  # inside one interval: its rows base-b ..
                    return _slice(node, base - b, end - b)
                return None
        self.acc_leaves += 1
        return _Leaf(self.acc[base:end], base)

    def _write(self, base: int, n: int, node: Node) -> None:
        """``acc[base:base+n]`` now holds ``node``: the intervals it covers are dropped (their values dead
        unless an expression holds them), those it covers in part keep the rows outside it."""
        p = self.pending
        hit = p.get(base)
        if hit is not None and hit[0] == n:  # the same interval again (intervals are disjoint: nothing else)
            p[base] = (n, node)
            return
        end = base + n
        for b in [b for b, (m, _) in p.items() if b < end and base < b + m]:
            m, old = p.pop(b)
            if b < base:
                p[b] = (base - b, _slice(old, 0, base - b))
            if b + m > end:
                p[end] = (b + m - end, _slice(old, end - b, m))
        p[base] = (n, node)

    def _settle(self, base: int, n: int) -> None:
        """Write the pending intervals that overlap ``acc[base:base+n]`` into the accumulator now. When
        another pending expression reads materialised vectors they cover, everything is written (that
        expression must see the old values)."""
        end = base + n
        hit = [b for b, (m, _) in self.pending.items() if b < end and base < b + m]
        if not hit:
            return
        if self.acc_leaves:
            ranges = [(b, b + self.pending[b][0]) for b in hit]
            rest = [e for b, (_, e) in self.pending.items() if b not in hit]
            for leaf in _leaves(rest):
                if leaf.acc_base is not None:
                    lo, hi = leaf.acc_base, leaf.acc_base + leaf.rows
                    if any(lo < e and b < hi for b, e in ranges):
                        self.flush()
                        return
        self._write_out(hit)

    # ---- evaluation -----------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write every pending interval into the accumulator (all evaluated before any is written)."""
        if self.pending:
            self._write_out(list(self.pending))
        self.dram_read = {}
        self.acc_leaves = 0

    def _write_out(self, bases: list[int]) -> None:
        """Evaluate the pending intervals at ``bases``, then write them and drop them from the map."""
        items = [(b, self.pending.pop(b)) for b in bases]
        uses: dict[int, int] = {}
        for _, (_, node) in items:
            _count_uses(node, uses)
        memo: dict[int, np.ndarray] = {}
        values = []
        for b, (n, node) in items:
            v, _ = self._eval(node, memo, uses)
            if np.may_share_memory(v, self.acc):  # a view of vectors another interval may overwrite
                v = v.copy()
            values.append((b, n, v))
        for b, n, v in values:
            self.acc[b:b + n] = v
            if b + n > self.written_high:
                self.written_high = b + n

    def _evaluate_into(self, node: Node, out: np.ndarray) -> None:
        """``out[...] = node`` narrowed like a C cast; a ufunc at the root writes ``out`` itself."""
        f = _ufunc(node.name) if type(node) is _Op else None
        if f is not None and type(node.x) is _Leaf:
            y = node.y
            if type(y) is _Leaf or (type(y) is int and node.name not in ("MIN", "MAX")):  # the tile's usual chain
                f(node.x.value, y if type(y) is int else y.value, out=out, casting="unsafe")
                return
        uses: dict[int, int] = {}
        _count_uses(node, uses)
        memo: dict[int, np.ndarray] = {}
        if f is not None and node.x is not None:
            x, _ = self._eval(node.x, memo, uses)
            y = node.y
            if type(y) is int:
                if node.name in ("MIN", "MAX") and x.size >= _FILL_MIN:
                    y = self.filled(x.shape, y)
            else:
                y, _ = self._eval(y, memo, uses)
            f(x, y, out=out, casting="unsafe")  # the int32 loop, then the cast
            return
        v, _ = self._eval(node, memo, uses)
        np.copyto(out, v, casting="unsafe")

    def _eval(self, node: Node, memo: dict[int, np.ndarray], uses: dict[int, int]) -> tuple[np.ndarray, bool]:
        """``(value, mine)``: the node's int32 value (``rows`` x the row shape) and whether it is a temporary
        no other use reads (so the caller may update it in place)."""
        key = id(node)
        v = memo.get(key)
        if v is not None:
            return v, False
        t = type(node)
        if t is _Leaf:
            v, mine = node.value, False
        elif t is _Fill:
            v, mine = np.full((1,) + self.row_shape, node.value, dtype=np.int32), True
        else:
            v, mine = self._apply(node, memo, uses)
        if uses[key] > 1:
            memo[key] = v
            mine = False
        return v, mine

    def _apply(self, node: _Op, memo: dict[int, np.ndarray], uses: dict[int, int]) -> tuple[np.ndarray, bool]:
        name, y = node.name, node.y
        if type(y) is int:
            if node.x is None:  # CLZ of an immediate: the same in every lane
                return np.array(ALU_NUMPY[name](np.zeros((1,) + self.row_shape, np.int32), y)), True
            x, mine = self._eval(node.x, memo, uses)
            f = _ufunc(name)
            if f is not None and not mine:  # one pass into a new temporary
                return f(x, self.filled(x.shape, y) if name in ("MIN", "MAX") and x.size >= _FILL_MIN else y), True
            if not mine:
                x = x.copy()
            apply_imm(x, name, y, self.filled)
            return x, True
        s, smine = self._eval(y, memo, uses)
        if node.x is None:  # CLZ: a function of the source only
            return np.array(ALU_NUMPY[name](s, s)), True
        x, mine = self._eval(node.x, memo, uses)
        shape = x.shape if x.shape == s.shape else np.broadcast_shapes(x.shape, s.shape)
        f = _ufunc(name)
        if f is not None:
            out = x if mine and x.shape == shape else (s if smine and s.shape == shape else None)
            return f(x, s, out=out), True
        if mine and x.shape == shape:
            ALU_INPLACE[name](x, s)
            return x, True
        if x.shape != shape:
            x = np.broadcast_to(x, shape)
        return np.asarray(ALU_NUMPY[name](x, s), dtype=np.int32), True


def _slice(node: Node, lo: int, hi: int) -> Node:
    """The expression of rows ``lo .. hi`` of ``node``'s value. Every recorded op is row-wise (row k of a
    result reads row k of each operand, or the one row of a uniform operand), so a slice of the tree is
    the tree of its leaves' slices."""
    if node.rows == 1:
        return node  # uniform: every row is the one row
    t = type(node)
    if t is _Leaf:
        return _Leaf(node.value[lo:hi], None if node.acc_base is None else node.acc_base + lo)
    x = None if node.x is None else _slice(node.x, lo, hi)
    return _Op(node.name, x, node.y if type(node.y) is int else _slice(node.y, lo, hi))


def _count_uses(node: Node, uses: dict[int, int]) -> None:
    """How many times each node is read in the expressions counted (its first visit walks its operands)."""
    key = id(node)
    seen = uses.get(key, 0)
    uses[key] = seen + 1
    if seen or type(node) is not _Op:
        return
    if node.x is not None:
        _count_uses(node.x, uses)
    if type(node.y) is not int:
        _count_uses(node.y, uses)
