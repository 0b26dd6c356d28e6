"""lik inside PyLate (tested with pylate 1.6.0).

:func:`patch` replaces PyLate's MaxSim scoring with lik's, everywhere PyLate
binds it; :func:`unpatch` puts PyLate's own functions back.

Patch points (``patch()`` returns the list it made):

* ``pylate.scores.colbert.colbert_scores``, ``colbert_scores_pairwise``,
  ``colbert_kd_scores`` and every other binding of these three function
  objects inside the ``pylate`` package: the re-exports in ``pylate.scores``,
  the ``from ..scores import ...`` copies in ``scores.similarity_functions``
  (what ``models.ColBERT`` uses for ``model.similarity``), ``rank.rank``
  (``rerank``), ``evaluation.colbert_triplet``,
  ``evaluation.colbert_distillation``, ``losses.distillation``, and the
  default argument ``Distillation.__init__(score_metric=colbert_kd_scores)``.
* ``pylate.scores.colbert.ColBERTScores.__call__`` (the score metric of
  ``losses.Contrastive`` and ``losses.CachedContrastive``): PyLate scores
  the N document groups with N calls; lik scores the flattened
  ``[Q_doc * N, Dt, H]`` documents in one call, same column order
  (``d * N + k``).

Semantics are PyLate's, not lik's native ones: PyLate multiplies the
similarities by the masks, so a masked document token takes part in the max
with a similarity of exactly 0 (it wins when every valid similarity is
negative) and a masked query token adds 0.  The wrappers reproduce this by
zeroing the masked document tokens (``D * documents_mask``) and passing no
document mask to lik; a float query mask scales the query tokens, a bool one
goes to lik as its query mask.  Gradients are PyLate's: none into masked
tokens.  NaN is PyLate's too (``_common``'s NaN rule): a NaN anywhere in
query i's or document j's embeddings, masked tokens included (PyLate
multiplies by the mask: 0 * NaN is NaN), makes score [i, j] NaN, where lik's
own rule (a NaN similarity never wins a max) would give a finite score.  The scores come back in the dtype PyLate's torch code returns (the
embeddings' dtype, promoted by a floating-point mask).

Backend selection: PyLate's ``backend=`` argument and its environment
variable ``PYLATE_SCORES_BACKEND`` keep working.  While patched, ``"auto"``
(the default) and ``"lik"`` run this lik (on CPU and CUDA tensors);
``"torch"`` and ``"flash"`` run PyLate's original code.  Calls lik cannot take
(lists of unequal tensors in ``colbert_scores``, mixed dtypes or devices,
empty dimensions, MPS tensors) run PyLate's original code too, so its
behaviour and errors are unchanged there.

Objects that copied a scoring function before ``patch()`` keep it: a
``models.ColBERT`` binds ``model.similarity`` when built, a
``losses.Distillation`` stores ``score_metric`` when built.  Patch first,
then build models and losses (``Contrastive`` / ``CachedContrastive`` hold a
``ColBERTScores`` object and use lik whenever it is patched).
"""

from __future__ import annotations

import os

import torch

from .. import _torch_ops as _ops
from . import _common
from ._patching import PatchSet, import_optional, rebind_everywhere

__all__ = ["patch", "unpatch", "is_patched", "colbert_scores", "colbert_scores_pairwise",
           "colbert_kd_scores"]

_PATCHES = PatchSet("pylate")
#: PyLate's own functions, captured by patch(): name -> function.
_ORIG: dict = {}

#: pylate modules that bind the scoring functions by name (imported before
#: the scan so that none is missed).
_MODULES = (
    "pylate.scores",
    "pylate.scores.colbert",
    "pylate.scores.similarity_functions",
    "pylate.losses",
    "pylate.losses.contrastive",
    "pylate.losses.cached_contrastive",
    "pylate.losses.distillation",
    "pylate.rank",
    "pylate.rank.rank",
    "pylate.evaluation",
    "pylate.evaluation.colbert_triplet",
    "pylate.evaluation.colbert_distillation",
    "pylate.models",
)

_BACKENDS = ("auto", "torch", "flash", "lik")


