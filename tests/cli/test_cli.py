"""End-to-end tests of the `lik` command.

The binary is found through $LIK_CLI, then `lik` on PATH, then the build
trees build/programs/lik/lik, build/release/programs/lik/lik and
build*/programs/lik/lik; the tests skip only when none exists.

Scores, rankings and metrics are checked against an independent numpy
float64 MaxSim and an nDCG / recall written here.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "cranfield"


def _find_cli() -> str | None:
    env = os.environ.get("LIK_CLI")
    if env:
        return env
    found = shutil.which("lik")
    if found:
        return found
    plain = [ROOT / "build/programs/lik/lik", ROOT / "build/release/programs/lik/lik"]
    for cand in plain + sorted(ROOT.glob("build*/programs/lik/lik")):
        if os.access(cand, os.X_OK):
            return str(cand)
    return None


CLI = _find_cli()
pytestmark = pytest.mark.skipif(CLI is None, reason="lik command not built (set LIK_CLI)")


# The suite checks the CPU's results (bitwise where the CPU promises it): the
# default --device, auto, would take a GPU where there is one (the GPU and the
# CPU are compared by tests/gpu/test_cli_gpu.py).  env=: the command's environment.
CPU_ENV = {**os.environ, "LIK_DEVICE": "cpu"}


def run(*args, check=True, env=None):
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=600,
                       env=CPU_ENV if env is None else env)
    if check and p.returncode != 0:
        raise AssertionError(f"lik {args} failed ({p.returncode}):\n{p.stderr}")
    return p


def run_json(*args):
    return json.loads(run("--json", *args).stdout)


# ---- independent readers / writers ----------------------------------------------

_ST = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "I64": np.int64,
       "I32": np.int32, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    """name -> ndarray, read by the safetensors package (an independent reader)."""
    return safetensors.numpy.load_file(str(path))


def write_safetensors(path, tensors):
    """tensors: name -> ndarray, or name -> (dtype_string, raw ndarray)."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        if isinstance(t, tuple):
            dt, arr = t
        else:
            arr = t
            dt = {v: k for k, v in _ST.items()}[arr.dtype.type]
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hb = json.dumps(header).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    Path(path).write_bytes(len(hb).to_bytes(8, "little") + hb + b"".join(blobs))


def ragged_to_list(emb, cu):
    return [emb[cu[i]:cu[i + 1]].astype(np.float64) for i in range(len(cu) - 1)]


def maxsim_ref(queries, docs, normalize=False, dtype=np.float64):
    """MaxSim (float64 unless told) of lists of [L, d] arrays -> [Nq, Nd]."""
    def nrm(x):
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    if normalize:
        queries = [nrm(q) for q in queries]
        docs = [nrm(d) for d in docs]
    cat = np.concatenate([d for d in docs if len(d)] or [np.zeros((0, queries[0].shape[1]))])
    cat = cat.astype(dtype)
    bounds = np.cumsum([0] + [len(d) for d in docs])
    nonempty = np.flatnonzero(bounds[1:] > bounds[:-1])
    S = np.zeros((len(queries), len(docs)))
    if len(nonempty) == 0:
        return S
    group = 16  # queries per matmul
    for g in range(0, len(queries), group):
        qs = [q for q in queries[g:g + group]]
        lens = np.array([len(q) for q in qs])
        if lens.sum() == 0:
            continue
        sim = np.concatenate(qs).astype(dtype) @ cat.T  # [sum Lq, T]
        # max over each non-empty document's token range (empty ones score 0)
        m = np.maximum.reduceat(sim, bounds[nonempty], axis=1)  # [sum Lq, nonempty]
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        sums = np.add.reduceat(m.astype(np.float64), starts[lens > 0], axis=0)
        rows = np.flatnonzero(lens > 0) + g
        S[np.ix_(rows, nonempty)] = sums
    return S


def ranking(scores_row, k):
    order = np.lexsort((np.arange(len(scores_row)), -scores_row))
    return order[:k]


