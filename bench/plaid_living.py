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

The save after a delete is a save to the index's own folder: the files it
wrote (new inode, size or mtime) and their bytes are listed below the table.

Exact MaxSim is lik.retrieve (fp16, all tokens, normalize on) over padded
blocks of the allowed documents, computed once per document set and shared
by the engines.  Each timing is one run (after one warm-up search of two
queries); threads: --threads (default all cores) for lik
(lik.set_num_threads) and for torch (torch.set_num_threads).

    python3 bench/plaid_living.py --docs 10000 [--peer fast-plaid]

--peer fast-plaid runs fast-plaid's own API on the same corpus, queries,
deleted sets and filters, after lik, in the same process: FastPlaid(index=,
device="cpu").create(docs, nbits=--peer-nbits, metadata=...) (its k-means,
its defaults otherwise; nbits 2 by default as lik's build -- fast-plaid's
own default is 4), FastPlaid.delete(subset=) on a copy of the built folder
(in place on disk, the call includes its reload), search at the same
parameters (its CPU search splits > 10 queries over joblib threads), and
filtering.where(index, "bucket < ?", [b]) -> search(subset=).  fast-plaid's
delete renumbers the survivors 0 .. N'-1 (documents and metadata rows), so
its results after a delete are mapped back through the survivors' ids for
recall.  It needs fast-plaid importable (its own environment: it pins
torch; see bench/plaid_index.py); without --peer nothing of it is imported.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
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


def folder_state(p):
    """{file name: (inode, mtime_ns, size)} of a folder's files."""
    return {f.name: (f.stat().st_ino, f.stat().st_mtime_ns, f.stat().st_size) for f in Path(p).iterdir() if f.is_file()}


def written(before, after):
    """Files a save wrote (new, replaced or modified) and their bytes."""
    names = sorted(n for n, v in after.items() if before.get(n) != v)
    return names, sum(after[n][2] for n in names)


FILTERS = ((500, "50 %"), (50, "5 %"), (1, "0.1 %"))


def lik_side(X, cu, Q, N, sets, tmp):
    """lik.plaid.Index: build, delete (+ save, compact, rebuild), filtered search."""
    out = {"delete": {}, "filter": {}}
    meta = [{"bucket": j % 1000} for j in range(N)]
    t = time.perf_counter()
    ix = plaid.Index.build(X, tmp / "base", cu_seqlens=cu, metadata=meta)
    build_s = time.perf_counter() - t
    i0, qps0 = timed_search(ix, Q)
    out["build"] = (build_s, qps0, recall(i0, sets["want_all"]), ix.num_centroids)
    for tag, gone, live, want in sets["deletes"]:
        shutil.copytree(tmp / "base", tmp / "d")
        ix = plaid.Index.load(tmp / "d")
        t = time.perf_counter()
        ix.delete(gone)
        td = time.perf_counter() - t
        before = folder_state(tmp / "d")
        t = time.perf_counter()
        ix.save(tmp / "d")
        ts = time.perf_counter() - t
        files, nbytes = written(before, folder_state(tmp / "d"))
        i1, qps1 = timed_search(ix, Q)
        assert not np.isin(i1, gone).any()
        r = {"delete": (td, ts, qps1, recall(i1, want)), "save_files": (files, nbytes)}
        t = time.perf_counter()
        ix.compact()
        tc = time.perf_counter() - t
        t = time.perf_counter()
        ix.save(tmp / "d")
        tcs = time.perf_counter() - t
        ix = plaid.Index.load(tmp / "d")
        i2, qps2 = timed_search(ix, Q)
        r["compact"] = (tc, tcs, qps2, recall(i2, want))
        docs = [X[cu[j]:cu[j + 1]] for j in live]
        t = time.perf_counter()
        rb = plaid.Index.build(docs, tmp / "r", doc_ids=live)
        tr = time.perf_counter() - t
        i3, qps3 = timed_search(rb, Q)
        r["rebuild"] = (tr, qps3, recall(i3, want))
        rb.close()
        shutil.rmtree(tmp / "d")
        shutil.rmtree(tmp / "r")
        out["delete"][tag] = r
    ix = plaid.Index.load(tmp / "base")
    for b, sel in FILTERS:
        t = time.perf_counter()
        allowed = ix.where("bucket < ?", [b])
        tw = time.perf_counter() - t
        assert np.array_equal(allowed, sets["allowed"][b])
        i4, qps4 = timed_search(ix, Q, filter=("bucket < ?", [b]))
        assert np.isin(i4[i4 >= 0], allowed).all()
        full = np.mean((i4 >= 0).sum(1) == min(10, len(allowed)))
        out["filter"][b] = (tw, qps4, recall(i4, sets["want_filter"][b]), full)
    return out


