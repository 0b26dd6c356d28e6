"""late-interaction-kernels 0.4.5's own test suite, run against ``lik.compat``
under the name ``late_interaction_kernels`` — the conformance test of lik's
drop-in claim — on the CPU or on a CUDA device.

Opt-in: ``LIK_SEED_SUITE=1`` (scripts/test.sh, hence CI, sets it).  The
seed's sdist is ``LIK_SEED_SDIST`` where that names a file (a machine
without internet: the file is used as it is, never downloaded), else
fetched from PyPI at test time with ``pip download`` (never committed here)
and kept in ``build/seed-suite/``; either way it is checked against its
sha256.  Its ``tests/`` folder alone is extracted (the seed's package must
not be importable).  The tests run in a separate pytest process with
``alias/`` on PYTHONPATH (there ``import late_interaction_kernels`` gives
``lik.compat``, in the seed's subprocesses too) and ``seed_plugin.py``
(outcomes as JSON).

Two modes, ``LIK_SEED_SUITE_DEVICE=cpu|cuda`` (default: ``cuda`` where torch
sees a CUDA device, else ``cpu``):

* ``cpu`` (CI): torch, PyLate and colpali-engine must be installed
  (tests/requirements*.txt; else this test skips).  The device strings are
  remapped to the CPU (``"cuda"`` / ``'cuda'`` / ``"cuda:N"`` literals become
  ``"cpu"``, ``.cuda()`` becomes ``.cpu()``, a ``skipif(not <cuda
  available>()`` skip is lifted; the seed's conftest then skips nothing, as
  its CUDA skip tests a ``cuda`` keyword through the same literal), and a
  test that still reaches the CUDA runtime is reported as skipped
  (seed_plugin.py).
* ``cuda``: the seed's tests run unmodified on the GPU.  PyLate and
  colpali-engine may be absent: the seed's modules that need them skip
  themselves (``importorskip``), and list entries of a module that skipped
  as a whole are reported as not run.

``expected_failures.txt`` lists the seed tests lik.compat fails on purpose,
one per line: an optional device tag (``[cpu]`` or ``[cuda]``: that mode
only; none: both), a node id (``*`` matches any run of characters), two
spaces, ``#``, the reason.  This test fails on any other failure, on a
listed test that passes (remove it from the list) and on a listed pattern
that matches no failure (unless its module skipped as a whole).
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

DEVICES = ("cpu", "cuda")
_DEVICE_LITERAL = re.compile(r"""(["'])cuda(?::\d+)?\1""")
_CUDA_SKIPIF = re.compile(r"skipif\(\s*not [\w.]*cuda[\w.]*\(\)")


def remap_devices(source: str) -> str:
    """The seed's test source with its CUDA device strings made the CPU's and
    its ``skipif(not <cuda available>()`` skips lifted."""
    source = _CUDA_SKIPIF.sub("skipif(False", source)
    return _DEVICE_LITERAL.sub(r"\1cpu\1", source).replace(".cuda()", ".cpu()")


def suite_device() -> str:
    """The mode: LIK_SEED_SUITE_DEVICE, else "cuda" where torch sees a CUDA device, else "cpu"."""
    import torch

    device = os.environ.get("LIK_SEED_SUITE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    assert device in DEVICES, f"LIK_SEED_SUITE_DEVICE={device!r}: expected one of {DEVICES}"
    assert device == "cpu" or torch.cuda.is_available(), \
        "LIK_SEED_SUITE_DEVICE=cuda, but torch sees no CUDA device"
    return device


def fetch_sdist() -> Path:
    """The seed's sdist, its sha256 checked: LIK_SEED_SDIST when set (never
    downloaded), else CACHE's copy, downloaded once."""
    given = os.environ.get("LIK_SEED_SDIST")
    path = Path(given) if given else CACHE / SDIST
    if given:
        assert path.is_file(), f"LIK_SEED_SDIST={given}: no such file (the seed's {SDIST})"
    elif not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        "-d", str(CACHE), SEED], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        if given:
            raise AssertionError(f"LIK_SEED_SDIST={given}: sha256 {digest}, expected {SDIST_SHA256} ({SDIST})")
        path.unlink()
        raise AssertionError(f"{SDIST}: sha256 {digest}, expected {SDIST_SHA256} (deleted; run again)")
    return path


def extract_tests(sdist: Path, device: str) -> Path:
    """The sdist's tests/ under CACHE/suite/ (device strings remapped for the
    CPU, unmodified for CUDA); returns that root."""
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
            if device == "cpu" and out.suffix == ".py":
                data = remap_devices(data.decode()).encode()
            out.write_bytes(data)
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


def parse_expected(text: str, device: str) -> dict[str, str]:
    """expected_failures.txt's entries for device: pattern -> reason."""
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            entry, sep, reason = line.partition("  # ")
            assert sep and reason.strip(), f"expected_failures.txt: no '  # reason' in {line!r}"
            tag = re.match(r"\[(\w+)\] ", entry)
            assert not tag or tag[1] in DEVICES, f"expected_failures.txt: unknown device tag in {line!r}"
            if not tag or tag[1] == device:
                out[entry[tag.end() if tag else 0:].strip()] = reason.strip()
    return out


def compare(outcomes: dict[str, str], expected: dict[str, str]) -> list[str]:
    """What differs from the expected-failure list, one line each (empty: conforms).
    A pattern of a module that skipped as a whole (its outcome under the
    module's path) did not run: not_run() names it, compare() does not."""
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
                 if p not in not_run(outcomes, expected)
                 and not any(rx[p].match(n) and o == "failed" for n, o in outcomes.items())]
    return problems