def ndcg_at(ranked_ids, judged, k=10):
    dcg = sum(judged.get(int(d), 0) / math.log2(r + 2) for r, d in enumerate(ranked_ids[:k]))
    ideal = sorted(judged.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg


def recall_at(ranked_ids, judged, k=100):
    rel = {d for d, g in judged.items() if g > 0}
    return len(rel & {int(d) for d in ranked_ids[:k]}) / len(rel)


def load_qrels(path):
    q = {}
    for line in Path(path).read_text().split("\n"):
        if line.strip():
            a, b, g = map(int, line.split())
            q.setdefault(a, {})[b] = max(g, 0)
    return q


def check_results(out, S, qids, dids, k, atol=2e-3):
    """Program results agree with the float64 reference scores S."""
    assert len(out["results"]) == len(qids)
    for i, res in enumerate(out["results"]):
        assert res["query_id"] == qids[i]
        idx = np.array(res["doc_index"])
        got = np.array(res["scores"])
        assert len(idx) == min(k, S.shape[1])
        assert len(set(idx.tolist())) == len(idx)
        assert [int(x) for x in res["doc_ids"]] == [int(dids[j]) for j in idx]
        # each reported score is the document's true score ...
        np.testing.assert_allclose(got, S[i, idx], atol=atol, rtol=1e-3)
        # ... the list is sorted and is the true top-k (up to near-ties)
        assert np.all(np.diff(got) <= 1e-6)
        ref = np.sort(S[i])[::-1][:len(idx)]
        np.testing.assert_allclose(got, ref, atol=atol, rtol=1e-3)
        ref_idx = ranking(S[i], len(idx))
        gaps = np.abs(np.diff(S[i, ref_idx]))
        for r in range(len(idx)):
            separated = (r == 0 or gaps[r - 1] > 10 * atol) and (r == len(idx) - 1 or gaps[r] > 10 * atol)
            if separated:
                assert idx[r] == ref_idx[r], (i, r)


# ---- default data -----------------------------------------------------------------

@pytest.fixture(scope="module")
def cranfield():
    if not (DATA / "docs.safetensors").is_file():
        pytest.skip("data/cranfield not present")
    q = read_safetensors(DATA / "queries.safetensors")
    d = read_safetensors(DATA / "docs.safetensors")
    return {
        "q": ragged_to_list(q["embeddings"], q["cu_seqlens"]), "qids": q["ids"],
        "d": ragged_to_list(d["embeddings"], d["cu_seqlens"]), "dids": d["ids"],
        "qrels": load_qrels(DATA / "qrels.tsv"),
    }


def test_default_data_scores_and_ndcg(cranfield):
    nq = 12
    out = run_json("--limit-queries", nq, "--top-k", 100)
    assert out["default_data"] is True
    assert out["num_queries"] == nq and out["num_docs"] == 1400 and out["dim"] == 64
    S = maxsim_ref(cranfield["q"][:nq], cranfield["d"])
    check_results(out, S, cranfield["qids"][:nq], cranfield["dids"], 100)

    # metrics: recomputed here from the reference ranking
    nd, rc = [], []
    for i in range(nq):
        judged = cranfield["qrels"][int(cranfield["qids"][i])]
        ids = cranfield["dids"][ranking(S[i], 100)]
        nd.append(ndcg_at(ids, judged))
        rc.append(recall_at(ids, judged))
    assert out["queries_evaluated"] == nq
    assert out["ndcg@10"] == pytest.approx(np.mean(nd), abs=1e-9)
    assert out["recall@100"] == pytest.approx(np.mean(rc), abs=1e-9)


def test_default_data_all_queries_metrics(cranfield):
    out = run_json("--print", 0)
    assert out["num_queries"] == 225
    # float32 here to keep the test fast on 2 cores (the float64 check of
    # scores and rankings is test_default_data_scores_and_ndcg)
    S = maxsim_ref(cranfield["q"], cranfield["d"], dtype=np.float32).astype(np.float64)
    nd, rc = [], []
    for i in range(225):
        judged = cranfield["qrels"].get(int(cranfield["qids"][i]), {})
        if not any(g > 0 for g in judged.values()):
            continue
        ids = cranfield["dids"][ranking(S[i], 100)]
        nd.append(ndcg_at(ids, judged))
        rc.append(recall_at(ids, judged))
    assert out["queries_evaluated"] == len(nd)
    # near-ties between fp32 and fp64 may swap a pair; allow a tiny slack
    assert out["ndcg@10"] == pytest.approx(np.mean(nd), abs=2e-3)
    assert out["recall@100"] == pytest.approx(np.mean(rc), abs=2e-3)
    # regression anchor for the bundled data (see data/cranfield/README.md)
    assert 0.30 < out["ndcg@10"] < 0.40
    assert 0.65 < out["recall@100"] < 0.80


def test_text_report(cranfield):
    p = run("--limit-queries", 3, "--print", 2)
    assert "query 1: top 10" in p.stdout and "query 2: top 10" in p.stdout
    assert "query 3: top" not in p.stdout
    assert "queries/s" in p.stdout and "GFLOP/s" in p.stdout
    assert "nDCG@10" in p.stdout and "recall@100" in p.stdout
    assert "\r" not in p.stderr  # no progress bar when stderr is not a terminal


def test_threads_do_not_change_results(cranfield):
    a = run_json("--limit-queries", 5, "--threads", 1, "--block-tokens", 5000)
    b = run_json("--limit-queries", 5, "--threads", 2)
    assert a["results"] == b["results"]
    assert a["ndcg@10"] == b["ndcg@10"]


def test_help_and_version():
    assert "Usage" in run("--help").stdout
    assert "lik" in run("--version").stdout


# ---- other input layouts --------------------------------------------------------------

def _random_set(rng, n, lmax, d, lmin=0):
    lens = rng.integers(lmin, lmax + 1, size=n)
    return [rng.standard_normal((l, d)) for l in lens]


def _padded(seqs, L, d, dtype):
    x = np.zeros((len(seqs), L, d), dtype=dtype)
    for i, s in enumerate(seqs):
        x[i, :len(s)] = s
    return x


def _ragged(seqs, d, dtype):
    emb = np.concatenate(seqs).astype(dtype) if seqs else np.zeros((0, d), dtype)
    cu = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).astype(np.int64)
    return emb, cu


