"""The intrinsics: LOAD, STORE, the ten ALU ops, SYNC, GEMM, constants and scratch DRAM, each with
both halves.

For every intrinsic this module holds, in one place, the interface (argument
checks shared by both paths, so a faulting call raises the same error whether it
runs or compiles), the Python half (numpy, vectorised over the whole tile; the ALU
ops run the engine of ``hw/alu_numpy.py`` and GEMM that of ``hw/gemm_numpy.py``, both shared
with the models) and the lowering half (records the operation for the compiler). Kernels
reach them as ``S.load`` (into any buffer), ``S.store``, ``S.add`` ... ``S.mov``, ``S.mulhr``, ``S.clz``, ``S.sync``,
``S.gemm``, ``S.const`` (and ``S.uops`` on top of it) and ``S.scratch``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from compiler.context import Context, GoldenContext, source_line
from compiler.errors import BufferRangeError, CompileError, kernel_error
from compiler.intrinsic_registry import ArgError, Intrinsic, implements, intrinsic, range_error
from compiler.ir import AluOp, GemmOp, LoadOp, StoreOp, SyncOp
from compiler.tensor import AccView, BufferView, Tensor, UopView, pad_to_vectors
from hw import csr
from hw.alu_numpy import run_alu_loop
from hw.gemm_numpy import GemmFault, run_gemm
from hw.isa import ALU_ITER_BITS, GEMM_ITER_BITS, IMM_BITS, PAD_BITS, SIZE_BITS, UOP_BYTES, UOP_FIELD_BITS
from hw.isa_semantics import affine_last

_SIZE_MAX = (1 << SIZE_BITS) - 1
_PAD_MAX = (1 << PAD_BITS) - 1
_ITER_MAX = (1 << ALU_ITER_BITS) - 1
_NO_PAD = (0, 0, 0, 0)
_OFFSET_MAX = (1 << 31) - 1
_IMM_MIN, _IMM_MAX = -(1 << (IMM_BITS - 1)), (1 << (IMM_BITS - 1)) - 1


# ---- shared argument checks ---------------------------------------------------------
def _int(v: Any, what: str, lo: int, hi: int, arg: str | None = None) -> int:
    if type(v) is int and lo <= v <= hi:  # the common case, kept cheap for the golden path
        return v
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ArgError(f"{what} must be an integer, got {type(v).__name__} {v!r}", arg)
    v = int(v)
    if not lo <= v <= hi:
        raise ArgError(f"{what} = {v} is outside {lo}..{hi}", arg)
    return v


def _view(v: Any, what: str) -> AccView:
    if not isinstance(v, AccView):
        raise ArgError(f"{what} must be an accumulator view (S.acc[a:b]), got {type(v).__name__}", what)
    return v


def _tensor(v: Any, what: str) -> Tensor:
    if not isinstance(v, Tensor):
        raise ArgError(f"{what} must be a DRAM tensor argument of the kernel, got {type(v).__name__}", what)
    return v


# per buffer: (word for messages, unit word, index prefix in messages)
_BUF_WORDS = {"ACC": ("accumulator buffer", "vectors", "acc"), "INP": ("input buffer", "vectors", "inp"),
              "WGT": ("weight buffer", "blocks", "wgt"), "UOP": ("micro-op buffer", "micro-ops", "uop")}


def _check_sram(ctx: Context, view: BufferView, first: int, last: int, what: str) -> None:
    """Indices first..last (inclusive) must lie in the view's buffer and in the view when it is sized."""
    buf = view.BUF
    depth = ctx.acc_depth if buf == "ACC" else ctx.cfg.depth_of(buf)
    name, unit, pre = _BUF_WORDS[buf]
    if first < 0:
        raise range_error(f"{what} index {first} is negative", what)
    if last >= depth:
        raise range_error(f"{what} index {last} is out of range (the {name} has {depth} {unit})", what)
    if view.length is not None and (first < view.base or last >= view.base + view.length):
        raise range_error(f"{what} indices {first}..{last} leave the view {pre}[{view.base}:"
                          f"{view.base + view.length}]", what)


