"""Drop-in lik scoring for PyLate and colpali-engine: one call to switch, one
to switch back.

::

    import lik.integrations as li
    li.patch_pylate()            # PyLate's colbert_scores & co. are lik's now
    li.patch_colpali_engine()    # colpali-engine's MaxSim (losses, processors) too
    ...
    li.unpatch_pylate(); li.unpatch_colpali_engine()   # the packages' own code again

Both packages are optional dependencies (``pip install 'lik[pylate]'``,
``'lik[colpali]'``); nothing is imported before a ``patch_*`` call.  The
replacements keep each package's signatures, mask semantics, score dtype and
backend switches (``PYLATE_SCORES_BACKEND`` / ``backend=``,
``COLPALI_SCORES_BACKEND``); see :mod:`lik.integrations.pylate` and
:mod:`lik.integrations.colpali` for every patch point.  Needs torch.
"""

from __future__ import annotations

__all__ = [
    "patch_pylate",
    "unpatch_pylate",
    "patch_colpali_engine",
    "unpatch_colpali_engine",
    "patch_all",
    "unpatch_all",
]


def patch_pylate() -> list[str]:
    """Replace PyLate's MaxSim scoring with lik's (idempotent, reversible).

    Returns:
        The patched locations (``"module.attribute"``).

    Raises:
        ImportError: PyLate (or torch) is not installed.
    """
    from . import pylate

    return pylate.patch()


def unpatch_pylate() -> None:
    """Restore PyLate's own scoring (a no-op when not patched)."""
    import sys

    mod = sys.modules.get(__name__ + ".pylate")
    if mod is not None:
        mod.unpatch()


def patch_colpali_engine() -> list[str]:
    """Replace colpali-engine's MaxSim scoring with lik's (idempotent, reversible).

    Returns:
        The patched locations (``"module.attribute"``).

    Raises:
        ImportError: colpali-engine (or torch) is not installed.
    """
    from . import colpali

    return colpali.patch()


def unpatch_colpali_engine() -> None:
    """Restore colpali-engine's own scoring (a no-op when not patched)."""
    import sys

    mod = sys.modules.get(__name__ + ".colpali")
    if mod is not None:
        mod.unpatch()


def patch_all() -> list[str]:
    """:func:`patch_pylate` and :func:`patch_colpali_engine`, for those of the
    two packages that are installed.  Returns every patched location."""
    out: list[str] = []
    for fn in (patch_pylate, patch_colpali_engine):
        try:
            out += fn()
        except ImportError:
            pass
    return out


def unpatch_all() -> None:
    """Undo :func:`patch_all`."""
    unpatch_pylate()
    unpatch_colpali_engine()
