"""pytest setup shared by every test folder.

Finds the package: an installed ``lik`` (``pip install .``, what
scripts/test.sh does) is used as is.  Otherwise the source tree's ``python/``
folder is put on sys.path and, unless ``LIK_LIBRARY`` is set, a built
``liblik.so`` from ``build/`` (``cmake -B build && cmake --build build``) or
``build/release/`` is used.

Tests marked ``gpu`` are skipped where torch sees no CUDA device.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

if importlib.util.find_spec("lik") is None:
    sys.path.insert(0, str(ROOT / "python"))
    if not os.environ.get("LIK_LIBRARY"):
        for cand in ("build/liblik.so", "build/release/liblik.so", "build/lib/liblik.so"):
            if (ROOT / cand).is_file():
                os.environ["LIK_LIBRARY"] = str(ROOT / cand)
                break


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        if torch.cuda.is_available():
            return
    except ImportError:
        pass
    skip = pytest.mark.skip(reason="needs CUDA (torch.cuda not available)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
