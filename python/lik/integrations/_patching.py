"""A reversible set of attribute replacements (the registry of originals).

Every replacement made by ``patch_pylate`` / ``patch_colpali_engine`` goes
through one :class:`PatchSet`: it records the object, the attribute and what
was there before, so ``unpatch_*`` restores exactly that, in reverse order.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from typing import Any, Callable, Iterable

_MISSING = object()


class PatchSet:
    """Attribute replacements that can be undone.

    ``set(obj, attr, value)`` replaces ``obj.attr`` and remembers the old
    value; for a class, an attribute inherited rather than defined on the
    class itself is deleted again on :meth:`restore` (so the class falls back
    to its base's, as before).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._saved: list[tuple[Any, str, Any]] = []
        self.locations: list[str] = []

    @property
    def active(self) -> bool:
        return bool(self._saved)

    def set(self, obj: Any, attr: str, value: Any, where: str) -> None:
        if isinstance(obj, type):
            old = vars(obj).get(attr, _MISSING)
        else:
            old = getattr(obj, attr)
        self._saved.append((obj, attr, old))
        self.locations.append(where)
        setattr(obj, attr, value)

    def restore(self) -> None:
        while self._saved:
            obj, attr, old = self._saved.pop()
            if old is _MISSING:
                delattr(obj, attr)
            else:
                setattr(obj, attr, old)
        self.locations = []


def import_optional(names: Iterable[str]) -> list[types.ModuleType]:
    """Import each module that can be imported (some submodules of a package
    pull optional dependencies); return those that were."""
    out = []
    for name in names:
        try:
            out.append(importlib.import_module(name))
        except ImportError:
            pass
    return out


def loaded_modules(prefix: str) -> list[types.ModuleType]:
    """Every module of package ``prefix`` loaded now (``prefix`` itself included)."""
    return [
        m
        for n, m in sorted(sys.modules.items())
        if m is not None and (n == prefix or n.startswith(prefix + "."))
    ]


def rebind_everywhere(
    patches: PatchSet, prefix: str, replacements: dict[Callable, Callable]
) -> None:
    """Replace every binding of the original functions inside package ``prefix``.

    Finds (1) module globals that are an original (``from ..scores import
    colbert_scores`` made a second binding in the importing module), and
    (2) default values of functions and methods defined in those modules
    (``def __init__(self, score_metric=colbert_kd_scores)`` binds the function
    at definition time), and replaces each with its lik version.
    """

    def fix_defaults(fn: Any, where: str) -> None:
        try:
            fn = inspect.unwrap(fn)
        except ValueError:  # a __wrapped__ cycle
            return
        if not isinstance(fn, types.FunctionType):
            return
        d = fn.__defaults__
        if d and any(_is_key(v, replacements) for v in d):
            new = tuple(_new(v, replacements) for v in d)
            patches.set(fn, "__defaults__", new, where + ".__defaults__")
        kd = fn.__kwdefaults__
        if kd and any(_is_key(v, replacements) for v in kd.values()):
            new_kd = {k: _new(v, replacements) for k, v in kd.items()}
            patches.set(fn, "__kwdefaults__", new_kd, where + ".__kwdefaults__")

    for mod in loaded_modules(prefix):
        for attr, value in list(vars(mod).items()):
            if _is_key(value, replacements):
                patches.set(mod, attr, _new(value, replacements), f"{mod.__name__}.{attr}")
            elif isinstance(value, types.FunctionType) and value.__module__ == mod.__name__:
                fix_defaults(value, f"{mod.__name__}.{attr}")
            elif isinstance(value, type) and value.__module__ == mod.__name__:
                for mname, member in list(vars(value).items()):
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    fix_defaults(member, f"{mod.__name__}.{value.__name__}.{mname}")


def _is_key(value: Any, replacements: dict) -> bool:
    """Identity, not equality: only the original function objects match."""
    return any(value is k for k in replacements)


def _new(value: Any, replacements: dict) -> Any:
    for k, v in replacements.items():
        if value is k:
            return v
    return value
