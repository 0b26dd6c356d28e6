"""pytest setup for the training tests (tests/train): finds the package the
same way as tests/python/conftest.py (installed ``lik``, else ``python/``
with ``$LIK_LIBRARY`` or ``build/liblik.so``).  torch is required here."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

if importlib.util.find_spec("lik") is None:
    sys.path.insert(0, str(ROOT / "python"))
    if not os.environ.get("LIK_LIBRARY"):
        for cand in (ROOT / "build" / "liblik.so", ROOT / "build" / "lib" / "liblik.so"):
            if cand.is_file():
                os.environ["LIK_LIBRARY"] = str(cand)
                break
