"""lik inside colpali-engine (tested with colpali-engine 0.3.18).

:func:`patch` replaces colpali-engine's MaxSim scoring with lik's, everywhere
it is bound; :func:`unpatch` restores colpali-engine's own code.

Patch points (``patch()`` returns the list it made):

* ``colpali_engine.utils.maxsim.maxsim_inbatch`` (``[B_q, L_q, d] x [B_d,
  L_d, d] -> [B_q, B_d]``) and ``maxsim_kd`` (``[B, L_q, d] x [B, N, L_d, d]
  -> [B, N]``), and every binding of these two function objects in the
  ``colpali_engine`` package: ``loss.late_interaction_losses`` (the in-batch
  scores of ``ColbertLoss``, ``ColbertPairwiseCELoss``, ``ColbertSigmoidLoss``
  through ``ColbertModule._inbatch_scores``; the negatives of
  ``ColbertNegativeCELoss`` / ``ColbertPairwiseNegativeCELoss``) and
  ``utils.processing_utils`` (``BaseVisualRetrieverProcessor.score_multi_vector``,
  the ``score`` of every ColPali / ColQwen / ColIdefics processor).
* ``ColbertNegativeCELoss.forward`` and ``ColbertPairwiseNegativeCELoss.forward``:
  colpali-engine computes their positive scores inline
  (``einsum("bnd,bsd->bns")`` + ``amax`` + ``sum``); the patched forward is
  the same code with that one line replaced by ``lik.maxsim_pairs``.

Semantics are colpali-engine's: no masks, padding tokens are zero vectors
that take part in the max with a similarity of 0 (lik is called without
masks, so the same holds).  Scores come back in the embeddings' dtype (as the
einsum returns).  NaN is colpali-engine's (``_common``'s NaN rule): a NaN
in query i's or document j's embeddings makes score [i, j] NaN, as torch's
``amax`` does, where lik's own rule (a NaN similarity never wins) would give
a finite score.  ``use_smooth_max=True`` (log-sum-exp instead of max) keeps
colpali-engine's einsum path: lik computes the hard max only.  On exact ties
of the max (in practice: zero padding tokens, similarity 0) torch's ``amax``
splits the gradient evenly among the tied tokens, lik gives it to the first;
the difference lands only on padding rows, which colpali-engine's models
zero with the attention mask, so the parameters' gradients are the same
(``tests/integrations/test_colpali.py`` checks them through that mask).

Backend selection: colpali-engine reads ``$COLPALI_SCORES_BACKEND`` on every
call.  While patched, ``auto`` (the default) and ``lik`` run this lik (CPU and
CUDA); ``torch`` runs colpali-engine's einsum.  Calls lik cannot take (mixed
dtypes or devices, empty tensors, MPS) run colpali-engine's original code.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F  # noqa: N812

from .. import _torch_ops as _ops
from . import _common
from ._patching import PatchSet, import_optional, rebind_everywhere

__all__ = ["patch", "unpatch", "is_patched", "maxsim_inbatch", "maxsim_kd"]

_PATCHES = PatchSet("colpali_engine")
_ORIG: dict = {}

_MODULES = (
    "colpali_engine.utils.maxsim",
    "colpali_engine.utils.processing_utils",
    "colpali_engine.utils",
    "colpali_engine.loss.late_interaction_losses",
    "colpali_engine.loss",
    "colpali_engine.trainer.colmodel_training",
)

_BACKENDS = ("auto", "torch", "lik")


def _backend() -> str:
    """colpali-engine's rule: ``$COLPALI_SCORES_BACKEND`` (default ``auto``),
    read per call.

    Raises:
        ValueError: an unknown backend name (colpali-engine's message).
    """
    backend = os.environ.get("COLPALI_SCORES_BACKEND", "auto").lower()
    if backend not in _BACKENDS:
        raise ValueError(f"COLPALI_SCORES_BACKEND must be one of {_BACKENDS}, got {backend!r}.")
    return backend


def _lik_selected() -> bool:
    """True for ``auto`` / ``lik`` (this lik), False for ``torch``."""
    return _backend() != "torch"


def _torch_inbatch(query, doc):
    return torch.einsum("bnd,csd->bcns", query, doc).amax(dim=3).sum(dim=2)


def _torch_kd(query, doc):
    return torch.einsum("bnd,bksd->bkns", query, doc).amax(dim=3).sum(dim=2)


def maxsim_inbatch(query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
    """colpali-engine's ``maxsim_inbatch`` computed by lik.

    Args:
        query: ``[B_q, L_q, d]`` zero-padded query tokens.
        doc: ``[B_d, L_d, d]`` zero-padded document tokens, same dtype / device.

    Returns:
        ``[B_q, B_d]`` in the embeddings' dtype, differentiable (CPU; CUDA
        where lik's CUDA backward is built).
    """
    backend = _backend()
    if backend != "torch" and _common.fits(query, doc, 3, 3):
        bad = _common.nan_seqs(query, 1)[:, None] | _common.nan_seqs(doc, 1)[None, :]
        return _common.as_dtype(_common.with_nan(_ops.maxsim(query, doc), bad), query.dtype)
    # colpali-engine's "lik" means the seed package: its reference formula instead
    return _torch_inbatch(query, doc) if backend == "lik" else _ORIG["maxsim_inbatch"](query, doc)


def maxsim_kd(query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
    """colpali-engine's ``maxsim_kd`` computed by lik (its KD layout).

    Args:
        query: ``[B, L_q, d]``.
        doc: ``[B, N, L_d, d]``: query ``b``'s ``N`` candidates.

    Returns:
        ``[B, N]`` in the embeddings' dtype, differentiable.
    """
    backend = _backend()
    if backend != "torch" and _common.fits(query, doc, 3, 4) and query.shape[0] == doc.shape[0]:
        bad = _common.nan_seqs(query, 1)[:, None] | _common.nan_seqs(doc, 2)
        return _common.as_dtype(_common.with_nan(_ops.maxsim(query, doc), bad), query.dtype)
    return _torch_kd(query, doc) if backend == "lik" else _ORIG["maxsim_kd"](query, doc)


def _pairs(query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
    """``einsum("bnd,bsd->bns", query, doc).amax(2).sum(1)`` -> ``[B]``."""
    if _lik_selected() and _common.fits(query, doc, 3, 3) and query.shape[0] == doc.shape[0]:
        bad = _common.nan_seqs(query, 1) | _common.nan_seqs(doc, 1)
        return _common.as_dtype(_common.with_nan(_ops.maxsim_pairs(query, doc), bad), query.dtype)
    return torch.einsum("bnd,bsd->bns", query, doc).amax(dim=2).sum(dim=1)


def _negative_loss(self, query_embeddings, doc_embeddings, neg_doc_embeddings, offset: int, n_pos: int,
                   inner: str):
    """The body both negative-CE losses of colpali-engine 0.3.18 share, positives
    by lik: softplus((neg - pos) / temperature), mixed with the in-batch term
    of the loss's attribute ``inner`` (called with query_embeddings,
    doc_embeddings, offset); the positives are
    ``doc_embeddings[offset : offset + n_pos]``."""
    lengths = (query_embeddings[:, :, 0] != 0).sum(dim=1)
    pos_scores = _pairs(query_embeddings, doc_embeddings[offset : offset + n_pos])
    neg_scores = maxsim_kd(query_embeddings, neg_doc_embeddings)

    if self.normalize_scores:
        pos_scores = self._apply_normalization(pos_scores, lengths)
        neg_scores = self._apply_normalization(neg_scores, lengths)

    loss = F.softplus((neg_scores - pos_scores.unsqueeze(1)) / self.temperature).mean()

    if self.in_batch_term_weight > 0:
        loss_ib = getattr(self, inner)(query_embeddings, doc_embeddings, offset)
        loss = loss * (1 - self.in_batch_term_weight) + loss_ib * self.in_batch_term_weight

    return loss


def _negative_ce_forward(self, query_embeddings, doc_embeddings, neg_doc_embeddings, offset: int = 0):
    """``ColbertNegativeCELoss.forward`` of colpali-engine 0.3.18, positives by lik."""
    if self.use_smooth_max:
        return _ORIG["ColbertNegativeCELoss.forward"](self, query_embeddings, doc_embeddings,
                                                      neg_doc_embeddings, offset)
    return _negative_loss(self, query_embeddings, doc_embeddings, neg_doc_embeddings, offset,
                          neg_doc_embeddings.size(0), "inner_loss")


def _pairwise_negative_ce_forward(self, query_embeddings, doc_embeddings, neg_doc_embeddings, offset: int = 0):
    """``ColbertPairwiseNegativeCELoss.forward`` of colpali-engine 0.3.18, positives by lik."""
    if self.use_smooth_max:
        return _ORIG["ColbertPairwiseNegativeCELoss.forward"](self, query_embeddings, doc_embeddings,
                                                              neg_doc_embeddings, offset)
    return _negative_loss(self, query_embeddings, doc_embeddings, neg_doc_embeddings, offset,
                          query_embeddings.size(0), "inner_pairwise")


def patch() -> list[str]:
    """Make colpali-engine score with lik (idempotent).

    Returns:
        The patched locations, ``"module.attribute"`` strings.

    Raises:
        ImportError: colpali-engine is not installed.
    """
    if _PATCHES.active:
        return list(_PATCHES.locations)
    try:
        import colpali_engine.loss.late_interaction_losses as losses
        import colpali_engine.utils.maxsim as maxsim_mod
    except ImportError as e:
        raise ImportError(
            "lik.integrations.patch_colpali_engine needs colpali-engine: pip install 'lik[colpali]'"
        ) from e
    import_optional(_MODULES)
    _ORIG.clear()
    _ORIG.update(maxsim_inbatch=maxsim_mod.maxsim_inbatch, maxsim_kd=maxsim_mod.maxsim_kd)
    rebind_everywhere(_PATCHES, "colpali_engine", {
        _ORIG["maxsim_inbatch"]: maxsim_inbatch,
        _ORIG["maxsim_kd"]: maxsim_kd,
    })
    for cls, fwd in ((losses.ColbertNegativeCELoss, _negative_ce_forward),
                     (losses.ColbertPairwiseNegativeCELoss, _pairwise_negative_ce_forward)):
        _ORIG[f"{cls.__name__}.forward"] = cls.forward
        _PATCHES.set(cls, "forward", fwd, f"{cls.__module__}.{cls.__name__}.forward")
    return list(_PATCHES.locations)


def unpatch() -> None:
    """Restore colpali-engine's own scoring everywhere :func:`patch` replaced
    it (and in its modules imported while patched).  A no-op when not patched."""
    if not _PATCHES.active:
        return
    _PATCHES.restore()
    rebind_everywhere(PatchSet("colpali-late"), "colpali_engine", {
        maxsim_inbatch: _ORIG["maxsim_inbatch"],
        maxsim_kd: _ORIG["maxsim_kd"],
    })


def is_patched() -> bool:
    """True between :func:`patch` and :func:`unpatch`."""
    return _PATCHES.active