@pytest.mark.parametrize("normalize", [False, True])
def test_npy_padded_and_ragged(tmp_path, normalize):
    rng = np.random.default_rng(1)
    d = 24
    qs = _random_set(rng, 7, 9, d, lmin=1)
    ds = _random_set(rng, 53, 31, d)
    qp = _padded(qs, 12, d, np.float32)
    np.save(tmp_path / "q.npy", qp)
    np.save(tmp_path / "ql.npy", np.array([len(s) for s in qs], dtype=np.int64))
    emb, cu = _ragged(ds, d, np.float32)
    np.save(tmp_path / "d.npy", emb)
    np.save(tmp_path / "dcu.npy", cu.astype(np.int32))
    np.save(tmp_path / "dids.npy", np.arange(1000, 1053, dtype=np.int64))
    args = ["--query-lengths", tmp_path / "ql.npy", "--doc-cu-seqlens", tmp_path / "dcu.npy",
            "--doc-ids", tmp_path / "dids.npy", "-k", 20, "--block-tokens", 200]
    if normalize:
        args.append("--normalize")
    out = run_json(tmp_path / "q.npy", tmp_path / "d.npy", *args)
    S = maxsim_ref([q.astype(np.float32).astype(np.float64) for q in qs],
                   [x.astype(np.float32).astype(np.float64) for x in ds], normalize)
    check_results(out, S, list(range(7)), np.arange(1000, 1053), 20, atol=1e-3)