def _check_dram(t: Tensor, offset: int, rows: int, cols: int, stride: int, verb: str, entry_bytes: int = 0,
                unit: str = "vectors") -> None:
    if rows * cols == 0:
        return
    if entry_bytes and t.region_offset % entry_bytes:
        raise ArgError(f"tensor '{t.name}' starts at byte {t.region_offset} of its region, not on a "
                       f"{entry_bytes}-byte entry", t.name)
    end = offset + (rows - 1) * stride + cols
    have = t.nvec if not entry_bytes else t.entry_count(entry_bytes)
    if end > have:
        what = f"{t.size} elements of {t.lanes} lanes" if not entry_bytes else \
            f"{t.nbytes} bytes, {entry_bytes} per entry"
        raise ArgError(f"{verb} {unit} up to {end - 1}, but tensor '{t.name}' has {have} {unit} ({what})", t.name)


def _tile(ctx: Context, t: Tensor, view: BufferView, offset: int, rows: int, cols: int | None,
          stride: int | None, padded: bool) -> tuple[int, int, int, int]:
    """Common LOAD/STORE geometry checks; returns (offset, rows, cols, stride)."""
    rows = _int(rows, "rows", 0, _SIZE_MAX)
    if cols is None:
        if view.length is None or rows != 1 or padded:
            raise ArgError("cols is required unless the view is sized, rows == 1 and there is no padding", "cols")
        cols = view.length
    cols = _int(cols, "cols", 0, _SIZE_MAX)
    stride = _int(cols if stride is None else stride, "stride", 0, _SIZE_MAX)
    offset = _int(offset, "offset", 0, _OFFSET_MAX)
    return offset, rows, cols, stride


def _load_dtype(ctx: Context, buf: str, src: Tensor) -> None:
    """The element type LOAD moves into ``buf``: int32 accumulator lanes, int8 inputs and weights, and
    micro-ops as int8 bytes (``S.uops``) of a constant tensor (the compiler must see what GEMM touches)."""
    cfg = ctx.cfg
    want = {"ACC": cfg.acc_width, "INP": cfg.inp_width, "WGT": cfg.wgt_width, "UOP": 8}[buf]
    if src.bits != want:
        if buf == "ACC":
            raise ArgError(f"tensor '{src.name}' is {src.dtype}, but LOAD moves {cfg.acc_width}-bit accumulator "
                           f"vectors (inputs must be int{cfg.acc_width})", src.name)
        raise ArgError(f"tensor '{src.name}' is {src.dtype}, but LOAD into the {_BUF_WORDS[buf][0]} moves int{want} "
                       f"{'micro-op bytes (S.uops)' if buf == 'UOP' else 'elements'}", src.name)
    if buf == "UOP" and src.kind != "const":
        raise ArgError(f"micro-ops must come from a constant tensor (S.uops), not from '{src.name}': the compiler "
                       f"derives what each GEMM touches from them", src.name)


