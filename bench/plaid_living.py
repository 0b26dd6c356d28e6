#!/usr/bin/env python3
"""A living PLAID index on the CPU: delete, compact, rebuild, filtered search.

On bench/plaid_index.py's synthetic corpus (--docs documents of 60..140
tokens, d = 128, fp16, seeded; 100 queries of 32 tokens near a document;
10^4 documents = ~10^6 tokens), lik.plaid.Index at fast-plaid's default
search parameters (top_k 10, n_ivf_probe 8, n_full_scores 4096):

  delete     for 1 % and 10 % of the documents (random, seeded): the delete
             call, the save after it, search queries/s (one batch of all
             queries) before and after, recall@10 against exact MaxSim top-10
             over the surviving documents; then compact (+ save) and search
             again; and a rebuild of an index of the survivors (build time,
             queries/s, recall@10) for comparison.
  filter     metadata {"bucket": j % 1000} (SQLite, metadata.sqlite), search
             with filter=("bucket < ?", [b]) at selectivities 50 %, 5 % and
             0.1 %: where() time, queries/s, recall@10 against exact MaxSim
             top-10 over the filtered documents, and the share of queries
             with 10 results.

Exact MaxSim is lik.retrieve (fp16, all tokens, normalize on) over padded
blocks of the allowed documents.  Each timing is one run (after one
warm-up search of two queries); threads: all cores (LIK_NUM_THREADS).

    python3 bench/plaid_living.py --docs 10000

fast-plaid's delete + filtering.where side by side is not run here (it needs
its own environment with torch; see bench/plaid_index.py).
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plaid_index as base  # noqa: E402  (the corpus, machine(), the library's path)

lik = base._lik()
plaid = lik.plaid


def exact_top(X, cu, Q, allowed, k=10):
    """Exact MaxSim top-k ids over the documents `allowed` (ids = positions)."""
    best_s = np.full((len(Q), k), -np.inf, np.float32)
    best_i = np.full((len(Q), k), -1, np.int64)
    Qh = Q.astype(X.dtype)
    for b0 in range(0, len(allowed), 1024):
        blk = allowed[b0:b0 + 1024]
        L = int((cu[blk + 1] - cu[blk]).max())
        D = np.zeros((len(blk), L, X.shape[1]), X.dtype)
        M = np.zeros((len(blk), L), bool)
        for a, j in enumerate(blk):
            n = cu[j + 1] - cu[j]
            D[a, :n] = X[cu[j]:cu[j + 1]]
            M[a, :n] = True
        s, i = lik.retrieve(Qh, D, min(k, len(blk)), d_mask=M, normalize=True)
        cs = np.concatenate([best_s, s], 1)
        ci = np.concatenate([best_i, blk[i]], 1)
        order = np.lexsort((ci, -cs), axis=1)[:, :k]
        best_s = np.take_along_axis(cs, order, 1)
        best_i = np.take_along_axis(ci, order, 1)
    return best_i


def recall(got, want):
    r = []
    for g, w in zip(got, want):
        w = set(int(x) for x in w if x >= 0)
        if w:
            r.append(len(w & set(int(x) for x in g if x >= 0)) / len(w))
    return float(np.mean(r))


def timed_search(ix, Q, **kw):
    ix.search(Q[:2], top_k=10, **kw)
    t = time.perf_counter()
    s, i = ix.search(Q, top_k=10, **kw)
    return i, len(Q) / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=10000)
    ap.add_argument("--clusters", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=18)
    args = ap.parse_args()
    X, cu, Q, _ = base.synthetic(args.docs, args.clusters, args.seed)
    N = args.docs
    print(f"# {datetime.date.today()}, {base.machine()}; {N} documents, {cu[-1]} tokens, d={X.shape[1]}, "
          f"{len(Q)} queries; `python3 bench/plaid_living.py --docs {N}`\n")
    tmp = Path(tempfile.mkdtemp(prefix="lik_living_"))
    try:
        rng = np.random.default_rng(args.seed)
        meta = [{"bucket": j % 1000} for j in range(N)]
        t = time.perf_counter()
        ix = plaid.Index.build(X, tmp / "base", cu_seqlens=cu, metadata=meta)
        build_s = time.perf_counter() - t
        i0, qps0 = timed_search(ix, Q)
        r0 = recall(i0, exact_top(X, cu, Q, np.arange(N)))
        print("| step | time s | queries/s | recall@10 vs exact (live / filtered set) |")
        print("|---|---|---|---|")
        print(f"| build {N} documents (K={ix.num_centroids}) | {build_s:.1f} | {qps0:.1f} | {r0:.3f} |")
        for frac in (0.01, 0.10):
            tag = f"{frac:.0%}"
            gone = np.sort(rng.choice(N, int(N * frac), replace=False))
            live = np.setdiff1d(np.arange(N), gone)
            want = exact_top(X, cu, Q, live)
            shutil.copytree(tmp / "base", tmp / "d")
            ix = plaid.Index.load(tmp / "d")
            t = time.perf_counter()
            ix.delete(gone)
            td = time.perf_counter() - t
            t = time.perf_counter()
            ix.save(tmp / "d")
            ts = time.perf_counter() - t
            i1, qps1 = timed_search(ix, Q)
            assert not np.isin(i1, gone).any()
            print(f"| delete {tag} ({len(gone)} documents): delete call / save | {td:.4f} / {ts:.2f} | {qps1:.1f} | "
                  f"{recall(i1, want):.3f} |")
            t = time.perf_counter()
            ix.compact()
            tc = time.perf_counter() - t
            t = time.perf_counter()
            ix.save(tmp / "d")
            tcs = time.perf_counter() - t
            ix = plaid.Index.load(tmp / "d")
            i2, qps2 = timed_search(ix, Q)
            print(f"| compact after {tag}: compact / save | {tc:.2f} / {tcs:.2f} | {qps2:.1f} | "
                  f"{recall(i2, want):.3f} |")
            docs = [X[cu[j]:cu[j + 1]] for j in live]
            t = time.perf_counter()
            rb = plaid.Index.build(docs, tmp / "r", doc_ids=live)
            tr = time.perf_counter() - t
            i3, qps3 = timed_search(rb, Q)
            print(f"| rebuild on the {len(live)} survivors (build + save) | {tr:.1f} | {qps3:.1f} | "
                  f"{recall(i3, want):.3f} |")
            rb.close()
            shutil.rmtree(tmp / "d")
            shutil.rmtree(tmp / "r")
        ix = plaid.Index.load(tmp / "base")
        print("\n| filter (bucket < b) | selectivity | where() ms | queries/s | recall@10 vs exact over the "
              "filtered set | queries with 10 results |")
        print("|---|---|---|---|---|---|")
        for b, sel in ((500, "50 %"), (50, "5 %"), (1, "0.1 %")):
            t = time.perf_counter()
            allowed = ix.where("bucket < ?", [b])
            tw = time.perf_counter() - t
            want = exact_top(X, cu, Q, allowed)
            i4, qps4 = timed_search(ix, Q, filter=("bucket < ?", [b]))
            assert np.isin(i4[i4 >= 0], allowed).all()
            full = np.mean((i4 >= 0).sum(1) == min(10, len(allowed)))
            print(f"| b={b} ({len(allowed)} documents) | {sel} | {1000 * tw:.1f} | {qps4:.1f} | "
                  f"{recall(i4, want):.3f} | {full:.2f} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
