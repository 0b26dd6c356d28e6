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


def test_search_device_cpu_and_auto_without_cuda(cran_index):
    """`lik search --device cpu` is the search the suite pins (LIK_DEVICE=cpu);
    without a usable CUDA device auto is the CPU too, with the same results."""
    import os

    from test_cli import cuda_state

    args = ("search", "--json", "-n", 20, "-k", 10, cran_index)
    cpu = json.loads(run(*args[:2], "--device", "cpu", *args[2:]).stdout)
    pinned = json.loads(run(*args).stdout)
    assert cpu["device"] == pinned["device"] == "cpu" and "to_device_seconds" not in cpu
    assert cpu["results"] == pinned["results"]
    if cuda_state() == "devices":
        pytest.skip("a CUDA device is present: auto takes it (tests/gpu/test_cli_gpu.py)")
    env = {k: v for k, v in os.environ.items() if k != "LIK_DEVICE"}
    auto = json.loads(run(*args[:2], "--device", "auto", *args[2:], env=env).stdout)
    assert auto["device"] == "cpu" and auto["results"] == cpu["results"]
    assert "PLAID search on cpu" in run("search", "-n", 2, cran_index, env=env).stdout


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
    for r, row, sc in zip(out["results"], i, s):  # both return the index's ids (doc_ids.npy)
        assert r["doc_ids"] == r["doc_index"] == [int(x) for x in row[:10]]
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


def test_index_device(tmp_path):
    """`lik index --device`: cpu builds as before (reported); cuda without a
    CUDA build or device fails naming --device; --delete takes none."""
    from test_cli import cuda_state

    d = 16
    X = np.random.default_rng(3).standard_normal((60, d)).astype(np.float32)
    np.save(tmp_path / "d.npy", X)
    np.save(tmp_path / "dcu.npy", np.array([0, 10, 60], dtype=np.int64))
    args = ("--centroids", "8", "--doc-cu-seqlens", tmp_path / "dcu.npy", tmp_path / "d.npy")
    rep = json.loads(run("index", "--json", "--device", "cpu", *args, tmp_path / "a").stdout)
    assert rep["device"] == "cpu"
    run("index", *args, tmp_path / "b")
    for f in (tmp_path / "a").iterdir():
        if f.is_file():
            assert f.read_bytes() == (tmp_path / "b" / f.name).read_bytes(), f.name
    assert "built on cpu" in run("index", "--device", "auto", *args, tmp_path / "c").stdout or \
        cuda_state() == "devices"
    p = run("index", "--device", "gpu", *args, tmp_path / "x", check=False)
    assert p.returncode == 2 and "--device" in p.stderr
    p = run("index", "--delete", "1", "--device", "cpu", tmp_path / "a", check=False)
    assert p.returncode == 2 and "--delete IDS INDEX_DIR" in p.stderr
    if cuda_state() != "devices":
        p = run("index", "--device", "cuda", *args, tmp_path / "x", check=False)
        assert p.returncode == 1 and "--device cuda" in p.stderr, p.stderr


def test_add_matches_the_python_index(tmp_path):
    """`lik index --add` = lik.plaid.Index.add on the same index: same ids,
    same search results; ids continue N..N+n-1 or come from --doc-ids."""
    import lik.plaid

    rng = np.random.default_rng()
    d = 20  # d * nbits a whole number of bytes
    lens = rng.integers(1, 25, 60)
    X = rng.standard_normal((int(lens.sum()), d)).astype(np.float32)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    first, second = 35, 60  # documents [0, 35) built, [35, 60) added as a padded .npy with lengths
    np.save(tmp_path / "d1.npy", X[: cu[first]])
    np.save(tmp_path / "cu1.npy", cu[: first + 1])
    L = int(lens[first:].max())
    pad = np.full((second - first, L, d), np.nan, np.float32)  # garbage in the padding
    for j in range(first, second):
        pad[j - first, : lens[j]] = X[cu[j]:cu[j + 1]]
    np.save(tmp_path / "d2.npy", pad)
    np.save(tmp_path / "len2.npy", lens[first:].astype(np.int64))
    run("index", "--centroids", "16", "--doc-cu-seqlens", tmp_path / "cu1.npy", tmp_path / "d1.npy", tmp_path / "ix")
    want = lik.plaid.Index.load(tmp_path / "ix")
    want.add([X[cu[j]:cu[j + 1]] for j in range(first, second)])
    rep = json.loads(run("index", "--add", "--json", "--doc-lengths", tmp_path / "len2.npy", tmp_path / "d2.npy",
                         tmp_path / "ix").stdout)
    assert rep["num_docs"] == second and rep["added_docs"] == second - first and rep["added_centroids"] == 0
    assert rep["num_centroids"] == 16
    assert not (tmp_path / "ix" / "doc_ids.npy").exists()  # ids 0..N-1: none written
    np.testing.assert_array_equal(lik.plaid.Index.load(tmp_path / "ix").ids, np.arange(second))
    Q = rng.standard_normal((5, 7, d)).astype(np.float32)
    np.save(tmp_path / "q.npy", Q)
    out = json.loads(run("search", "--json", "-k", "8", "--n-ivf-probe", "16", "--n-full-scores", "1000",
                         tmp_path / "ix", tmp_path / "q.npy").stdout)
    s, i = want.search(Q, 8, n_ivf_probe=16, n_full_scores=1000)
    for r, row, sc in zip(out["results"], i, s):
        assert r["doc_index"] == [int(x) for x in row]
        np.testing.assert_allclose(r["scores"], sc, rtol=1e-6)
    assert any(x >= first for r in out["results"] for x in r["doc_index"])  # added documents are found
    # ids given: appended after the index's own
    np.save(tmp_path / "ids3.npy", np.array([1000, 1001], np.int64))
    np.save(tmp_path / "d3.npy", X[: cu[2]])
    np.save(tmp_path / "cu3.npy", cu[:3])
    run("index", "--add", "--doc-ids", tmp_path / "ids3.npy", "--doc-cu-seqlens", tmp_path / "cu3.npy",
        tmp_path / "d3.npy", tmp_path / "ix")
    np.testing.assert_array_equal(np.load(tmp_path / "ix" / "doc_ids.npy"), [*range(second), 1000, 1001])