def not_run(outcomes: dict[str, str], expected: dict[str, str]) -> list[str]:
    """The patterns whose module skipped as a whole (a package it needs is absent)."""
    return [p for p in expected if outcomes.get(p.split("::")[0]) == "skipped"]


def test_compare_flags_every_difference():
    outcomes = {"t.py::a": "failed", "t.py::b[x-1]": "failed", "t.py::c": "passed", "t.py::d": "skipped"}
    assert compare(outcomes, {"t.py::a": "r", "t.py::b[*]": "r"}) == []
    assert compare(outcomes, {"t.py::a": "r"}) == ["unexpected failure: t.py::b[x-1]"]
    assert compare(outcomes, {"t.py::a": "r", "t.py::b*": "r", "t.py::c": "r"}) == [
        "passes now (remove from expected_failures.txt): t.py::c",
        "expected failure matches no failing test: t.py::c"]
    assert compare(outcomes, {"t.py::a": "r", "t.py::b*": "r", "t.py::d": "r"}) == [
        "expected failure matches no failing test: t.py::d"]
    skipped_module = {**outcomes, "m.py": "skipped"}  # m.py skipped itself (importorskip)
    expected = {"t.py::a": "r", "t.py::b*": "r", "m.py::x": "r", "m.py::y[*]": "r"}
    assert compare(skipped_module, expected) == []
    assert not_run(skipped_module, expected) == ["m.py::x", "m.py::y[*]"]


def test_parse_expected_device_tags():
    text = "# comment\nt.py::a  # both\n[cpu] t.py::b[*]  # cpu only\n\n[cuda] t.py::c  # cuda only\n"
    assert parse_expected(text, "cpu") == {"t.py::a": "both", "t.py::b[*]": "cpu only"}
    assert parse_expected(text, "cuda") == {"t.py::a": "both", "t.py::c": "cuda only"}
    with pytest.raises(AssertionError, match="unknown device tag"):
        parse_expected("[gpu] t.py::a  # r", "cpu")
    with pytest.raises(AssertionError, match="no '  # reason'"):
        parse_expected("[cpu] t.py::a", "cpu")


def test_fetch_sdist_takes_a_local_file_and_checks_it(tmp_path, monkeypatch):
    wrong = tmp_path / SDIST
    wrong.write_bytes(b"not the seed's sdist")
    monkeypatch.setenv("LIK_SEED_SDIST", str(wrong))
    with pytest.raises(AssertionError, match=f"sha256 {hashlib.sha256(wrong.read_bytes()).hexdigest()}"):
        fetch_sdist()
    assert wrong.is_file()  # a file given by LIK_SEED_SDIST is never deleted
    monkeypatch.setenv("LIK_SEED_SDIST", str(tmp_path / "missing.tar.gz"))
    with pytest.raises(AssertionError, match="no such file"):
        fetch_sdist()


def test_remap_devices():
    src = 'x = torch.ones(2, device="cuda"); y.to(\'cuda:1\').cuda(); "cudagraph"; torch.cuda.synchronize()'
    assert remap_devices(src) == 'x = torch.ones(2, device="cpu"); y.to(\'cpu\').cpu(); "cudagraph"; ' \
                                 'torch.cuda.synchronize()'
    src = 'a = pytest.mark.skipif(not torch.cuda.is_available(), r="x")\nb = pytest.mark.skipif(not _cuda_ok(), r="x")'
    assert remap_devices(src) == 'a = pytest.mark.skipif(False, r="x")\nb = pytest.mark.skipif(False, r="x")'


@pytest.mark.skipif(os.environ.get("LIK_SEED_SUITE") != "1",
                    reason="the seed's suite is opt-in: LIK_SEED_SUITE=1 (on in scripts/test.sh)")
def test_seed_suite():
    pytest.importorskip("torch", reason="the seed's suite needs tests/requirements.txt")
    device = suite_device()
    if device == "cpu":  # the CPU list expects the integration tests to run
        for name in ("pylate", "colpali_engine"):
            pytest.importorskip(name, reason="the seed's suite on the CPU needs tests/requirements-integrations.txt")
    outcomes = run_suite(extract_tests(fetch_sdist(), device))
    counts = {k: sum(v == k for v in outcomes.values()) for k in ("passed", "failed", "skipped")}
    print(f"seed suite on {device}: {counts}")
    expected = parse_expected((HERE / "expected_failures.txt").read_text(), device)
    for p in not_run(outcomes, expected):
        print(f"listed, not run (its module skipped): {p}")
    problems = compare(outcomes, expected)
    assert not problems, "\n".join(problems)
