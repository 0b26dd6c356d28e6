"""Public functions: :func:`maxsim`, :func:`maxsim_pairs`, :func:`retrieve`,
:class:`MaxSimScorer` -- the one definition of each (torch inputs reach the
autograd / torch.compile ops of :mod:`lik._autograd` from here).

Names, keywords and defaults follow the seed package late-interaction-kernels
(``maxsim`` / ``maxsim_pairs`` default ``normalize=False``; ``retrieve`` and
``MaxSimScorer`` default ``normalize=True``, the ColBERT / ColPali / LateOn
convention).  The score is ColBERT's MaxSim (Khattab & Zaharia 2020), with
PyLate's ``colbert_scores`` / ``colbert_scores_pairwise`` /
``colbert_kd_scores`` layouts::

    score[i, j] = sum_{s : q_mask[i, s]} max_{t : d_mask[j, t]} <Q[i, s], D[j, t]>

A masked document token loses the max as -inf (negative similarities are
honoured; NaN/Inf stored in masked tokens never reach a result); a query token
with no valid document token contributes 0.  A valid token's -inf similarity
is a max like any number (the query token then adds -inf); a NaN one never
wins (lik.h).

Inputs are numpy arrays or torch tensors (CPU, or CUDA where the library was
built with CUDA) and are passed to the C library as zero-copy views (any
strides).  numpy in -> numpy out; any torch input -> torch out.  torch
inputs are differentiable (``maxsim``, ``maxsim_pairs``); ``retrieve`` is
inference only.

Argument checking is the C library's: its messages (naming the argument and
the sizes) are raised as ValueError (shape, value, device) or TypeError
(dtype).  Python only rejects what the C API cannot express: a non-array
argument (TypeError), more than 4 dimensions (ValueError), a dtype with no
lik code (TypeError).
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Sequence

import numpy as np

from . import _lib

try:
    import torch as _torch
except ImportError:  # pragma: no cover - without torch
    _torch = _autograd = None
else:
    from . import _autograd  # the torch ops (autograd, torch.compile)

__all__ = ["maxsim", "maxsim_pairs", "retrieve", "MaxSimScorer"]


# ---- helpers ---------------------------------------------------------------------


def _prepare(names, arrays, optional):
    """Check arguments and decide the output kind.

    Returns (arrays, torch_mode): when any argument is a torch tensor the
    numpy ones are converted to torch (zero-copy where possible).
    """
    torch_mode = False
    for name, x, opt in zip(names, arrays, optional):
        _lib.check_array(x, name, optional=opt)
        torch_mode = torch_mode or isinstance(x, _lib._Tensor)
    if torch_mode:
        return [_lib.to_torch(x) for x in arrays], True
    return list(arrays), False


def _empty(shape, dtype: str, torch_mode: bool, like: Any):
    if torch_mode:
        import torch

        tdt = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "int32": torch.int32,
               "uint8": torch.uint8, "int8": torch.int8}[dtype]
        return torch.empty(shape, dtype=tdt, device=like.device)
    return np.empty(shape, dtype=dtype)


def _scores_shape(Q, D) -> tuple:
    """Output shape per lik.h; for ill-formed inputs any shape (C reports)."""
    if D.ndim == 4:  # KD layout [Nq, K, Ld, d] -> [Nq, K]
        return (D.shape[0], D.shape[1])
    shape = []
    if Q.ndim == 3:
        shape.append(Q.shape[0])
    if D.ndim == 3:
        shape.append(D.shape[0])
    return tuple(shape)


# ---- the one-time unnormalised-input warning ---------------------------------------

#: Set once the check below has run (whatever its outcome): later calls pay
#: one global read.  The check reads back a median (on CUDA a device -> host
#: copy, i.e. one sync), so it runs on the first eligible call only, never
#: under torch.compile tracing or CUDA-graph capture.
_norms_checked = False


def _warn_if_unnormalized(Q, torch_mode: bool) -> None:
    """Warn once per process when ``normalize=False`` scores tokens whose L2
    norms are far from 1: the median norm of Q's first 64 tokens outside
    [0.9, 1.1].  ColBERT / ColPali / LateOn score unit tokens, so raw encoder
    outputs give scores on another scale.  ``LIK_SUPPRESS_NORM_WARN=1``
    silences it."""
    global _norms_checked
    if os.environ.get("LIK_SUPPRESS_NORM_WARN", "0") == "1":
        _norms_checked = True
        return
    if Q.ndim < 2 or Q.shape[-1] == 0:
        return
    if torch_mode:
        if not _lib.can_read_back(Q):
            return
        sample = Q.detach().reshape(-1, Q.shape[-1])[:64]
        if sample.shape[0] == 0:
            return
        median = float(_torch.linalg.vector_norm(sample.float(), dim=-1).median())
    else:
        sample = np.asarray(Q).reshape(-1, Q.shape[-1])[:64]
        if sample.shape[0] == 0:
            return
        median = float(np.median(np.linalg.norm(sample.astype(np.float64), axis=-1)))
    _norms_checked = True
    if not 0.9 <= median <= 1.1:
        frame, level = sys._getframe(1), 2  # point at the first caller outside lik (lik.compat too)
        while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] == "lik":
            frame, level = frame.f_back, level + 1
        warnings.warn(
            f"lik: normalize=False, but the median L2 norm of Q's first tokens is {median:.3g} "
            "(ColBERT-style scoring expects unit tokens, norm 1): pass normalize=True to "
            "normalise inside the kernel, or normalise the inputs first. This warning is "
            "given once; set LIK_SUPPRESS_NORM_WARN=1 to silence it.",
            UserWarning,
            stacklevel=level,
        )


# ---- forward with argmax (for the training path) ---------------------------------------


def _forward(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False, pairs: bool = False,
             with_argmax: bool = False, q_lengths=None, d_lengths=None):
    """Forward of :func:`maxsim` (``pairs=False``) or :func:`maxsim_pairs`
    (``pairs=True``) through the C call alone (no autograd), optionally with
    the argmax lik.h describes.

    Returns ``(scores, argmax)``; ``argmax`` is None unless ``with_argmax``,
    else int32 of shape ``scores.shape + (Lq,)``: the winning document token
    per query token (lowest index on ties), -1 where the query token is
    masked or no document token is valid.  Same output kind as the inputs;
    scores float32, float64 for float64 torch inputs (as :func:`maxsim`).
    """
    (Q, D, q_mask, d_mask, q_lengths, d_lengths), tm = _prepare_padded(Q, D, q_mask, d_mask, q_lengths, d_lengths)
    return _run(Q, D, q_mask, d_mask, tm, _lib.flag(normalize, "normalize"), pairs, with_argmax, q_lengths, d_lengths)


def _prepare_padded(Q, D, q_mask, d_mask, q_lengths, d_lengths):
    """:func:`_prepare` of a padded call's arguments, lengths as int32."""
    return _prepare(
        ("Q", "D", "q_mask", "d_mask", "q_lengths", "d_lengths"),
        (Q, D, q_mask, d_mask, _lib.lengths_arg(q_lengths, "q_lengths"), _lib.lengths_arg(d_lengths, "d_lengths")),
        (False, False, True, True, True, True),
    )