def test_safetensors_padded_mask_bf16_and_f16(tmp_path):
    rng = np.random.default_rng(2)
    d = 16
    qs = _random_set(rng, 4, 6, d, lmin=1)
    ds = _random_set(rng, 30, 20, d)
    # queries: padded F16 with a mask
    qp = _padded(qs, 6, d, np.float16)
    mask = np.zeros((4, 6), dtype=np.bool_)
    for i, s in enumerate(qs):
        mask[i, :len(s)] = True
    qp[~mask] = np.float16(np.nan)  # masked tokens must never matter
    write_safetensors(tmp_path / "q.safetensors", {"embeddings": qp, "mask": mask,
                                                   "ids": np.array([5, 6, 7, 8], dtype=np.int64)})
    # documents: padded BF16 (raw bits) with lengths
    dp = _padded(ds, 20, d, np.float32)
    bits = (dp.view(np.uint32) >> 16).astype(np.uint16)
    write_safetensors(tmp_path / "d.safetensors", {
        "embeddings": ("BF16", bits),
        "lengths": np.array([len(s) for s in ds], dtype=np.int64)})
    out = run_json(tmp_path / "q.safetensors", tmp_path / "d.safetensors", "-k", 30)
    assert out["dtype"] == "F32"  # mixed F16/BF16 is scored in F32
    q64 = [q.astype(np.float16).astype(np.float64) for q in qs]
    d64 = [(bits[i, :len(s)].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
           for i, s in enumerate(ds)]
    S = maxsim_ref(q64, d64)
    check_results(out, S, [5, 6, 7, 8], np.arange(30), 30, atol=1e-3)


# ---- errors ------------------------------------------------------------------------------

def _small_pair(tmp_path, dq=8, dd=8):
    rng = np.random.default_rng(3)
    write_safetensors(tmp_path / "q.safetensors", {
        "embeddings": rng.standard_normal((5, dq)).astype(np.float32),
        "cu_seqlens": np.array([0, 2, 5], dtype=np.int64)})
    write_safetensors(tmp_path / "d.safetensors", {
        "embeddings": rng.standard_normal((7, dd)).astype(np.float32),
        "cu_seqlens": np.array([0, 3, 3, 7], dtype=np.int64)})
    return tmp_path / "q.safetensors", tmp_path / "d.safetensors"


def _fails(*args, expect):
    p = run(*args, check=False)
    assert p.returncode not in (0, None) and p.returncode > 0, p  # non-zero, not a signal
    assert expect in p.stderr, p.stderr
    return p


def test_small_ragged_ok(tmp_path):
    q, d = _small_pair(tmp_path)
    out = run_json(q, d, "-k", 3)
    assert [len(r["doc_ids"]) for r in out["results"]] == [3, 3]
    assert 0.0 in out["results"][0]["scores"]  # the empty document scores 0


def test_error_missing_file(tmp_path):
    q, _ = _small_pair(tmp_path)
    _fails(q, tmp_path / "nope.safetensors", expect="nope.safetensors: cannot open")


def test_error_qrels_is_a_directory(tmp_path):
    q, d = _small_pair(tmp_path)
    _fails(q, d, "--qrels", tmp_path, expect="cannot open qrels: is a directory")


def test_error_dim_mismatch(tmp_path):
    q, d = _small_pair(tmp_path, dq=8, dd=12)
    _fails(q, d, expect="dimension mismatch")


def test_error_bad_header(tmp_path):
    q, _ = _small_pair(tmp_path)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes((20).to_bytes(8, "little") + b"{not json at all....")
    _fails(q, bad, expect="not valid JSON")
    bad.write_bytes((1 << 40).to_bytes(8, "little") + b"{}")
    _fails(q, bad, expect="bad safetensors header length")
    bad.write_bytes(b"abc")
    _fails(q, bad, expect="not a safetensors file")


def test_error_unknown_dtype(tmp_path):
    q, _ = _small_pair(tmp_path)
    write_safetensors(tmp_path / "f8.safetensors", {
        "embeddings": ("F8_E4M3", np.zeros((4, 8), dtype=np.uint8)),
        "cu_seqlens": np.array([0, 4], dtype=np.int64)})
    _fails(q, tmp_path / "f8.safetensors", expect="unsupported dtype F8_E4M3")
    np.save(tmp_path / "i2.npy", np.zeros((2, 3, 8), dtype=np.int16))
    _fails(q, tmp_path / "i2.npy", expect="unsupported dtype")


def test_error_bad_offsets_and_shapes(tmp_path):
    q, _ = _small_pair(tmp_path)
    write_safetensors(tmp_path / "cu.safetensors", {
        "embeddings": np.zeros((4, 8), dtype=np.float32),
        "cu_seqlens": np.array([0, 3, 9], dtype=np.int64)})
    _fails(q, tmp_path / "cu.safetensors", expect="cu_seqlens ends at 9")
    write_safetensors(tmp_path / "nocu.safetensors", {"embeddings": np.zeros((4, 8), np.float32)})
    _fails(q, tmp_path / "nocu.safetensors", expect="need cu_seqlens")
    write_safetensors(tmp_path / "noemb.safetensors", {"x": np.zeros((4, 8), np.float32)})
    _fails(q, tmp_path / "noemb.safetensors", expect='no tensor "embeddings"')
    # a truncated file: offsets beyond the data
    raw = (tmp_path / "cu.safetensors").read_bytes()
    (tmp_path / "trunc.safetensors").write_bytes(raw[:-20])
    _fails(q, tmp_path / "trunc.safetensors", expect="] outside the file (data section has")
    np.save(tmp_path / "p.npy", np.zeros((2, 3, 8), np.float32))
    np.save(tmp_path / "pl.npy", np.array([1, 4], np.int64))
    _fails(q, tmp_path / "p.npy", "--doc-lengths", tmp_path / "pl.npy", expect="lengths[1] = 4")
    (tmp_path / "t.npy").write_bytes((tmp_path / "p.npy").read_bytes()[:-10])
    _fails(q, tmp_path / "t.npy", expect="truncated .npy data")


def test_error_usage(tmp_path):
    q, _ = _small_pair(tmp_path)
    assert run(q, check=False).returncode == 2
    assert run("--top-k", 0, check=False).returncode == 2
    assert run("--bogus", check=False).returncode == 2


# ---- rerank ------------------------------------------------------------------------------

def test_rerank_candidates(tmp_path, cranfield):
    (tmp_path / "none.tsv").write_text("")  # no judgments (inputs are regular files: not /dev/null)
    full = run_json("--limit-queries", 6, "--top-k", 50, "--qrels", tmp_path / "none.tsv")
    lines = []
    for res in full["results"]:
        # candidates in scrambled order, TREC run format, plus a duplicate
        ids = list(res["doc_ids"])[::-1]
        for r, d in enumerate(ids + ids[:3]):
            lines.append(f"{res['query_id']} Q0 {d} {r + 1} 0.0 test")
    (tmp_path / "run.trec").write_text("\n".join(lines) + "\n")
    out = run_json("--limit-queries", 6, "--rerank", tmp_path / "run.trec", "-k", 10)
    assert out["rerank"] is True and out["pairs_scored"] == 6 * 50
    for a, b in zip(out["results"], full["results"]):
        assert a["doc_ids"] == b["doc_ids"][:10]
        assert a["scores"] == b["scores"][:10]
    # a two-column candidate file; a query without candidates gets no results
    (tmp_path / "c.txt").write_text("1 184\n1 12\n2 1400\n")
    out = run_json("--limit-queries", 3, "--rerank", tmp_path / "c.txt")
    S = maxsim_ref(cranfield["q"][:1], [cranfield["d"][183], cranfield["d"][11]])
    assert out["results"][0]["doc_ids"] == [int(x) for x in np.array([184, 12])[np.argsort(-S[0])]]
    np.testing.assert_allclose(sorted(out["results"][0]["scores"], reverse=True),
                               np.sort(S[0])[::-1], atol=2e-3)
    assert out["results"][1]["doc_ids"] == [1400]
    assert out["results"][2]["doc_ids"] == []


def test_rerank_errors(tmp_path, cranfield):
    (tmp_path / "c.txt").write_text("1 999999\n")
    _fails("--rerank", tmp_path / "c.txt", expect="document id 999999 (query 1) is not in")
    (tmp_path / "c.txt").write_text("1 2 3\n")
    _fails("--rerank", tmp_path / "c.txt", expect="expected 'query doc'")
    _fails("--rerank", tmp_path / "none.txt", expect="cannot open candidates")


# ---- untrusted files and extreme sizes (issue 22) -------------------------------------------

CEILING = 100 << 20  # bytes of address space a refused file may cost


def _bounded(*args):
    """Runs lik under a 100 MB address-space limit; returns (process, seconds)."""
    if b"__asan_init" in Path(CLI).read_bytes():
        pytest.skip("an ASan build reserves more address space than the ceiling")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (CEILING, CEILING))

    t0 = time.monotonic()
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=30,
                       preexec_fn=limit)
    return p, time.monotonic() - t0


