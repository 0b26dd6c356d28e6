#!/usr/bin/env python3
"""PLAID index benchmark: quality and speed of lik's index (lik.plaid.Index)
against exact MaxSim and against fast-plaid (PyPI fast-plaid, when it
imports), one run each.

  cranfield   the bundled Cranfield-1400 embeddings (258,747 tokens, d = 64,
              fp16) and qrels: nDCG@10 / recall@100 of exact MaxSim
              (lik.retrieve) and of PLAID at nbits 2 and 4 (lik; fast-plaid
              with --fast-plaid), build time, index bytes, search throughput
              (all queries in one batch) and one-query latency (median), peak
              memory (each measurement in a child process: its ru_maxrss,
              and in parentheses ru_maxrss once numpy, torch and the engine
              are imported and the data is loaded -- the part of the peak no
              engine work adds; the synthetic corpus is memory-mapped, so what
              a build touches of it counts).
  synthetic   a clustered corpus (--docs documents of 60..140 tokens, each
              token a random unit direction of --clusters (4 topics per
              document) plus Gaussian noise of norm ~0.75, normalised; d = 128,
              fp16, seeded; queries: 32 tokens of one document plus noise of
              norm ~0.5):
              recall@10 of PLAID against exact MaxSim top-10 (lik.retrieve)
              over a grid of (n_ivf_probe, n_full_scores), plus build / speed /
              memory rows as above; with --fast-plaid the same for fast-plaid
              at its default parameters and at the lik setting of equal
              recall.

Search parameters are fast-plaid's defaults (top_k 10, n_ivf_probe 8,
n_full_scores 4096) unless a row says otherwise.  Queries are unit-norm (as
ColBERT's); fast-plaid receives them as float32 tensors (it casts to fp16).

    python3 bench/plaid_index.py cranfield [--fast-plaid]
    python3 bench/plaid_index.py synthetic --docs 10000 [--fast-plaid]
    python3 bench/plaid_index.py expand --docs 10000
    python3 bench/plaid_index.py latency --docs 20000 --doc-lens 100,300 --thread-counts 1,2,4,8,16

  expand      Index.add of documents unlike the indexed ones: the synthetic
              corpus with split topics, built on the first half of the
              documents, the second half (other clusters) added with and
              without expand_centroids: K, add time, recall@10 against exact
              MaxSim (all queries / those drawn from added documents); the
              same on the unsplit corpus (an add of like documents).
  latency     lik only, the synthetic corpus: one-query latency (the median
              over every query searched alone, --lat-rounds times) and
              batched throughput at each of --thread-counts, on one index
              (built with --threads, or reused from --index-dir when it holds
              this corpus's build); no exact search.  --doc-lens 100,300 and
              --docs 20000 give 4 M tokens in 20 k documents (issue 29's CPU
              row).

  synthetic --device cuda
              the GPU mode (issue 29): the same distribution generated on the
              GPU (torch, seeded) at --tokens tokens (documents of 100..300
              tokens, so 4 M tokens = 20 k documents; 64 queries x 32
              tokens), lik's index built once on --build-device (default
              cuda: k-means' assignment and the coding on the GPU; cpu: all
              host threads; or loaded from --index-dir when it holds this
              corpus's build; --check-cpu-build also builds it on the host,
              times that and compares the files byte for byte: "lik build"
              rows in --out) and
              then, at fast-plaid's defaults (8/4096) and two faster settings
              (4/1024, 2/256; --grid): lik's GPU search (Index.load(device=
              "cuda")), lik's CPU search (all host threads), exact dense
              lik.retrieve in bf16 on the GPU (the reference of recall@10:
              padded [N, Lmax, d] + mask), and with --fast-plaid fast-plaid
              1.7 on the GPU searching the same index files (in a child
              process; --fast-plaid-build also times its own create() on the
              GPU of the same documents: its rows' build_s).  Throughput: the
              median of repeated 64-query calls, each waited for
              (torch.cuda.synchronize); one-query latency: the median of 50
              single-query calls, each waited for.  Rows (engine, device,
              tokens, n_ivf_probe, n_full_scores, nq, qps, latency_ms,
              recall10, build_s, index_mb: the index folder, for exact dense
              the padded bf16 corpus) go to --out as JSON (rows of other
              token counts already there are kept, so 4 M and 10 M runs
              share one file) and are printed as a table.

    python3 bench/plaid_index.py synthetic --device cuda --tokens 4000000 \
        --fast-plaid --fast-plaid-build --index-dir /tmp/ix4m --out bench/plaid_gpu_h200.json
    python3 bench/plaid_index.py synthetic --device cuda --tokens 4000000 --check-cpu-build \
        --index-dir /tmp/ix4m-gpu --grid 8/4096 --out /tmp/build_h100.json

fast-plaid needs its own environment (it pins torch): this session used
``python -m venv /work/venv-index`` with the main environment's site-packages
on a .pth line and ``pip install fast-plaid==1.7.0.2110``, and ran this script
with that interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import safetensors.numpy

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "cranfield"


def _lik():
    sys.path.insert(0, str(ROOT / "python"))
    if not os.environ.get("LIK_LIBRARY"):
        for cand in ("build/release/liblik.so", "build/liblik.so"):
            if (ROOT / cand).is_file():
                os.environ["LIK_LIBRARY"] = str(ROOT / cand)
                break
    import lik
    import lik.plaid

    return lik


# ---- data -------------------------------------------------------------------------------


def read_safetensors(path):
    """name -> ndarray (the safetensors package)."""
    return safetensors.numpy.load_file(str(path))


def cranfield():
    d = read_safetensors(DATA / "docs.safetensors")
    q = read_safetensors(DATA / "queries.safetensors")
    lens = np.diff(q["cu_seqlens"])
    Q = np.zeros((len(lens), int(lens.max()), d["embeddings"].shape[1]), np.float16)
    for i in range(len(lens)):
        Q[i, : lens[i]] = q["embeddings"][q["cu_seqlens"][i]:q["cu_seqlens"][i + 1]]
    qrels = {}
    for line in (DATA / "qrels.tsv").read_text().split("\n"):
        if line.strip():
            a, b, g = map(int, line.split())
            qrels.setdefault(a, {})[b] = max(g, 0)
    return d["embeddings"], d["cu_seqlens"], d["ids"], Q, lens, q["ids"], qrels


def synthetic(ndocs, clusters, seed, nq=100, lq=32, d=128, split=False, doc_lens=(60, 140)):
    """(X, cu, Q, qdoc): the clustered corpus (documents of doc_lens[0] ..
    doc_lens[1] tokens), its queries and the document each query was drawn
    from.  split: documents of the first half take their topics from the
    first half of the clusters, the others from the second."""
    rng = np.random.default_rng(seed)
    dirs = rng.standard_normal((clusters, d)).astype(np.float32)
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    lens = rng.integers(doc_lens[0], doc_lens[1] + 1, ndocs)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    X = np.empty((int(cu[-1]), d), np.float16)
    # each document draws its tokens from a few topics (clusters)
    for j0 in range(0, ndocs, 2048):
        j1 = min(ndocs, j0 + 2048)
        t0, t1 = cu[j0], cu[j1]
        topics = rng.integers(0, clusters, (j1 - j0, 4))
        if split:
            half = clusters // 2
            topics = topics % half + half * (np.arange(j0, j1) >= ndocs // 2)[:, None]
        which = topics[np.repeat(np.arange(j1 - j0), lens[j0:j1]), rng.integers(0, 4, t1 - t0)]
        x = dirs[which] + 0.75 * rng.standard_normal((t1 - t0, d)).astype(np.float32) / np.sqrt(d)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        X[t0:t1] = x
    # queries: tokens near the tokens of a random document
    Q = np.empty((nq, lq, d), np.float32)
    qdoc = np.empty(nq, np.int64)
    for i in range(nq):
        j = qdoc[i] = rng.integers(0, ndocs)
        src = X[cu[j] + rng.integers(0, lens[j], lq)].astype(np.float32)
        q = src + 0.5 * rng.standard_normal((lq, d)).astype(np.float32) / np.sqrt(d)
        Q[i] = q / np.linalg.norm(q, axis=1, keepdims=True)
    return X, cu, Q, qdoc


# ---- metrics ------------------------------------------------------------------------------


def ndcg_at(ranked, judged, k=10):
    dcg = sum(judged.get(int(d), 0) / np.log2(r + 2) for r, d in enumerate(ranked[:k]))
    ideal = sorted(judged.values(), reverse=True)[:k]
    return dcg / sum(g / np.log2(r + 2) for r, g in enumerate(ideal))


def recall_at(ranked, judged, k=100):
    rel = {d for d, g in judged.items() if g > 0}
    return len(rel & {int(d) for d in ranked[:k]}) / len(rel)


def overlap_at(got, want, k=10):
    return float(np.mean([len(set(map(int, g[:k])) & set(map(int, w[:k]))) / k for g, w in zip(got, want)]))


def folder_bytes(p):
    return sum(f.stat().st_size for f in Path(p).iterdir() if f.is_file())


# ---- one measurement per child process ------------------------------------------------------


def child(spec: dict) -> dict:
    """Runs one measurement (build or search) and reports it with ru_maxrss."""
    engine, task = spec["engine"], spec["task"]
    if task == "gpu":
        return fast_plaid_gpu(spec)
    corpus = spec["corpus"]
    if corpus == "cranfield":
        X, cu, dids, Q, qlens, qids, qrels = cranfield()
    else:  # written once by the parent, memory-mapped here
        X = np.load(spec["X"], mmap_mode="r")
        cu, Q = np.load(spec["cu"]), np.load(spec["Q"])
        qlens = np.full(len(Q), Q.shape[1])
    out = {}
    if engine == "lik":
        lik = _lik()
        out["base_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if spec.get("threads"):
            lik.set_num_threads(spec["threads"])
        if task == "build":
            t = time.perf_counter()
            lik.plaid.Index.build(X, spec["path"], cu_seqlens=cu, nbits=spec["nbits"],
                                  num_centroids=spec.get("num_centroids") or None)
            out["build_s"] = time.perf_counter() - t
        elif task == "exact":
            import lik as L

            k = spec["k"]
            docs = [X[cu[j]:cu[j + 1]] for j in range(len(cu) - 1)]
            Lmax = max(len(x) for x in docs)
            t = time.perf_counter()
            best_s = np.full((len(Q), k), -np.inf, np.float32)
            best_i = np.zeros((len(Q), k), np.int64)
            for j0 in range(0, len(docs), 2048):  # padded blocks, merged
                blk = docs[j0:j0 + 2048]
                D = np.zeros((len(blk), Lmax, X.shape[1]), X.dtype)
                M = np.zeros((len(blk), Lmax), bool)
                for a, x in enumerate(blk):
                    D[a, : len(x)] = x
                    M[a, : len(x)] = True
                Qm = np.arange(Q.shape[1])[None, :] < qlens[:, None]
                s, i = L.retrieve(Q.astype(X.dtype), D, min(k, len(blk)), q_mask=Qm, d_mask=M, normalize=False)
                cs = np.concatenate([best_s, s], 1)
                ci = np.concatenate([best_i, i + j0], 1)
                order = np.lexsort((ci, -cs), axis=1)[:, :k]
                best_s = np.take_along_axis(cs, order, 1)
                best_i = np.take_along_axis(ci, order, 1)
            out["search_s"] = time.perf_counter() - t
            out["ids"] = best_i.tolist()
        else:
            ix = lik.plaid.Index.load(spec["path"])
            kw = dict(top_k=spec["k"], n_ivf_probe=spec["probe"], n_full_scores=spec["full"])
            ix.search(Q[:2], q_lengths=qlens[:2], **kw)  # warm-up (page cache, allocator)
            t = time.perf_counter()
            s, i = ix.search(Q, q_lengths=qlens, **kw)
            out["search_s"] = time.perf_counter() - t
            lat = []
            for _ in range(spec.get("lat_rounds", 1)):
                for q in range(min(len(Q), spec.get("lat_queries", 30))):
                    t = time.perf_counter()
                    ix.search(Q[q:q + 1], q_lengths=qlens[q:q + 1], **kw)
                    lat.append(time.perf_counter() - t)
            out["latency_ms"] = 1e3 * statistics.median(lat)
            out["ids"] = i.tolist()
    else:  # fast-plaid
        import torch
        from fast_plaid import search

        if spec.get("threads"):
            torch.set_num_threads(spec["threads"])
        out["base_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        fp = search.FastPlaid(index=spec["path"], device="cpu")
        if task == "build":
            docs = [torch.from_numpy(X[cu[j]:cu[j + 1]].astype(np.float32)) for j in range(len(cu) - 1)]
            t = time.perf_counter()
            fp.create(documents_embeddings=docs, nbits=spec["nbits"])
            out["build_s"] = time.perf_counter() - t
        else:
            Qt = torch.from_numpy(Q.astype(np.float32))
            kw = dict(top_k=spec["k"], n_ivf_probe=spec["probe"], n_full_scores=spec["full"], show_progress=False)
            fp.search(Qt[:2], **kw)
            t = time.perf_counter()
            r = fp.search(Qt, **kw)
            out["search_s"] = time.perf_counter() - t
            lat = []
            for q in range(min(len(Q), spec.get("lat_queries", 30))):
                t = time.perf_counter()
                fp.search(Qt[q:q + 1], **kw)
                lat.append(time.perf_counter() - t)
            out["latency_ms"] = 1e3 * statistics.median(lat)
            out["ids"] = [[p for p, _ in x] + [-1] * (spec["k"] - len(x)) for x in r]
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def fast_plaid_gpu(spec: dict) -> dict:
    """fast-plaid on the GPU (a child process): its own create() of the
    documents when asked (build_s, index_mb), then searches of the index
    folder spec["path"] over spec["grid"]: qps, one-query latency, ids."""
    import torch
    from fast_plaid import search

    Q = torch.from_numpy(np.load(spec["Q"]))
    out = {}
    if spec.get("build_path"):
        X = np.load(spec["X"], mmap_mode="r")
        cu = np.load(spec["cu"])
        docs = [torch.from_numpy(X[cu[j]:cu[j + 1]].astype(np.float32)) for j in range(len(cu) - 1)]
        fb = search.FastPlaid(index=spec["build_path"], device="cuda")
        t = time.perf_counter()
        fb.create(documents_embeddings=docs, nbits=spec["nbits"])
        torch.cuda.synchronize()
        out["build_s"] = time.perf_counter() - t
        out["index_mb"] = folder_bytes(spec["build_path"]) / 1e6
        del fb, docs
    fp = search.FastPlaid(index=spec["path"], device="cuda")
    out["rows"] = []
    for probe, full in spec["grid"]:
        kw = dict(top_k=10, n_ivf_probe=probe, n_full_scores=full, show_progress=False)

        def run(q):
            r = fp.search(q, **kw)
            torch.cuda.synchronize()
            return r

        run(Q[:2])  # warm-up
        r = run(Q)
        ids = [[p for p, _ in x] + [-1] * (10 - len(x)) for x in r]
        out["rows"].append({"n_ivf_probe": probe, "n_full_scores": full, "ids": ids,
                            "batch_s": median_time(lambda: run(Q)),
                            "latency_ms": 1e3 * statistics.median(
                                timed(lambda q=q: run(Q[q:q + 1])) for q in range(min(50, len(Q))))})
    return out


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def median_time(fn, min_s: float = 1.0, max_reps: int = 50) -> float:
    """The median wall time of fn() over at least 3 calls and ~min_s seconds."""
    ts = [timed(fn)]
    while len(ts) < 3 or (sum(ts) < min_s and len(ts) < max_reps):
        ts.append(timed(fn))
    return statistics.median(ts)


def cached_index(path: Path, key: dict, build) -> tuple:
    """(build seconds, cached): build() (returning its seconds) makes the index
    folder path unless path holds the build of key already (the stamp
    path.bench.json beside it says so)."""
    stamp = path.parent / (path.name + ".bench.json")
    if path.is_dir() and stamp.is_file() and json.loads(stamp.read_text())["key"] == key:
        return json.loads(stamp.read_text())["build_s"], True
    shutil.rmtree(path, ignore_errors=True)
    build_s = build()
    stamp.write_text(json.dumps({"key": key, "build_s": build_s}))
    return build_s, False


def run_child(spec: dict) -> dict:
    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"child {spec} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().split("\n")[-1])


# ---- parts ------------------------------------------------------------------------------------


def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs"


def row(name, **m):
    cells = [name] + [m.get(k, "") for k in COLS[1:]]
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


COLS = ["engine / setting", "nDCG@10", "recall@100", "recall@10 vs exact", "build s", "index MB", "queries/s (batch)",
        "latency ms (1 query)", "peak RSS MB (build / search)"]


def header():
    print("| " + " | ".join(COLS) + " |")
    print("|" + "---|" * len(COLS))


def part_cranfield(args, tmp):
    X, cu, dids, Q, qlens, qids, qrels = cranfield()
    base = dict(corpus="cranfield", threads=args.threads)
    print(f"\nCranfield-1400: {len(cu) - 1} docs, {len(X)} tokens, d={X.shape[1]}; {len(Q)} queries; {machine()}\n")
    header()
    exact = run_child({**base, "engine": "lik", "task": "exact", "k": 100})

    def quality(ids):
        nd = np.mean([ndcg_at([dids[j] for j in r if j >= 0], qrels[int(q)]) for r, q in zip(ids, qids)])
        rc = np.mean([recall_at([dids[j] for j in r if j >= 0], qrels[int(q)]) for r, q in zip(ids, qids)])
        return f"{nd:.4f}", f"{rc:.4f}"

    nd, rc = quality(exact["ids"])
    row("exact MaxSim (lik.retrieve, fp16)", **{"nDCG@10": nd, "recall@100": rc, "recall@10 vs exact": "1.000",
        "queries/s (batch)": f"{len(Q) / exact['search_s']:.1f}"})
    engines = ([] if args.no_lik else ["lik"]) + (["fast-plaid"] if args.fast_plaid else [])
    for engine in engines:
        for nbits in (2, 4):
            path = str(tmp / f"cran-{engine}-{nbits}")
            b = run_child({**base, "engine": engine, "task": "build", "path": path, "nbits": nbits})
            s = run_child({**base, "engine": engine, "task": "search", "path": path, "k": 100, "probe": 8,
                           "full": 4096})
            nd, rc = quality(s["ids"])
            row(f"{engine} PLAID nbits {nbits}", **{"nDCG@10": nd, "recall@100": rc,
                "recall@10 vs exact": f"{overlap_at(s['ids'], exact['ids']):.3f}",
                "build s": f"{b['build_s']:.1f}", "index MB": f"{folder_bytes(path) / 1e6:.1f}",
                "queries/s (batch)": f"{len(Q) / s['search_s']:.1f}", "latency ms (1 query)": f"{s['latency_ms']:.1f}",
                "peak RSS MB (build / search)": f"{b['maxrss_mb']:.0f} / {s['maxrss_mb']:.0f} (imports {b['base_mb']:.0f})"})
            shutil.rmtree(path, ignore_errors=True)


def part_synthetic(args, tmp):
    X, cu, Q, _ = synthetic(args.docs, args.clusters, args.seed, doc_lens=args.doc_lens)
    for name, a in (("X", X), ("cu", cu), ("Q", Q)):
        np.save(tmp / f"{name}.npy", a)
    base = dict(corpus="synthetic", threads=args.threads, X=str(tmp / "X.npy"), cu=str(tmp / "cu.npy"),
                Q=str(tmp / "Q.npy"))
    print(f"\nSynthetic clustered corpus: {args.docs} docs of {args.doc_lens[0]}..{args.doc_lens[1]} tokens, "
          f"{len(X)} tokens, d={X.shape[1]}, {args.clusters} "
          f"clusters, seed {args.seed}, K {args.num_centroids or 'by the rule'}; {len(Q)} queries x {Q.shape[1]} tokens; "
          f"{machine()}\n")
    del X
    header()
    exact = run_child({**base, "engine": "lik", "task": "exact", "k": 10})
    row("exact MaxSim (lik.retrieve, fp16)", **{"recall@10 vs exact": "1.000",
        "queries/s (batch)": f"{len(Q) / exact['search_s']:.2f}"})
    grid = [(8, 4096), (4, 1024), (2, 256), (1, 64)] if not args.grid else [tuple(map(int, g.split("/"))) for g in args.grid.split(",")]
    engines = ([] if args.no_lik else ["lik"]) + (["fast-plaid"] if args.fast_plaid else [])
    for engine in engines:
        path = str(tmp / f"syn-{engine}")
        b = run_child({**base, "engine": engine, "task": "build", "path": path, "nbits": args.nbits,
                       "num_centroids": args.num_centroids})
        first = True
        for probe, full in grid:
            s = run_child({**base, "engine": engine, "task": "search", "path": path, "k": 10, "probe": probe,
                           "full": full})
            cells = {"recall@10 vs exact": f"{overlap_at(s['ids'], exact['ids']):.3f}",
                     "queries/s (batch)": f"{len(Q) / s['search_s']:.1f}",
                     "latency ms (1 query)": f"{s['latency_ms']:.1f}",
                     "peak RSS MB (build / search)": f"{b['maxrss_mb']:.0f} / {s['maxrss_mb']:.0f} (imports {b['base_mb']:.0f})"}
            if first:
                cells.update({"build s": f"{b['build_s']:.1f}", "index MB": f"{folder_bytes(path) / 1e6:.1f}"})
                first = False
            row(f"{engine} nbits {args.nbits}, n_ivf_probe {probe}, n_full_scores {full}", **cells)
        shutil.rmtree(path, ignore_errors=True)


def synthetic_cuda(tokens, clusters, seed, nq=64, lq=32, d=128, lens=(100, 300)):
    """The synthetic corpus's distribution (4 topics per document, token
    noise of norm ~0.75, normalised; queries: lq tokens of one document plus
    noise of norm ~0.5, normalised) generated on the GPU for about ``tokens``
    tokens in documents of lens[0]..lens[1] tokens.  Returns (X fp16 [T, d],
    cu int64 [N + 1], lengths [N], Q fp32 [nq, lq, d]), all CUDA tensors."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    dirs = torch.randn(clusters, d, generator=g, device=dev)
    dirs /= dirs.norm(dim=1, keepdim=True)
    n = max(1, round(tokens / ((lens[0] + lens[1]) / 2)))
    L = torch.randint(lens[0], lens[1] + 1, (n,), generator=g, device=dev)
    cu = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    cu[1:] = L.cumsum(0)
    T = int(cu[-1])
    doc = torch.repeat_interleave(torch.arange(n, device=dev), L)
    topics = torch.randint(0, clusters, (n, 4), generator=g, device=dev)
    X = torch.empty(T, d, dtype=torch.float16, device=dev)
    for t0 in range(0, T, 1 << 22):
        t1 = min(T, t0 + (1 << 22))
        which = topics[doc[t0:t1], torch.randint(0, 4, (t1 - t0,), generator=g, device=dev)]
        x = dirs[which] + 0.75 * torch.randn(t1 - t0, d, generator=g, device=dev) / d**0.5
        X[t0:t1] = (x / x.norm(dim=1, keepdim=True)).half()
    qdoc = torch.randint(0, n, (nq,), generator=g, device=dev)
    pos = (torch.rand(nq, lq, generator=g, device=dev) * L[qdoc, None]).long()
    q = X[cu[qdoc, None] + pos].float() + 0.5 * torch.randn(nq, lq, d, generator=g, device=dev) / d**0.5
    return X, cu, L, q / q.norm(dim=-1, keepdim=True)


