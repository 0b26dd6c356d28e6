"""The seed's ``late_interaction_kernels.pylate_compat``: PyLate scoring with
lik, over :mod:`lik.integrations.pylate` (its docstring lists every patch
point, PyLate's mask semantics and the backend switches).

* :func:`patch_pylate` / :func:`unpatch_pylate`: as
  :func:`lik.integrations.patch_pylate` / ``unpatch_pylate``.
* ``patched_colbert_scores``, ``patched_colbert_kd_scores``,
  ``patched_colbert_scores_pairwise``: the functions ``patch_pylate()``
  installs in place of PyLate's ``colbert_scores``, ``colbert_kd_scores``
  and ``colbert_scores_pairwise`` (PyLate's signatures; a call lik cannot
  take goes to PyLate's own function, so call them after ``patch_pylate()``).

Needs torch; PyLate is imported by ``patch_pylate()`` only.
"""

from __future__ import annotations

from lik.integrations import patch_pylate, unpatch_pylate
from lik.integrations.pylate import colbert_kd_scores as patched_colbert_kd_scores
from lik.integrations.pylate import colbert_scores as patched_colbert_scores
from lik.integrations.pylate import colbert_scores_pairwise as patched_colbert_scores_pairwise

__all__ = ["patch_pylate", "unpatch_pylate", "patched_colbert_scores", "patched_colbert_kd_scores",
           "patched_colbert_scores_pairwise"]