def _run(Q, D, q_mask, d_mask, tm: bool, normalize: bool, pairs: bool, with_argmax: bool, q_lengths=None,
         d_lengths=None):
    """:func:`_forward` on prepared arguments."""
    if pairs:
        shape = (Q.shape[0] if Q.ndim >= 1 else 0,)
    else:
        shape = _scores_shape(Q, D)
    # one float64 rule for every forward (lik._autograd._score_dtype): float64
    # torch inputs give float64 scores; numpy and other dtypes float32
    f64 = tm and str(Q.dtype) == "torch.float64"
    scores = _empty(shape, "float64" if f64 else "float32", tm, Q)
    argmax = None
    if with_argmax:
        Lq = Q.shape[-2] if Q.ndim >= 2 else 0
        argmax = _empty(shape + (Lq,), "int32", tm, Q)
    call = _lib.call_maxsim_pairs if pairs else _lib.call_maxsim
    call(Q, D, q_mask, d_mask, scores, argmax, normalize=normalize, q_lengths=q_lengths, d_lengths=d_lengths)
    return scores, argmax


def _scores(Q, D, q_mask, d_mask, normalize, backward, pairs: bool, q_lengths=None, d_lengths=None):
    """maxsim / maxsim_pairs: torch tensors of a well-formed layout go through
    the autograd-aware path (:func:`lik._autograd._maxsim_scores`), anything
    else through the C call alone (which names what is wrong)."""
    backward = _lib.check_backward(backward)
    (Q, D, q_mask, d_mask, q_lengths, d_lengths), tm = _prepare_padded(Q, D, q_mask, d_mask, q_lengths, d_lengths)
    if pairs:
        layout_ok = Q.ndim == 3 and D.ndim == 3
    else:
        layout_ok = Q.ndim in (2, 3) and D.ndim in (2, 3, 4) and (D.ndim != 4 or Q.ndim == 3)
    if tm and _autograd is not None and layout_ok:
        out = _autograd._maxsim_scores(Q, D, q_mask, d_mask, _lib.flag(normalize, "normalize"), int(pairs), backward, q_lengths,
                                       d_lengths)
    else:
        out = _run(Q, D, q_mask, d_mask, tm, _lib.flag(normalize, "normalize"), pairs, False, q_lengths, d_lengths)[0]
    if not normalize and not _norms_checked:
        _warn_if_unnormalized(Q, tm)
    return out