# ---- LOAD -------------------------------------------------------------------------------
@intrinsic("load")
def load(ctx: Context, dst: BufferView, src: Tensor, offset: int = 0, rows: int = 1, cols: int | None = None,
         stride: int | None = None, pad: tuple[int, int, int, int] = _NO_PAD) -> LoadOp:
    """Copy ``rows`` x ``cols`` entries of DRAM tensor ``src`` (row r starts at entry
    ``offset + r*stride``) into the buffer of view ``dst`` (``S.acc``, ``S.inp``, ``S.wgt`` or
    ``S.uop``) from its base, inside zero padding ``pad = (top, bottom, left, right)`` entries.
    An entry is the buffer's DRAM unit: an int32 accumulator vector, an int8 input vector, an
    int8 weight block (BLOCK x BLOCK, row o = the weights of output lane o) or a micro-op."""
    if (type(dst) is AccView and type(src) is Tensor and rows == 1 and cols is None and stride is None
            and pad is _NO_PAD and src.bits == ctx.acc_width):
        # the common whole-view form (one row, no padding): the checks below, inlined
        n, b = dst.length, dst.base
        if type(n) is int and type(b) is int and type(offset) is int and 0 <= n <= _SIZE_MAX and b >= 0 \
                and 0 <= offset <= _OFFSET_MAX and offset + n <= src.nvec and b + n <= ctx.acc_depth:
            src.loaded = True
            return LoadOp(src, offset, b, 1, n, n, _NO_PAD)
    if not isinstance(dst, BufferView):
        raise ArgError(f"dst must be a buffer view (S.acc[a:b], S.inp[..], S.wgt[..], S.uop[..]), got "
                       f"{type(dst).__name__}", "dst")
    src = _tensor(src, "src")
    buf = dst.BUF
    if buf != "ACC" and getattr(ctx, "batch", 1) != 1:
        raise ArgError(f"LOAD into the {_BUF_WORDS[buf][0]} cannot run in an elementwise (lockstep) kernel", "dst")
    _load_dtype(ctx, buf, src)
    if pad == _NO_PAD:
        pad4 = _NO_PAD
    else:
        if len(pad) != 4:
            raise ArgError("pad must be (top, bottom, left, right)", "pad")
        pad4 = tuple(_int(p, "pad", 0, _PAD_MAX, "pad") for p in pad)
    offset, rows, cols, stride = _tile(ctx, src, dst, offset, rows, cols, stride, any(pad4))
    if buf == "ACC":
        _check_dram(src, offset, rows, cols, stride, "reads")
    else:
        _check_dram(src, offset, rows, cols, stride, "reads", ctx.cfg.elem_bytes(buf), _BUF_WORDS[buf][1])
    op = LoadOp(src, offset, dst.base, rows, cols, stride, pad4, buf)  # type: ignore[arg-type]
    if op.sram_vectors:  # the padded tile: padding alone (no data rows or columns) is still written
        _check_sram(ctx, dst, dst.base, dst.base + op.sram_vectors - 1, "dst")
    src.loaded = True
    return op


def _tile_into(target: np.ndarray, entries: np.ndarray, op: LoadOp) -> None:
    """Write LOAD ``op``'s padded tile of source ``entries`` into ``target`` (both indexed by entry)."""
    rows, cols, b, o = op.rows, op.cols, op.sram_base, op.offset
    pad = op.pad
    if pad is _NO_PAD or pad == _NO_PAD:
        if rows == 1 or op.stride == cols:
            n = rows * cols
            target[b:b + n] = entries[o:o + n]
            return
        y0 = y1 = x0 = x1 = 0
    else:
        y0, y1, x0, x1 = pad
    idx = o + np.arange(rows)[:, None] * op.stride + np.arange(cols)[None, :]
    tile = np.zeros((y0 + rows + y1, x0 + cols + x1) + target.shape[1:], dtype=target.dtype)
    tile[y0:y0 + rows, x0:x0 + cols] = entries[idx]
    target[b:b + op.sram_vectors] = tile.reshape((-1,) + target.shape[1:])


def decode_uop_bytes(raw: np.ndarray) -> np.ndarray:
    """Micro-ops ``(n, 16)`` int8 bytes (:func:`hw.isa.encode_uops`'s format) -> ``(n, 3)`` int64 rows
    (acc, inp, wgt): three little-endian 16-bit fields from bit 0, the rest ignored."""
    words = np.ascontiguousarray(raw).view(np.uint8).reshape(-1, UOP_BYTES).view("<u2")
    return words[:, :3].astype(np.int64)


