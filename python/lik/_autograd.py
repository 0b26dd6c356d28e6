"""Training (torch): autograd + torch.compile support, packed / varlen layouts.

Everything here goes through real ``torch.library.custom_op`` operators
(namespace ``lik``) with ``register_fake`` and ``register_autograd``:

* ``lik::maxsim_fwd`` / ``lik::maxsim_bwd``   — padded cross / KD / pairs
  (C: ``lik_maxsim``, ``lik_maxsim_pairs`` and their ``*_backward``),
* ``lik::packed_fwd`` / ``lik::packed_bwd``   — varlen cross product and pair
  lists over packed ``[total, d]`` tensors (C: ``lik_maxsim_varlen``,
  ``lik_score_pairs_packed`` and their ``*_backward``).

so ``lik.maxsim`` and friends work eagerly and under
``torch.compile(fullgraph=True)`` with autograd and no graph break.

Rules (see docs/training.md):

* The forward saves the int32 argmax only when a gradient will be needed
  (grad mode on and an input requires grad); ``no_grad`` / ``inference_mode``
  skip it.
* Scores are float32; for float64 inputs they are float64 (the C call runs in
  double and returns F64 scores), so ``torch.autograd.gradcheck`` works.
* Gradients come back in the input dtype, masked tokens get exactly zero,
  and every ``backward=`` strategy is deterministic: bitwise independent of
  the thread count on the CPU, bitwise equal run to run on CUDA (the C calls
  run on the current torch stream: graph capturable).
* Double backward is not supported (the backward is not itself
  differentiable).

The C calls go through the package's private ctypes layer (:mod:`lik._lib`),
their options through its one builder (:func:`lik._lib.call_options`: the
torch stream and fp32 precision, as every other call of the package).
"""

from __future__ import annotations

import ctypes
from typing import Optional

import torch

from . import _lib

__all__ = ["maxsim_varlen", "score_pairs_packed"]


# ---- ctypes declarations of the training calls -------------------------------

_PT = ctypes.POINTER(_lib.LikTensor)
_PO = ctypes.POINTER(_lib.LikOptions)
_L = _lib.lib
for _name, _n_before in (
    ("lik_maxsim_backward", 6),
    ("lik_maxsim_pairs_backward", 6),
    ("lik_maxsim_varlen", 6),
    ("lik_maxsim_varlen_backward", 8),
    ("lik_score_pairs_packed", 8),
    ("lik_score_pairs_packed_backward", 10),
):
    _f = getattr(_L, _name)
    _f.restype = ctypes.c_int
    _f.argtypes = [_PT] * _n_before + [_PO, _PT, _PT]


def _call(fn, tensors, opts, outs):
    """fn(*tensors, &opts, *outs) with lik_tensor views; raises on failure."""
    keep = [_lib.view(x) for x in list(tensors) + list(outs)]
    ptrs = [ctypes.byref(t) if t is not None else None for _, t in keep]
    n = len(tensors)
    _lib.check(fn(*ptrs[:n], ctypes.byref(opts), *ptrs[n:]))
    del keep


def _score_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _grid(Q: torch.Tensor, D: torch.Tensor, layout: int) -> list:
    if layout == 1:  # pairs
        return [Q.shape[0]]
    if D.dim() == 4:
        return [D.shape[0], D.shape[1]]
    g = []
    if Q.dim() == 3:
        g.append(Q.shape[0])
    if D.dim() == 3:
        g.append(D.shape[0])
    return g


# ---- padded layouts: ops ------------------------------------------------------------