# ---- maxsim ------------------------------------------------------------------------


def maxsim(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False, backward: str | None = "auto",
           q_lengths=None, d_lengths=None):
    """Fused MaxSim scores, cross-product or per-query-candidate (KD) layout;
    differentiable for torch inputs.

    ColBERT's late interaction (the seed's ``maxsim``; PyLate's
    ``colbert_scores`` and, with 4-D ``D``, ``colbert_kd_scores``)::

        score[i, j] = sum_s q_mask[i,s] * max_{t : d_mask[j,t]} <Q[i,s], D[j,t]>

    A masked document token never wins; a query token with no valid document
    token adds 0; a NaN similarity never wins, a -inf one does when nothing
    larger is valid (lik.h).  numpy inputs return numpy (inference only).
    torch inputs go through the ``lik::maxsim_fwd`` custom op: autograd flows
    into ``Q`` and ``D`` (masks are not differentiable) and
    ``torch.compile(fullgraph=True)`` traces it without a graph break.

    With ``normalize=False``, the first call whose ``Q`` tokens have a median
    L2 norm outside [0.9, 1.1] gives a one-time UserWarning (ColBERT-style
    models score unit tokens); ``LIK_SUPPRESS_NORM_WARN=1`` silences it.  The
    check runs once per process (on CUDA one device -> host copy, never under
    torch.compile or CUDA-graph capture); later calls pay one flag test.

    Args:
        Q: queries ``[Nq, Lq, d]``, or ``[Lq, d]`` for one query; float32,
            float16, float64 or torch.bfloat16; any strides.
        D: documents, same dtype and ``d`` as ``Q``: ``[Nd, Ld, d]`` (cross
            product), ``[Ld, d]`` (one document) or ``[Nq, K, Ld, d]`` (K
            candidates per query, KD layout; needs 3-D ``Q``).
        q_mask: optional ``[Nq, Lq]`` (``[Lq]`` for 2-D ``Q``), bool or uint8,
            True / nonzero = valid query token.  None (the default): every
            query token is valid, padding included -- each adds its max (a
            zero padding token adds 0; pass a mask or ``q_lengths`` for
            tokens that must not count).
        d_mask: optional ``[Nd, Ld]`` (``[Ld]``; ``[Nq, K, Ld]`` for KD), bool
            or uint8, True / nonzero = valid document token.  None: every
            document token is valid, padding included (a zero padding token
            takes part in the max with similarity 0, which wins when every
            real token's similarity is negative; a masked token never wins).
        normalize: L2-normalise every token, ``x / max(||x||, 1e-12)``, on both
            sides inside the kernel (cosine MaxSim).
        backward: ``"auto" | "unified" | "lowmem"`` (None = ``"auto"``), the
            backward strategy (lik.h ``lik_backward``).  All three are
            deterministic and give bitwise identical gradients; on the CPU
            they differ in memory and speed only, on CUDA they run the same
            kernels.
        q_lengths: optional integer ``[Nq]`` (0-d for 2-D ``Q``): query ``i``
            is its first ``q_lengths[i]`` tokens, each in ``[0, Lq]`` -- a
            prefix ``q_mask`` (both given: both apply).
        d_lengths: optional integer ``[Nd]`` (0-d for 2-D ``D``, ``[Nq, K]``
            for KD): document ``j`` is its first ``d_lengths[j]`` tokens, each
            in ``[0, Ld]``.  Padding given as lengths costs nothing on CUDA (a
            prefix ``d_mask`` is detected on the GPU and costs one small
            kernel).  fp32 CUDA inputs follow
            ``torch.get_float32_matmul_precision()``: ``"highest"`` keeps fp32
            accuracy (3xTF32), ``"high"`` / ``"medium"`` use TF32 (the
            backward keeps fp32 accuracy).

    Returns:
        Scores ``[Nq, Nd]`` (cross), ``[Nd]`` for 2-D ``Q``, ``[Nq]`` for 2-D
        ``D``, 0-d for both 2-D, ``[Nq, K]`` for KD: float32, float64 for
        float64 torch inputs.  Nq, Nd or K = 0 give an empty result, Lq = 0
        or Ld = 0 zeros.  numpy for numpy inputs, else torch on ``Q``'s device.

    Raises:
        TypeError: an argument is not a numpy array / torch tensor, a dtype is
            unsupported, Q and D dtypes differ, a mask is not bool / uint8,
            lengths are not integers.
        ValueError: wrong ndim, ``d`` or batch mismatch, mask or lengths shape
            mismatch, a length outside ``[0, L]`` (CPU; CUDA clamps), ``d`` or
            a sequence length beyond 2**31 - 1, tensors on different devices,
            an unknown ``backward``.
        lik.LikError (RuntimeError): allocation failure, CUDA tensors with a
            CPU-only build, CUDA runtime errors.
    """
    return _scores(Q, D, q_mask, d_mask, normalize, backward, False, q_lengths, d_lengths)