def _resolve(backend) -> str:
    """PyLate's backend rule: ``backend=`` else ``$PYLATE_SCORES_BACKEND``,
    default ``"auto"``, read on every call.

    Raises:
        ValueError: an unknown backend name (PyLate's message).
    """
    if backend is None:
        backend = os.environ.get("PYLATE_SCORES_BACKEND", "auto")
    backend = backend.lower()
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be one of 'auto', 'torch', 'flash', 'lik'; got {backend!r}")
    return backend


def _lik_selected(backend) -> bool:
    """True for ``auto`` / ``lik`` (this lik), False for ``torch`` / ``flash``."""
    return _resolve(backend) in ("auto", "lik")


def _fallback(backend) -> str:
    """Backend for PyLate's own function when lik cannot take a call: its
    ``"lik"`` means the seed package, so ``"lik"`` becomes ``"torch"``."""
    return "torch" if _resolve(backend) == "lik" else "auto"


def _to_tensor(x):
    if x is None:
        return None
    from pylate.utils.tensor import convert_to_tensor

    return convert_to_tensor(x)


def _pylate_masked(Q, D, q_mask, d_mask):
    """(Q, D, lik q_mask) giving PyLate's ``sim * q_mask * d_mask`` semantics
    with lik's kernel: masked document tokens become zero vectors (similarity
    exactly 0, as in PyLate, and no gradient through the multiply)."""
    lik_q_mask = None
    if q_mask is not None:
        if q_mask.dtype == torch.bool:
            lik_q_mask = q_mask
        else:
            Q = Q * q_mask.to(Q.dtype).unsqueeze(-1)
            lik_q_mask = q_mask != 0
    if d_mask is not None:
        D = D * d_mask.to(D.dtype).unsqueeze(-1)
    return Q, D, lik_q_mask


def colbert_scores(queries_embeddings, documents_embeddings, queries_mask=None, documents_mask=None,
                   backend=None):
    """PyLate's ``colbert_scores`` computed by lik.

    Args:
        queries_embeddings: ``[Nq, Lq, H]`` tensor (or what PyLate's
            ``convert_to_tensor`` takes: numpy array, list of equal tensors).
        documents_embeddings: ``[Nd, Ld, H]``, same dtype and device.
        queries_mask: optional ``[Nq, Lq]`` bool / integer / float mask.
        documents_mask: optional ``[Nd, Ld]`` mask.
        backend: PyLate's argument (see the module docstring).

    Returns:
        ``[Nq, Nd]`` scores in PyLate's dtype; differentiable in both
        embeddings (CPU; CUDA where lik's CUDA backward is built).

    Raises:
        ValueError: an unknown backend name.  Inputs lik does not take go to
        PyLate's own function, with its errors.
    """
    if not _lik_selected(backend):
        return _ORIG["colbert_scores"](queries_embeddings, documents_embeddings, queries_mask,
                                       documents_mask, backend=backend)
    Q, D = _to_tensor(queries_embeddings), _to_tensor(documents_embeddings)
    qm, dm = _to_tensor(queries_mask), _to_tensor(documents_mask)
    if not (_common.fits(Q, D, 3, 3) and _common.mask_fits(qm, Q.shape[:2], Q.device)
            and _common.mask_fits(dm, D.shape[:2], D.device)):
        return _ORIG["colbert_scores"](Q, D, qm, dm, backend=_fallback(backend))
    out = _common.result_dtype(Q, qm, dm)
    bad = _common.nan_seqs(Q, 1)[:, None] | _common.nan_seqs(D, 1)[None, :]
    Q, D, lik_q_mask = _pylate_masked(Q, D, qm, dm)
    return _common.as_dtype(_common.with_nan(_ops.maxsim(Q, D, lik_q_mask), bad), out)


