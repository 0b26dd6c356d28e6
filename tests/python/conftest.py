"""pytest setup for the lik Python package.

The package is found by tests/conftest.py.

Random data uses a fresh seed per test, printed (shown on failure); set
``LIK_TEST_SEED`` to replay one.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

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