def maxsim_pairs(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False, backward: str | None = "auto",
                 q_lengths=None, d_lengths=None):
    """Paired MaxSim: one score per same-index pair ``(Q[b], D[b])``;
    differentiable for torch inputs.

    The seed's ``maxsim_pairs`` and PyLate's ``colbert_scores_pairwise`` (the
    K = 1 case of the KD layout)::

        score[b] = sum_s q_mask[b,s] * max_{t : d_mask[b,t]} <Q[b,s], D[b,t]>

    Semantics (masks, NaN, -inf), numpy / torch behaviour, autograd and the
    one-time unnormalised-input warning as :func:`maxsim`.

    Args:
        Q: ``[B, Lq, d]``; float32, float16, float64 or torch.bfloat16.
        D: ``[B, Ld, d]``, same dtype, ``B`` and ``d`` as ``Q``.
        q_mask: optional ``[B, Lq]`` bool or uint8 (True = valid token); None:
            every query token is valid, padding included (see :func:`maxsim`).
        d_mask: optional ``[B, Ld]`` bool or uint8 (True = valid token); None:
            every document token is valid, padding included.
        normalize: per-token L2 normalisation of both sides in the kernel.
        backward: ``"auto" | "unified" | "lowmem"`` or None (see :func:`maxsim`).
        q_lengths: optional integer ``[B]``, each in ``[0, Lq]`` (a prefix mask).
        d_lengths: optional integer ``[B]``, each in ``[0, Ld]`` (a prefix mask).

    Returns:
        ``[B]`` scores, float32 (float64 for float64 torch inputs); zeros for
        Lq = 0 or Ld = 0.  numpy for numpy inputs, else torch.

    Raises:
        TypeError: non-array argument, unsupported or mismatched dtype, mask
            not bool / uint8, lengths not integers.
        ValueError: Q or D not 3-D, ``B`` or ``d`` mismatch (the message says
            ``Q.shape[0] == D.shape[0]``), mask or lengths shape mismatch, a
            length outside ``[0, L]`` (CPU), a sequence length beyond
            2**31 - 1, different devices, an unknown ``backward``.
        lik.LikError (RuntimeError): allocation / CUDA failures.
    """
    return _scores(Q, D, q_mask, d_mask, normalize, backward, True, q_lengths, d_lengths)


# ---- retrieve ------------------------------------------------------------------------