def _maxsim_fwd_impl(
    Q: torch.Tensor,
    D: torch.Tensor,
    q_mask: Optional[torch.Tensor],
    d_mask: Optional[torch.Tensor],
    normalize: bool,
    layout: int,
    backward: str,
    save_argmax: bool,
    q_lengths: Optional[torch.Tensor] = None,
    d_lengths: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    scores, argmax = _maxsim_fwd_eager(Q, D, q_mask, d_mask, normalize, layout, save_argmax, q_lengths, d_lengths)
    if argmax is None:  # a custom op returns tensors
        argmax = Q.new_empty(0, dtype=torch.int32)
    return scores, argmax


def _maxsim_fwd_eager(Q, D, q_mask, d_mask, normalize: bool, layout: int, save_argmax: bool, q_lengths=None,
                      d_lengths=None):
    """The C call of ``lik::maxsim_fwd``: (scores, argmax or None)."""
    grid = _grid(Q, D, layout)
    scores = Q.new_empty(grid, dtype=_score_dtype(Q))
    argmax = Q.new_empty(grid + [Q.shape[-2]], dtype=torch.int32) if save_argmax else None
    call = _lib.call_maxsim_pairs if layout == 1 else _lib.call_maxsim
    call(Q, D, q_mask, d_mask, scores, argmax, normalize=normalize, q_lengths=q_lengths, d_lengths=d_lengths)
    return scores, argmax


_maxsim_fwd = torch.library.custom_op("lik::maxsim_fwd", mutates_args=())(_maxsim_fwd_impl)


@_maxsim_fwd.register_fake
def _(Q, D, q_mask, d_mask, normalize, layout, backward, save_argmax, q_lengths=None, d_lengths=None):
    grid = _grid(Q, D, layout)
    scores = Q.new_empty(grid, dtype=_score_dtype(Q))
    argmax = Q.new_empty(grid + [Q.shape[-2]] if save_argmax else [0], dtype=torch.int32)
    return scores, argmax


def _grad_buffers(Q, D, need_q, need_d):
    """Uninitialised gradients like Q / D (None where not needed: the C call skips them)."""
    gQ = torch.empty(Q.shape, dtype=Q.dtype, device=Q.device) if need_q else None
    gD = torch.empty(D.shape, dtype=D.dtype, device=D.device) if need_d else None
    return gQ, gD


def _grads_or_empty(Q, D, gQ, gD):
    """Custom ops return tensors: an empty one stands for a skipped gradient."""
    return (gQ if gQ is not None else Q.new_empty(0)), (gD if gD is not None else D.new_empty(0))


@torch.library.custom_op("lik::maxsim_bwd", mutates_args=())
def _maxsim_bwd(
    grad: torch.Tensor,
    Q: torch.Tensor,
    D: torch.Tensor,
    q_mask: Optional[torch.Tensor],
    d_mask: Optional[torch.Tensor],
    argmax: torch.Tensor,
    normalize: bool,
    layout: int,
    backward: str,
    need_q: bool,
    need_d: bool,
    q_lengths: Optional[torch.Tensor] = None,
    d_lengths: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    gQ, gD = _grad_buffers(Q, D, need_q, need_d)
    fn = _L.lik_maxsim_pairs_backward if layout == 1 else _L.lik_maxsim_backward
    opts = _lib.call_options(Q, normalize=normalize, backward=backward, q_lengths=q_lengths, d_lengths=d_lengths)
    _call(fn, (Q, D, q_mask, d_mask, argmax, grad), opts, (gQ, gD))
    return _grads_or_empty(Q, D, gQ, gD)


@_maxsim_bwd.register_fake
def _(grad, Q, D, q_mask, d_mask, argmax, normalize, layout, backward, need_q, need_d, q_lengths=None,
      d_lengths=None):
    gQ = Q.new_empty(Q.shape) if need_q else Q.new_empty(0)
    gD = D.new_empty(D.shape) if need_d else D.new_empty(0)
    return gQ, gD


def _maxsim_setup(ctx, inputs, output):
    Q, D, q_mask, d_mask, normalize, layout, backward, save_argmax, q_lengths, d_lengths = inputs
    ctx.save_for_backward(Q, D, q_mask, d_mask, q_lengths, d_lengths, output[1])
    ctx.normalize, ctx.layout, ctx.strategy, ctx.saved_argmax = normalize, layout, backward, save_argmax
    # the argmax output has no gradient: not a zero tensor of its size (17 MB on a 64 x 64 x 1030 step)
    ctx.set_materialize_grads(False)


def _maxsim_backward(ctx, grad_scores, grad_argmax):
    if grad_scores is None:  # the scores took no part in the loss
        return (None,) * 10
    if not ctx.saved_argmax:
        raise RuntimeError("lik: this forward ran without saving the argmax (no input required grad)")
    Q, D, q_mask, d_mask, q_lengths, d_lengths, argmax = ctx.saved_tensors
    need_q, need_d = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    gQ, gD = torch.ops.lik.maxsim_bwd(
        grad_scores, Q, D, q_mask, d_mask, argmax, ctx.normalize, ctx.layout, ctx.strategy, need_q, need_d,
        q_lengths, d_lengths,
    )
    return (gQ if need_q else None), (gD if need_d else None), *([None] * 8)


_maxsim_fwd.register_autograd(_maxsim_backward, setup_context=_maxsim_setup)


class _MaxSimEager(torch.autograd.Function):
    """The same forward, setup and backward as ``lik::maxsim_fwd`` for eager
    calls that need a gradient: an autograd.Function costs a few µs a call
    where the custom op's dispatch costs ~25 µs (bench/host_cost.py).  Under
    torch.compile the custom op runs (:func:`_maxsim_scores`)."""

    @staticmethod
    def forward(ctx, Q, D, q_mask, d_mask, normalize, layout, backward, save_argmax, q_lengths, d_lengths):
        args = (Q, D, q_mask, d_mask, normalize, layout, backward, save_argmax, q_lengths, d_lengths)
        out = _maxsim_fwd_impl(*args)
        ctx.mark_non_differentiable(out[1])
        _maxsim_setup(ctx, args, out)
        return out

    @staticmethod
    def backward(ctx, grad_scores, grad_argmax):
        return _maxsim_backward(ctx, grad_scores, grad_argmax)


def _maxsim_scores(Q, D, q_mask, d_mask, normalize: bool, layout: int, backward: str, q_lengths=None,
                   d_lengths=None) -> torch.Tensor:
    """Scores of the padded layouts: the custom op under torch.compile, else
    the autograd.Function when a gradient is needed, else the C call alone."""
    grad = _needs_grad(Q, D)
    args = (Q, D, q_mask, d_mask, normalize, layout, backward)
    if torch.compiler.is_compiling():
        return torch.ops.lik.maxsim_fwd(*args, grad, q_lengths, d_lengths)[0]
    if grad:
        return _MaxSimEager.apply(*args, True, q_lengths, d_lengths)[0]
    return _maxsim_fwd_eager(Q, D, q_mask, d_mask, normalize, layout, False, q_lengths, d_lengths)[0]


# ---- packed layouts: ops --------------------------------------------------------------


def _packed_grid(cu_q, cu_d, pair_q) -> list:
    if pair_q is not None:
        return [pair_q.shape[0]]
    # (a malformed cu_seqlens gives a 0 here; the C call reports it)
    return [max(cu_q.shape[0] - 1, 0) if cu_q.dim() else 0, max(cu_d.shape[0] - 1, 0) if cu_d.dim() else 0]


@torch.library.custom_op("lik::packed_fwd", mutates_args=())
def _packed_fwd(
    Q: torch.Tensor,
    D: torch.Tensor,
    cu_q: torch.Tensor,
    cu_d: torch.Tensor,
    pair_q: Optional[torch.Tensor],
    pair_d: Optional[torch.Tensor],
    q_mask: Optional[torch.Tensor],
    d_mask: Optional[torch.Tensor],
    max_lq: int,
    normalize: bool,
    backward: str,
    save_argmax: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    grid = _packed_grid(cu_q, cu_d, pair_q)
    scores = torch.empty(grid, dtype=_score_dtype(Q), device=Q.device)
    argmax = torch.empty(grid + [max_lq], dtype=torch.int32, device=Q.device) if save_argmax else None
    opts = _lib.call_options(Q, normalize=normalize, max_seqlen_q=max_lq)
    if pair_q is None:
        _call(_L.lik_maxsim_varlen, (Q, D, cu_q, cu_d, q_mask, d_mask), opts, (scores, argmax))
    else:
        _call(_L.lik_score_pairs_packed, (Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask), opts, (scores, argmax))
    if not save_argmax:
        argmax = torch.empty(0, dtype=torch.int32, device=Q.device)
    return scores, argmax


@_packed_fwd.register_fake
def _(Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, max_lq, normalize, backward, save_argmax):
    grid = _packed_grid(cu_q, cu_d, pair_q)
    scores = Q.new_empty(grid, dtype=_score_dtype(Q))
    argmax = Q.new_empty(grid + [max_lq] if save_argmax else [0], dtype=torch.int32)
    return scores, argmax


@torch.library.custom_op("lik::packed_bwd", mutates_args=())
def _packed_bwd(
    grad: torch.Tensor,
    Q: torch.Tensor,
    D: torch.Tensor,
    cu_q: torch.Tensor,
    cu_d: torch.Tensor,
    pair_q: Optional[torch.Tensor],
    pair_d: Optional[torch.Tensor],
    q_mask: Optional[torch.Tensor],
    d_mask: Optional[torch.Tensor],
    argmax: torch.Tensor,
    normalize: bool,
    backward: str,
    need_q: bool,
    need_d: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    gQ, gD = _grad_buffers(Q, D, need_q, need_d)
    opts = _lib.call_options(Q, normalize=normalize, backward=backward)
    if pair_q is None:
        _call(_L.lik_maxsim_varlen_backward, (Q, D, cu_q, cu_d, q_mask, d_mask, argmax, grad), opts, (gQ, gD))
    else:
        _call(
            _L.lik_score_pairs_packed_backward,
            (Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, argmax, grad),
            opts,
            (gQ, gD),
        )
    return _grads_or_empty(Q, D, gQ, gD)


@_packed_bwd.register_fake
def _(grad, Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, argmax, normalize, backward, need_q, need_d):
    gQ = Q.new_empty(Q.shape) if need_q else Q.new_empty(0)
    gD = D.new_empty(D.shape) if need_d else D.new_empty(0)
    return gQ, gD


def _packed_setup(ctx, inputs, output):
    Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, max_lq, normalize, backward, save_argmax = inputs
    ctx.save_for_backward(Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, output[1])
    ctx.normalize, ctx.strategy, ctx.saved_argmax = normalize, backward, save_argmax
    ctx.set_materialize_grads(False)  # as _maxsim_setup


def _packed_backward(ctx, grad_scores, grad_argmax):
    if grad_scores is None:
        return (None,) * 12
    Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, argmax = ctx.saved_tensors
    if not ctx.saved_argmax:
        raise RuntimeError("lik: this forward ran without saving the argmax (no input required grad)")
    need_q, need_d = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    gQ, gD = torch.ops.lik.packed_bwd(
        grad_scores, Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask, argmax, ctx.normalize, ctx.strategy,
        need_q, need_d,
    )
    return (gQ if need_q else None), (gD if need_d else None), *([None] * 10)


_packed_fwd.register_autograd(_packed_backward, setup_context=_packed_setup)


# ---- public functions -----------------------------------------------------------------


def _needs_grad(*xs) -> bool:
    return torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in xs)


def _check_torch(name, x, *, optional=False):
    if x is None and optional:
        return
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch tensor, got {type(x).__name__}")


def _max_len(cu: torch.Tensor) -> int:
    """The longest sequence of cu_seqlens (0 where its shape or dtype is wrong: the C library's error)."""
    if cu.dim() != 1 or cu.shape[0] < 2 or cu.dtype not in (torch.int32, torch.int64):
        return 0
    return max(int((cu[1:] - cu[:-1]).max()), 0)


def _check_max_seqlen(value, name: str = "max_seqlen_q"):
    """A max_seqlen argument as given: None or an int in [0, 2**62]."""
    return None if value is None else _lib.int_arg(value, name, 0, 2**62)


def _packed_args(Q, D, cu_q, cu_d, q_mask, d_mask):
    for name, x, opt in (
        ("Q_packed", Q, False),
        ("D_packed", D, False),
        ("cu_seqlens_q", cu_q, False),
        ("cu_seqlens_d", cu_d, False),
        ("q_mask", q_mask, True),
        ("d_mask", d_mask, True),
    ):
        _check_torch(name, x, optional=opt)
        if x is not None:
            _lib.check_array(x, name)


def _cu_values(Q, D, cu_q, cu_d, max_seqlen_q=None, max_seqlen_d=None):
    """Values of cu_seqlens (lik.h's rules) and given bounds max_seqlen_q /
    max_seqlen_d > 0, on a host copy: (Nq, Nd, longest query), or None where
    a dtype or shape is wrong (left to the C library's error)."""
    if Q.dim() != 2 or D.dim() != 2:
        return None
    out = []
    for name, cu, rows, what in (("cu_seqlens_q", cu_q, Q.shape[0], "Q rows"),
                                 ("cu_seqlens_d", cu_d, D.shape[0], "D rows")):
        if cu.dtype not in (torch.int32, torch.int64) or cu.dim() != 1 or cu.numel() == 0:
            return None
        c = cu.detach().cpu().long()
        if int(c[0]) != 0:
            raise ValueError(f"{name}: must start at 0, got {int(c[0])}")
        if c.numel() > 1 and bool((c[1:] < c[:-1]).any()):
            raise ValueError(f"{name}: must be non-decreasing")
        if int(c[-1]) != rows:
            raise ValueError(f"{name}: last entry {int(c[-1])} does not equal {what}={rows}")
        out.append(c)
    lq, ld = _max_len(out[0]), _max_len(out[1])
    for name, bound, longest, what in (("max_seqlen_q", max_seqlen_q, lq, "query (%d tokens in cu_seqlens_q)"),
                                       ("max_seqlen_d", max_seqlen_d, ld, "document (%d tokens in cu_seqlens_d)")):
        if bound and bound < longest:
            raise ValueError(f"{name}: {bound} is shorter than the longest " + what % longest)
    return out[0].numel() - 1, out[1].numel() - 1, lq


def _check_index_values(Q, D, cu_q, cu_d, pair_q=None, pair_d=None, max_seqlen_q=None, max_seqlen_d=None) -> int:
    """The host check of a packed call on CUDA tensors, where the C library
    cannot read cu_seqlens and pair indices without a sync: _cu_values, then
    the pair indices.  Returns the longest query (0 where left to C)."""
    r = _cu_values(Q, D, cu_q, cu_d, max_seqlen_q, max_seqlen_d)
    if r is None:
        return 0
    nq, nd, longest = r
    for name, idx, n, what in (("pair_q_idx", pair_q, nq, "Nq"), ("pair_d_idx", pair_d, nd, "Nd")):
        if idx is None or idx.dim() != 1:
            continue
        bad = ((idx < 0) | (idx >= n)).nonzero()
        if bad.numel():
            p = int(bad[0, 0])
            raise ValueError(f"{name}: entry {p} = {int(idx[p])} is outside [0, {what}={n})")
    return longest


def _packed_width(Q, D, cu_q, cu_d, pair_q, pair_d, max_seqlen_q, max_seqlen_d, validate: bool) -> int:
    """The Lq bound of a packed call: the saved argmax's last dimension and,
    on CUDA, the kernel's query blocks (lik_options.max_seqlen_q).

    A given max_seqlen_q (> 0) is the bound as given, capped at Q's rows (no
    query is longer), on every device and every way of running the call
    (eager, captured in a CUDA graph, compiled): they all run the same
    kernels and give the same bits.  Without it: the longest query read
    from cu_seqlens_q (on CUDA one host copy, one sync), or Q's rows where
    nothing can be read (:func:`lik._lib.can_read_back`: CUDA graph capture,
    torch.compile).

    The values read are checked (cu_seqlens, given bounds; pair indices on
    CUDA, the C library checks them on the CPU): always for CPU tensors,
    for CUDA tensors with ``validate`` (one copy, one sync), never where
    nothing can be read."""
    rows = Q.shape[0] if Q.dim() == 2 else 0
    bound = min(max_seqlen_q, rows) if max_seqlen_q else None
    if not _lib.can_read_back(Q):
        return rows if bound is None else bound
    if Q.device.type != "cuda":
        r = _cu_values(Q, D, cu_q, cu_d, max_seqlen_q, max_seqlen_d)
        longest = r[2] if r else 0
    elif validate:
        longest = _check_index_values(Q, D, cu_q, cu_d, pair_q, pair_d, max_seqlen_q, max_seqlen_d)
    else:  # unchecked: the longest query is read only where no bound is given
        longest = min(_max_len(cu_q), rows) if bound is None else 0
    return longest if bound is None else bound


def _packed_scores(Q, D, cu_q, cu_d, pair_q, pair_d, max_seqlen_q, max_seqlen_d, q_mask, d_mask,
                   normalize, backward, validate):
    """Checks and runs the packed forward op: maxsim_varlen (no pairs) or
    score_pairs_packed."""
    backward = _lib.check_backward(backward)
    _packed_args(Q, D, cu_q, cu_d, q_mask, d_mask)
    if pair_q is not None:
        for name, x in (("pair_q_idx", pair_q), ("pair_d_idx", pair_d)):
            _check_torch(name, x)
            _lib.check_array(x, name)
    width = _packed_width(Q, D, cu_q, cu_d, pair_q, pair_d, _check_max_seqlen(max_seqlen_q),
                          _check_max_seqlen(max_seqlen_d, "max_seqlen_d"), _lib.flag(validate, "validate"))
    scores, _ = torch.ops.lik.packed_fwd(
        Q, D, cu_q, cu_d, pair_q, pair_d, q_mask, d_mask,
        int(width), _lib.flag(normalize, "normalize"), backward, _needs_grad(Q, D),
    )
    return scores


def maxsim_varlen(
    Q_packed,
    D_packed,
    cu_seqlens_q,
    cu_seqlens_d,
    max_seqlen_q: int | None = None,
    max_seqlen_d: int | None = None,
    *,
    q_mask=None,
    d_mask=None,
    normalize: bool = False,
    backward: str = "auto",
    validate: bool = True,
):
    """MaxSim of every (query, document) pair of two packed batches -> ``[Nq, Nd]``.

    FlashAttention's convention (the seed's ``maxsim_varlen``): query ``i`` is
    ``Q_packed[cu_seqlens_q[i]:cu_seqlens_q[i+1]]``, document ``j`` likewise.

    On CUDA the kernels read ``cu_seqlens`` on the device.  The host reads
    them only to check them (``validate``) and, where ``max_seqlen_q`` is not
    given, for the longest query: one copy, one sync, and never while a CUDA
    graph is captured or torch.compile traces.  So the call (forward and
    backward) is capturable in a CUDA graph and traced by
    ``torch.compile(fullgraph=True)``; pass ``max_seqlen_q`` there, and the
    captured call gives the bits of the eager call with the same
    ``max_seqlen_q`` (docs/training.md, "Packed calls in CUDA graphs").

    Args:
        Q_packed: ``[total_q, d]`` float32 / float16 / bfloat16 / float64.
        D_packed: ``[total_d, d]``, same dtype, ``d`` and device.
        cu_seqlens_q: ``[Nq + 1]`` int32 or int64 on ``Q_packed``'s device:
            starts at 0, non-decreasing, last entry ``total_q`` (checked:
            ValueError; see ``validate``).
        cu_seqlens_d: ``[Nd + 1]`` likewise for ``D_packed``.
        max_seqlen_q: None (or 0: not given), or an int >= the longest query
            (FlashAttention's ``max_seqlen_q``).  It sizes the argmax saved
            for the backward (``[Nq, Nd, min(max_seqlen_q, total_q)]`` int32)
            and the CUDA kernel's query blocks: pass the longest query (a
            looser bound is correct and costs time and memory).  Not given:
            the longest query is read from ``cu_seqlens_q``, or, where
            nothing can be read (CUDA graph capture, torch.compile),
            ``total_q`` bounds it (correct; slower, and an argmax of
            ``[Nq, Nd, total_q]`` when a gradient is needed).  Shorter than
            the longest query: ValueError wherever ``cu_seqlens_q`` is
            checked (always on the CPU).  Unchecked on CUDA (``validate=False``,
            capture, compile) a bound shorter than a query is memory-safe
            and its results are undefined (the query's tokens past the bound
            may be left out of its scores and gradients).
        max_seqlen_d: None (or 0), or an int >= the longest document,
            checked as ``max_seqlen_q`` (ValueError); the kernels walk each
            document's own length and do not need it (the seed's argument).
        q_mask, d_mask: optional ``[total_q]`` / ``[total_d]`` bool/uint8
            token masks (beyond the seed); None: every packed token is valid
            (the sequences are their ``cu_seqlens`` ranges).
        normalize: per-token L2 normalisation in the kernel (beyond the seed).
        backward: ``"auto" | "unified" | "lowmem"``.
        validate: CUDA tensors: check ``cu_seqlens`` (the rules above), the
            bounds given and, for :func:`score_pairs_packed`, the pair
            indices on a host copy (one sync) before the call; False skips
            it, as does CUDA graph capture and torch.compile: the caller then
            guarantees those values, and malformed ``cu_seqlens`` or pair
            indices are undefined behaviour (the kernels would read out of
            bounds), as in FlashAttention.  CPU tensors are always checked
            (no copy needed).

    fp32 CUDA inputs follow ``torch.get_float32_matmul_precision()`` as
    :func:`lik.maxsim` does (``"high"`` / ``"medium"``: TF32 forward).

    Returns:
        ``[Nq, Nd]`` float32 (float64 for float64 inputs).  Empty or fully
        masked sequences score 0 and take no gradient.  Differentiable in
        ``Q_packed`` and ``D_packed``.

    Raises:
        TypeError: an argument is not a torch tensor, unsupported or
            mismatched dtypes, ``max_seqlen_*`` not an int, ``validate`` not
            a bool.
        ValueError: shapes, ``d`` mismatch, malformed ``cu_seqlens``, a
            ``max_seqlen_q`` / ``max_seqlen_d`` shorter than the longest
            query / document (where checked), an unknown ``backward``.
        lik.LikError (RuntimeError): allocation / CUDA failures.
    """
    return _packed_scores(Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, None, None, max_seqlen_q,
                          max_seqlen_d, q_mask, d_mask, normalize, backward, validate)


def score_pairs_packed(
    Q_packed,
    D_packed,
    cu_seqlens_q,
    cu_seqlens_d,
    pair_q_idx,
    pair_d_idx,
    max_seqlen_q: int | None = None,
    max_seqlen_d: int | None = None,
    *,
    q_mask=None,
    d_mask=None,
    normalize: bool = False,
    backward: str = "auto",
    validate: bool = True,
):
    """MaxSim of a list of (query, document) pairs of two packed batches ->
    ``[num_pairs]`` (the seed's ``score_pairs_packed``).

    ``scores[p] = MaxSim(query pair_q_idx[p], document pair_d_idx[p])``.
    On CUDA as :func:`maxsim_varlen`: capturable in a CUDA graph and traced
    by ``torch.compile(fullgraph=True)`` (pass ``max_seqlen_q`` there).

    Args:
        Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d: as :func:`maxsim_varlen`.
        pair_q_idx: ``[P]`` int32 or int64 on the inputs' device, entries in
            ``[0, Nq)`` (checked: ValueError naming the entry; on CUDA as
            ``cu_seqlens``, see ``validate``); pairs may repeat.
        pair_d_idx: ``[P]`` int32 or int64, entries in ``[0, Nd)``.
        max_seqlen_q, max_seqlen_d, q_mask, d_mask, normalize, backward,
            validate: as :func:`maxsim_varlen` (the saved argmax is
            ``[P, min(max_seqlen_q, total_q)]``).

    Returns:
        ``[P]`` float32 (float64 for float64 inputs), differentiable in
        ``Q_packed`` and ``D_packed``.

    Raises:
        TypeError, ValueError, lik.LikError: as :func:`maxsim_varlen`, and
            ValueError for a pair index out of range or pair lists of
            different lengths.
    """
    return _packed_scores(Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, pair_q_idx, pair_d_idx,
                          max_seqlen_q, max_seqlen_d, q_mask, d_mask, normalize, backward, validate)
