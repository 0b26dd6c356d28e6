"""The seed's ``experimental`` names (soft / smooth MaxSim relaxations): lik
computes the exact (hard-max) MaxSim only, so every name here raises
NotImplementedError naming :func:`lik.maxsim`."""

from __future__ import annotations


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotImplementedError(
        f"lik.compat.experimental.{name}: lik has no soft / smooth MaxSim; use lik.maxsim (exact MaxSim, "
        "differentiable through the winning tokens)"
    )
