"""Public training entry points (differentiable with torch; see :mod:`lik._autograd`).

Imported by ``lik/__init__.py``.  With torch installed, ``maxsim`` and
``maxsim_pairs`` are the autograd-aware versions (torch inputs go through the
``lik::`` custom ops, numpy inputs through the inference path unchanged) and
the packed layouts are available.  Without torch, ``maxsim`` /
``maxsim_pairs`` are the inference functions and the torch-only functions
raise ImportError.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401

    _HAVE_TORCH = True
except ImportError:  # pragma: no cover - exercised only without torch
    _HAVE_TORCH = False

if _HAVE_TORCH:
    from ._autograd import maxsim, maxsim_padded, maxsim_pairs, maxsim_varlen, score_pairs_packed
else:  # pragma: no cover
    from ._api import maxsim, maxsim_pairs

    def _needs_torch(name):
        def f(*args, **kwargs):
            raise ImportError(f"lik.{name} needs torch (pip install torch)")

        f.__name__ = name
        return f

    maxsim_varlen = _needs_torch("maxsim_varlen")
    score_pairs_packed = _needs_torch("score_pairs_packed")
    maxsim_padded = _needs_torch("maxsim_padded")

__all__ = ["maxsim", "maxsim_pairs", "maxsim_varlen", "score_pairs_packed", "maxsim_padded"]
