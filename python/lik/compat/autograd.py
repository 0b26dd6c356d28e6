"""The seed's ``late_interaction_kernels.autograd`` (where PyLate's and
colpali-engine's native backends import ``maxsim`` / ``maxsim_pairs`` from):
the same functions as :mod:`lik.compat`."""

from __future__ import annotations

from . import maxsim, maxsim_pairs

__all__ = ["maxsim", "maxsim_pairs"]