def _pad_docs(docs: Sequence, d_masks, d_hint: int | None, dtype_like):
    """Pad a sequence of ``[Ld_j, d]`` documents into ``[Nd, max Ld, d]`` plus
    a ``[Nd, max Ld]`` bool mask (padding is masked out)."""
    docs = list(docs)
    for j, x in enumerate(docs):
        _lib.check_array(x, f"D[{j}]")
        if x.ndim != 2:
            raise ValueError(f"D[{j}]: a document of a list must be [Ld, d]; got shape {tuple(x.shape)}")
    if d_masks is not None:
        if _lib.is_array(d_masks) or not isinstance(d_masks, (list, tuple)):
            raise TypeError("d_mask: with D given as a list of documents, d_mask must be None or a list of [Ld] masks")
        d_masks = list(d_masks)
        if len(d_masks) != len(docs):
            raise ValueError(f"d_mask: {len(d_masks)} masks for {len(docs)} documents")
        for j, (m, x) in enumerate(zip(d_masks, docs)):
            _lib.check_array(m, f"d_mask[{j}]")
            if not _lib.is_mask(m):
                raise TypeError(f"d_mask[{j}]: dtype {_lib.dtype_name(m)} is not a mask dtype (bool or uint8)")
            if tuple(m.shape) != (x.shape[0],):
                raise ValueError(f"d_mask[{j}]: shape {tuple(m.shape)} does not match D[{j}]'s [Ld={x.shape[0]}]")
    torch_mode = any(_lib.is_torch(x) for x in docs) or (
        d_masks is not None and any(_lib.is_torch(m) for m in d_masks)
    ) or _lib.is_torch(dtype_like)
    if docs:
        dims = {int(x.shape[1]) for x in docs}
        if len(dims) > 1:
            raise ValueError(f"D: documents of a list must share d; got d in {sorted(dims)}")
        d = dims.pop()
    else:
        d = d_hint if d_hint is not None else 0
    Nd = len(docs)
    Lmax = max((int(x.shape[0]) for x in docs), default=0)
    if torch_mode:
        import torch

        docs = [_lib.to_torch(x) for x in docs]
        dt = docs[0].dtype if docs else getattr(dtype_like, "dtype", torch.float32)
        if not isinstance(dt, torch.dtype):
            dt = _lib.to_torch(np.empty(0, dtype=dt)).dtype
        dev = docs[0].device if docs else getattr(dtype_like, "device", "cpu")
        if any(x.dtype != dt for x in docs):
            raise TypeError(f"D: documents of a list must share one dtype; got {sorted({str(x.dtype) for x in docs})}")
        out = torch.zeros((Nd, Lmax, d), dtype=dt, device=dev)
        mask = torch.zeros((Nd, Lmax), dtype=torch.bool, device=dev)
        for j, x in enumerate(docs):
            n = x.shape[0]
            out[j, :n] = x.detach().to(dev)
            if d_masks is None:
                mask[j, :n] = True
            else:
                mask[j, :n] = _lib.to_torch(d_masks[j]).to(device=dev, dtype=torch.bool)
    else:
        dt = docs[0].dtype if docs else getattr(dtype_like, "dtype", np.float32)
        if any(x.dtype != dt for x in docs):
            raise TypeError(f"D: documents of a list must share one dtype; got {sorted({str(x.dtype) for x in docs})}")
        out = np.zeros((Nd, Lmax, d), dtype=dt)
        mask = np.zeros((Nd, Lmax), dtype=bool)
        for j, x in enumerate(docs):
            n = x.shape[0]
            out[j, :n] = x
            mask[j, :n] = True if d_masks is None else (np.asarray(d_masks[j]) != 0)
    return out, mask