def colbert_kd_scores(queries_embeddings, documents_embeddings, queries_mask=None, documents_mask=None,
                      backend=None):
    """PyLate's ``colbert_kd_scores`` computed by lik (lik's KD layout).

    Args:
        queries_embeddings: ``[Nq, Lq, H]``.
        documents_embeddings: ``[Nq, K, Ld, H]``: query ``i``'s ``K`` candidates.
        queries_mask: optional ``[Nq, Lq]``.
        documents_mask: optional ``[Nq, K, Ld]``.
        backend: PyLate's argument.

    Returns:
        ``[Nq, K]`` scores, PyLate's mask semantics and dtype, differentiable.

    Raises:
        ValueError: an unknown backend name (other bad input: PyLate's errors).
    """
    if not _lik_selected(backend):
        return _ORIG["colbert_kd_scores"](queries_embeddings, documents_embeddings, queries_mask,
                                          documents_mask, backend=backend)
    Q, D = _to_tensor(queries_embeddings), _to_tensor(documents_embeddings)
    qm, dm = _to_tensor(queries_mask), _to_tensor(documents_mask)
    if not (_common.fits(Q, D, 3, 4) and Q.shape[0] == D.shape[0]
            and _common.mask_fits(qm, Q.shape[:2], Q.device)
            and _common.mask_fits(dm, D.shape[:3], D.device)):
        return _ORIG["colbert_kd_scores"](Q, D, qm, dm, backend=_fallback(backend))
    out = _common.result_dtype(Q, qm, dm)
    bad = _common.nan_seqs(Q, 1)[:, None] | _common.nan_seqs(D, 2)
    Q, D, lik_q_mask = _pylate_masked(Q, D, qm, dm)
    return _common.as_dtype(_common.with_nan(_ops.maxsim(Q, D, lik_q_mask), bad), out)


def colbert_scores_pairwise(queries_embeddings, documents_embeddings, backend=None):
    """PyLate's ``colbert_scores_pairwise`` computed by lik: ``scores[i] =
    MaxSim(queries[i], documents[i])``, no masks (padding takes part, as in
    PyLate).

    Args:
        queries_embeddings: ``[B, Lq, H]`` tensor, or a list of ``[Lq_i, H]``
            tensors / arrays (PyLate's evaluators pass lists of unequal length).
        documents_embeddings: ``[B, Ld, H]`` tensor or a list of ``[Ld_i, H]``.
        backend: PyLate's argument.

    Returns:
        ``[B]`` scores (``min`` of the two lengths, as PyLate's ``zip``), in
        the embeddings' dtype, differentiable.  Lists are packed (one copy)
        and scored with ``lik.score_pairs_packed``.

    Raises:
        ValueError: an unknown backend name (other bad input: PyLate's errors).
    """
    if not _lik_selected(backend):
        return _ORIG["colbert_scores_pairwise"](queries_embeddings, documents_embeddings, backend=backend)
    Q, D = queries_embeddings, documents_embeddings
    if (isinstance(Q, torch.Tensor) and isinstance(D, torch.Tensor) and _common.fits(Q, D, 3, 3)
            and Q.shape[0] == D.shape[0]):
        bad = _common.nan_seqs(Q, 1) | _common.nan_seqs(D, 1)
        return _common.as_dtype(_common.with_nan(_ops.maxsim_pairs(Q, D), bad), Q.dtype)
    packed = _pack_pairs(Q, D)
    if packed is None:
        return _ORIG["colbert_scores_pairwise"](queries_embeddings, documents_embeddings,
                                                backend=_fallback(backend))
    Qp, Dp, cu_q, cu_d, idx, longest = packed
    s = _ops.score_pairs_packed(Qp, Dp, cu_q, cu_d, idx, idx, max_seqlen_q=longest)
    bad = _common.nan_packed(Qp, cu_q) | _common.nan_packed(Dp, cu_d)
    return _common.as_dtype(_common.with_nan(s, bad), Qp.dtype)


def _pack_pairs(Q, D):
    """Packed ``(Q, D, cu_q, cu_d, pair_idx, longest query)`` for the pairs
    ``zip(Q, D)``, or None where lik does not take them."""
    try:
        qs = [_to_tensor(x) for x in Q]
        ds = [_to_tensor(x) for x in D]
    except TypeError:
        return None
    n = min(len(qs), len(ds))
    if n == 0:
        return None
    qs, ds = qs[:n], ds[:n]
    first = qs[0]
    for x in qs + ds:
        if not (isinstance(x, torch.Tensor) and x.dim() == 2 and x.shape[0] > 0
                and x.dtype == first.dtype and x.device == first.device
                and x.shape[1] == first.shape[1]):
            return None
    if not _common.fits(first, ds[0], 2, 2):
        return None
    dev = first.device
    lq = torch.tensor([0] + [x.shape[0] for x in qs], dtype=torch.int64)
    ld = torch.tensor([0] + [x.shape[0] for x in ds], dtype=torch.int64)
    longest = int(lq.max())
    cu_q, cu_d = lq.cumsum(0).to(dev), ld.cumsum(0).to(dev)
    idx = torch.arange(n, dtype=torch.int64, device=dev)
    return torch.cat(qs), torch.cat(ds), cu_q, cu_d, idx, longest


