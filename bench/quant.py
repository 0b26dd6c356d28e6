"""Low-bit MaxSim on the CPU (issue 20): speed of int8 / binary vs lik fp32 /
fp16 on the CPU table's shapes (bench/cpu_forward.py), and retrieval quality
on Cranfield (data/cranfield) for fp16, int8, binary and binary pre-filter +
exact rescoring vs exact fp32 MaxSim.  One run, every engine on the same
inputs.  Usage:  python bench/quant.py [--reps N] [--threads T]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_forward import SHAPES  # noqa: E402
from plaid_index import _lik, cranfield, machine, ndcg_at, overlap_at, recall_at  # noqa: E402

lik = _lik()


def timed(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def part_speed(reps):
    print("| shape (Nq, Nd, Lq, Ld, d) | fp32 ms | fp16 ms | int8 ms | int8 x bits ms | bits x bits ms "
          "| int8 / fp32 speed-up | bytes/token fp32 : int8 : bits |")
    print("|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name, nq, nd, lq, ld, d in SHAPES:
        Q = rng.standard_normal((nq, lq, d), dtype=np.float32)
        D = rng.standard_normal((nd, ld, d), dtype=np.float32)
        Q /= np.linalg.norm(Q, axis=-1, keepdims=True)
        D /= np.linalg.norm(D, axis=-1, keepdims=True)
        Q16, D16 = Q.astype(np.float16), D.astype(np.float16)
        qi, sq = lik.quantize_int8(Q)
        di, sd = lik.quantize_int8(D)
        qb, db = lik.quantize_binary(Q), lik.quantize_binary(D)
        t32 = timed(lambda: lik.maxsim(Q, D), reps)
        t16 = timed(lambda: lik.maxsim(Q16, D16), reps)
        t8 = timed(lambda: lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd), reps)
        t8b = timed(lambda: lik.maxsim_inference_binary(qi, db, scale_Q=sq), reps)
        tbb = timed(lambda: lik.maxsim_inference_binary(qb, db, d=d), reps)
        print(f"| {name} ({nq}, {nd}, {lq}, {ld}, {d}) | {t32*1e3:.2f} | {t16*1e3:.2f} | {t8*1e3:.2f} | "
              f"{t8b*1e3:.2f} | {tbb*1e3:.2f} | {t32/t8:.2f}x | {4*d} : {d + 4} : {-(-d // 8)} |", flush=True)


def part_quality():
    X, cu, dids, Q16, qlens, qids, qrels = cranfield()
    lens = np.diff(cu)
    D = np.zeros((len(lens), int(lens.max()), X.shape[1]), np.float32)
    dm = np.zeros(D.shape[:2], bool)
    for j in range(len(lens)):
        D[j, : lens[j]] = X[cu[j]:cu[j + 1]]
        dm[j, : lens[j]] = True
    Q = Q16.astype(np.float32)
    qm = np.arange(Q.shape[1])[None] < qlens[:, None]
    keep = [i for i, q in enumerate(qids) if int(q) in qrels]
    Q, qm, qids = Q[keep], qm[keep], qids[keep]

    def quality(name, ids, exact_ids, secs):
        nd = np.mean([ndcg_at([dids[j] for j in r], qrels[int(q)]) for r, q in zip(ids, qids)])
        rc = np.mean([recall_at([dids[j] for j in r], qrels[int(q)]) for r, q in zip(ids, qids)])
        ov = overlap_at(ids, exact_ids, 10)
        print(f"| {name} | {nd:.4f} | {rc:.4f} | {ov:.4f} | {secs*1e3:.0f} |", flush=True)

    def top(scores, k=100):
        return np.argsort(-scores, axis=1, kind="stable")[:, :k]

    print(f"\nCranfield: {len(qids)} judged queries x {len(lens)} documents, d={X.shape[1]}\n")
    print("| scoring | nDCG@10 | recall@100 | top-10 overlap with exact | ms (all queries) |")
    print("|---|---|---|---|---|")
    t0 = time.perf_counter()
    _, exact = lik.retrieve(Q, D, 100, qm, dm, normalize=False)
    te = time.perf_counter() - t0
    quality("exact fp32", exact, exact, te)
    t0 = time.perf_counter()
    _, i16 = lik.retrieve(Q.astype(np.float16), D.astype(np.float16), 100, qm, dm, normalize=False)
    quality("fp16", i16, exact, time.perf_counter() - t0)
    qi, sq = lik.quantize_int8(Q)
    di, sd = lik.quantize_int8(D)
    t0 = time.perf_counter()
    s8 = lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd, q_mask=qm, d_mask=dm)
    quality("int8 (per-token scales)", top(s8), exact, time.perf_counter() - t0)
    db = lik.quantize_binary(D)
    t0 = time.perf_counter()
    sb = lik.maxsim_inference_binary(qi, db, scale_Q=sq, q_mask=qm, d_mask=dm)
    quality("binary docs x int8 queries (no rescoring)", top(sb), exact, time.perf_counter() - t0)
    for c in (2, 4, 10):
        t0 = time.perf_counter()
        _, ib = lik.retrieve_binary(Q, D, db, 100, candidates=c, q_mask=qm, d_mask=dm, normalize=False)
        quality(f"binary pre-filter top-{100 * c} + exact rescoring", ib, exact, time.perf_counter() - t0)
    for c in (5, 10, 20):
        t0 = time.perf_counter()
        _, ib = lik.retrieve_binary(Q, D, db, 10, candidates=c, q_mask=qm, d_mask=dm, normalize=False)
        ov = overlap_at(ib, exact, 10)
        print(f"| binary pre-filter top-{10 * c} + exact rescoring, k=10 | | | {ov:.4f} | "
              f"{(time.perf_counter() - t0)*1e3:.0f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    lik.set_num_threads(a.threads)
    print(f"machine: {machine()}; lik CPU kernels: {lik.cpu_isa()} (int8: VNNI where present); "
          f"threads: {a.threads or 'all'}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    part_speed(a.reps)
    part_quality()


if __name__ == "__main__":
    main()