def encode_uop_table(table: Any) -> np.ndarray:
    """``(n, 3)`` micro-ops (acc, inp, wgt) -> ``(n, 16)`` int8 bytes as LOAD reads them (vectorised
    :func:`hw.isa.encode_uops`); raises ValueError when an index does not fit its 16-bit field."""
    t = np.asarray(table, dtype=np.int64).reshape(-1, 3)
    if t.size and (t.min() < 0 or t.max() >= 1 << UOP_FIELD_BITS):
        k = int(np.flatnonzero(((t < 0) | (t >= 1 << UOP_FIELD_BITS)).any(axis=1))[0])
        raise ValueError(f"micro-op {k}: index {t[k].tolist()} does not fit {UOP_FIELD_BITS} bits")
    words = np.zeros((t.shape[0], UOP_BYTES // 2), dtype="<u2")
    words[:, :3] = t
    return words.view(np.int8).reshape(t.shape[0], UOP_BYTES)


@implements("load", "python")
def _load_python(ctx: GoldenContext, op: LoadOp) -> None:
    rows, cols = op.rows, op.cols
    if op.sram_vectors == 0:  # padding alone (no data rows or columns) is still written: not this
        return
    buf = op.buf
    if ctx.cores is not None and rows * cols:  # several cores: the race check wants every core's DRAM reads
        eb = ctx.cfg.elem_bytes(buf) if buf != "ACC" else op.tensor.lanes * op.tensor.bits // 8
        ctx.cores.record(ctx.core_id, op.tensor, False, op.offset, rows, cols, op.stride, eb)
    if buf == "ACC":
        hi = op.sram_base + op.sram_vectors
        if hi > ctx.acc_high:
            ctx.acc_high = hi
        d = ctx.deferred
        if d is not None and op.pad == _NO_PAD and (rows == 1 or op.stride == cols):
            d.load(op.tensor.data, op.offset, op.sram_base, rows * cols)  # recorded (compiler.deferred_acc)
            return
        _tile_into(ctx.acc, op.tensor.data, op)
        return
    g = ctx.gemm_buffers
    if buf == "INP":
        _tile_into(g.inp, op.tensor.entries((ctx.lanes,)), op)
        return
    if buf == "WGT":
        block = ctx.cfg.block
        _tile_into(g.wgt, op.tensor.entries((block, block)), op)
        g.wgt_loaded[op.sram_base:op.sram_base + op.sram_vectors] = True
        return
    _tile_into(g.uops, decode_uop_bytes(op.tensor.entries((UOP_BYTES,))), op)
    g.uop_loaded[op.sram_base:op.sram_base + op.sram_vectors] = True


@implements("load", "lower")
def _load_lower(ctx: Context, op: LoadOp) -> None:
    ctx.record(op)


# ---- STORE ------------------------------------------------------------------------------
@intrinsic("store")
def store(ctx: Context, dst: Tensor, src: AccView, offset: int = 0, rows: int = 1, cols: int | None = None,
          stride: int | None = None) -> StoreOp:
    """Copy ``rows`` x ``cols`` accumulator vectors from ``src`` (contiguous) to DRAM tensor
    ``dst`` (row r at vector ``offset + r*stride``), narrowing each lane like a C cast."""
    if (type(dst) is Tensor and type(src) is AccView and rows == 1 and cols is None and stride is None
            and dst.bits == ctx.out_width and dst.kind != "const"):
        # the common whole-view form (one row): the checks below, inlined
        n, b = src.length, src.base
        if type(n) is int and type(b) is int and type(offset) is int and 0 <= n <= _SIZE_MAX and b >= 0 \
                and 0 <= offset <= _OFFSET_MAX and offset + n <= dst.nvec and b + n <= ctx.acc_depth:
            dst.stored = True
            return StoreOp(dst, offset, b, 1, n, n)
    dst, src = _tensor(dst, "dst"), _view(src, "src")
    if dst.kind == "const":
        raise ArgError(f"tensor '{dst.name}' is a constant (S.const): STORE cannot write it", dst.name)
    if dst.bits != ctx.out_width:
        raise ArgError(f"tensor '{dst.name}' is {dst.dtype}, but STORE writes {ctx.cfg.out_width}-bit lanes "
                       f"(outputs must be int{ctx.cfg.out_width})", dst.name)
    offset, rows, cols, stride = _tile(ctx, dst, src, offset, rows, cols, stride, False)
    _check_dram(dst, offset, rows, cols, stride, "writes")
    if rows * cols:
        _check_sram(ctx, src, src.base, src.base + rows * cols - 1, "src")
    dst.stored = True
    return StoreOp(dst, offset, src.base, rows, cols, stride)


@implements("store", "python")
def _store_python(ctx: GoldenContext, op: StoreOp) -> None:
    rows, cols = op.rows, op.cols
    n = rows * cols
    if n == 0:
        return
    data, b, o = op.tensor.data, op.sram_base, op.offset
    if ctx.cores is not None:
        ctx.cores.record(ctx.core_id, op.tensor, True, o, rows, cols, op.stride, op.tensor.lanes * op.tensor.bits // 8)
    contiguous = rows == 1 or op.stride == cols
    d = ctx.deferred
    if d is not None and contiguous:
        d.store(data, o, b, n)  # what the vectors hold, evaluated straight into DRAM (compiler.deferred_acc)
        return
    acc = ctx.acc
    if contiguous:
        np.copyto(data[o:o + n], acc[b:b + n], casting="unsafe")  # int32 -> intN wraps like a C cast
        return
    idx = o + np.arange(rows)[:, None] * op.stride + np.arange(cols)[None, :]
    data[idx] = acc[b:b + n].reshape((rows, cols) + acc.shape[1:]).astype(data.dtype)


@implements("store", "lower")
def _store_lower(ctx: Context, op: StoreOp) -> None:
    ctx.record(op)


# ---- ALU --------------------------------------------------------------------------------
# The Python halves run the numpy engine of hw/alu_numpy.py, the one the TLM runs too.


def _alu_interface(opname: str) -> Callable[..., AluOp]:
    def interface(ctx: Context, dst: AccView, src: AccView | int, iters: tuple[int, int] | None = None,
                  dst_factors: tuple[int, int] | None = None, src_factors: tuple[int, int] | None = None) -> AluOp:
        if iters is None and dst_factors is None and src_factors is None and type(dst) is AccView:
            # the common whole-view form: the checks below, inlined (anything unusual takes the full path)
            n, d = dst.length, dst.base
            if type(n) is int and type(d) is int and 0 < n <= _ITER_MAX and d >= 0 and d + n <= ctx.acc_depth:
                if type(src) is int:
                    if _IMM_MIN <= src <= _IMM_MAX:
                        return AluOp(opname, d, 0, 1, n, 0, 1, 0, 0, src)
                elif type(src) is AccView:
                    sb, sl = src.base, src.length
                    if type(sb) is int and sb >= 0:
                        if sl == 1 and n > 1:  # a one-vector source broadcasts
                            if sb < ctx.acc_depth:
                                return AluOp(opname, d, sb, 1, n, 0, 1, 0, 0, None)
                        elif sb + n <= ctx.acc_depth and (sl is None or (type(sl) is int and n <= sl)):
                            return AluOp(opname, d, sb, 1, n, 0, 1, 0, 1, None)
        dst = _view(dst, "dst")
        fmax = ctx.factor_max
        if iters is None:
            if dst.length is None:
                raise ArgError("iters is required when dst is an unsized view", "iters")
            io, ii = 1, _int(dst.length, "iters", 0, _ITER_MAX, "iters")
        else:
            io, ii = _pair(iters, "iters", 0, _ITER_MAX)
        dfo, dfi = _pair(dst_factors, "dst_factors", 0, fmax) if dst_factors is not None else (0, 1)
        if isinstance(src, AccView):
            if src_factors is None:
                src_factors = (0, 0) if (src.length == 1 and io * ii > 1) else (dfo, dfi)
            sfo, sfi = _pair(src_factors, "src_factors", 0, fmax)
            imm, sbase = None, src.base
        elif isinstance(src, (int, np.integer)) and not isinstance(src, bool):
            if not _IMM_MIN <= int(src) <= _IMM_MAX:
                raise ArgError(f"immediate {int(src)} does not fit the {IMM_BITS}-bit signed field "
                               f"({_IMM_MIN}..{_IMM_MAX})", "src")
            imm, sbase, sfo, sfi = int(src), 0, 0, 0
        else:
            raise ArgError(f"src must be an accumulator view or an integer immediate, got {type(src).__name__}",
                           "src")
        if io * ii:
            _check_sram(ctx, dst, dst.base, affine_last(dst.base, io, ii, dfo, dfi), "dst")
            if imm is None:
                _check_sram(ctx, src, sbase, affine_last(sbase, io, ii, sfo, sfi), "src")  # type: ignore[arg-type]
        return AluOp(opname, dst.base, sbase, io, ii, dfo, dfi, sfo, sfi, imm)
    interface.__name__ = opname.lower()
    interface.__doc__ = (f"ALU {opname}: for i < iters[0], j < iters[1]: acc[d] = {opname}(acc[d], s) with "
                         f"d = dst + i*dst_factors[0] + j*dst_factors[1] and s the immediate or "
                         f"acc[src + i*src_factors[0] + j*src_factors[1]]. Defaults: iters (1, len(dst)), "
                         f"factors (0, 1); a one-vector src view broadcasts.")
    return interface


def _alu_python(opname: str) -> Callable[[GoldenContext, AluOp], None]:
    """The Python half of an ALU op: the shared numpy engine (whole-tile unless a write feeds a later read)."""

    def run(ctx: GoldenContext, op: AluOp) -> None:
        io, ii, dfo, dfi = op.iter_out, op.iter_in, op.dst_factor_out, op.dst_factor_in
        if not (io and ii):
            return
        d = ctx.deferred
        if d is None or not d.alu_loop(opname, op.dst_base, op.src_base, io, ii, dfo, dfi, op.src_factor_out,
                                       op.src_factor_in, op.imm):
            run_alu_loop(ctx.acc, opname, op.dst_base, op.src_base, io, ii, dfo, dfi, op.src_factor_out,
                         op.src_factor_in, op.imm, ctx.filled)
        # the highest destination: each loop at its last iteration if its factor is positive
        hi = op.dst_base + ((io - 1) * dfo if dfo > 0 else 0) + ((ii - 1) * dfi if dfi > 0 else 0) + 1
        if hi > ctx.acc_high:
            ctx.acc_high = hi

    return run


def _alu_lower(ctx: Context, op: AluOp) -> None:
    ctx.record(op)


def _alu(opname: str) -> Intrinsic:
    """Declare the ALU intrinsic ``opname`` with its two halves."""
    intr = intrinsic(opname.lower())(_alu_interface(opname))
    implements(intr.name, "python")(_alu_python(opname))
    implements(intr.name, "lower")(_alu_lower)
    return intr


add = _alu("ADD")
sub = _alu("SUB")
mul = _alu("MUL")
min = _alu("MIN")  # noqa: A001 - S.min / S.max mirror the ISA's op names
max = _alu("MAX")  # noqa: A001
shr = _alu("SHR")
clip = _alu("CLIP")
mov = _alu("MOV")
mulhr = _alu("MULHR")  # (x*s + 2**30) >> 31: the rounding multiply-high of requantization
clz = _alu("CLZ")  # leading zeros of s (32 for 0): the normalizing shift of Newton reciprocal steps


# ---- SYNC -------------------------------------------------------------------------------
@intrinsic("sync")
def sync(ctx: Context) -> SyncOp:
    """Explicit barrier: every earlier operation completes before any later one starts."""
    return SyncOp()


@implements("sync", "python")
def _sync_python(ctx: GoldenContext, op: SyncOp) -> None:
    return None  # the golden path is sequential already


@implements("sync", "lower")
def _sync_lower(ctx: Context, op: SyncOp) -> None:
    ctx.record(op)


# ---- GEMM -------------------------------------------------------------------------------
_GEMM_ITER_MAX = (1 << GEMM_ITER_BITS) - 1


def _pair(v: Any, what: str, lo: int, hi: int) -> tuple[int, int]:
    if not isinstance(v, (tuple, list)) or len(v) != 2:
        raise ArgError(f"{what} must be a pair (outer, inner), got {v!r}", what)
    return _int(v[0], what, lo, hi, what), _int(v[1], what, lo, hi, what)


@intrinsic("gemm")
def gemm(ctx: Context, uops: UopView, iters: tuple[int, int] = (1, 1), acc_factors: tuple[int, int] = (0, 0),
         inp_factors: tuple[int, int] = (0, 0), wgt_factors: tuple[int, int] = (0, 0),
         reset: bool = False) -> GemmOp:
    """GEMM over the micro-ops of view ``uops`` (``S.uop[a:b]``): for i < iters[0], j < iters[1], each
    micro-op (acc, inp, wgt) in order: ``a = acc + i*acc_factors[0] + j*acc_factors[1]`` (x, w likewise),
    ``acc[a] += inp[x] . wgt[w]^T`` (int8 x int8 into the int32 lanes, wrapping), or ``acc[a] = 0`` with
    ``reset``. Faults as on the hardware (``hw.gemm_numpy``): a micro-op or weight block never loaded,
    an index past its buffer."""
    if not isinstance(uops, UopView) or uops.length is None:
        raise ArgError(f"uops must be a sized micro-op view (S.uop[a:b]), got {uops!r}", "uops")
    if getattr(ctx, "batch", 1) != 1:
        raise ArgError("GEMM cannot run in an elementwise (lockstep) kernel", "uops")
    cfg = ctx.cfg
    io, ii = _pair(iters, "iters", 0, _GEMM_ITER_MAX)
    fmax = ctx.factor_max
    afo, afi = _pair(acc_factors, "acc_factors", 0, fmax)
    xfo, xfi = _pair(inp_factors, "inp_factors", 0, fmax)
    wfo, wfi = _pair(wgt_factors, "wgt_factors", 0, fmax)
    if not isinstance(reset, (bool, np.bool_)):
        raise ArgError(f"reset must be True or False, got {reset!r}", "reset")
    begin, end = uops.base, uops.base + uops.length
    if begin < 0:
        raise range_error(f"micro-op index {begin} is negative", "uops")
    # the hardware checks uop_end only for a non-empty loop; an empty one must still encode its fields
    if end > cfg.uop_depth or begin >= cfg.uop_depth:
        raise range_error(f"micro-ops {begin}..{end - 1} leave the {cfg.uop_depth}-entry micro-op buffer", "uops")
    return GemmOp(bool(reset), begin, end, io, ii, afo, afi, xfo, xfi, wfo, wfi)


def gemm_fault_error(ctx: Context, fault: GemmFault) -> CompileError:
    """The one-line error of a GEMM that faults as the hardware would (an index past a buffer:
    BufferRangeError; a micro-op or weight block never loaded: CompileError)."""
    cls = BufferRangeError if fault.code == csr.ERR_SRAM_RANGE else CompileError
    return kernel_error(ctx.kernel_name, None, f"S.gemm at {source_line()}: {fault.message}", cls)


@implements("gemm", "python")
def _gemm_python(ctx: GoldenContext, op: GemmOp) -> None:
    g = ctx.gemm_buffers
    _, fault = run_gemm(ctx.acc, g.inp, g.wgt, g.uops, op, ctx.cfg, g.uop_loaded, g.wgt_loaded)
    if fault is not None:
        raise gemm_fault_error(ctx, fault)


@implements("gemm", "lower")
def _gemm_lower(ctx: Context, op: GemmOp) -> None:
    ctx.record_gemm(op)


# ---- constants and scratch DRAM ---------------------------------------------------------------
# The element types of a constant, by dtype (``dtype.name`` builds a new string on every call).
_CONST_DTYPES = {np.dtype(d): d for d in ("int8", "int16", "int32")}


@dataclass(slots=True)
class ConstRequest:
    """``S.const``'s record: the data of a constant DRAM tensor and its name."""

    data: np.ndarray
    name: str


@intrinsic("const")
def const(ctx: Context, data: Any, name: str = "const") -> ConstRequest:
    """A constant DRAM tensor holding ``data`` (an int8, int16 or int32 array the kernel computed:
    micro-op tables, identity weights...). Returns a tensor to LOAD from; on a compiled Program every
    constant lives in one input region the compiler fills."""
    a = np.asarray(data)
    if a.dtype not in _CONST_DTYPES:
        raise ArgError(f"constant '{name}' must be an int8, int16 or int32 array, got {a.dtype}", "data")
    if a.size == 0:
        raise ArgError(f"constant '{name}' is empty", "data")
    return ConstRequest(np.ascontiguousarray(a), str(name))


def _every_copy(ctx: GoldenContext, data: np.ndarray) -> np.ndarray:
    """A constant's ``(nvec, lanes)`` data as a lockstep context's tensors are laid out, ``(nvec, batch,
    lanes)``: one read-only view of the same vectors for every copy (each sees what a run on one copy
    would); unchanged on a one-copy context."""
    batch = getattr(ctx, "batch", 1)
    if batch == 1:
        return data
    return np.broadcast_to(data[:, None, :], (data.shape[0], batch, data.shape[1]))


@implements("const", "python")
def _const_python(ctx: GoldenContext, req: ConstRequest) -> Tensor:
    a = req.data
    data = pad_to_vectors(a, ctx.lanes, a.dtype)
    if np.may_share_memory(data, a):
        # the values at S.const, as the compiled program's constant region holds them: the kernel may
        # change its array afterwards (a deferred LOAD reads the tensor after its call)
        data = data.copy()
    return Tensor(req.name, a.shape, _CONST_DTYPES[a.dtype], ctx.lanes, _every_copy(ctx, data), kind="const")


@implements("const", "lower")
def _const_lower(ctx: Context, req: ConstRequest) -> Tensor:
    return ctx.add_const(req.data, req.name)


def uops(table: Any, name: str = "uops") -> Tensor:
    """A constant tensor of micro-ops ``(acc, inp, wgt)`` (an ``(n, 3)`` array or list of triples),
    16 bytes each, to LOAD into ``S.uop``."""
    try:
        raw = encode_uop_table(table)
    except ValueError as e:
        from compiler.context import current
        raise kernel_error(current().kernel_name, None, f"S.uops at {source_line()}: {e}") from None
    return const(raw, name)


@dataclass(slots=True)
class ScratchRequest:
    """``S.scratch``'s record: the shape, dtype and name of a DRAM tensor the kernel uses for itself."""

    shape: tuple[int, ...]
    dtype: str
    name: str


@intrinsic("scratch")
def scratch(ctx: Context, shape: Any, dtype: str = "int8", name: str = "scratch") -> ScratchRequest:
    """A DRAM tensor of ``shape`` and ``dtype`` for the kernel's own intermediate results (stored, then
    loaded back: a layer's output feeding the next layer). The compiler orders the stores and loads."""
    shp = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if not shp or any(s <= 0 for s in shp):
        raise ArgError(f"scratch '{name}' has shape {shp}: every dimension must be positive", "shape")
    if str(np.dtype(dtype)) not in ("int8", "int16", "int32"):
        raise ArgError(f"scratch '{name}' must be int8, int16 or int32, got {dtype}", "dtype")
    return ScratchRequest(shp, str(np.dtype(dtype)), str(name))


@implements("scratch", "python")
def _scratch_python(ctx: GoldenContext, req: ScratchRequest) -> Tensor:
    def make() -> Tensor:
        nvec = -(-int(np.prod(req.shape)) // ctx.lanes)
        batch = getattr(ctx, "batch", 1)  # a lockstep context: every copy its own scratch, as on one copy
        shape = (nvec, ctx.lanes) if batch == 1 else (nvec, batch, ctx.lanes)
        return Tensor(req.name, req.shape, req.dtype, ctx.lanes, np.zeros(shape, dtype=req.dtype), kind="scratch")

    # several cores share DRAM: the k-th scratch tensor a core asks for is every core's k-th one
    return make() if ctx.cores is None else ctx.cores.shared_scratch(ctx.core_id, req, make)


@implements("scratch", "lower")
def _scratch_lower(ctx: Context, req: ScratchRequest) -> Tensor:
    return ctx.add_scratch(req.shape, req.dtype, req.name)
