"""Look-up of lik functions that a compat name wraps but that this build of
lik may not have yet: found at call time, else NotImplementedError naming
what to use instead."""

from __future__ import annotations

import lik


def native(name: str, instead: str):
    """``lik.<name>``, or NotImplementedError saying to use ``instead``."""
    fn = getattr(lik, name, None)
    if fn is None:
        raise NotImplementedError(f"lik.{name} is not available in this build of lik; use {instead}")
    return fn
