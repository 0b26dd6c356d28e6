"""The seed's ``late_interaction_kernels.colpali_compat``: colpali-engine
scoring with lik, over :mod:`lik.integrations.colpali` (its docstring lists
the patch points — ``colpali_engine.utils.maxsim``'s in-batch and KD scores
wherever they are bound, the two negative-CE losses' forwards — and
colpali-engine's semantics).

* :func:`patch_colpali_engine` / :func:`unpatch_colpali_engine`: as
  :func:`lik.integrations.patch_colpali_engine` / ``unpatch_colpali_engine``.

The seed's ``patched_*`` functions (its replacements of
``score_multi_vector`` and of each loss's ``forward``, written for
colpali-engine < 0.3.17) have no counterpart: lik patches the scoring
functions those call instead.  Needs torch; colpali-engine is imported by
``patch_colpali_engine()`` only.
"""

from __future__ import annotations

from lik.integrations import patch_colpali_engine, unpatch_colpali_engine

__all__ = ["patch_colpali_engine", "unpatch_colpali_engine"]