def part_gpu(args, tmp):
    """synthetic --device cuda: lik on the GPU and the CPU, exact dense bf16
    and fast-plaid on the GPU, on one corpus and one index folder."""
    import torch

    lik = _lik()
    if args.threads:
        lik.set_num_threads(args.threads)
    t = time.perf_counter()
    X, cu, L, Q = synthetic_cuda(args.tokens, args.clusters, args.seed)
    N, T, d = len(L), len(X), X.shape[1]
    gen_s = time.perf_counter() - t
    nq = len(Q)
    grid = [tuple(map(int, g.split("/"))) for g in (args.grid or "8/4096,4/1024,2/256").split(",")]
    print(f"\nSynthetic clustered corpus on the GPU: {N} docs, {T} tokens, d={d}, {args.clusters} clusters, seed "
          f"{args.seed} (generated in {gen_s:.1f} s); {nq} queries x {Q.shape[1]} tokens; nbits {args.nbits}; "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}; host: {machine()}\n", flush=True)
    rows, build_rows = [], []

    def add(engine, device, probe, full, batch_s, latency_ms, ids, build_s, index_mb, graph_ms=None):
        rows.append({"engine": engine, "device": device, "tokens": T, "n_ivf_probe": probe, "n_full_scores": full,
                     "nq": nq, "qps": nq / batch_s, "latency_ms": latency_ms, "graph_latency_ms": graph_ms,
                     "recall10": overlap_at(ids, exact), "build_s": build_s, "index_mb": index_mb})
        print(f"row: {rows[-1]}", flush=True)  # as measured (a long run's log keeps what it got)

    # the host copy the builds read; then the GPU holds the padded corpus
    # alone (10^8 tokens: 25.6 GB of fp16 tokens, 38.4 GB padded bf16)
    Xh, cuh = X.cpu().numpy(), cu.cpu().numpy()
    # exact dense: padded bf16 [N, Lmax, d] + mask, the reference, filled in
    # chunks of tokens (no bf16 copy of the whole corpus beside it)
    Lmax = int(L.max())
    D = torch.zeros(N, Lmax, d, dtype=torch.bfloat16, device="cuda")
    for t0 in range(0, T, 1 << 24):
        t1 = min(T, t0 + (1 << 24))
        t = torch.arange(t0, t1, device="cuda")
        doc = torch.searchsorted(cu, t, right=True) - 1
        D[doc, t - cu[doc]] = X[t0:t1].to(torch.bfloat16)
        del t, doc
    del X
    M = torch.arange(Lmax, device="cuda")[None, :] < L[:, None]
    Qb = Q.to(torch.bfloat16)

    def dense(q):
        r = lik.retrieve(q, D, 10, d_mask=M)
        torch.cuda.synchronize()
        return r

    exact = dense(Qb)[1].tolist()
    lat = 1e3 * statistics.median(timed(lambda q=q: dense(Qb[q:q + 1])) for q in range(min(50, nq)))
    add("exact dense (lik.retrieve bf16)", "cuda", None, None, median_time(lambda: dense(Qb)), lat, exact, None,
        D.numel() * D.element_size() / 1e6)
    del D, M
    torch.cuda.empty_cache()

    # lik's index: built once on the host, or the cached folder of this corpus
    path = Path(args.index_dir) if args.index_dir else tmp / "lik-index"
    key = {"tokens": T, "docs": N, "clusters": args.clusters, "seed": args.seed, "nbits": args.nbits,
           "num_centroids": args.num_centroids, "build_device": args.build_device}

    def build(dev=args.build_device, dst=path):
        """Seconds of Index.build on dev ("cuda": k-means' assignment and the
        coding on the GPU, then the copy of the index to it; "cpu": the host
        threads), the folder written (the save is in the time on both)."""
        torch.cuda.synchronize()
        t = time.perf_counter()
        lik.plaid.Index.build(Xh, dst, cu_seqlens=cuh, nbits=args.nbits, num_centroids=args.num_centroids or None,
                              device="cuda" if dev == "cuda" else None).close()
        return time.perf_counter() - t

    build_s, cached = cached_index(path, key, build)
    print(f"lik index: {path} (cached; built on {args.build_device} in {build_s:.1f} s)" if cached
          else f"lik index: built on {args.build_device} in {build_s:.1f} s", flush=True)
    if args.check_cpu_build:  # the host build of the same documents: its time, and the files byte for byte
        other = path.parent / (path.name + "-cpu")
        shutil.rmtree(other, ignore_errors=True)
        cpu_s = build("cpu", other)
        names = sorted(p.name for p in path.iterdir() if p.is_file())
        same = names == sorted(p.name for p in other.iterdir() if p.is_file()) and all(
            (path / n).read_bytes() == (other / n).read_bytes() for n in names)
        print(f"lik index on the CPU ({other}): built in {cpu_s:.1f} s; files byte-identical to the "
              f"{args.build_device} build: {same}", flush=True)
        build_rows.append({"engine": "lik build", "device": "cpu", "tokens": T, "build_s": cpu_s,
                           "identical_to": args.build_device if same else None})
    build_rows.append({"engine": "lik build", "device": args.build_device, "tokens": T, "build_s": build_s,
                       "cached": cached})
    index_mb = folder_bytes(path) / 1e6
    t = time.perf_counter()
    ix = lik.plaid.Index.load(path, device="cuda")
    print(f"lik index: K {ix.num_centroids}, {index_mb:.0f} MB on disk, copied to {ix.device} in "
          f"{time.perf_counter() - t:.2f} s ({ix.device_bytes / 1e6:.0f} MB there)\n", flush=True)
    host = lik.plaid.Index.load(path)
    Qn = Q.cpu().numpy()
    for probe, full in grid:
        kw = dict(top_k=10, n_ivf_probe=probe, n_full_scores=full)

        def gpu(q):
            r = ix.search(q, **kw)
            torch.cuda.synchronize()
            return r

        gpu(Q)
        lat = 1e3 * statistics.median(timed(lambda q=q: gpu(Q[q:q + 1])) for q in range(min(50, nq)))
        q1 = Q[:1].clone()  # one query's search captured in a CUDA graph, replayed on fresh contents
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            ix.search(q1, **kw)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ix.search(q1, **kw)

        def replay(q):
            q1.copy_(Q[q:q + 1])
            graph.replay()
            torch.cuda.synchronize()

        glat = 1e3 * statistics.median(timed(lambda q=q: replay(q)) for q in range(min(50, nq)))
        add("lik", "cuda", probe, full, median_time(lambda: gpu(Q)), lat, gpu(Q)[1].tolist(), build_s, index_mb,
            graph_ms=glat)
        if args.profile:  # where one query's and the batch's GPU time goes
            from torch.profiler import ProfilerActivity, profile
            for label, q in (("one query", Q[:1]), (f"{nq} queries", Q)):
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(10):
                        gpu(q)
                print(f"\nprofile, {label}, n_ivf_probe {probe} / n_full_scores {full} (10 calls):")
                print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=14), flush=True)
        host.search(Qn[:2], **kw)
        lat = 1e3 * statistics.median(timed(lambda q=q: host.search(Qn[q:q + 1], **kw)) for q in range(min(50, nq)))
        add("lik", "cpu", probe, full, median_time(lambda: host.search(Qn, **kw)), lat,
            host.search(Qn, **kw)[1].tolist(), build_s, index_mb)
    ix.close()
    host.close()
    torch.cuda.empty_cache()

    if args.fast_plaid:
        spec = {"engine": "fast-plaid", "task": "gpu", "corpus": "synthetic", "path": str(path), "grid": grid,
                "Q": str(tmp / "Q.npy"), "nbits": args.nbits}
        np.save(tmp / "Q.npy", Qn)
        if args.fast_plaid_build:
            np.save(tmp / "X.npy", Xh)
            np.save(tmp / "cu.npy", cuh)
            spec.update(X=str(tmp / "X.npy"), cu=str(tmp / "cu.npy"), build_path=str(tmp / "fast-plaid-index"))
        f = run_child(spec)
        if "build_s" in f:
            print(f"fast-plaid create() on the GPU: {f['build_s']:.1f} s, {f['index_mb']:.0f} MB (its rows' build_s; "
                  "they search lik's folder)\n", flush=True)
        for r in f["rows"]:
            add("fast-plaid", "cuda", r["n_ivf_probe"], r["n_full_scores"], r["batch_s"], r["latency_ms"],
                r["ids"], f.get("build_s"), index_mb)

    cols = ["engine", "device", "tokens", "n_ivf_probe", "n_full_scores", "nq", "qps", "latency_ms",
            "graph_latency_ms", "recall10", "build_s", "index_mb"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join("" if r[c] is None else f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c])
                                for c in cols) + " |", flush=True)
    for r in build_rows:
        print(f"build: {r}")
    if args.out:
        out = Path(args.out)
        old = json.loads(out.read_text()) if out.is_file() else []
        out.write_text(json.dumps([r for r in old if r["tokens"] != T] + rows + build_rows, indent=1) + "\n")
        print(f"\n{len(rows) + len(build_rows)} rows -> {out}")


