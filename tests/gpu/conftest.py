"""Fixtures of the GPU tests: one seeded generator per test."""

import os

import numpy as np
import pytest


@pytest.fixture
def rng():
    """numpy Generator seeded from $LIK_TEST_SEED, else a fresh seed (printed, to replay a failure)."""
    seed = int(os.environ.get("LIK_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
    print(f"seed={seed}")
    return np.random.default_rng(seed)
