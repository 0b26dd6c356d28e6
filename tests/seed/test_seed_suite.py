"""late-interaction-kernels 0.4.5's own test suite, run on the CPU against
``lik.compat`` under the name ``late_interaction_kernels`` — the conformance
test of lik's drop-in claim.

Opt-in: ``LIK_SEED_SUITE=1`` (scripts/test.sh, hence CI, sets it), with
torch, PyLate and colpali-engine installed (tests/requirements*.txt).  The
seed's sdist is fetched from PyPI at test time with ``pip download`` (never
committed here), checked against its sha256 and kept in
``build/seed-suite/``; its ``tests/`` folder alone is extracted (the seed's
package must not be importable) with the device strings remapped to the CPU
(``"cuda"`` / ``'cuda'`` / ``"cuda:N"`` literals become ``"cpu"``,
``.cuda()`` becomes ``.cpu()``, a ``skipif(not <cuda available>()`` skip is
lifted; the seed's conftest then skips nothing, as its CUDA skip tests a
``cuda`` keyword through the same literal).  The tests
run in a separate pytest process with ``alias/`` on PYTHONPATH (there
``import late_interaction_kernels`` gives ``lik.compat``, in the seed's
subprocesses too) and ``seed_plugin.py`` (GPU-only tests reported as
skipped, outcomes as JSON).

``expected_failures.txt`` lists the seed tests lik.compat fails on purpose,
one per line: a node id (``*`` matches any run of characters), two spaces,
``#``, the reason.  This test fails on any other failure, on a listed test
that passes (remove it from the list) and on a listed pattern that matches
no failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SEED = "late-interaction-kernels==0.4.5"
SDIST = "late_interaction_kernels-0.4.5.tar.gz"
SDIST_SHA256 = "703f8b930c5c2e4c3a8a945dba28a84b895462ebe389fcf015e9cb1cf23ef64c"
HERE = Path(__file__).resolve().parent
CACHE = HERE.parents[1] / "build" / "seed-suite"

_DEVICE_LITERAL = re.compile(r"""(["'])cuda(?::\d+)?\1""")
_CUDA_SKIPIF = re.compile(r"skipif\(\s*not [\w.]*cuda[\w.]*\(\)")


def remap_devices(source: str) -> str:
    """The seed's test source with its CUDA device strings made the CPU's and
    its ``skipif(not <cuda available>()`` skips lifted."""
    source = _CUDA_SKIPIF.sub("skipif(False", source)
    return _DEVICE_LITERAL.sub(r"\1cpu\1", source).replace(".cuda()", ".cpu()")


def fetch_sdist() -> Path:
    """The seed's sdist in CACHE, downloaded once, its sha256 checked."""
    path = CACHE / SDIST
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        "-d", str(CACHE), SEED], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        path.unlink()
        raise AssertionError(f"{SDIST}: sha256 {digest}, expected {SDIST_SHA256} (deleted; run again)")
    return path


def extract_tests(sdist: Path) -> Path:
    """The sdist's tests/ (device strings remapped) under CACHE/suite/; returns that root."""
    root = CACHE / "suite"
    tests = root / "tests"
    shutil.rmtree(tests, ignore_errors=True)
    tests.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) < 3 or parts[1] != "tests" or not member.isfile():
                continue
            out = tests.joinpath(*parts[2:])
            out.parent.mkdir(parents=True, exist_ok=True)
            data = tar.extractfile(member).read()
            out.write_bytes(remap_devices(data.decode()).encode() if out.suffix == ".py" else data)
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    cuda: the seed's GPU tests\n    slow: long tests\n")
    return root