def part_expand(args, tmp):
    """Adding documents unlike the indexed ones: build on the first half of
    the documents, add the second half with and without expand_centroids;
    the corpus with split topics (the added half from the other half of the
    clusters) and without (the same distribution)."""
    lik = _lik()
    if args.threads:
        lik.set_num_threads(args.threads)
    print(f"\nAdding documents (lik.plaid.Index.add, expand_centroids): synthetic corpus, {args.docs} docs, "
          f"{args.clusters} clusters, seed {args.seed}, nbits {args.nbits}; build on documents 0 .. N/2-1, add the "
          f"rest; search with fast-plaid's defaults; {machine()}; load average {os.getloadavg()[0]:.1f}\n")
    print("| corpus | index | K | add s | recall@10 vs exact (all / queries from added docs / from built docs) "
          "| cluster_threshold |")
    print("|---|---|---|---|---|---|")
    for split in (True, False):
        X, cu, Q, qdoc = synthetic(args.docs, args.clusters, args.seed, split=split)
        for name, a in (("X", X), ("cu", cu), ("Q", Q)):
            np.save(tmp / f"{name}.npy", a)
        exact = np.array(run_child({"corpus": "synthetic", "engine": "lik", "task": "exact", "k": 10,
                                    "threads": args.threads, "X": str(tmp / "X.npy"), "cu": str(tmp / "cu.npy"),
                                    "Q": str(tmp / "Q.npy")})["ids"])
        h = (len(cu) - 1) // 2
        added = qdoc >= h
        corpus = "added half: other clusters" if split else "added half: same clusters"

        def report(label, ix, add_s=""):
            ids = ix.search(Q, top_k=10)[1]
            r = [overlap_at(ids[m], exact[m]) for m in (slice(None), added, ~added)]
            ix.save(tmp / "cur")
            thr = float(np.load(tmp / "cur" / "cluster_threshold.npy").reshape(-1)[0])
            print(f"| {corpus} | {label} | {ix.num_centroids} | {add_s} | {r[0]:.3f} / {r[1]:.3f} / {r[2]:.3f} | "
                  f"{thr:.4f} |", flush=True)

        report("built on all documents", lik.plaid.Index.build(X, cu_seqlens=cu, nbits=args.nbits))
        lik.plaid.Index.build(X[: cu[h]], tmp / "base", cu_seqlens=cu[: h + 1], nbits=args.nbits)
        report("built on the first half", lik.plaid.Index.load(tmp / "base"))
        for expand in (False, True):
            ix = lik.plaid.Index.load(tmp / "base")
            t = time.perf_counter()
            ix.add(X[cu[h]:], cu_seqlens=cu[h:] - cu[h], expand_centroids=expand)
            report(f"first half + add, expand_centroids={expand}", ix, f"{time.perf_counter() - t:.1f}")