def fast_plaid_side(X, cu, Q, N, sets, tmp, threads, nbits):
    """fast-plaid's own API on the same corpus: FastPlaid.create (with metadata),
    FastPlaid.delete (in place), filtering.where -> search(subset=)."""
    import contextlib

    import torch
    from fast_plaid import filtering, search

    torch.set_num_threads(threads)
    quiet = contextlib.redirect_stdout(sys.stderr)  # fast-plaid prints its own messages
    out = {"delete": {}, "filter": {}}
    Qt = torch.from_numpy(Q.astype(np.float32))

    def fp_search(fp, **kw):
        kw = dict(top_k=10, n_ivf_probe=8, n_full_scores=4096, show_progress=False, **kw)
        with quiet:
            fp.search(Qt[:2], **kw)
            t = time.perf_counter()
            res = fp.search(Qt, **kw)
            qps = len(Q) / (time.perf_counter() - t)
        ids = np.array([[p for p, _ in x] + [-1] * (10 - len(x)) for x in res], np.int64)
        return ids, qps

    docs = [torch.from_numpy(X[cu[j]:cu[j + 1]].astype(np.float32)) for j in range(N)]
    meta = [{"bucket": j % 1000} for j in range(N)]
    path = str(tmp / "fp_base")
    fp = search.FastPlaid(index=path, device="cpu")
    t = time.perf_counter()
    with quiet:
        fp.create(documents_embeddings=docs, nbits=nbits, metadata=meta)
    build_s = time.perf_counter() - t
    del docs
    i0, qps0 = fp_search(fp)
    with open(Path(path) / "metadata.json") as f:
        K = json.load(f)["num_partitions"]
    out["build"] = (build_s, qps0, recall(i0, sets["want_all"]), K)
    for tag, gone, live, want in sets["deletes"]:
        dpath = str(tmp / "fp_d")
        shutil.copytree(path, dpath)
        fd = search.FastPlaid(index=dpath, device="cpu")
        t = time.perf_counter()
        with quiet:
            fd.delete(subset=[int(j) for j in gone])
        td = time.perf_counter() - t
        with open(Path(dpath) / "metadata.json") as f:
            n_after = json.load(f)["num_documents"]
        i1, qps1 = fp_search(fd)
        # fast-plaid renumbers the survivors 0 .. N'-1 (positions): map back to ids
        mapped = np.where(i1 >= 0, live[np.clip(i1, 0, len(live) - 1)], -1)
        with quiet:
            renumbered = filtering.where(index=dpath, condition="bucket < ?", parameters=[1])
        out["delete"][tag] = {"delete": (td, qps1, recall(mapped, want)), "num_documents": n_after,
                              "max_id": int(i1.max()), "meta_ids": renumbered}
        fd.close()
        shutil.rmtree(dpath)
    for b, sel in FILTERS:
        t = time.perf_counter()
        allowed = filtering.where(index=path, condition="bucket < ?", parameters=[b])
        tw = time.perf_counter() - t
        assert np.array_equal(np.asarray(allowed), sets["allowed"][b])
        i4, qps4 = fp_search(fp, subset=allowed)
        assert np.isin(i4[i4 >= 0], allowed).all()
        full = np.mean((i4 >= 0).sum(1) == min(10, len(allowed)))
        nres = (i4 >= 0).sum(1)
        out["filter"][b] = (tw, qps4, recall(i4, sets["want_filter"][b]), full, int(nres.min()), float(nres.mean()))
    fp.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=10000)
    ap.add_argument("--clusters", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="lik.set_num_threads and torch.set_num_threads (default: all cores)")
    ap.add_argument("--peer", choices=["fast-plaid"], default=None,
                    help="also run fast-plaid's delete + filtering.where on the same corpus (must import)")
    ap.add_argument("--peer-nbits", type=int, default=2,
                    help="fast-plaid's create nbits (default 2, lik's build default; fast-plaid's own is 4)")
    args = ap.parse_args()
    lik.set_num_threads(args.threads)
    X, cu, Q, _ = base.synthetic(args.docs, args.clusters, args.seed)
    N = args.docs
    peer = ""
    if args.peer:
        import importlib.metadata

        import torch

        peer = (f"; fast-plaid {importlib.metadata.version('fast-plaid')} (torch {torch.__version__}, CPU, "
                f"create nbits {args.peer_nbits})")
    cmd = " ".join(["python3", "bench/plaid_living.py"] + sys.argv[1:])
    print(f"# {datetime.datetime.now():%Y-%m-%d %H:%M}, {base.machine()}, {args.threads} threads, load average "
          f"{os.getloadavg()[0]:.1f}; {N} documents, {cu[-1]} tokens, d={X.shape[1]}, {len(Q)} queries{peer}; "
          f"`{cmd}`\n", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="lik_living_"))
    try:
        # the deleted sets, the filtered sets and exact MaxSim over each (shared by the engines)
        rng = np.random.default_rng(args.seed)
        sets = {"want_all": exact_top(X, cu, Q, np.arange(N)), "deletes": [], "allowed": {}, "want_filter": {}}
        for frac in (0.01, 0.10):
            gone = np.sort(rng.choice(N, int(N * frac), replace=False))
            live = np.setdiff1d(np.arange(N), gone)
            sets["deletes"].append((f"{frac:.0%}", gone, live, exact_top(X, cu, Q, live)))
        for b, _ in FILTERS:
            allowed = np.flatnonzero(np.arange(N) % 1000 < b)
            sets["allowed"][b] = allowed
            sets["want_filter"][b] = exact_top(X, cu, Q, allowed)
        t0 = time.perf_counter()
        L = lik_side(X, cu, Q, N, sets, tmp)
        print(f"(lik side: {time.perf_counter() - t0:.0f} s, load average {os.getloadavg()[0]:.1f})", flush=True)
        F = None
        if args.peer:
            t0 = time.perf_counter()
            F = fast_plaid_side(X, cu, Q, N, sets, tmp, args.threads, args.peer_nbits)
            print(f"(fast-plaid side: {time.perf_counter() - t0:.0f} s, load average {os.getloadavg()[0]:.1f})\n")
        report(L, F, N)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(L, F, N):
    na = "—"
    fp_cols = " | fast-plaid time s | fast-plaid queries/s | fast-plaid recall@10" if F else ""
    print(f"| step | lik time s | lik queries/s | lik recall@10 vs exact (live / filtered set){fp_cols} |")
    print("|---|---|---|---|" + ("---|---|---|" if F else ""))
    bs, q, r, K = L["build"]
    fb = f" | {F['build'][0]:.1f} | {F['build'][1]:.1f} | {F['build'][2]:.3f}" if F else ""
    Kf = f" / {F['build'][3]}" if F else ""
    print(f"| build {N} documents with metadata (K={K}{Kf}) | {bs:.1f} | {q:.1f} | {r:.3f}{fb} |")
    for tag, r in L["delete"].items():
        td, ts, q1, r1 = r["delete"]
        n = round(float(tag.rstrip("%")) / 100 * N)
        fd = ""
        if F:
            f = F["delete"][tag]
            fd = f" | {f['delete'][0]:.2f} | {f['delete'][1]:.1f} | {f['delete'][2]:.3f}"
        print(f"| delete {tag} ({n} documents): lik delete call / save; fast-plaid delete | {td:.4f} / {ts:.3f} | "
              f"{q1:.1f} | {r1:.3f}{fd} |")
        tc, tcs, q2, r2 = r["compact"]
        nf = f" | {na} | {na} | {na}" if F else ""
        print(f"| compact after {tag}: compact / save | {tc:.2f} / {tcs:.2f} | {q2:.1f} | {r2:.3f}{nf} |")
        tr, q3, r3 = r["rebuild"]
        print(f"| rebuild on the {N - n} survivors (build + save) | {tr:.1f} | {q3:.1f} | {r3:.3f}{nf} |")
    print()
    for tag, r in L["delete"].items():
        files, nbytes = r["save_files"]
        print(f"lik save after the {tag} delete wrote {', '.join(files)} ({nbytes} bytes)")
        if F:
            f = F["delete"][tag]
            print(f"fast-plaid after the {tag} delete: num_documents {f['num_documents']}, highest id returned "
                  f"{f['max_id']} (ids renumbered), filtering.where('bucket < 1') -> {f['meta_ids']}")
    fp_cols = (" | fast-plaid where() ms | fast-plaid queries/s | fast-plaid recall@10 | fast-plaid queries with "
               "10 results (results min / mean)") if F else ""
    print(f"\n| filter (bucket < b) | selectivity | lik where() ms | lik queries/s | lik recall@10 vs exact over the "
          f"filtered set | lik queries with 10 results{fp_cols} |")
    print("|---|---|---|---|---|---|" + ("---|---|---|---|" if F else ""))
    for b, sel in FILTERS:
        tw, q4, r4, full = L["filter"][b]
        n = int(np.sum(np.arange(N) % 1000 < b))
        ff = ""
        if F:
            fw, fq, fr, ffull, fmin, fmean = F["filter"][b]
            ff = f" | {1000 * fw:.1f} | {fq:.1f} | {fr:.3f} | {ffull:.2f} ({fmin} / {fmean:.1f})"
        print(f"| b={b} ({n} documents) | {sel} | {1000 * tw:.1f} | {q4:.1f} | {r4:.3f} | {full:.2f}{ff} |")


if __name__ == "__main__":
    main()