def run_suite(root: Path) -> dict[str, str]:
    """Runs the seed's tests in a separate pytest process; node id -> outcome."""
    import lik

    results = CACHE / "results.json"
    results.unlink(missing_ok=True)
    env = dict(os.environ, LIK_SEED_RESULTS=str(results),
               PYTHONPATH=os.pathsep.join([str(HERE), str(HERE / "alias"), str(Path(lik.__file__).resolve().parents[1]),
                                           os.environ.get("PYTHONPATH", "")]))
    env.pop("LIK_SEED_SUITE", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "seed_plugin", "-p", "no:cacheprovider",
           "--continue-on-collection-errors", "--rootdir", str(root), "tests"]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    if not results.is_file():
        raise AssertionError(f"the seed's suite did not run (exit {proc.returncode}):\n{proc.stdout[-5000:]}"
                             f"\n{proc.stderr[-5000:]}")
    print(proc.stdout[-3000:])
    return json.loads(results.read_text())


def load_expected() -> dict[str, str]:
    """expected_failures.txt: pattern -> reason."""
    out = {}
    for line in (HERE / "expected_failures.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            pattern, sep, reason = line.partition("  # ")
            assert sep and reason.strip(), f"expected_failures.txt: no '  # reason' in {line!r}"
            out[pattern.strip()] = reason.strip()
    return out


def compare(outcomes: dict[str, str], expected: dict[str, str]) -> list[str]:
    """What differs from the expected-failure list, one line each (empty: conforms)."""
    rx = {p: re.compile(".*".join(map(re.escape, p.split("*"))) + r"\Z") for p in expected}
    problems, matched = [], set()
    for nodeid, outcome in sorted(outcomes.items()):
        hits = [p for p, r in rx.items() if r.match(nodeid)]
        matched.update(hits)
        if outcome == "failed" and not hits:
            problems.append(f"unexpected failure: {nodeid}")
        elif outcome == "passed" and hits:
            problems.append(f"passes now (remove from expected_failures.txt): {nodeid}")
    problems += [f"expected failure matches no failing test: {p}" for p in expected
                 if not any(rx[p].match(n) and o == "failed" for n, o in outcomes.items())]
    return problems


def test_compare_flags_every_difference():
    outcomes = {"t.py::a": "failed", "t.py::b[x-1]": "failed", "t.py::c": "passed", "t.py::d": "skipped"}
    assert compare(outcomes, {"t.py::a": "r", "t.py::b[*]": "r"}) == []
    assert compare(outcomes, {"t.py::a": "r"}) == ["unexpected failure: t.py::b[x-1]"]
    assert compare(outcomes, {"t.py::a": "r", "t.py::b*": "r", "t.py::c": "r"}) == [
        "passes now (remove from expected_failures.txt): t.py::c",
        "expected failure matches no failing test: t.py::c"]
    assert compare(outcomes, {"t.py::a": "r", "t.py::b*": "r", "t.py::d": "r"}) == [
        "expected failure matches no failing test: t.py::d"]


def test_remap_devices():
    src = 'x = torch.ones(2, device="cuda"); y.to(\'cuda:1\').cuda(); "cudagraph"; torch.cuda.synchronize()'
    assert remap_devices(src) == 'x = torch.ones(2, device="cpu"); y.to(\'cpu\').cpu(); "cudagraph"; ' \
                                 'torch.cuda.synchronize()'
    src = 'a = pytest.mark.skipif(not torch.cuda.is_available(), r="x")\nb = pytest.mark.skipif(not _cuda_ok(), r="x")'
    assert remap_devices(src) == 'a = pytest.mark.skipif(False, r="x")\nb = pytest.mark.skipif(False, r="x")'


@pytest.mark.skipif(os.environ.get("LIK_SEED_SUITE") != "1",
                    reason="the seed's suite is opt-in: LIK_SEED_SUITE=1 (on in scripts/test.sh)")
def test_seed_suite():
    for name in ("torch", "pylate", "colpali_engine"):  # the list expects the integration tests to run
        pytest.importorskip(name, reason="the seed's suite needs tests/requirements-integrations.txt")
    outcomes = run_suite(extract_tests(fetch_sdist()))
    counts = {k: sum(v == k for v in outcomes.values()) for k in ("passed", "failed", "skipped")}
    print(f"seed suite: {counts}")
    problems = compare(outcomes, load_expected())
    assert not problems, "\n".join(problems)