def _npy_header_only(path, descr, shape, data=b""):
    """A .npy whose header declares `shape`, followed by `data` (no padding)."""
    h = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(shape)}, }}".encode()
    Path(path).write_bytes(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + data)
    return path


def _raw_safetensors(path, header, data=b""):
    h = json.dumps(header, separators=(",", ":")).encode()
    Path(path).write_bytes(len(h).to_bytes(8, "little") + h + data)
    return path


def _declaring_files(tmp_path):
    """(file, substring of the expected message): files whose headers declare
    more than the files hold."""
    t = tmp_path
    return [
        # 1. N sequences of 0 tokens: no data bounds N (the heap overflow of issue 22)
        (_npy_header_only(t / "n0.npy", "<f4", (2305843009213693953, 0, 4)),
         "declare 2305843009213693953 sequences in a"),
        # 2. the same in safetensors (16.8 GB of allocations before)
        (_raw_safetensors(t / "n0.safetensors", {"embeddings": {
            "dtype": "F32", "shape": [1073741824, 0, 4], "data_offsets": [0, 0]}}),
         "declare 1073741824 sequences in a"),
        (_npy_header_only(t / "trunc.npy", "<f4", (10**12, 1, 4), b"\0" * 16),
         "needs 16000000000000 bytes, file has 16"),
        (_npy_header_only(t / "huge.npy", "<f4", (2**62, 2**62, 4)), ".npy shape too large"),
        (_raw_safetensors(t / "shape.safetensors", {"embeddings": {
            "dtype": "F32", "shape": [10**12, 4], "data_offsets": [0, 16]}}, b"\0" * 16),
         "shape [1000000000000, 4] of F32 needs a different byte size than data_offsets [0, 16]"),
        (_raw_safetensors(t / "off.safetensors", {"embeddings": {
            "dtype": "F32", "shape": [10**12, 1, 4], "data_offsets": [0, 16 * 10**12]}},
            b"\0" * 16),
         "data_offsets [0, 16000000000000] outside the file (data section has 16 bytes)"),
    ]


def test_declared_sizes_fail_fast_and_small(tmp_path):
    q, d = _small_pair(tmp_path)
    for bad, expect in _declaring_files(tmp_path):
        for args in ((bad, d), (q, bad)):  # as queries and as documents
            p, secs = _bounded(*args)
            assert p.returncode == 1, (bad.name, p.returncode, p.stderr)
            assert f"{bad}: " in p.stderr and expect in p.stderr, p.stderr
            assert secs < 1.0, (bad.name, secs)


def test_companion_counts_fail_fast_and_small(tmp_path):
    np.save(tmp_path / "p.npy", np.zeros((2, 3, 8), np.float32))
    lengths = _npy_header_only(tmp_path / "len.npy", "<i8", (10**15,), b"\0" * 8)
    ids = _npy_header_only(tmp_path / "ids.npy", "<i8", (10**15,), b"\0" * 8)
    for opt, f in (("--query-lengths", lengths), ("--query-ids", ids)):
        p, secs = _bounded(tmp_path / "p.npy", tmp_path / "p.npy", opt, f)
        assert p.returncode == 1 and f"{f}: truncated .npy data" in p.stderr, p.stderr
        assert secs < 1.0


def test_safetensors_offsets_must_tile_the_data(tmp_path):
    q, _ = _small_pair(tmp_path)
    emb = np.zeros((4, 8), np.float32).tobytes()
    cu = np.array([0, 4], np.int64).tobytes()
    entry = lambda dt, shape, b, e: {"dtype": dt, "shape": shape, "data_offsets": [b, e]}
    # cu_seqlens overlapping the embeddings
    bad = _raw_safetensors(tmp_path / "overlap.safetensors", {
        "embeddings": entry("F32", [4, 8], 0, 128), "cu_seqlens": entry("I64", [2], 112, 128)},
        emb)
    _fails(q, bad, expect='tensors "embeddings" [0, 128] and "cu_seqlens" [112, 128] overlap')
    bad = _raw_safetensors(tmp_path / "hole.safetensors", {
        "embeddings": entry("F32", [4, 8], 0, 128), "cu_seqlens": entry("I64", [2], 136, 152)},
        emb + b"\0" * 8 + cu)
    _fails(q, bad, expect="bytes [128, 136) of the data section belong to no tensor")
    bad = _raw_safetensors(tmp_path / "tail.safetensors", {
        "embeddings": entry("F32", [4, 8], 0, 128), "cu_seqlens": entry("I64", [2], 128, 144)},
        emb + cu + b"\0")
    _fails(q, bad, expect="the tensors end at byte 144 of a 145-byte data section")
    good = _raw_safetensors(tmp_path / "good.safetensors", {
        "embeddings": entry("F32", [4, 8], 0, 128), "cu_seqlens": entry("I64", [2], 128, 144)},
        emb + cu)
    assert run(q, good).returncode == 0