def part_latency(args, tmp):
    """One-query latency of lik's search at each thread count, one index."""
    X, cu, Q, _ = synthetic(args.docs, args.clusters, args.seed, doc_lens=args.doc_lens)
    for name, a in (("X", X), ("cu", cu), ("Q", Q)):
        np.save(tmp / f"{name}.npy", a)
    ntok = len(X)
    del X
    base = dict(corpus="synthetic", engine="lik", X=str(tmp / "X.npy"), cu=str(tmp / "cu.npy"), Q=str(tmp / "Q.npy"))
    path = Path(args.index_dir) if args.index_dir else tmp / "syn-lik"
    key = {"docs": args.docs, "doc_lens": list(args.doc_lens), "clusters": args.clusters, "seed": args.seed,
           "nbits": args.nbits, "num_centroids": args.num_centroids}
    build_s, cached = cached_index(path, key, lambda: run_child(
        {**base, "task": "build", "threads": args.threads, "path": str(path), "nbits": args.nbits,
         "num_centroids": args.num_centroids})["build_s"])
    K = json.loads((path / "metadata.json").read_text())["num_partitions"]
    probe, full = map(int, (args.grid or "8/4096").split(",")[0].split("/"))
    print(f"\nOne-query latency: synthetic corpus, {args.docs} docs of {args.doc_lens[0]}..{args.doc_lens[1]} tokens, "
          f"{ntok} tokens, d={Q.shape[2]}, {args.clusters} clusters, seed {args.seed}, nbits {args.nbits}, K {K} "
          f"(built in {build_s:.1f} s{', cached in ' + str(path) if cached else ''}); {len(Q)} queries x "
          f"{Q.shape[1]} tokens, each searched alone "
          f"{args.lat_rounds} times; top_k 10, n_ivf_probe {probe}, n_full_scores {full}; {machine()}; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| threads | tokens | latency ms (1 query, median) | queries/s (batch) |")
    print("|---|---|---|---|")
    for th in map(int, args.thread_counts.split(",")):
        s = run_child({**base, "task": "search", "threads": th, "path": str(path), "k": 10, "probe": probe,
                       "full": full, "lat_queries": len(Q), "lat_rounds": args.lat_rounds})
        print(f"| {th} | {ntok} | {s['latency_ms']:.2f} | {len(Q) / s['search_s']:.1f} |", flush=True)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["cranfield", "synthetic", "expand", "latency", "all"])
    ap.add_argument("--fast-plaid", action="store_true", help="also fast-plaid (must import)")
    ap.add_argument("--no-lik", action="store_true", help="only the exact and fast-plaid rows")
    ap.add_argument("--docs", type=int, default=10000)
    ap.add_argument("--clusters", type=int, default=2000)
    ap.add_argument("--nbits", type=int, default=2)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--threads", type=int, default=0, help="0: all cores (lik and torch defaults)")
    ap.add_argument("--num-centroids", type=int, default=0,
                    help="synthetic, lik only: K (0: 2^floor(log2(16 sqrt(tokens))), fast-plaid's rule)")
    ap.add_argument("--grid", default="", help="n_ivf_probe/n_full_scores pairs, e.g. 8/4096,2/256 (latency: the first)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="synthetic: cuda runs the GPU mode (lik GPU + CPU, exact dense and fast-plaid on the GPU)")
    ap.add_argument("--tokens", type=int, default=4_000_000, help="--device cuda: corpus tokens")
    ap.add_argument("--index-dir", default="", help="--device cuda, latency: lik's index folder, reused when it holds "
                    "this corpus's build (else built there)")
    ap.add_argument("--fast-plaid-build", action="store_true",
                    help="--device cuda --fast-plaid: also time fast-plaid's own create() on the GPU")
    ap.add_argument("--build-device", choices=["cuda", "cpu"], default="cuda",
                    help="--device cuda: where lik's index is built (Index.build(device=...); cuda: k-means' "
                         "assignment and the coding on the GPU)")
    ap.add_argument("--check-cpu-build", action="store_true",
                    help="--device cuda: also build on the CPU (INDEX_DIR-cpu), time it and compare the files "
                         "byte for byte")
    ap.add_argument("--profile", action="store_true", help="--device cuda: lik's GPU kernels per search (torch.profiler)")
    ap.add_argument("--out", default="", help="--device cuda: JSON rows written here (other token counts kept)")
    ap.add_argument("--thread-counts", default=f"1,{os.cpu_count()}", help="latency: the thread counts, e.g. 1,2,16")
    ap.add_argument("--lat-rounds", type=int, default=3, help="latency: times each query is searched alone")
    ap.add_argument("--doc-lens", default="60,140", type=lambda v: tuple(map(int, v.split(","))),
                    help="synthetic, latency: tokens per document, min,max")
    args = ap.parse_args()
    if args.device == "cuda" and args.part != "synthetic":
        ap.error("--device cuda: the synthetic part only")
    print(f"date {time.strftime('%Y-%m-%d %H:%M')}, command: python3 {' '.join(sys.argv)}")
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        if args.part in ("cranfield", "all"):
            part_cranfield(args, tmp)
        if args.part == "synthetic" and args.device == "cuda":
            part_gpu(args, tmp)
        elif args.part in ("synthetic", "all"):
            part_synthetic(args, tmp)
        if args.part in ("expand", "all"):
            part_expand(args, tmp)
        if args.part == "latency":
            part_latency(args, tmp)


if __name__ == "__main__":
    main()
