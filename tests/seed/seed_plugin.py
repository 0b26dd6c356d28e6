"""pytest plugin for the seed's own test suite run against lik.compat
(loaded by test_seed_suite.py into a separate pytest process, ``-p seed_plugin``).

It does three things:

1. imports ``late_interaction_kernels`` — ``alias/late_interaction_kernels.py``,
   which makes it ``lik.compat`` — before any test module;
2. reports a test that reached the CUDA runtime (messages of torch without a
   usable GPU: "Torch not compiled with CUDA enabled", "Found no NVIDIA
   driver", ...) as skipped, "GPU-only": in the CPU run the device strings
   are remapped to the CPU, but ``torch.cuda.synchronize`` / memory
   statistics / streams / graphs have no CPU form (the CUDA run never
   meets these messages);
3. writes every test's outcome (``passed`` / ``failed`` / ``skipped``; a
   module that fails to import or skips itself is one entry under its path)
   as JSON to the file named by ``LIK_SEED_RESULTS``.
"""

from __future__ import annotations

import json
import os

import late_interaction_kernels  # noqa: F401  (alias/: lik.compat under the seed's name)
import pytest

_GPU_ONLY = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver", "No CUDA GPUs are available",
             "CUDA driver version is insufficient")
_outcomes: dict[str, str] = {}


def _record(nodeid: str, outcome: str) -> None:
    # A test's worst phase wins: failed > skipped > passed.
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    if rank[outcome] >= rank.get(_outcomes.get(nodeid, "passed"), 0):
        _outcomes[nodeid] = outcome


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and call.excinfo is not None:
        msg = str(call.excinfo.value)
        if any(key in msg for key in _GPU_ONLY):
            rep.outcome = "skipped"
            rep.longrepr = (str(item.path), item.location[1] or 0, "GPU-only (needs the CUDA runtime): " + msg)


def pytest_runtest_logreport(report):
    _record(report.nodeid, report.outcome)


def pytest_collectreport(report):
    if report.failed or report.skipped:  # a module that cannot import, or skips itself (MPS)
        _record(report.nodeid, report.outcome)


def pytest_sessionfinish(session):
    path = os.environ.get("LIK_SEED_RESULTS")
    if path:
        with open(path, "w") as f:
            json.dump(_outcomes, f, indent=0, sort_keys=True)
