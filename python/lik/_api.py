"""Public functions: :func:`maxsim`, :func:`maxsim_pairs`, :func:`retrieve`,
:class:`MaxSimScorer`.

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
strides).  numpy in -> numpy out; any torch input -> torch out.  This is the
forward path only: torch inputs that require grad are read detached.

Argument checking is the C library's: its messages (naming the argument and
the sizes) are raised as ValueError (shape, value, device) or TypeError
(dtype).  Python only rejects what the C API cannot express: a non-array
argument (TypeError), more than 4 dimensions (ValueError), a dtype with no
lik code (TypeError).
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Sequence

import numpy as np

from . import _lib

__all__ = ["maxsim", "maxsim_pairs", "retrieve", "MaxSimScorer"]


# ---- helpers ---------------------------------------------------------------------


def _prepare(names, arrays, optional):
    """Check arguments and decide the output kind.

    Returns (arrays, torch_mode): when any argument is a torch tensor the
    numpy ones are converted to torch (zero-copy where possible).
    """
    for name, x, opt in zip(names, arrays, optional):
        _lib.check_array(x, name, optional=opt)
    torch_mode = any(_lib.is_torch(x) for x in arrays)
    if torch_mode:
        arrays = [_lib.to_torch(x) for x in arrays]
    return list(arrays), torch_mode


def _empty(shape, dtype: str, torch_mode: bool, like: Any):
    if torch_mode:
        import torch

        tdt = {"float32": torch.float32, "int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8}[dtype]
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


# ---- forward with argmax (for the training path) ---------------------------------------


def _forward(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False, pairs: bool = False,
             with_argmax: bool = False, q_lengths=None, d_lengths=None):
    """Forward of :func:`maxsim` (``pairs=False``) or :func:`maxsim_pairs`
    (``pairs=True``), optionally with the argmax lik.h describes.

    Returns ``(scores, argmax)``; ``argmax`` is None unless ``with_argmax``,
    else int32 of shape ``scores.shape + (Lq,)``: the winning document token
    per query token (lowest index on ties), -1 where the query token is
    masked or no document token is valid.  Same output kind as the inputs.
    Private: the hook an autograd layer saves for its backward.
    """
    q_lengths = _lib.lengths_arg(q_lengths, "q_lengths")
    d_lengths = _lib.lengths_arg(d_lengths, "d_lengths")
    (Q, D, q_mask, d_mask, q_lengths, d_lengths), tm = _prepare(
        ("Q", "D", "q_mask", "d_mask", "q_lengths", "d_lengths"),
        (Q, D, q_mask, d_mask, q_lengths, d_lengths),
        (False, False, True, True, True, True),
    )
    if pairs:
        shape = (Q.shape[0] if Q.ndim >= 1 else 0,)
    else:
        shape = _scores_shape(Q, D)
    scores = _empty(shape, "float32", tm, Q)
    argmax = None
    if with_argmax:
        Lq = Q.shape[-2] if Q.ndim >= 2 else 0
        argmax = _empty(shape + (Lq,), "int32", tm, Q)
    call = _lib.call_maxsim_pairs if pairs else _lib.call_maxsim
    call(Q, D, q_mask, d_mask, scores, argmax, normalize=bool(normalize), q_lengths=q_lengths,
         d_lengths=d_lengths)
    return scores, argmax


# ---- maxsim ------------------------------------------------------------------------


def maxsim(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False, q_lengths=None, d_lengths=None):
    """Fused MaxSim scores, cross-product or per-query-candidate (KD) layout.

    Semantics of the seed's ``maxsim`` (drop-in for PyLate's ``colbert_scores``
    and, with 4-D ``D``, ``colbert_kd_scores``); ColBERT's late interaction::

        score[i, j] = sum_s q_mask[i,s] * max_{t : d_mask[j,t]} <Q[i,s], D[j,t]>

    Args:
        Q: queries ``[Nq, Lq, d]``, or ``[Lq, d]`` for one query.
            dtype float32, float16, float64, or torch.bfloat16.
        D: documents, same dtype as ``Q``, one of
            ``[Nd, Ld, d]`` (cross product -> ``[Nq, Nd]``),
            ``[Ld, d]`` (one document), or
            ``[Nq, K, Ld, d]`` (K candidates per query, KD layout -> ``[Nq, K]``;
            needs 3-D ``Q``).
        q_mask: optional ``[Nq, Lq]`` (``[Lq]`` for 2-D ``Q``), bool or uint8,
            True / nonzero = valid query token.
        d_mask: optional ``[Nd, Ld]`` (``[Ld]`` for 2-D ``D``; ``[Nq, K, Ld]``
            for KD), bool or uint8, True / nonzero = valid document token.
        normalize: L2-normalise every token, ``x / max(||x||, 1e-12)``, on
            both sides inside the kernel (ColBERT's cosine MaxSim).
        q_lengths: optional integer ``[Nq]`` (0-d for 2-D ``Q``): query ``i``
            is its first ``q_lengths[i]`` tokens (each in ``[0, Lq]``), the
            same as a prefix ``q_mask`` (combined with ``q_mask`` if both).
        d_lengths: optional integer ``[Nd]`` (0-d for 2-D ``D``; ``[Nq, K]``
            for KD): document ``j`` is its first ``d_lengths[j]`` tokens
            (each in ``[0, Ld]``); the fastest form of padding on CUDA.

    Returns:
        float32 scores: ``[Nq, Nd]`` (cross), ``[Nd]`` for 2-D ``Q``, ``[Nq]``
        for 2-D ``D``, 0-d for both 2-D, ``[Nq, K]`` for KD.  A numpy array
        for numpy inputs, a torch tensor (on ``Q``'s device) if any input is
        a torch tensor.  Nq, Nd or K = 0 give an empty result; Lq = 0 or
        Ld = 0 give zeros.  Accumulation is fp32 (fp64 for float64 inputs).

    Raises:
        TypeError: an argument is not a numpy array / torch tensor, a dtype is
            unsupported, Q and D dtypes differ, a mask is not bool/uint8, or
            lengths are not integers.
        ValueError: wrong ndim, embedding sizes differ (the message names
            both), batch, mask or lengths shape mismatch, a length outside
            ``[0, L]`` (CPU; CUDA clamps), tensors on different devices.
        lik.LikError (RuntimeError): allocation failure, CUDA tensors with a
            CPU-only build, CUDA runtime errors.
    """
    return _forward(Q, D, q_mask, d_mask, normalize=normalize, q_lengths=q_lengths, d_lengths=d_lengths)[0]


def maxsim_pairs(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False, q_lengths=None,
                 d_lengths=None):
    """Paired MaxSim: one score per same-index pair ``(Q[b], D[b])``.

    Semantics of the seed's ``maxsim_pairs`` and PyLate's
    ``colbert_scores_pairwise`` (the K = 1 case of the KD layout)::

        score[b] = sum_s q_mask[b,s] * max_{t : d_mask[b,t]} <Q[b,s], D[b,t]>

    Args:
        Q: ``[B, Lq, d]``, float32 / float16 / float64 / torch.bfloat16.
        D: ``[B, Ld, d]``, same dtype and same ``B`` as ``Q``.
        q_mask: optional ``[B, Lq]`` bool or uint8 (True = valid token).
        d_mask: optional ``[B, Ld]`` bool or uint8 (True = valid token).
        normalize: per-token L2 normalisation of both sides in the kernel.
        q_lengths: optional integer ``[B]``, each in ``[0, Lq]`` (a prefix mask).
        d_lengths: optional integer ``[B]``, each in ``[0, Ld]`` (a prefix mask).

    Returns:
        float32 ``[B]`` scores (numpy, or torch if any input is torch).

    Raises:
        TypeError: non-array argument, unsupported / mismatched dtype, mask
            not bool/uint8, lengths not integers.
        ValueError: Q or D not 3-D, B or d mismatch, mask or lengths shape
            mismatch, a length outside ``[0, L]`` (CPU), different devices.
        lik.LikError (RuntimeError): allocation / CUDA failures.
    """
    return _forward(Q, D, q_mask, d_mask, normalize=normalize, pairs=True, q_lengths=q_lengths,
                    d_lengths=d_lengths)[0]


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
):
    """Exact top-k documents per query by MaxSim (the seed's ``retrieve``).

    Equivalent to ``maxsim(Q, D, normalize=normalize)`` followed by a
    descending top-k per query, but the C library streams document blocks
    through per-query selection and never holds the ``[Nq, Nd]`` score
    matrix.  Ties are ordered by lower document index first.

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``; float32 / float16 / float64 /
            torch.bfloat16.
        D: ``[Nd, Ld, d]`` or ``[Ld, d]`` (same dtype as ``Q``), or a list /
            tuple of ``[Ld_j, d]`` documents of varying length (padded here
            into ``[Nd, max Ld_j, d]`` with the padding masked out; this is a
            copy).
        top_k: int >= 1; ``k = min(top_k, Nd)`` results are returned.
        q_mask: optional ``[Nq, Lq]`` (``[Lq]``) bool / uint8.
        d_mask: optional ``[Nd, Ld]`` (``[Ld]``) bool / uint8, or, with a list
            ``D``, a list of ``[Ld_j]`` masks.
        normalize: per-token L2 normalisation (default True, as the seed's
            ``retrieve``: ColBERT / ColPali cosine scoring).
        chunk: accepted for compatibility with the seed, which scores in
            document chunks to bound memory; lik always streams with bounded
            scratch, so the value is not needed and is ignored.

    Returns:
        ``(scores, indices)``: float32 and int64, ``[Nq, k]`` (``[k]`` for a
        2-D ``Q``), scores descending.  numpy for numpy inputs, torch if any
        input is a torch tensor.

    Raises:
        TypeError: non-array argument, ``top_k`` not an int, unsupported or
            mismatched dtype, mask not bool/uint8.
        ValueError: ``top_k <= 0``, wrong ndim (KD 4-D ``D`` is not
            accepted), d / mask shape mismatch, different devices.
        lik.LikError (RuntimeError): allocation / CUDA failures.
    """
    try:
        top_k = operator.index(top_k)
    except TypeError:
        raise TypeError(f"top_k: expected an int, got {type(top_k).__name__}") from None
    if chunk is not None:
        try:
            operator.index(chunk)
        except TypeError:
            raise TypeError(f"chunk: expected None or an int, got {type(chunk).__name__}") from None
    if isinstance(D, (list, tuple)):
        _lib.check_array(Q, "Q")
        D, d_mask = _pad_docs(D, d_mask, Q.shape[-1] if Q.ndim else None, Q)
    (Q, D, q_mask, d_mask), tm = _prepare(
        ("Q", "D", "q_mask", "d_mask"), (Q, D, q_mask, d_mask), (False, False, True, True)
    )
    Nd = D.shape[0] if D.ndim == 3 else (1 if D.ndim == 2 else 0)
    k = max(0, min(top_k, Nd))
    shape = (Q.shape[0], k) if Q.ndim == 3 else (k,)
    scores = _empty(shape, "float32", tm, Q)
    indices = _empty(shape, "int64", tm, Q)
    top_k = min(top_k, 2**63 - 1)  # beyond int64 every document is returned anyway
    _lib.call_retrieve(Q, D, q_mask, d_mask, top_k, scores, indices, normalize=bool(normalize))
    return scores, indices


# ---- MaxSimScorer ------------------------------------------------------------------


class _ScorerBase:
    """Behaviour of :class:`MaxSimScorer`, shared by the torch.nn.Module and
    the plain-class variants."""

    def _setup(self, normalize: bool, backward: str, mask_pad_token: int | None) -> None:
        if backward not in _lib.BACKWARD_CODES:
            raise ValueError(f"backward= must be one of {tuple(_lib.BACKWARD_CODES)}, got {backward!r}")
        self.normalize = bool(normalize)
        self.backward = backward
        self.mask_pad_token = mask_pad_token

    def extra_repr(self) -> str:
        return f"normalize={self.normalize}, backward={self.backward!r}, mask_pad_token={self.mask_pad_token!r}"

    def forward(self, Q, D, q_mask=None, d_mask=None):
        """MaxSim scores: ``lik.maxsim(Q, D, q_mask, d_mask,
        normalize=self.normalize)``, autograd-aware where the package's
        ``lik.maxsim`` is (torch installed), with ``backward=self.backward``.

        Shapes, dtypes, return value and exceptions as :func:`lik.maxsim`
        (cross ``[Nq, Nd]``, KD ``[Nq, K]``, 2-D squeezing).
        """
        fn = getattr(sys.modules.get(__package__), "maxsim", maxsim)
        if fn is maxsim:
            return maxsim(Q, D, q_mask, d_mask, normalize=self.normalize)
        return fn(Q, D, q_mask, d_mask, normalize=self.normalize, backward=self.backward)

    def score(self, Q, D, q_mask=None, d_mask=None):
        """Inference-only MaxSim (the seed's ``score``): :meth:`forward`
        without autograd (no saved argmax)."""
        return maxsim(Q, D, q_mask, d_mask, normalize=self.normalize)

    def retrieve(self, Q, D, top_k: int, q_mask=None, d_mask=None, *, chunk: int | None = None):
        """``(scores, indices)`` top-k per query; see :func:`lik.retrieve`."""
        return retrieve(Q, D, top_k, q_mask, d_mask, normalize=self.normalize, chunk=chunk)

    def forward_with_ids(self, Q, D, q_ids, d_ids):
        """Like :meth:`forward` with masks ``q_ids != mask_pad_token`` and
        ``d_ids != mask_pad_token`` (token-id arrays ``[Nq, Lq]`` / ``[Nd, Ld]``).

        Raises:
            ValueError: ``mask_pad_token`` was not set on the scorer.
        """
        if self.mask_pad_token is None:
            raise ValueError("forward_with_ids requires mask_pad_token set on the scorer")
        return self.forward(Q, D, q_ids != self.mask_pad_token, d_ids != self.mask_pad_token)


_SCORER_DOC = """Stateless MaxSim scorer (the seed's ``MaxSimScorer``).

    A ``torch.nn.Module`` (no parameters) when torch is importable, else a
    plain callable class.  ``scorer(Q, D, q_mask=None, d_mask=None)`` returns
    :func:`lik.maxsim` scores with the scorer's ``normalize``.

    Args:
        normalize: per-token L2 normalisation (default True, the ColBERT /
            ColPali / LateOn convention of the seed).
        backward: ``"auto" | "unified" | "lowmem"``, the grad_D strategy of
            the training path (lik.h ``lik_backward``); stored for it, the
            forward does not use it.
        mask_pad_token: optional pad-token id for :meth:`forward_with_ids`.

    Raises:
        ValueError: unknown ``backward``.
    """

try:
    import torch as _torch

    class MaxSimScorer(_ScorerBase, _torch.nn.Module):
        __doc__ = _SCORER_DOC

        def __init__(self, *, normalize: bool = True, backward: str = "auto", mask_pad_token: int | None = None):
            _torch.nn.Module.__init__(self)
            self._setup(normalize, backward, mask_pad_token)

        forward = _ScorerBase.forward
        extra_repr = _ScorerBase.extra_repr

except ImportError:  # pragma: no cover - without torch

    class MaxSimScorer(_ScorerBase):  # type: ignore[no-redef]
        __doc__ = _SCORER_DOC

        def __init__(self, *, normalize: bool = True, backward: str = "auto", mask_pad_token: int | None = None):
            self._setup(normalize, backward, mask_pad_token)

        def __call__(self, Q, D, q_mask=None, d_mask=None):
            return self.forward(Q, D, q_mask, d_mask)

        def __repr__(self) -> str:
            return f"MaxSimScorer({self.extra_repr()})"