def _colbert_scores_call(self, queries_embeddings, documents_embeddings, queries_mask=None,
                         documents_mask=None, backend=None):
    """``ColBERTScores.__call__`` (the score metric of ``losses.Contrastive``
    and ``losses.CachedContrastive``) in one lik call.

    Args:
        queries_embeddings: ``[Q_query, Qt, H]``.
        documents_embeddings: ``[Q_doc, N, Dt, H]``: N document groups.
        queries_mask: optional ``[Q_query, Qt]``.
        documents_mask: optional ``[Q_doc, N, Dt]``.
        backend: PyLate's argument.

    Returns:
        ``[Q_query, Q_doc * N]``, column ``d * N + k`` = document ``(d, k)``
        (PyLate's query-major order), PyLate's mask semantics and dtype.
    """
    original = _ORIG["ColBERTScores.__call__"]
    if not _lik_selected(backend):
        return original(self, queries_embeddings, documents_embeddings, queries_mask, documents_mask,
                        backend=backend)
    D = _to_tensor(documents_embeddings)
    dm = _to_tensor(documents_mask)
    if not (isinstance(D, torch.Tensor) and D.dim() == 4 and _common.mask_fits(dm, D.shape[:3], D.device)):
        return original(self, queries_embeddings, D, queries_mask, dm, backend=backend)
    n_doc, n_group = D.shape[0], D.shape[1]
    D3 = D.reshape(n_doc * n_group, *D.shape[2:])
    dm3 = dm.reshape(n_doc * n_group, dm.shape[2]) if dm is not None else None
    return colbert_scores(queries_embeddings, D3, queries_mask, dm3, backend=backend)


def _import_pylate():
    try:
        import pylate.scores.colbert as colbert_mod
    except ImportError as e:
        raise ImportError("lik.integrations.patch_pylate needs PyLate: pip install 'lik[pylate]'") from e
    return colbert_mod


def patch() -> list[str]:
    """Make PyLate score with lik (idempotent).

    Returns:
        The patched locations, ``"module.attribute"`` strings.

    Raises:
        ImportError: PyLate is not installed.
    """
    if _PATCHES.active:
        return list(_PATCHES.locations)
    colbert_mod = _import_pylate()
    import_optional(_MODULES)
    _ORIG.clear()
    _ORIG.update(
        colbert_scores=colbert_mod.colbert_scores,
        colbert_scores_pairwise=colbert_mod.colbert_scores_pairwise,
        colbert_kd_scores=colbert_mod.colbert_kd_scores,
    )
    _ORIG["ColBERTScores.__call__"] = colbert_mod.ColBERTScores.__call__
    rebind_everywhere(_PATCHES, "pylate", {
        _ORIG["colbert_scores"]: colbert_scores,
        _ORIG["colbert_scores_pairwise"]: colbert_scores_pairwise,
        _ORIG["colbert_kd_scores"]: colbert_kd_scores,
    })
    _PATCHES.set(colbert_mod.ColBERTScores, "__call__", _colbert_scores_call,
                 "pylate.scores.colbert.ColBERTScores.__call__")
    return list(_PATCHES.locations)


def unpatch() -> None:
    """Restore PyLate's own scoring everywhere :func:`patch` replaced it (and
    in pylate modules imported while patched).  A no-op when not patched."""
    if not _PATCHES.active:
        return
    _PATCHES.restore()
    # Modules imported while patched bound the lik functions: give them back
    # PyLate's (not recorded: nothing to undo later).
    rebind_everywhere(PatchSet("pylate-late"), "pylate", {
        colbert_scores: _ORIG["colbert_scores"],
        colbert_scores_pairwise: _ORIG["colbert_scores_pairwise"],
        colbert_kd_scores: _ORIG["colbert_kd_scores"],
    })


def is_patched() -> bool:
    """True between :func:`patch` and :func:`unpatch`."""
    return _PATCHES.active
