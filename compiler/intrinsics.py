"""The intrinsics: LOAD, STORE, the eight ALU ops and SYNC, each with both halves.

For every intrinsic this module holds, in one place, the interface (argument
checks shared by both paths, so a faulting call raises the same error whether it
runs or compiles), the Python half (numpy, vectorised over the whole tile; the ALU
ops run the engine of ``hw/alu_numpy.py``, shared with the TLM) and the lowering half (records the operation for the compiler). Kernels reach them as
``S.load``, ``S.store``, ``S.add`` ... ``S.mov``, ``S.sync``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from compiler.context import Context
from compiler.intrinsic_registry import ArgError, Intrinsic, implements, intrinsic, range_error
from compiler.ir import AluOp, LoadOp, StoreOp, SyncOp
from compiler.tensor import AccView, Tensor
from hw.alu_numpy import run_alu_loop
from hw.isa import ALU_ITER_BITS, IMM_BITS, PAD_BITS, SIZE_BITS
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


def _check_sram(ctx: Context, view: AccView, first: int, last: int, what: str) -> None:
    """Indices first..last (inclusive) must lie in the buffer and in the view when it is sized."""
    if first < 0:
        raise range_error(f"{what} index {first} is negative", what)
    if last >= ctx.acc_depth:
        raise range_error(f"{what} index {last} is out of range (the accumulator buffer has {ctx.acc_depth} "
                          f"vectors)", what)
    if view.length is not None and (first < view.base or last >= view.base + view.length):
        raise range_error(f"{what} indices {first}..{last} leave the view acc[{view.base}:"
                          f"{view.base + view.length}]", what)


def _check_dram(t: Tensor, offset: int, rows: int, cols: int, stride: int, verb: str) -> None:
    if rows * cols == 0:
        return
    end = offset + (rows - 1) * stride + cols
    if end > t.nvec:
        raise ArgError(f"{verb} vectors up to {end - 1}, but tensor '{t.name}' has {t.nvec} vectors "
                       f"({t.size} elements of {t.lanes} lanes)", t.name)


def _tile(ctx: Context, t: Tensor, view: AccView, offset: int, rows: int, cols: int | None,
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


# ---- LOAD -------------------------------------------------------------------------------
@intrinsic("load")
def load(ctx: Context, dst: AccView, src: Tensor, offset: int = 0, rows: int = 1, cols: int | None = None,
         stride: int | None = None, pad: tuple[int, int, int, int] = _NO_PAD) -> LoadOp:
    """Copy ``rows`` x ``cols`` vectors of DRAM tensor ``src`` (row r starts at vector
    ``offset + r*stride``) into the accumulator from ``dst``, inside zero padding
    ``pad = (top, bottom, left, right)`` vectors."""
    if (type(dst) is AccView and type(src) is Tensor and rows == 1 and cols is None and stride is None
            and pad is _NO_PAD and src.bits == ctx.acc_width):
        # the common whole-view form (one row, no padding): the checks below, inlined
        n, b = dst.length, dst.base
        if type(n) is int and type(b) is int and type(offset) is int and 0 <= n <= _SIZE_MAX and b >= 0 \
                and 0 <= offset <= _OFFSET_MAX and offset + n <= src.nvec and b + n <= ctx.acc_depth:
            src.loaded = True
            return LoadOp(src, offset, b, 1, n, n, _NO_PAD)
    dst, src = _view(dst, "dst"), _tensor(src, "src")
    if src.bits != ctx.acc_width:
        raise ArgError(f"tensor '{src.name}' is {src.dtype}, but LOAD moves {ctx.cfg.acc_width}-bit accumulator "
                       f"vectors (inputs must be int{ctx.cfg.acc_width})", src.name)
    if pad == _NO_PAD:
        pad4 = _NO_PAD
    else:
        if len(pad) != 4:
            raise ArgError("pad must be (top, bottom, left, right)", "pad")
        pad4 = tuple(_int(p, "pad", 0, _PAD_MAX, "pad") for p in pad)
    offset, rows, cols, stride = _tile(ctx, src, dst, offset, rows, cols, stride, any(pad4))
    _check_dram(src, offset, rows, cols, stride, "reads")
    op = LoadOp(src, offset, dst.base, rows, cols, stride, pad4)  # type: ignore[arg-type]
    if rows * cols:
        _check_sram(ctx, dst, dst.base, dst.base + op.sram_vectors - 1, "dst")
    src.loaded = True
    return op


@implements("load", "python")
def _load_python(ctx: Any, op: LoadOp) -> None:
    rows, cols = op.rows, op.cols
    if rows * cols == 0:
        return
    acc, data, b, o = ctx.acc, op.tensor.data, op.sram_base, op.offset
    pad = op.pad
    if pad is _NO_PAD or pad == _NO_PAD:
        if rows == 1 or op.stride == cols:
            n = rows * cols
            acc[b:b + n] = data[o:o + n]
            return
        y0 = y1 = x0 = x1 = 0
    else:
        y0, y1, x0, x1 = pad
    idx = o + np.arange(rows)[:, None] * op.stride + np.arange(cols)[None, :]
    tile = np.zeros((y0 + rows + y1, x0 + cols + x1) + acc.shape[1:], dtype=acc.dtype)
    tile[y0:y0 + rows, x0:x0 + cols] = data[idx]
    acc[b:b + op.sram_vectors] = tile.reshape((-1,) + acc.shape[1:])


@implements("load", "lower")
def _load_lower(ctx: Any, op: LoadOp) -> None:
    ctx.record(op)


# ---- STORE ------------------------------------------------------------------------------
@intrinsic("store")
def store(ctx: Context, dst: Tensor, src: AccView, offset: int = 0, rows: int = 1, cols: int | None = None,
          stride: int | None = None) -> StoreOp:
    """Copy ``rows`` x ``cols`` accumulator vectors from ``src`` (contiguous) to DRAM tensor
    ``dst`` (row r at vector ``offset + r*stride``), narrowing each lane like a C cast."""
    if (type(dst) is Tensor and type(src) is AccView and rows == 1 and cols is None and stride is None
            and dst.bits == ctx.out_width):
        # the common whole-view form (one row): the checks below, inlined
        n, b = src.length, src.base
        if type(n) is int and type(b) is int and type(offset) is int and 0 <= n <= _SIZE_MAX and b >= 0 \
                and 0 <= offset <= _OFFSET_MAX and offset + n <= dst.nvec and b + n <= ctx.acc_depth:
            dst.stored = True
            return StoreOp(dst, offset, b, 1, n, n)
    dst, src = _tensor(dst, "dst"), _view(src, "src")
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
def _store_python(ctx: Any, op: StoreOp) -> None:
    rows, cols = op.rows, op.cols
    n = rows * cols
    if n == 0:
        return
    acc, data, b, o = ctx.acc, op.tensor.data, op.sram_base, op.offset
    if rows == 1 or op.stride == cols:
        np.copyto(data[o:o + n], acc[b:b + n], casting="unsafe")  # int32 -> intN wraps like a C cast
        return
    idx = o + np.arange(rows)[:, None] * op.stride + np.arange(cols)[None, :]
    data[idx] = acc[b:b + n].reshape((rows, cols) + acc.shape[1:]).astype(data.dtype)


@implements("store", "lower")
def _store_lower(ctx: Any, op: StoreOp) -> None:
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
            io, ii = 1, dst.length
        else:
            io, ii = iters
        io = _int(io, "iters", 0, _ITER_MAX, "iters")
        ii = _int(ii, "iters", 0, _ITER_MAX, "iters")
        dfo, dfi = dst_factors or (0, 1)
        dfo = _int(dfo, "dst_factors", 0, fmax, "dst_factors")
        dfi = _int(dfi, "dst_factors", 0, fmax, "dst_factors")
        if isinstance(src, AccView):
            if src_factors is None:
                src_factors = (0, 0) if (src.length == 1 and io * ii > 1) else (dfo, dfi)
            sfo, sfi = src_factors
            sfo = _int(sfo, "src_factors", 0, fmax, "src_factors")
            sfi = _int(sfi, "src_factors", 0, fmax, "src_factors")
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


def _alu_python(opname: str) -> Callable[[Any, AluOp], None]:
    """The Python half of an ALU op: the shared numpy engine (whole-tile unless a write feeds a later read)."""

    def run(ctx: Any, op: AluOp) -> None:
        run_alu_loop(ctx.acc, opname, op.dst_base, op.src_base, op.iter_out, op.iter_in, op.dst_factor_out,
                     op.dst_factor_in, op.src_factor_out, op.src_factor_in, op.imm, getattr(ctx, "filled", None))

    return run


def _alu_lower(ctx: Any, op: AluOp) -> None:
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


# ---- SYNC -------------------------------------------------------------------------------
@intrinsic("sync")
def sync(ctx: Context) -> SyncOp:
    """Explicit barrier: every earlier operation completes before any later one starts."""
    return SyncOp()


@implements("sync", "python")
def _sync_python(ctx: Any, op: SyncOp) -> None:
    return None  # the golden path is sequential already


@implements("sync", "lower")
def _sync_lower(ctx: Any, op: SyncOp) -> None:
    ctx.record(op)
