"""Hostile inputs of the `lik` command (issue 27 part B): counts whose
products do not fit, NaN scores across document blocks, FIFOs in place of
input files, and every valid integer .npy as an index's doc_ids.npy."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from test_cli import CLI, run, write_safetensors

pytestmark = pytest.mark.skipif(CLI is None, reason="lik command not built (set LIK_CLI)")


def _run_bounded(*args, timeout=20):
    """lik with a wall-clock bound: an input that blocks the reader fails the
    test instead of hanging it."""
    try:
        return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"lik {args} still running after {timeout} s (blocked on an input?)")


def _fails(p, *expect):
    assert p.returncode == 1, (p.returncode, p.stderr)  # an error, not a signal
    for e in expect:
        assert e in p.stderr, p.stderr


@pytest.fixture
def small_index(tmp_path):
    rng = np.random.default_rng(5)
    np.save(tmp_path / "d.npy", rng.standard_normal((40, 6, 16)).astype(np.float32))
    np.save(tmp_path / "q.npy", rng.standard_normal((3, 4, 16)).astype(np.float32))
    run("index", "--centroids", "8", tmp_path / "d.npy", tmp_path / "ix")
    return tmp_path


# ---- 1. size products -----------------------------------------------------------------


def test_search_results_product_does_not_wrap(small_index):
    # 2^26 empty queries in a 64 MiB file (one byte per declared sequence) and
    # -k 2^36: nq x k x 4 bytes is 2^64, which wrapped to 0 and the row writer
    # ran past the buffers.  Now: a clean error naming both counts.
    q = small_index / "empty_queries.npy"
    np.save(q, np.zeros((1 << 26, 0, 16), np.float32))
    os.truncate(q, 64 << 20)
    p = _run_bounded("search", small_index / "ix", q, "-k", 1 << 36)
    _fails(p, "67108864 queries x top 68719476736")


# ---- 2. NaN: the library's order --------------------------------------------------------


def _nan_pair(tmp_path):
    # document 0 scores +inf + -inf = NaN against the query, document 1 scores 0
    np.save(tmp_path / "nq.npy", np.array([[[1.0], [-1.0]]], np.float32))
    np.save(tmp_path / "nd.npy", np.array([[[np.inf]], [[1.0]]], np.float32))
    return tmp_path / "nq.npy", tmp_path / "nd.npy"


@pytest.mark.parametrize("k", [1, 2])
def test_nan_ranks_last_in_every_block_split(tmp_path, k):
    q, d = _nan_pair(tmp_path)
    whole = json.loads(run(q, d, "-k", k, "--json").stdout)["results"][0]
    split = json.loads(run(q, d, "-k", k, "--block-tokens", 1, "--json").stdout)["results"][0]
    assert whole["doc_index"] == split["doc_index"] == [1, 0][:k]
    assert split["scores"][0] == 0.0


# ---- 3. FIFOs ---------------------------------------------------------------------------


def test_fifo_inputs_are_refused_not_waited_on(small_index, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    q, d = small_index / "q.npy", small_index / "d.npy"
    np.save(tmp_path / "dl.npy", np.full(40, 6, np.int64))
    write_safetensors(tmp_path / "q.safetensors", {"embeddings": np.load(q)})
    cases = [
        ((fifo, d), "cannot open queries"),
        ((q, fifo), "cannot open documents"),
        ((q, d, "--qrels", fifo), "cannot open qrels"),
        ((q, d, "--rerank", fifo), "cannot open"),
        ((q, d, "--doc-ids", fifo), "cannot open ids"),
        ((q, d, "--doc-lengths", fifo), "cannot open lengths"),
        ((tmp_path / "q.safetensors", d, "--query-ids", fifo), "cannot open ids"),
        (("search", small_index / "ix", fifo), "cannot open queries"),
        (("search", small_index / "ix", q, "-r", fifo), "cannot open qrels"),
        (("index", fifo, tmp_path / "ix2"), "cannot open documents"),
    ]
    for args, want in cases:
        _fails(_run_bounded(*args, timeout=10), f"{fifo}: {want}", "FIFO, not a regular file")
    ids = small_index / "ix" / "doc_ids.npy"
    ids.unlink(missing_ok=True)  # ids 0..N-1: none written
    os.mkfifo(ids)
    for args in (("search", small_index / "ix", q), ("index", "--add", d, small_index / "ix")):
        _fails(_run_bounded(*args, timeout=10), "doc_ids.npy: cannot open (not a regular file)")


# ---- 4. doc_ids.npy: the command's one .npy reader ------------------------------------------


def _npy(path, descr, shape, data: bytes, version=1, reorder=False):
    keys = [f"'descr': '{descr}'", "'fortran_order': False", f"'shape': {tuple(shape)}"]
    if reorder:  # another key order, no spaces: a dict literal numpy reads as well
        keys = [k.replace(": ", ":").replace(", ", ",") for k in reversed(keys)]
    h = ("{" + ", ".join(keys) + ", }").encode()
    size = 2 if version == 1 else 4
    pad = (-(10 + size - 2 + len(h) + 1)) % 64
    h = h + b" " * pad + b"\n"
    path.write_bytes(b"\x93NUMPY" + bytes([version, 0]) + len(h).to_bytes(size, "little") + h + data)


@pytest.mark.parametrize("variant", ["v2", "reordered", "int32"])
def test_doc_ids_any_valid_integer_npy(small_index, variant):
    ids = np.arange(100, 140)
    path = small_index / "ix" / "doc_ids.npy"
    if variant == "int32":
        _npy(path, "<i4", (40,), ids.astype(np.int32).tobytes())
    else:
        _npy(path, "<i8", (40,), ids.astype(np.int64).tobytes(), version=2 if variant == "v2" else 1,
             reorder=variant == "reordered")
    np.testing.assert_array_equal(np.load(path), ids)  # numpy reads it
    out = json.loads(run("search", "--json", "-k", 5, small_index / "ix", small_index / "q.npy").stdout)
    for r in out["results"]:  # the index's ids, read by the library
        assert r["doc_ids"] == r["doc_index"] and all(100 <= j < 140 for j in r["doc_ids"])
    np.save(small_index / "d2.npy", np.ones((2, 3, 16), np.float32))
    run("index", "--add", small_index / "d2.npy", small_index / "ix")
    np.testing.assert_array_equal(np.load(path), [*ids, 140, 141])  # the next ids after the highest


def test_doc_ids_wrong_length_is_an_error(small_index):
    np.save(small_index / "ix" / "doc_ids.npy", np.arange(39))
    p = run("search", small_index / "ix", small_index / "q.npy", check=False)
    _fails(p, "doc_ids.npy: has 39 entries, the doclens files hold 40 documents")
