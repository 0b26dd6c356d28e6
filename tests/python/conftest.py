"""pytest setup for the lik Python package.

Finds the package: an installed ``lik`` (``pip install .``) is used as is.
Otherwise the source tree's ``python/`` folder is put on sys.path and, unless
``LIK_LIBRARY`` is set, a built ``build/liblik.so`` (``cmake -B build &&
cmake --build build``) is used.

Random data uses a fresh seed per test, printed (shown on failure); set
``LIK_TEST_SEED`` to replay one.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

if importlib.util.find_spec("lik") is None:
    sys.path.insert(0, str(ROOT / "python"))
    if not os.environ.get("LIK_LIBRARY"):
        for cand in (ROOT / "build" / "liblik.so", ROOT / "build" / "lib" / "liblik.so"):
            if cand.is_file():
                os.environ["LIK_LIBRARY"] = str(cand)
                break

try:
    from hypothesis import HealthCheck, settings

    # Tests are never timed: no deadline.
    settings.register_profile(
        "lik",
        deadline=None,
        max_examples=40,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    settings.register_profile("lik-long", deadline=None, max_examples=400)
    settings.load_profile(os.environ.get("LIK_HYPOTHESIS_PROFILE", "lik"))
except ImportError:  # pragma: no cover
    pass


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs CUDA (torch.cuda not available)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    env = os.environ.get("LIK_TEST_SEED")
    seed = int(env) if env else int(np.random.SeedSequence().entropy % (2**63))
    print(f"{request.node.nodeid}: LIK_TEST_SEED={seed}")
    return np.random.default_rng(seed)


@pytest.fixture
def threads():
    """Restore lik's thread setting after a test that changes it."""
    import lik

    before = lik.get_num_threads()
    yield lik
    lik.set_num_threads(before)
