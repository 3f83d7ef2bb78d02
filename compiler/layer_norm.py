"""Integer layer normalization on the vector ALU, the reciprocal square root by CLZ and Newton steps.

The operator ``layer_norm`` takes int32 values ``A`` of shape ``(n, lanes)``: each lane is one token,
its ``n`` vectors the token's features (the layout of :mod:`compiler.softmax`: the ALU works lane by
lane, so a reduction over the features needs no cross-lane step). ``G`` and ``Bb`` (same shape, the host
repeats a feature's value over the lanes) are the scale and shift folded with gamma, beta and the
output scale (:func:`layer_norm_constants`). The definition, which :func:`layer_norm_reference`
restates in plain int64 numpy, is:

1. ``s = sum_j A_j``; ``d_j = n A_j - s``  (``n (x - mean)``, exact);
2. ``r = min(CLZ(max(max_j |d_j|, 1)) - (32 - T), eps_frac // 2)``, ``T = (30 - ceil(log2 n)) // 2``;
   ``d_j = SHR(d_j, -r)``  (a per-token normalization: the largest ``|d_j|`` just below ``2**T``, so
   the ``n`` squares sum below ``2**30`` and a token of small spread keeps its precision; ``r`` is
   negative, a right shift, for a wide one);
   ``V = max(sum_j d_j**2 + SHR(eps, eps_frac - 2r), 1)``  (``n**3 4**r (var + eps)`` in input units:
   ``eps`` holds the float eps times ``n**3 / in_scale**2`` in ``eps_frac`` fractional bits, below
   ``2**30``, so the cap on ``r`` keeps the term below ``2**30``);
3. ``k = CLZ(V)``; ``i = (k - 1) >> 1``; ``m = V << 2i`` in ``[2**29, 2**31)`` (``f = m / 2**31``
   in ``[1/4, 1)``);
4. ``y0 = Y0_A - MULHR(m, Y0_B)`` (``2.13 - 1.215 f`` in Q29, 8.7 % from ``1/sqrt(f)``), then three
   Newton steps ``y = MULHR(y, 3 * 2**29 - (MULHR(MULHR(y, y), m) << 2)) << 1`` (``y (3 - f y**2) / 2``;
   relative error below ``1e-7``, from below);
5. ``h_j = MULHR(d_j << (i + 15), y)`` ``= 2**28.5 d_j / sqrt(V)`` ``= 2**28.5 xhat_j / sqrt(n)``
   (``|d_j << i| < 2**15.5`` because ``d_j**2 <= V``: nothing overflows);
6. ``C_j = clip((MULHR(h_j, G_j) + Bb_j) >> shift, -128, 127)``.

CLZ is what makes step 3 three instructions (docs/microarch.md "Compute"); the Newton steps need only
MULHR, the shifts and an add.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from compiler import dsl as S
from compiler.ops import Operator, const_vector
from compiler.tensor import Tensor

Y0_A = round(2.13 * 2 ** 29)     # the linear start of 1/sqrt(f) on [1/4, 1), Q29
Y0_B = round(1.215 * 2 ** 29)
THREE_Q29 = 3 << 29
NEWTON_STEPS = 3
H_BITS = 28.5                    # h = 2**28.5 * xhat / sqrt(n)
MAX_N = 256
CONSTS = (Y0_A, Y0_B, THREE_Q29)
INT31 = 1 << 31


def rows_needed(n: int) -> int:
    """Accumulator vectors the kernel uses for a token of ``n`` features (four feature-long regions,
    eight one-vector temporaries, the constants and the eps vector)."""
    return 4 * n + 8 + len(CONSTS) + 1


def target_bits(n: int) -> int:
    """T: the normalized ``|d_j|`` stay below ``2**T`` so that ``n`` squares sum below ``2**30``."""
    return (30 - (n - 1).bit_length()) // 2


def _int_param(name: str, v: Any, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise S.error(name, f"{v!r} must be an integer {lo}..{hi}")
    return int(v)


@S.kernel
def layer_norm(A: Tensor, G: Tensor, Bb: Tensor, C: Tensor, n: int = 16, eps: int = 0, eps_frac: int = 0,
               shift: int = 16) -> None:
    """C = int8 layer norm of A over axis 0 (``n`` features per lane-token), scaled by G, shifted by Bb
    and ``shift`` (module docstring); ``eps`` and ``eps_frac`` as :func:`layer_norm_constants` gives them.
    ``|A|`` must stay below ``2**30 / n`` (the mean's ``n A`` is exact)."""
    cfg = S.config()
    n = _int_param("n", n, 1, MAX_N)
    eps = _int_param("eps", eps, 0, (1 << 30) - 1)
    eps_frac = _int_param("eps_frac", eps_frac, 0, 62)
    shift = _int_param("shift", shift, 0, 31)
    for t in (A, G, Bb, C):
        if tuple(t.shape) != (n, cfg.lanes):
            raise S.error(t.name, f"shape {tuple(t.shape)} is not (n, lanes) = ({n}, {cfg.lanes})")
    if rows_needed(n) > cfg.acc_depth:
        raise S.error("n", f"a token of {n} features needs {rows_needed(n)} accumulator vectors, the buffer "
                           f"has {cfg.acc_depth} on config '{cfg.name}'")
    for _ in S.core_range(1):  # several cores: the first does the one token group
        _tokens(n, eps, eps_frac, shift, A, G, Bb, C)


def _tokens(n: int, eps: int, eps_frac: int, shift: int, A: Tensor, G: Tensor, Bb: Tensor, C: Tensor) -> None:
    """The layer norm of one (n, lanes) token group, from A's DRAM to C's (module docstring steps)."""
    acc = S.acc
    norm_constants(n, eps)
    S.load(acc[0:n], A)
    S.load(acc[2 * n:3 * n], G)
    S.load(acc[3 * n:4 * n], Bb)
    norm_in_acc(n, eps_frac, shift)
    S.store(C, acc[0:n])


def norm_constants(n: int, eps: int) -> None:
    """Fill the accumulator vectors of :func:`norm_in_acc`'s constants (after its ``4n + 8`` working
    vectors)."""
    acc = S.acc
    for k, value in enumerate((*CONSTS, eps)):
        const_vector(acc[4 * n + 8 + k], value)


def norm_in_acc(n: int, eps_frac: int, shift: int) -> None:
    """Steps 1 to 6 of the module docstring in the accumulator: the tokens' features in ``acc[0:n]``
    (one token per lane), G in ``acc[2n:3n]``, Bb in ``acc[3n:4n]``, the constants set by
    :func:`norm_constants`; the int8 result replaces ``acc[0:n]``. Uses ``acc[0:rows_needed(n)]``."""
    acc = S.acc
    x, t = acc[0:n], acc[n:2 * n]
    g, b = acc[2 * n:3 * n], acc[3 * n:4 * n]
    s, v, i, m, y, p, r, e = (acc[4 * n + k] for k in range(8))
    y0a, y0b, three, epsv = (acc[4 * n + 8 + k] for k in range(4))
    # 1. d = n x - sum x
    S.mov(s, acc[0])
    if n > 1:
        S.add(s, acc[1:n], iters=(1, n - 1), dst_factors=(0, 0), src_factors=(0, 1))
    S.mul(x, n)
    S.sub(x, s)
    # 2. r from the largest |d|; d <<= r; V = max(sum d^2 + eps 4^r, 1)
    S.mov(t, x)
    S.mul(t, -1)
    S.max(t, x)
    S.mov(r, acc[n])
    if n > 1:
        S.max(r, acc[n + 1:2 * n], iters=(1, n - 1), dst_factors=(0, 0), src_factors=(0, 1))
    S.max(r, 1)
    S.clz(r, r)
    S.add(r, target_bits(n) - 32)
    S.min(r, eps_frac // 2)
    S.mov(p, r)
    S.mul(p, -1)
    S.shr(x, p)
    S.mov(e, epsv)
    S.mov(p, r)
    S.mul(p, -2)
    S.add(p, eps_frac)
    S.shr(e, p)
    S.mov(t, x)
    S.mul(t, x)
    S.mov(v, acc[n])
    if n > 1:
        S.add(v, acc[n + 1:2 * n], iters=(1, n - 1), dst_factors=(0, 0), src_factors=(0, 1))
    S.add(v, e)
    S.max(v, 1)
    # 3. i = (CLZ(V) - 1) >> 1; m = V << 2i
    S.clz(i, v)
    S.add(i, -1)
    S.shr(i, 1)
    S.mov(p, i)
    S.mul(p, -2)
    S.mov(m, v)
    S.shr(m, p)
    # 4. y = 1/sqrt(f) in Q29: linear start, Newton steps
    S.mov(y, m)
    S.mulhr(y, y0b)
    S.mul(y, -1)
    S.add(y, y0a)
    for _ in range(NEWTON_STEPS):
        S.mov(p, y)
        S.mulhr(p, y)
        S.mulhr(p, m)
        S.shr(p, -2)
        S.mul(p, -1)
        S.add(p, three)
        S.mulhr(y, p)      # y (3 - f y^2) in Q27, which is y_new in Q28
        S.shr(y, -1)
    # 5. h = MULHR(d << (i + 15), y)
    S.add(i, 15)
    S.mul(i, -1)
    S.shr(x, i)
    S.mulhr(x, y)
    # 6. C = clip((MULHR(h, G) + Bb) >> shift)
    S.mulhr(x, g)
    S.add(x, b)
    if shift:
        S.shr(x, shift)
    S.max(x, -128)
    S.min(x, 127)


def _mulhr(u: np.ndarray, v: np.ndarray | int) -> np.ndarray:
    """(u * v + 2**30) >> 31 on int64 operands whose product fits int64."""
    return (u * v + (1 << 30)) >> 31


def layer_norm_reference(A: np.ndarray, G: np.ndarray, Bb: np.ndarray, n: int = 16, eps: int = 0,
                         eps_frac: int = 0, shift: int = 16, **_: object) -> np.ndarray:
    """The integer layer norm of the module docstring in plain int64 numpy (no ALU engine): inputs flat
    or ``(n, lanes)``, the result ``(n * lanes,)`` int32."""
    x = np.asarray(A, dtype=np.int64).reshape(n, -1)
    gg = np.asarray(G, dtype=np.int64).reshape(n, -1)
    bb = np.asarray(Bb, dtype=np.int64).reshape(n, -1)
    d = n * x - x.sum(axis=0)
    widest = np.maximum(np.abs(d).max(axis=0), 1)
    top = (30 - (n - 1).bit_length()) // 2   # T: n squares below 2**(2T) sum below 2**30
    r = np.minimum([top - int(w).bit_length() for w in widest], eps_frac // 2)
    r = np.asarray(r, dtype=np.int64)
    d = np.where(r >= 0, d << np.maximum(r, 0), d >> np.maximum(-r, 0))
    amount = eps_frac - 2 * r     # >= 0: r is capped at eps_frac // 2
    eps_term = eps >> np.minimum(amount, 31)
    big_v = np.maximum((d * d).sum(axis=0) + eps_term, 1)
    half = np.array([(32 - int(w).bit_length() - 1) // 2 for w in big_v], dtype=np.int64)
    m = big_v << (2 * half)
    y = Y0_A - _mulhr(m, Y0_B)
    for _ in range(NEWTON_STEPS):
        y = _mulhr(y, THREE_Q29 - 4 * _mulhr(_mulhr(y, y), m)) * 2
    h = _mulhr(d << (half + 15), y)
    out = (_mulhr(h, gg) + bb) >> shift
    return np.clip(out, -128, 127).astype(np.int32).reshape(-1)


def layer_norm_constants(gamma: np.ndarray, beta: np.ndarray, in_scale: float, out_scale: float,
                         in_bound: int, eps: float = 1e-5) -> dict[str, Any]:
    """The kernel's parameters for a float layer norm ``(x - mean) / sqrt(var + eps) * gamma + beta`` of
    values ``x = A * in_scale`` with ``|A| <= in_bound``, quantized to ``C * out_scale``: ``eps``,
    ``eps_frac`` and ``shift`` (ints) and the per-feature ``G``, ``Bb`` (int64 ``(n,)``); raises ValueError when no
    shift keeps the multipliers in 31 bits."""
    gamma = np.asarray(gamma, dtype=np.float64).reshape(-1)
    beta = np.asarray(beta, dtype=np.float64).reshape(-1)
    n = len(gamma)
    if len(beta) != n or not 1 <= n <= MAX_N:
        raise ValueError(f"gamma and beta must have the same length 1..{MAX_N}, got {len(gamma)} and {len(beta)}")
    if in_scale <= 0 or out_scale <= 0 or in_bound < 1:
        raise ValueError("in_scale and out_scale must be positive and in_bound at least 1")
    if n * in_bound >= 1 << 30:
        raise ValueError(f"in_bound {in_bound} is too large for {n} features (n * |A| must stay below 2**30)")
    eps0 = n ** 3 * eps / in_scale ** 2     # eps in the units of sum (n A - sum A)**2
    eps_frac = 0
    while eps_frac < 62 and round(eps0 * 2.0 ** (eps_frac + 1)) < 1 << 30:
        eps_frac += 1
    eps_q = int(round(eps0 * 2.0 ** eps_frac))
    if eps_q >= 1 << 30:
        raise ValueError(f"eps {eps} is too large for in_scale {in_scale} and {n} features")
    mult = gamma * math.sqrt(n) / out_scale * 2.0 ** (31 - H_BITS)
    offset = beta / out_scale
    for shift in range(24, -1, -1):
        g = np.round(mult * 2.0 ** shift).astype(np.int64)
        bb = np.round(offset * 2.0 ** shift).astype(np.int64) + ((1 << shift) >> 1)
        if np.abs(g).max() < INT31 and np.abs(bb).max() < 1 << 30:
            return {"eps": eps_q, "eps_frac": eps_frac, "shift": shift, "G": g, "Bb": bb}
    raise ValueError("gamma / out_scale or beta / out_scale is too large for 31-bit multipliers")


def layer_norm_float(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """The real layer norm over axis 0 of ``x`` ``(n, tokens)`` (float64)."""
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(axis=0)
    var = ((x - mu) ** 2).mean(axis=0)
    return (x - mu) / np.sqrt(var + eps) * np.asarray(gamma)[:, None] + np.asarray(beta)[:, None]


LAYER_NORM = Operator("layer_norm", layer_norm, ("A", "G", "Bb"), "C", layer_norm_reference,
                      doc="C = int8 layer norm of A along axis 0 (mean, variance, 1/sqrt by CLZ and Newton "
                          "steps), scaled by G and shifted by Bb")
