"""The torch-only public functions (see :mod:`lik._autograd`, :mod:`lik.padded`,
:mod:`lik.head`).

Imported by ``lik/__init__.py``.  With torch installed these are the packed
layouts (``maxsim_varlen``, ``score_pairs_packed``), the padded reranking
helpers and the fused head (``maxsim_from_hidden``); without torch each
raises ImportError.  ``maxsim`` / ``maxsim_pairs``
(one definition, :mod:`lik._api`) are re-exported for the integrations.
"""

from __future__ import annotations

from ._api import maxsim, maxsim_pairs

try:
    import torch  # noqa: F401

    _HAVE_TORCH = True
except ImportError:  # pragma: no cover - exercised only without torch
    _HAVE_TORCH = False

if _HAVE_TORCH:
    from ._autograd import maxsim_varlen, score_pairs_packed
    from .head import maxsim_from_hidden
    from .padded import PackedBatch, maxsim_padded, pack_padded
else:  # pragma: no cover

    def _needs_torch(name):
        def f(*args, **kwargs):
            raise ImportError(f"lik.{name} needs torch (pip install torch)")

        f.__name__ = name
        return f

    maxsim_varlen = _needs_torch("maxsim_varlen")
    score_pairs_packed = _needs_torch("score_pairs_packed")
    maxsim_padded = _needs_torch("maxsim_padded")
    pack_padded = _needs_torch("pack_padded")
    maxsim_from_hidden = _needs_torch("maxsim_from_hidden")
    PackedBatch = None

__all__ = ["maxsim", "maxsim_pairs", "maxsim_varlen", "score_pairs_packed", "maxsim_padded", "pack_padded",
           "PackedBatch", "maxsim_from_hidden"]
