"""`lik index` / `lik search` (the PLAID index subcommands): the bundled
Cranfield run (metrics recomputed from the JSON results, within a point of
the exact job), agreement with lik.plaid.Index, .npy inputs, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from test_cli import CLI, DATA, load_qrels, ndcg_at, read_safetensors, recall_at, run

pytestmark = pytest.mark.skipif(CLI is None, reason="lik command not built (set LIK_CLI)")


@pytest.fixture(scope="module")
def cran_index(tmp_path_factory):
    if not (DATA / "docs.safetensors").is_file():
        pytest.skip("bundled data missing")
    out = tmp_path_factory.mktemp("cran") / "ix"
    rep = json.loads(run("index", "--json", out).stdout)
    assert rep["num_docs"] == 1400 and rep["num_tokens"] == 258747 and rep["nbits"] == 2
    assert rep["num_centroids"] == 4096  # 2^floor(log2(16 sqrt(258747)))
    return out


def test_cranfield_search_metrics(cran_index):
    out = json.loads(run("search", "--json", cran_index).stdout)
    assert out["num_queries"] == 225 and out["queries_evaluated"] == 225
    qrels = load_qrels(DATA / "qrels.tsv")
    nd, rc = [], []
    for r in out["results"]:
        j = qrels[r["query_id"]]
        assert len(r["doc_ids"]) == 10 and len(set(r["doc_ids"])) == 10
        assert all(a >= b for a, b in zip(r["scores"], r["scores"][1:]))
        nd.append(ndcg_at(r["doc_ids"], j))
    full = json.loads(run("search", "--json", "-k", "100", cran_index).stdout)
    for r in full["results"]:
        rc.append(recall_at(r["doc_ids"], qrels[r["query_id"]]))
    assert abs(np.mean(nd) - out["ndcg@10"]) < 1e-9
    assert abs(np.mean(rc) - out["recall@100"]) < 1e-9
    # within one point of the exact job (0.3516 / 0.7234)
    assert abs(out["ndcg@10"] - 0.3516) < 0.01 and abs(out["recall@100"] - 0.7234) < 0.01
    text = run("search", cran_index).stdout
    assert "nDCG@10" in text and "queries/s" in text


def test_search_matches_the_python_index(cran_index):
    import lik.plaid

    q = read_safetensors(DATA / "queries.safetensors")
    cu, emb = q["cu_seqlens"], q["embeddings"]
    ix = lik.plaid.Index.load(cran_index)
    queries = [emb[cu[i]:cu[i + 1]] for i in range(20)]
    s, i = ix.search(queries, top_k=10, n_ivf_probe=4, n_full_scores=256)
    # queries named (no default qrels, so top 10 are computed, as in Python)
    out = json.loads(run("search", "--json", "-n", "20", "--n-ivf-probe", "4", "--n-full-scores", "256",
                         cran_index, DATA / "queries.safetensors").stdout)
    doc_ids = np.load(cran_index / "doc_ids.npy")
    for r, row, sc in zip(out["results"], i, s):
        assert r["doc_index"] == [int(x) for x in row[:10]]
        assert r["doc_ids"] == [int(doc_ids[x]) for x in row[:10]]
        np.testing.assert_allclose(r["scores"], sc[:10], rtol=1e-6)


def test_npy_inputs_and_pruning(tmp_path):
    rng = np.random.default_rng()
    d, n = 24, 90
    lens = rng.integers(1, 30, n)
    X = rng.standard_normal((int(lens.sum()), d)).astype(np.float32)
    np.save(tmp_path / "d.npy", X)
    np.save(tmp_path / "dcu.npy", np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))
    Q = rng.standard_normal((7, 11, d)).astype(np.float16)
    np.save(tmp_path / "q.npy", Q)
    rep = json.loads(run("index", "--json", "--nbits", "4", "--centroids", "32", "--doc-cu-seqlens",
                         tmp_path / "dcu.npy", tmp_path / "d.npy", tmp_path / "ix").stdout)
    assert rep["num_docs"] == n and rep["nbits"] == 4 and rep["num_centroids"] == 32
    a = json.loads(run("search", "--json", "-k", "5", "--n-ivf-probe", "32", "--n-full-scores", "1000",
                       tmp_path / "ix", tmp_path / "q.npy").stdout)
    b = json.loads(run("search", "--json", "-k", "5", "--n-ivf-probe", "32", "--n-full-scores", "1000",
                       "--threshold", "-5", "-t", "1", tmp_path / "ix", tmp_path / "q.npy").stdout)
    assert [r["doc_index"] for r in a["results"]] == [r["doc_index"] for r in b["results"]]
    assert a["results"][0]["doc_ids"] == a["results"][0]["doc_index"]  # no doc ids file: 0..N-1 given


def test_errors(tmp_path):
    p = run("search", tmp_path / "nope", check=False)
    assert p.returncode == 1 and "not a folder" in p.stderr
    tmp_path.joinpath("empty").mkdir()
    p = run("search", tmp_path / "empty", check=False)
    assert p.returncode == 1 and "metadata.json" in p.stderr
    p = run("index", "--nbits", "3", tmp_path / "x", check=False)
    assert p.returncode == 1 and "nbits" in p.stderr
    p = run("index", "--bogus", tmp_path / "x", check=False)
    assert p.returncode == 2
    p = run("search", check=False)
    assert p.returncode == 2 and "INDEX" in p.stderr
    d = 16
    X = np.random.default_rng().standard_normal((40, d)).astype(np.float32)
    np.save(tmp_path / "d.npy", X)
    np.save(tmp_path / "dcu.npy", np.array([0, 10, 40], dtype=np.int64))
    run("index", "--doc-cu-seqlens", tmp_path / "dcu.npy", tmp_path / "d.npy", tmp_path / "ix")
    np.save(tmp_path / "q8.npy", np.zeros((2, 3, 8), np.float32))
    p = run("search", tmp_path / "ix", tmp_path / "q8.npy", check=False)
    assert p.returncode == 1 and "d=8" in p.stderr and "d=16" in p.stderr
    # DOCS given but OUT_DIR forgotten: refused at once (it used to build the bundled Cranfield index first)
    p = run("index", tmp_path / "d.npy", check=False)
    assert p.returncode == 2 and "OUT_DIR" in p.stderr and "d.npy" in p.stderr and "not a folder" in p.stderr
    assert not (tmp_path / "d.npy").is_dir()
    assert "index --help" in run("--help").stdout
    assert "--n-ivf-probe" in run("search", "--help").stdout
