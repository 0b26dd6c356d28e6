"""The seed's ``late_interaction_kernels.retrieve``: :class:`MaxSimScorer`
and :func:`retrieve` — lik's own (same signatures and defaults)."""

from __future__ import annotations

import lik as _lik

__all__ = ["MaxSimScorer", "retrieve"]

MaxSimScorer = _lik.MaxSimScorer
retrieve = _lik.retrieve