def test_duplicated_qrels_line_counts_once(tmp_path):
    q, d = _small_pair(tmp_path)
    (tmp_path / "once.tsv").write_text("0 1 1\n1 2 2\n1 0 1\n")
    (tmp_path / "twice.tsv").write_text("0 1 1\n0 1 1\n1 2 2\n1 0 1\n1 2 2\n")
    once = run_json(q, d, "--qrels", tmp_path / "once.tsv")
    twice = run_json(q, d, "--qrels", tmp_path / "twice.tsv")
    # 3 documents, so every relevant one is in the top 100
    assert once["recall@100"] == twice["recall@100"] == 1.0
    assert twice["ndcg@10"] == once["ndcg@10"]
    (tmp_path / "clash.tsv").write_text("0 1 1\n0 1 2\n")
    _fails(q, d, "--qrels", tmp_path / "clash.tsv",
           expect="clash.tsv: query 0, document 1 is judged twice, with gains 1 and 2")


def test_threads_out_of_int_range(tmp_path):
    q, d = _small_pair(tmp_path)
    for v in ("2147483648", "-1", "99999999999999999999"):
        p = run(q, d, "-t", v, check=False)
        assert p.returncode == 2, (v, p.stderr)
        assert "--threads expects an integer in [0, 2147483647]" in p.stderr, p.stderr


def test_out_of_memory_names_file_and_sizes(tmp_path):
    # legal ragged queries whose padded block (1000 x 100000 tokens x d=4 fp32,
    # 1.6 GB) exceeds the ceiling: a clean error naming the file and the sizes
    emb = np.zeros((100000, 4), np.float32)
    cu = np.concatenate([np.zeros(1000, np.int64), [100000]])
    _, d = _small_pair(tmp_path, dq=4, dd=4)
    write_safetensors(tmp_path / "long.safetensors", {"embeddings": emb, "cu_seqlens": cu})
    p, secs = _bounded(tmp_path / "long.safetensors", d)
    assert p.returncode == 1, p.stderr
    assert (f"{tmp_path / 'long.safetensors'}: out of memory for a padded block of 1000 queries x "
            "100000 tokens x d=4 (F32)") in p.stderr, p.stderr
    assert secs < 1.0


# ---- --precision int8 | binary | fp16 ---------------------------------------------


def _quantize_int8(x):
    """The documented formula: scale = amax / 127, q = round_half_even(x / scale) (fp32)."""
    s = (np.abs(x).max(-1) / np.float32(127)).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.clip(np.rint(x / s[..., None]), -127, 127)
    q[s == 0] = 0
    return q.astype(np.float64), s.astype(np.float64)


def _lowbit_ref(Q, D, precision, ql, dl):
    """float64 scores [Nq, Nd] of padded Q / D (valid lengths ql / dl; a document
    without tokens scores 0) scored as the command's --precision does."""
    Q = np.where(np.arange(Q.shape[1])[None, :, None] < ql[:, None, None], Q, 0)
    D = np.where(np.arange(D.shape[1])[None, :, None] < dl[:, None, None], D, 0)
    q, sq = _quantize_int8(Q)
    if precision == "int8":
        d, sd = _quantize_int8(D)
        sims = np.einsum("isk,jtk->ijst", q * sq[..., None], d * sd[..., None])
    elif precision == "binary":
        sims = np.einsum("isk,jtk->ijst", q * sq[..., None], np.where(D > 0, 1.0, -1.0))
    elif precision == "fp16":
        sims = np.einsum("isk,jtk->ijst", Q.astype(np.float16).astype(np.float64),
                         D.astype(np.float16).astype(np.float64))
    else:
        sims = np.einsum("isk,jtk->ijst", Q.astype(np.float64), D.astype(np.float64))
    valid_d = np.arange(D.shape[1])[None, :] < dl[:, None]  # [Nd, Ld]
    best = np.where(valid_d[None, :, None, :], sims, -np.inf).max(-1)  # [Nq, Nd, Lq]
    best[:, dl == 0] = 0
    valid_q = np.arange(Q.shape[1])[None, :] < ql[:, None]  # [Nq, Lq]
    return np.where(valid_q[:, None, :], best, 0).sum(-1)


def _random_qd(tmp_path, nq, nd, lq, ld, d):
    """Padded .npy queries / documents with valid lengths (1 and full among them, a
    document without tokens) and NaN / Inf garbage in the padding."""
    seed = int(np.random.SeedSequence().entropy % 2**32)
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((nq, lq, d)).astype(np.float32)
    D = rng.standard_normal((nd, ld, d)).astype(np.float32)
    ql = rng.integers(1, lq + 1, nq)
    ql[:2] = 1, lq
    dl = rng.integers(1, ld + 1, nd)
    dl[:3] = 1, ld, 0
    for x, lens in ((Q, ql), (D, dl)):
        pad = np.arange(x.shape[1])[None, :] >= lens[:, None]
        x[pad] = rng.choice(np.array([np.nan, np.inf, -np.inf, 1e30], np.float32), (int(pad.sum()), d))
    for name, arr in (("q", Q), ("d", D), ("ql", ql.astype(np.int64)), ("dl", dl.astype(np.int64))):
        np.save(tmp_path / f"{name}.npy", arr)
    files = (tmp_path / "q.npy", tmp_path / "d.npy", "--query-lengths", tmp_path / "ql.npy",
             "--doc-lengths", tmp_path / "dl.npy")
    return Q, D, ql, dl, files, seed