def test_add_expand_centroids(tmp_path):
    """--expand-centroids: documents unlike the indexed ones get centroids
    (as lik.plaid.Index.add(expand_centroids=True) on the same files)."""
    import lik.plaid

    rng = np.random.default_rng()
    d = 16
    X = rng.standard_normal((400, d)).astype(np.float32)
    X[:, : d // 2] = np.abs(X[:, : d // 2])  # indexed tokens live in one orthant half ...
    Y = rng.standard_normal((300, d)).astype(np.float32)
    Y[:, : d // 2] = -np.abs(Y[:, : d // 2])  # ... added ones in the opposite one
    np.save(tmp_path / "x.npy", X.reshape(40, 10, d))
    np.save(tmp_path / "y.npy", Y.reshape(30, 10, d))
    run("index", "--centroids", "8", tmp_path / "x.npy", tmp_path / "ix")
    want = lik.plaid.Index.load(tmp_path / "ix")
    want.add(Y.reshape(30, 10, d), expand_centroids=True)
    rep = json.loads(run("index", "--add", "--expand-centroids", "--json", tmp_path / "y.npy",
                         tmp_path / "ix").stdout)
    assert rep["added_centroids"] > 0 and rep["num_centroids"] == 8 + rep["added_centroids"]
    assert rep["num_centroids"] == want.num_centroids
    got = lik.plaid.Index.load(tmp_path / "ix")
    Q = rng.standard_normal((3, 5, d)).astype(np.float32)
    for a, b in zip(got.search(Q, 10), want.search(Q, 10)):
        np.testing.assert_array_equal(a, b)


def test_add_errors(tmp_path):
    np.save(tmp_path / "d.npy", np.ones((2, 3, 8), np.float32))
    p = run("index", "--add", tmp_path / "d.npy", check=False)  # INDEX_DIR missing
    assert p.returncode == 2 and "--add DOCS INDEX_DIR" in p.stderr
    p = run("index", "--expand-centroids", tmp_path / "d.npy", tmp_path / "ix", check=False)
    assert p.returncode == 2 and "--expand-centroids applies to --add only" in p.stderr
    p = run("index", "--add", "--nbits", "4", tmp_path / "d.npy", tmp_path / "ix", check=False)
    assert p.returncode == 2 and "keeps its own" in p.stderr
    p = run("index", "--add", tmp_path / "d.npy", tmp_path / "nope", check=False)
    assert p.returncode == 1 and "loading the index" in p.stderr
    run("index", "--centroids", "4", tmp_path / "d.npy", tmp_path / "ix")
    np.save(tmp_path / "d4.npy", np.ones((2, 3, 4), np.float32))
    before = sorted((f.name, f.read_bytes()) for f in (tmp_path / "ix").iterdir())
    p = run("index", "--add", tmp_path / "d4.npy", tmp_path / "ix", check=False)  # d = 4, the index has 8
    assert p.returncode == 1 and "adding to the index failed" in p.stderr
    assert sorted((f.name, f.read_bytes()) for f in (tmp_path / "ix").iterdir()) == before


def test_failed_add_keeps_the_index(tmp_path):
    """A failed `lik index --add` (a folder in the way of plan.json, a file-size
    limit, with and without --expand-centroids) leaves the index as it was:
    same files, same search results (issue 27: it used to leave a folder that
    no longer loaded)."""
    import resource
    import signal
    import subprocess

    rng = np.random.default_rng(7)
    d = 16
    np.save(tmp_path / "d.npy", rng.standard_normal((40, 10, d)).astype(np.float32))
    np.save(tmp_path / "more.npy", rng.standard_normal((1000, 10, d)).astype(np.float32))
    np.save(tmp_path / "q.npy", rng.standard_normal((3, 5, d)).astype(np.float32))
    ix = tmp_path / "ix"
    run("index", "--centroids", "8", tmp_path / "d.npy", ix)

    def files():
        return sorted((f.name, f.read_bytes()) for f in ix.iterdir() if f.is_file())

    def found():
        return json.loads(run("search", "--json", ix, tmp_path / "q.npy").stdout)["results"]

    before, want = files(), found()
    for expand in ([], ["--expand-centroids"]):
        (ix / "plan.json").unlink()
        (ix / "plan.json").mkdir()
        p = run("index", "--add", *expand, tmp_path / "more.npy", ix, check=False)
        assert p.returncode == 1 and "plan.json" in p.stderr
        (ix / "plan.json").rmdir()
        assert [f for f in before if f[0] != "plan.json"] == [f for f in files() if f[0] != "plan.json"]
        assert found() == want
        (ix / "plan.json").write_bytes(dict(before)["plan.json"])

        def limit():  # the new merged_codes.npy (83 kB) cannot be written
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (28 * 1024, 28 * 1024))

        p = subprocess.run([CLI, "index", "--add", *expand, str(tmp_path / "more.npy"), str(ix)],
                           capture_output=True, text=True, timeout=600, preexec_fn=limit)
        assert p.returncode == 1 and "write failed" in p.stderr
        assert files() == before and not any(f.name.startswith(".lik") for f in ix.iterdir())
        assert found() == want


def test_delete(tmp_path):
    rng = np.random.default_rng()
    d, n = 16, 60
    np.save(tmp_path / "d.npy", rng.standard_normal((n, 12, d)).astype(np.float32))
    np.save(tmp_path / "q.npy", rng.standard_normal((4, 8, d)).astype(np.float32))
    run("index", "--centroids", "16", tmp_path / "d.npy", tmp_path / "ix")
    gone = [int(x) for x in rng.choice(n, 20, replace=False)]
    rep = json.loads(run("index", "--json", "--delete", ",".join(map(str, gone[:10])), tmp_path / "ix").stdout)
    assert rep["deleted"] == 10 and rep["num_docs"] == n - 10 and rep["num_deleted"] == 10
    np.save(tmp_path / "more.npy", np.array(gone[10:], np.int64))
    run("index", "--delete", tmp_path / "more.npy", tmp_path / "ix")
    out = json.loads(run("search", "--json", "-k", "50", "--n-ivf-probe", "16", tmp_path / "ix",
                         tmp_path / "q.npy").stdout)
    for r in out["results"]:
        assert len(r["doc_ids"]) == 40 and not set(r["doc_ids"]) & set(gone)
    import lik.plaid

    assert sorted(lik.plaid.Index.load(tmp_path / "ix").ids) == sorted(set(range(n)) - set(gone))
    for arg, msg in [(str(gone[0]), f"ids[0]={gone[0]} is a deleted document"), ("1,x", "entry 1 is not an integer"),
                     (f"{n}", "out of range")]:
        p = run("index", "--delete", arg, tmp_path / "ix", check=False)
        assert p.returncode == 1 and msg in p.stderr, p.stderr


# ---- lik search --where (metadata filters) ------------------------------------------------

def _meta_index(tmp_path, n=90, d=16):
    """An index with metadata built by Python, some documents deleted by Python (rows dropped)
    and some by the command (rows kept: the filter must drop them as Python's where does)."""
    import lik.plaid

    rng = np.random.default_rng()
    docs = [rng.standard_normal((int(rng.integers(3, 20)), d)).astype(np.float32) for _ in range(n)]
    meta = [{"year": 2000 + i % 30, "lang": ("en", "fr", "de")[i % 3], "score": i / 10} for i in range(n)]
    meta[5] = {"year": 2011}  # a row without lang / score (NULLs)
    ix = lik.plaid.Index.build(docs, tmp_path / "ix", num_centroids=32, metadata=meta)
    ix.delete([1, 2, 40])
    ix.save(tmp_path / "ix")
    run("index", "--delete", "4,7,60", tmp_path / "ix")
    np.save(tmp_path / "q.npy", rng.standard_normal((6, 8, d)).astype(np.float32))
    return tmp_path / "ix", tmp_path / "q.npy"


def test_search_where_matches_python(tmp_path):
    import lik.plaid

    ixp, qp = _meta_index(tmp_path)
    ix = lik.plaid.Index.load(ixp)
    Q = np.load(qp)
    cases = [("year > ? AND lang = ?", [2010, "en"]), ("score < ?", [2.5]), ("lang IN (?, ?)", ["fr", "de"]),
             ("_id % 7 = 0", []), ("abs(year - ?) <= 1 OR lang IS NULL", [2005]), ("year > ?", [5000]),
             ("score BETWEEN ? AND ?", [-1, 0.45]), ("lang = ?", ["12"])]
    for cond, params in cases:
        args = [a for p in params for a in ("--param", str(p))]
        for k, extra in [(5, []), (20, ["--n-ivf-probe", "2", "--n-full-scores", "16"])]:
            out = json.loads(run("search", "--json", "-k", k, *extra, "--where", cond, *args, ixp, qp).stdout)
            kw = dict(n_ivf_probe=2, n_full_scores=16) if extra else {}
            s, i = ix.search(Q, top_k=k, filter=(cond, params), **kw)
            allowed = ix.where(cond, params)
            assert out["where"] == cond and out["params"] == [str(p) for p in params]
            assert out["where_docs"] == len(allowed)
            assert not set(allowed.tolist()) & {1, 2, 4, 7, 40, 60}
            for r, row, sc in zip(out["results"], i, s):
                want = [int(x) for x in row if x >= 0]
                assert r["doc_ids"] == want, (cond, params, k)
                assert set(want) <= set(allowed.tolist())
                assert len(want) == min(k, len(allowed))  # filters before the candidate stages
                np.testing.assert_allclose(r["scores"], sc[:len(want)], rtol=1e-6)
    text = run("search", "--where", "year > ?", "--param", "2020", ixp, qp).stdout
    assert f"{len(ix.where('year > ?', [2020]))} live documents match" in text


def test_search_where_param_types(tmp_path):
    import lik.plaid

    ixp, qp = _meta_index(tmp_path, n=70)
    live = len(lik.plaid.Index.load(ixp).ids)
    # integer -> INTEGER, decimal -> REAL (an integer past int64 too), anything else -> TEXT
    for v, t in [("7", "integer"), ("-3", "integer"), ("+12", "integer"), ("2.5", "real"), ("1e3", "real"),
                 ("-.5", "real"), ("99999999999999999999", "real"), ("en", "text"), ("0x10", "text"),
                 (" 5", "text"), ("5 ", "text"), ("nan", "text"), ("inf", "text"), ("1e999", "text"),
                 ("", "text"), ("1,5", "text")]:
        out = json.loads(run("search", "--json", "--where", "typeof(?) = ?", "--param", v, "--param", t,
                             ixp, qp).stdout)
        assert out["where_docs"] == live, (v, t)
    out = json.loads(run("search", "--json", "--where", "? = 7 AND ? = 2.5 AND ? = 'x'", "--param", "7",
                         "--param", "2.5", "--param", "x", ixp, qp).stdout)
    assert out["where_docs"] == live


def test_search_where_errors(tmp_path):
    ixp, qp = _meta_index(tmp_path, n=70)
    before = {f.name: f.read_bytes() for f in ixp.iterdir() if f.is_file()}
    for args, msg in [(["--where", "year >"], "--where"), (["--where", "nope = 1"], "no such column: nope"),
                      (["--where", "1; DROP TABLE metadata"], "';' is refused"),
                      (["--where", "   "], "non-empty"),
                      (["--where", "year > ?"], "has 1 parameter, 0 --param given"),
                      (["--where", "year > ? AND lang = ?", "--param", "1"], "has 2 parameters, 1 --param"),
                      (["--where", "year > 1", "--param", "1"], "has 0 parameters, 1 --param"),
                      (["--where", "_id IN (SELECT rowid FROM sqlite_master)"], "prohibited"),
                      (["--where", "(SELECT count(*) FROM pragma_table_info('metadata')) > 0"], "not authorized")]:
        p = run("search", *args, ixp, qp, check=False)
        assert p.returncode == 1 and msg in p.stderr and "lik: error:" in p.stderr, (args, p.stderr)
    assert {f.name: f.read_bytes() for f in ixp.iterdir() if f.is_file()} == before  # read-only
    p = run("search", "--param", "1", ixp, qp, check=False)  # --param without --where: a usage error
    assert p.returncode == 2 and "--where" in p.stderr
    run("index", "--centroids", "16", tmp_path / "q.npy", tmp_path / "plain")
    p = run("search", "--where", "1", tmp_path / "plain", qp, check=False)
    assert p.returncode == 1 and "--where" in p.stderr and "has no metadata" in p.stderr
    h = run("search", "--help").stdout
    assert "--where COND" in h and "--param VALUE" in h and "--where" in run("--help").stdout
