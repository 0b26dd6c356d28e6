#!/usr/bin/env python3
"""Low-bit MaxSim on the GPU (issue 20), one run, every engine on the same
inputs: lik bf16 (lik.maxsim) vs lik int8 / fp8 e4m3 / int8 x bits / bits x
bits (lik.quant) vs late-interaction-kernels 0.4.5 maxsim_inference_fp8, on
rerank shapes (1, 4, 16 and 64 queries x 10^4 documents, 1 and 16 queries x
10^5, x 300 tokens, d 128) and ColPali shapes (1024 document patches, 1, 4, 16, 64
queries); plus the binary pre-filter
(lik.retrieve_binary: int8 x bits top-10*c, exact bf16 rescoring) vs exact
bf16 top-10 on data with planted neighbours (queries are noisy copies of a
document's tokens): speed-up and recall@10 of the exact top-10, and the
coarse int8 x bits call alone (the rest: host quantisation of the queries,
top-k, gather, exact rescoring).

Timing: CUDA events around R back-to-back calls after a warm-up, median of 5
(documents far larger than the 60 MB L2 stream from HBM; the 10^4 rerank
inputs (38-77 MB) partly fit).  Per-token scales everywhere (lik.quant's formulas,
evaluated in torch on the GPU, and the peer's fp8 per-token formula).
Usage: python3 bench/quant_gpu.py [--out results.json] [--parts speed,prefilter]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import lik  # noqa: E402

SHAPES = [  # name, Nq, Nd, Lq, Ld, d
    ("rerank-1e4", 1, 10_000, 32, 300, 128),
    ("rerank-1e4-4q", 4, 10_000, 32, 300, 128),
    ("rerank-1e4-16q", 16, 10_000, 32, 300, 128),
    ("rerank-1e4-64q", 64, 10_000, 32, 300, 128),
    ("rerank-1e5", 1, 100_000, 32, 300, 128),
    ("rerank-1e5-16q", 16, 100_000, 32, 300, 128),
    ("colpali", 1, 10_000, 32, 1024, 128),
    ("colpali-4q", 4, 10_000, 32, 1024, 128),
    ("colpali-16q", 16, 2_000, 32, 1024, 128),
    ("colpali-64q", 64, 2_000, 32, 1024, 128),
]


def timed(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / reps)
    return statistics.median(ts)


def quantize_cuda(X):
    """lik.quantize_int8 / quantize_binary's formulas in torch on the GPU (the
    library's quantisers run on the host; 15 GB of fp32 documents would spend
    the device time copying).  tests/python/test_quant.py checks the formula."""
    s = X.abs().amax(-1) / 127.0
    q = torch.round(X / s.clamp_min(1e-30)[..., None]).clamp(-127, 127).to(torch.int8)
    w = torch.tensor([128, 64, 32, 16, 8, 4, 2, 1], device=X.device, dtype=torch.uint8)
    bits = ((X > 0).to(torch.uint8).unflatten(-1, (-1, 8)) * w).sum(-1, dtype=torch.uint8)
    return q, s.float(), bits


def fp8_per_token(X):
    s = X.float().abs().amax(-1).clamp_min(1e-6) / 448.0
    return (X.float() / s[..., None]).to(torch.float8_e4m3fn), s


def part_speed(rows):
    try:
        from late_interaction_kernels.fp8 import maxsim_inference_fp8 as peer_fp8
    except Exception as exc:  # noqa: BLE001 - report and run without the peer
        print(f"late-interaction-kernels not available: {exc!r}")
        peer_fp8 = None
    print("| shape (Nq, Nd, Lq, Ld, d) | lik bf16 ms | lik int8 ms | lik fp8 ms | lik int8 x bits ms | "
          "lik bits x bits ms | lik-kernels fp8 ms | int8 / bf16 | fp8 / bf16 | int8 top-10 overlap |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    g = torch.Generator(device="cuda").manual_seed(0)
    for name, nq, nd, lq, ld, d in SHAPES:
        Q = torch.nn.functional.normalize(torch.randn(nq, lq, d, device="cuda", generator=g), dim=-1)
        D = torch.nn.functional.normalize(torch.randn(nd, ld, d, device="cuda", generator=g), dim=-1)
        Qb, Db = Q.bfloat16(), D.bfloat16()
        qi, sq, qbits = quantize_cuda(Q)
        di, sd, dbits = quantize_cuda(D)
        q8, s8q = fp8_per_token(Q)
        d8, s8d = fp8_per_token(D)
        del D
        r = {"shape": name, "Nq": nq, "Nd": nd, "Lq": lq, "Ld": ld, "d": d}
        r["bf16"] = timed(lambda: lik.maxsim(Qb, Db))
        r["int8"] = timed(lambda: lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd))
        r["fp8"] = timed(lambda: lik.maxsim_inference_fp8(q8, d8, scale_Q=s8q, scale_D=s8d))
        r["int8_bits"] = timed(lambda: lik.maxsim_inference_binary(qi, dbits, scale_Q=sq))
        r["bits_bits"] = timed(lambda: lik.maxsim_inference_binary(qbits, dbits, d=d), reps=2)
        r["peer_fp8"] = None
        if peer_fp8:
            try:  # the peer on a shape it cannot run (memory) must not end the run
                r["peer_fp8"] = timed(lambda: peer_fp8(q8, d8, scale_Q=s8q, scale_D=s8d))
            except Exception as exc:  # noqa: BLE001
                print(f"late-interaction-kernels on {name}: {exc!r}")
                torch.cuda.empty_cache()
        ex = lik.maxsim(Qb, Db).reshape(nq, nd).float()
        s8 = lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd).reshape(nq, nd)
        k = min(10, nd)
        ov = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in
                 zip(ex.topk(k, 1).indices, s8.topk(k, 1).indices)) / (k * nq)
        r["int8_top10_overlap"] = ov
        peer = f"{r['peer_fp8']:.3f}" if r["peer_fp8"] else "n/a"
        print(f"| {name} ({nq}, {nd}, {lq}, {ld}, {d}) | {r['bf16']:.3f} | {r['int8']:.3f} | {r['fp8']:.3f} | "
              f"{r['int8_bits']:.3f} | {r['bits_bits']:.3f} | {peer} | {r['bf16']/r['int8']:.2f}x | "
              f"{r['bf16']/r['fp8']:.2f}x | {ov:.3f} |", flush=True)
        rows.append(r)
        del Db, di, d8, dbits
        torch.cuda.empty_cache()


def part_prefilter(rows, nq, nd=100_000, ld=300, d=128, lq=32):
    """Each query has 10 planted relevant documents (their first Lq tokens are
    noisy copies of the query's, noise growing with the rank), the rest random:
    the exact top-10 is well separated, as for a real relevant set."""
    g = torch.Generator(device="cuda").manual_seed(1)
    D = torch.nn.functional.normalize(torch.randn(nd, ld, d, device="cuda", generator=g), dim=-1)
    Q = torch.nn.functional.normalize(torch.randn(nq, lq, d, device="cuda", generator=g), dim=-1)
    rel = torch.randperm(nd, device="cuda", generator=g)[: 10 * nq].view(nq, 10)
    for r in range(10):
        noise = torch.randn(nq, lq, d, device="cuda", generator=g) * (0.5 + 0.1 * r) / d ** 0.5
        D[rel[:, r], :lq] = torch.nn.functional.normalize(Q + noise, dim=-1)
    Qb, Db = Q.bfloat16(), D.bfloat16()
    _, _, bits = quantize_cuda(D)
    del D
    t_exact = timed(lambda: lik.retrieve(Qb, Db, 10, normalize=False), reps=3)
    _, ex = lik.retrieve(Qb, Db, 10, normalize=False)
    planted = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(ex, rel)) / (10 * nq)
    # the coarse call alone, on the queries retrieve_binary quantises on the host
    qi, sq = (x.cuda() for x in lik.quantize_int8(Qb.cpu(), normalize=False))
    t_coarse = timed(lambda: lik.maxsim_inference_binary(qi, bits, d=d, scale_Q=sq), reps=3)
    print(f"\nbinary pre-filter, {nq} queries x {nd} documents x {ld} tokens, d={d}: exact bf16 "
          f"lik.retrieve top-10 {t_exact:.2f} ms (finds {planted:.3f} of the planted documents); "
          f"the coarse int8 x bits call alone {t_coarse:.3f} ms\n")
    print("| queries | candidates (10*c) | ms | speed-up vs exact bf16 | recall@10 of exact top-10 |")
    print("|---|---|---|---|---|")
    for c in (2, 5, 10, 20):
        t = timed(lambda: lik.retrieve_binary(Qb, Db, bits, 10, candidates=c, normalize=False), reps=3)
        _, ib = lik.retrieve_binary(Qb, Db, bits, 10, candidates=c, normalize=False)
        rec = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(ex, ib)) / (10 * nq)
        print(f"| {nq} | {10 * c} | {t:.2f} | {t_exact / t:.2f}x | {rec:.3f} |", flush=True)
        rows.append({"prefilter_queries": nq, "candidates": 10 * c, "ms": t, "exact_ms": t_exact,
                     "coarse_ms": t_coarse, "recall10": rec})
    del Db, bits
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=None)
    ap.add_argument("--parts", default="speed,prefilter", help="comma-separated: speed, prefilter")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    rows = []
    if "speed" in parts:
        part_speed(rows)
    if "prefilter" in parts:
        part_prefilter(rows, nq=1)
        part_prefilter(rows, nq=16)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