@pytest.mark.parametrize("precision", ["int8", "binary", "fp16"])
def test_precision_matches_quantised_reference(tmp_path, precision):
    Q, D, ql, dl, files, seed = _random_qd(tmp_path, 4, 30, 6, 9, 17)
    out = run_json("--precision", precision, "-k", 5, *files)
    ref = _lowbit_ref(Q, D, precision, ql, dl)
    for i, res in enumerate(out["results"]):
        want = np.argsort(-ref[i], kind="stable")[:5]
        np.testing.assert_allclose(res["scores"], ref[i][want], rtol=1e-5, atol=1e-5, err_msg=f"seed {seed}")


def _check_two_stage(out, first, exact, pools, k, c, seed):
    """Every query: the low-bit top k*c of its pool (by first), rescored by exact."""
    for i, res in enumerate(out["results"]):
        pool = np.asarray(pools[i])
        keep = pool[np.argsort(-first[i][pool], kind="stable")[:k * c]]
        want = keep[np.argsort(-exact[i][keep], kind="stable")[:k]]
        assert res["doc_index"] == want.tolist(), f"seed {seed}, query {i}"
        np.testing.assert_allclose(res["scores"], exact[i][want], rtol=1e-5, atol=1e-4,
                                   err_msg=f"seed {seed}")


@pytest.mark.parametrize("precision", ["int8", "binary"])
def test_rescore_is_lowbit_top_kc_then_exact(tmp_path, precision):
    Q, D, ql, dl, files, seed = _random_qd(tmp_path, 5, 41, 7, 11, 17)
    out = run_json("--precision", precision, "--rescore", 3, "-k", 4, *files)
    assert out["rescore"] == 3 and out["rescored_as"] == "F32" and out["dtype"] == precision
    first, exact = _lowbit_ref(Q, D, precision, ql, dl), _lowbit_ref(Q, D, "exact", ql, dl)
    _check_two_stage(out, first, exact, [np.arange(41)] * 5, 4, 3, seed)
    # when k*C covers the corpus the result is the exact top-k, scores bitwise
    full = run_json("-k", 4, *files)
    out = run_json("--precision", precision, "--rescore", 11, "-k", 4, *files)
    for a, b in zip(out["results"], full["results"]):
        assert (a["doc_index"], a["scores"]) == (b["doc_index"], b["scores"]), f"seed {seed}"


def _candidates(tmp_path, nq, nd, per_query, seed):
    rng = np.random.default_rng(seed)
    pools = [np.sort(rng.choice(nd, per_query, replace=False)) for _ in range(nq)]
    lines = [f"{i} {j}" for i, pool in enumerate(pools) for j in rng.permutation(pool)]
    (tmp_path / "cand.txt").write_text("\n".join(lines) + "\n")
    return pools


def test_rerank_in_int8_and_binary_with_rescore(tmp_path):
    Q, D, ql, dl, files, seed = _random_qd(tmp_path, 4, 60, 5, 8, 48)
    pools = _candidates(tmp_path, 4, 60, 25, seed)
    args = ("-k", 5, "--rerank", tmp_path / "cand.txt", *files)
    int8 = _lowbit_ref(Q, D, "int8", ql, dl)
    out = run_json("--precision", "int8", *args)
    assert out["rerank"] is True and out["dtype"] == "int8" and out["pairs_scored"] == 4 * 25
    for i, res in enumerate(out["results"]):
        want = pools[i][np.argsort(-int8[i][pools[i]], kind="stable")[:5]]
        assert res["doc_index"] == want.tolist(), f"seed {seed}"
        np.testing.assert_allclose(res["scores"], int8[i][want], rtol=1e-5, atol=1e-5)
    out = run_json("--precision", "binary", "--rescore", 2, *args)
    assert out["pairs_scored"] == 4 * 25 + 4 * 10
    _check_two_stage(out, _lowbit_ref(Q, D, "binary", ql, dl), _lowbit_ref(Q, D, "exact", ql, dl),
                     pools, 5, 2, seed)


def test_rescore_cranfield_top10_is_exact(cranfield):
    """Binary top-200 then exact: the exact top-10 on Cranfield (measured 1.000,
    bench/RESULTS.md); without rescoring binary keeps ~0.76 of it."""
    files = (DATA / "queries.safetensors", DATA / "docs.safetensors")
    exact = run_json("-k", 10, "-n", 60, *files)
    binary = run_json("--precision", "binary", "-k", 10, "-n", 60, *files)
    two = run_json("--precision", "binary", "--rescore", 20, "-k", 10, "-n", 60, *files)

    def overlap(out):
        return np.mean([len(set(a["doc_ids"]) & set(b["doc_ids"])) / 10
                        for a, b in zip(out["results"], exact["results"])])

    assert overlap(two) >= 0.99 and overlap(binary) < 0.9, (overlap(two), overlap(binary))
    for a, b in zip(two["results"], exact["results"]):  # rescored scores are exact ones
        got = dict(zip(a["doc_ids"], a["scores"]))
        for d, sc in zip(b["doc_ids"], b["scores"]):
            if d in got:
                assert got[d] == sc