def retrieve(
    Q,
    D,
    top_k: int,
    q_mask=None,
    d_mask=None,
    *,
    normalize: bool = True,
    chunk: int | None = None,
    largest: bool = True,
    sorted: bool = True,
):
    """Exact top-k documents per query by MaxSim (the seed's ``retrieve``).

    Equivalent to ``maxsim(Q, D, normalize=normalize)`` followed by a
    top-k per query (``torch.topk``'s ``largest``), ties ordered by lower
    document index first.  For ``largest=True`` the C library streams
    document blocks through per-query selection and never holds the
    ``[Nq, Nd]`` score matrix; ``largest=False`` (the k lowest scores) scores
    every document with :func:`maxsim` and sorts that matrix (``Nq * Nd``
    floats of memory).

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``; float32 / float16 / float64 /
            torch.bfloat16.
        D: ``[Nd, Ld, d]`` or ``[Ld, d]`` (same dtype as ``Q``), or a list /
            tuple of ``[Ld_j, d]`` documents of varying length (padded here
            into ``[Nd, max Ld_j, d]`` with the padding masked out; this is a
            copy).
        top_k: int >= 1; ``k = min(top_k, Nd)`` results are returned.
        q_mask: optional ``[Nq, Lq]`` (``[Lq]``) bool / uint8; None: every
            query token is valid, padding included (see :func:`maxsim`).
        d_mask: optional ``[Nd, Ld]`` (``[Ld]``) bool / uint8, or, with a list
            ``D``, a list of ``[Ld_j]`` masks; None: every document token is
            valid (a list ``D``: each document's own tokens).
        normalize: per-token L2 normalisation (default True, as the seed's
            ``retrieve``: ColBERT / ColPali cosine scoring).  fp32 CUDA
            inputs are scored under ``torch.get_float32_matmul_precision()``
            as :func:`maxsim` (``"high"`` / ``"medium"``: TF32).
        chunk: accepted for compatibility with the seed, which scores in
            document chunks to bound memory; lik always streams with bounded
            scratch, so the value is not needed and is ignored.
        largest: True (default): the k highest scores, descending; False:
            the k lowest, ascending.
        sorted: accepted for ``torch.topk`` compatibility; results are
            always sorted (a valid answer for ``sorted=False`` too).

    Returns:
        ``(scores, indices)``: float32 and int64, ``[Nq, k]`` (``[k]`` for a
        2-D ``Q``), scores descending (ascending for ``largest=False``).
        numpy for numpy inputs, torch if any input is a torch tensor.

    Raises:
        TypeError: non-array argument, ``top_k`` not an int, ``largest`` /
            ``sorted`` not a bool, unsupported or mismatched dtype, mask not
            bool/uint8.
        ValueError: ``top_k <= 0`` (the message says ``top_k must be
            positive``), wrong ndim (KD 4-D ``D`` is not accepted), d / mask shape mismatch, different devices.
        lik.LikError (RuntimeError): allocation / CUDA failures.
    """
    top_k = _lib.int_arg(top_k, "top_k", None, None)  # <= 0: the library's error; above int64: clamped
    largest, sorted = _lib.flag(largest, "largest"), _lib.flag(sorted, "sorted")
    if chunk is not None:
        _lib.int_arg(chunk, "chunk", None, None)  # accepted and ignored (the seed's argument)
    if isinstance(D, (list, tuple)):
        _lib.check_array(Q, "Q")
        D, d_mask = _pad_docs(D, d_mask, Q.shape[-1] if Q.ndim else None, Q)
    (Q, D, q_mask, d_mask), tm = _prepare(
        ("Q", "D", "q_mask", "d_mask"), (Q, D, q_mask, d_mask), (False, False, True, True)
    )
    Nd = D.shape[0] if D.ndim == 3 else (1 if D.ndim == 2 else 0)
    k = max(0, min(top_k, Nd))
    if not largest and top_k > 0:
        return _lowest(Q, D, q_mask, d_mask, k, tm, _lib.flag(normalize, "normalize"))
    shape = (Q.shape[0], k) if Q.ndim == 3 else (k,)
    scores = _empty(shape, "float32", tm, Q)
    indices = _empty(shape, "int64", tm, Q)
    top_k = min(top_k, 2**63 - 1)  # beyond int64 every document is returned anyway
    _lib.call_retrieve(Q, D, q_mask, d_mask, top_k, scores, indices, normalize=_lib.flag(normalize, "normalize"))
    return scores, indices


