"""lik.compat — late-interaction-kernels 0.4.5's public surface over lik.

``import lik.compat as late_interaction_kernels`` lets code written for the
seed package run on lik: the same names, positional order, keyword names and
defaults, shapes, dtypes and return types, each a thin wrapper over lik's
native API (no second implementation).  Submodules mirror the seed's:
:mod:`.padded`, :mod:`.score_pairs`, :mod:`.topk`, :mod:`.forward`,
:mod:`.backward`, :mod:`.varlen`, :mod:`.retrieve`, :mod:`.plaid`,
:mod:`.fused_head`, :mod:`.fp8`, :mod:`.mps`, :mod:`.experimental`,
:mod:`.reference`, :mod:`.autograd`, :mod:`.pylate_compat`,
:mod:`.colpali_compat`.

Where the seed and lik differ the compat names keep the seed's behaviour
(e.g. ``backward=None`` defaults, ``maxsim_padded(validate=False)``, the
residual bit order ``layout="lik"``); the README section "Coming from
late-interaction-kernels" lists every difference.  What lik deliberately
lacks (Apple ``mps``, the seed's ``experimental`` soft / smooth MaxSim)
raises NotImplementedError naming the alternative.  Needs torch, as the
seed does.
"""

from __future__ import annotations

import lik as _lik

from .. import integrations as _integrations
from .autograd import maxsim, maxsim_pairs
from .padded import maxsim_padded
from .retrieve import MaxSimScorer, retrieve
from .varlen import maxsim_varlen

__version__: str = _lik.__version__

patch_pylate = _integrations.patch_pylate
unpatch_pylate = _integrations.unpatch_pylate
patch_colpali_engine = _integrations.patch_colpali_engine
unpatch_colpali_engine = _integrations.unpatch_colpali_engine

from . import (  # noqa: E402  (submodules, as the seed's `late_interaction_kernels.<name>`)
    autograd,
    backward,
    colpali_compat,
    experimental,
    forward,
    fp8,
    fused_head,
    mps,
    plaid,
    pylate_compat,
    reference,
    score_pairs,
    topk,
)

__all__ = [
    "__version__",
    "MaxSimScorer",
    "retrieve",
    "maxsim_padded",
    "patch_pylate",
    "unpatch_pylate",
    "patch_colpali_engine",
    "unpatch_colpali_engine",
    "maxsim",
    "maxsim_pairs",
    "maxsim_varlen",
    "reference",
]