def test_rescore_and_precision_combinations_that_make_no_sense(tmp_path):
    (tmp_path / "c.txt").write_text("1 184\n")
    _fails("--rescore", 4, expect="--rescore rescores low-bit candidates exactly: it needs "
           "--precision int8 or binary (as-stored scores are already final)")
    _fails("--precision", "fp16", "--rescore", 4, expect="(fp16 scores are already final)")
    p = _fails("--precision", "binary", "--rerank", tmp_path / "c.txt",
               expect="--precision binary --rerank: sign bits are a pre-filter, not a reranker; "
               "add --rescore C")
    assert p.returncode == 2
    assert run("--precision", "int8", "--rescore", 0, check=False).returncode == 2


# ---- --device (the CPU suite: a build without CUDA, or a machine without a GPU) ----------------

def cuda_state():
    """'not built', 'no device' or 'devices': this command's CUDA, as `lik --version` says."""
    v = run("--version").stdout
    if "CUDA: not built" in v:
        return "not built"
    return "no device" if "CUDA: no device" in v else "devices"


def _no_lik_device():
    return {k: v for k, v in os.environ.items() if k != "LIK_DEVICE"}


def test_device_auto_is_the_cpu_without_cuda(cranfield):
    args = ("--limit-queries", 4, "--top-k", 20)
    cpu = run_json("--device", "cpu", *args)
    assert cpu["device"] == "cpu" and "device_name" not in cpu
    pinned = run_json(*args)  # LIK_DEVICE=cpu (the suite's)
    assert pinned["results"] == cpu["results"] and pinned["device"] == "cpu"
    if cuda_state() == "devices":
        pytest.skip("a CUDA device is present: auto takes it (tests/gpu/test_cli_gpu.py)")
    for how in ((), ("--device", "auto")):
        out = json.loads(run("--json", *how, *args, env=_no_lik_device()).stdout)
        assert out["device"] == "cpu" and out["results"] == cpu["results"], how
        assert out["ndcg@10"] == cpu["ndcg@10"], how
    text = run("--device", "auto", "-n", 1, "-p", 1, env=_no_lik_device()).stdout
    assert text.startswith("lik ") and " on cpu, CPU kernels: " in text.splitlines()[0]
    for prec in (("--precision", "int8"), ("--precision", "binary", "--rescore", 2)):
        a = run_json("--device", "cpu", *prec, *args)
        b = json.loads(run("--json", "--device", "auto", *prec, *args, env=_no_lik_device()).stdout)
        assert a["results"] == b["results"] and b["device"] == "cpu", prec


def test_device_cuda_without_cuda_is_an_error(tmp_path):
    state = cuda_state()
    if state == "devices":
        pytest.skip("a CUDA device is present (tests/gpu/test_cli_gpu.py)")
    why = ("this lik was built without the CUDA backend (-DLIK_CUDA=OFF)" if state == "not built"
           else "no CUDA device")
    (tmp_path / "c.txt").write_text("1 184\n")
    for args in (("--device", "cuda"), ("--device", "cuda:0", "--precision", "int8"),
                 ("--device", "cuda", "--rerank", tmp_path / "c.txt"), ("search", "--device", "cuda", tmp_path)):
        p = run(*args, check=False)
        assert p.returncode == 1 and f"lik: error: --device cuda: {why}" in p.stderr, (args, p.stderr)
        assert p.stdout == "", args
    p = run("-n", 1, check=False, env={**os.environ, "LIK_DEVICE": "cuda"})
    assert p.returncode == 1 and why in p.stderr


def test_device_bad_values():
    p = run("--device", "gpu", check=False)
    assert p.returncode == 2 and "lik: --device expects cpu, cuda, cuda:N or auto, got 'gpu'" in p.stderr
    for bad in ("cuda:", "cuda:-1", "cuda:x", "cuda:99999999999", "CPU"):
        assert run("--device", bad, check=False).returncode == 2, bad
    bogus = {**os.environ, "LIK_DEVICE": "bogus"}
    p = run("-n", 1, check=False, env=bogus)
    assert p.returncode == 2 and "LIK_DEVICE expects cpu, cuda, cuda:N or auto, got 'bogus'" in p.stderr
    assert run("-n", 1, "-p", 0, "--device", "cpu", env=bogus).returncode == 0  # --device wins
    assert "--device D" in run("--help").stdout and "--device D" in run("search", "--help").stdout
    assert "CUDA: " in run("--version").stdout
    # the CUDA search runs neither --where nor more than 512 probes: a usage error on cuda
    p = run("search", "--device", "cuda", "--where", "year > 1", "ix", check=False)
    assert p.returncode == 2 and "the CUDA search takes no --where" in p.stderr
    p = run("search", "--device", "cuda", "--n-ivf-probe", 513, "ix", check=False)
    assert p.returncode == 2 and "at most 512 cells per query token (--n-ivf-probe 513)" in p.stderr
    # `lik index --device` (the build's nearest-centroid search and coding): the same values
    p = run("index", "--device", "gpu", "ix", check=False)
    assert p.returncode == 2 and "lik: --device expects cpu, cuda, cuda:N or auto, got 'gpu'" in p.stderr
    assert "--device D" in run("index", "--help").stdout


def test_precision_bad_value():
    p = run("--precision", "int4", check=False)
    assert p.returncode == 2 and "--precision: expected fp16, int8 or binary, got 'int4'" in p.stderr