def _lowest(Q, D, q_mask, d_mask, k: int, tm: bool, normalize: bool):
    """retrieve(largest=False): the k lowest MaxSim scores per query,
    ascending, ties by lower document index (a stable sort of the scores)."""
    if D.ndim == 2:  # one document: score it as a batch of one
        D = D[None]
        d_mask = d_mask[None] if d_mask is not None else None
    scores = _run(Q, D, q_mask, d_mask, tm, normalize, False, False)[0]
    if tm:
        s, i = _torch.sort(scores, dim=-1, stable=True)
        return s[..., :k].contiguous(), i[..., :k].contiguous()
    i = np.argsort(scores, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(scores, i, axis=-1), i.astype(np.int64)


# ---- MaxSimScorer ------------------------------------------------------------------


class _ScorerBase:
    """Behaviour of :class:`MaxSimScorer`, shared by the torch.nn.Module and
    the plain-class variants."""

    def _setup(self, normalize: bool, backward: str, mask_pad_token: int | None) -> None:
        self.normalize = _lib.flag(normalize, "normalize")
        self.backward = _lib.check_backward(backward)
        self.mask_pad_token = mask_pad_token

    def extra_repr(self) -> str:
        return f"normalize={self.normalize}, backward={self.backward!r}, mask_pad_token={self.mask_pad_token!r}"

    def forward(self, Q, D, q_mask=None, d_mask=None):
        """MaxSim scores: ``lik.maxsim(Q, D, q_mask, d_mask,
        normalize=self.normalize, backward=self.backward)`` (autograd-aware
        for torch inputs).

        Shapes, dtypes, return value and exceptions as :func:`lik.maxsim`
        (cross ``[Nq, Nd]``, KD ``[Nq, K]``, 2-D squeezing).
        """
        return maxsim(Q, D, q_mask, d_mask, normalize=self.normalize, backward=self.backward)

    def score(self, Q, D, q_mask=None, d_mask=None):
        """Inference-only MaxSim (the seed's ``score``): :meth:`forward`
        without autograd (no saved argmax)."""
        with _torch.no_grad() if _torch is not None else contextlib.nullcontext():
            return maxsim(Q, D, q_mask, d_mask, normalize=self.normalize, backward=self.backward)

    def retrieve(self, Q, D, top_k: int, q_mask=None, d_mask=None, *, chunk: int | None = None):
        """``(scores, indices)`` top-k per query; see :func:`lik.retrieve`."""
        return retrieve(Q, D, top_k, q_mask, d_mask, normalize=self.normalize, chunk=chunk)

    def forward_with_ids(self, Q, D, q_ids, d_ids):
        """Like :meth:`forward` with masks ``q_ids != mask_pad_token`` and
        ``d_ids != mask_pad_token`` (token-id arrays ``[Nq, Lq]`` / ``[Nd, Ld]``).

        Raises:
            ValueError: ``mask_pad_token`` was not set on the scorer.
            TypeError: ``q_ids`` / ``d_ids`` not a numpy array or torch tensor.
        """
        if self.mask_pad_token is None:
            raise ValueError("forward_with_ids requires mask_pad_token set on the scorer")
        for name, ids in (("q_ids", q_ids), ("d_ids", d_ids)):
            if not _lib.is_array(ids):  # a list != pad would be one bool
                raise TypeError(f"{name}: expected a numpy array or torch tensor, got {type(ids).__name__}")
        return self.forward(Q, D, q_ids != self.mask_pad_token, d_ids != self.mask_pad_token)


_SCORER_DOC = """Stateless MaxSim scorer (the seed's ``MaxSimScorer``).

    A ``torch.nn.Module`` (no parameters) when torch is importable, else a
    plain callable class.  ``scorer(Q, D, q_mask=None, d_mask=None)`` returns
    :func:`lik.maxsim` scores with the scorer's ``normalize``.

    Args:
        normalize: per-token L2 normalisation (default True, the ColBERT /
            ColPali / LateOn convention of the seed).
        backward: ``"auto" | "unified" | "lowmem"`` (None = ``"auto"``), the
            backward strategy :meth:`forward` passes to :func:`lik.maxsim`
            (lik.h ``lik_backward``).
        mask_pad_token: optional pad-token id for :meth:`forward_with_ids`.

    Raises:
        ValueError: unknown ``backward``.
    """

if _torch is not None:

    class MaxSimScorer(_ScorerBase, _torch.nn.Module):
        __doc__ = _SCORER_DOC

        def __init__(self, *, normalize: bool = True, backward: str = "auto", mask_pad_token: int | None = None):
            _torch.nn.Module.__init__(self)
            self._setup(normalize, backward, mask_pad_token)

        forward = _ScorerBase.forward
        extra_repr = _ScorerBase.extra_repr

else:  # pragma: no cover - without torch

    class MaxSimScorer(_ScorerBase):  # type: ignore[no-redef]
        __doc__ = _SCORER_DOC

        def __init__(self, *, normalize: bool = True, backward: str = "auto", mask_pad_token: int | None = None):
            self._setup(normalize, backward, mask_pad_token)

        def __call__(self, Q, D, q_mask=None, d_mask=None):
            return self.forward(Q, D, q_mask, d_mask)

        def __repr__(self) -> str:
            return f"MaxSimScorer({self.extra_repr()})"
