#!/usr/bin/env python3
"""Compressed late interaction (PLAID / ColBERTv2 residuals), side by side in
one run on the same corpus and queries:

  CPU  lik residual   lik.maxsim_residual_varlen on the compressed corpus
       lik dense fp16 lik.maxsim_varlen on the same corpus decoded to fp16
  GPU  (when torch sees a CUDA device)
       lik residual   the same call on the GPU
       lik-kernels    late-interaction-kernels 0.4.5 maxsim_residual_varlen on the
                      same bytes converted once (outside the timing) to its bit
                      order (the 8-bit reversal of a colbert byte)
       lik dense bf16 lik's maxsim_varlen on the corpus decoded to bf16

All with normalize=True (PLAID's convention).  Corpus (synthetic: the speed
of every method does not depend on the values): Nd documents of Ld tokens,
d = 128, C = 2^floor(log2(16 sqrt(T))) fp16 unit-norm centroids (fast-plaid's
rule for T tokens), uniform random codes and residual bytes, bucket weights
from a normal sample; one query of Lq = 32 tokens (the seed's PLAID
benchmark), or --nq of them per call.  Times: median over --reps calls after warm-up (the Triton peer
autotunes on its first call); CPU: wall time with all cores, the two methods'
calls interleaved; GPU: CUDA events
around 10 back-to-back calls.  lik's GPU calls go through the C entry point
(lik's Python front would add its host check of the codes: one device
reduction and a sync).  Scores of every method are compared with lik dense
(max abs difference printed).

    python3 bench/residual.py [--device cpu|gpu|all] [--reps N] [--shapes a,b]
        [--q-dtype fp32|fp16|bf16] [--nq N]

--q-dtype: the query's dtype (default fp32).  On CUDA an fp32 query scores
in fp32 (3xTF32 tiles), a half-type one on fp16 operands (normalize).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402

import lik  # noqa: E402
from lik import _lib  # noqa: E402

SHAPES = {  # name: (Nd, Ld, nbits)
    "5k-200-nb2": (5000, 200, 2),
    "10k-300-nb2": (10000, 300, 2),
    "10k-512-nb2": (10000, 512, 2),
    "10k-512-nb4": (10000, 512, 4),
    "25k-300-nb2": (25000, 300, 2),
}
D, LQ = 128, 32
Q_DTYPE = torch.float32
NQ = 1  # queries per call (--nq)


def corpus(nd, ld, nbits, seed=0):
    g = torch.Generator().manual_seed(seed)
    T = nd * ld
    C = 2 ** int(np.floor(np.log2(16 * np.sqrt(T))))
    cent = torch.nn.functional.normalize(torch.randn(C, D, generator=g), dim=-1).half()
    codes = torch.randint(0, C, (T,), generator=g, dtype=torch.int32)
    res = torch.randint(0, 256, (T, D * nbits // 8), generator=g, dtype=torch.uint8)
    w = torch.sort(torch.randn(1 << nbits, generator=g) * 0.1).values
    cu = torch.arange(0, T + 1, ld, dtype=torch.int32)
    Q = torch.randn(NQ, LQ, D, generator=g).to(Q_DTYPE)
    return dict(cent=cent, codes=codes, res=res, w=w, cu=cu, Q=Q, C=C, T=T, nbits=nbits)


def decoded(c, dtype, device):
    """The corpus decoded (normalised) to dtype on device."""
    x = torch.empty(c["T"], D, dtype=dtype, device=device)
    args = [t.to(device) for t in (c["codes"], c["res"], c["cent"], c["w"])]
    _lib.call_codec_decompress(args[0], args[1], args[2], args[3], c["nbits"], "colbert", x, normalize=True)
    return x


def lik_residual(c, device):
    codes, res, cu, cent, w, Q = (c[k].to(device) for k in ("codes", "res", "cu", "cent", "w", "Q"))
    out = torch.empty(NQ, cu.shape[0] - 1, device=device)
    return lambda: (_lib.call_maxsim_residual(Q, codes, res, cu, cent, w, c["nbits"], "colbert", out,
                                              normalize=True, packed=True), out)[1]


def lik_dense(c, dtype, device):
    Dx = decoded(c, dtype, device)
    Q = c["Q"].reshape(NQ * LQ, D).to(dtype).to(device)
    cu_q = torch.arange(0, NQ * LQ + 1, LQ, dtype=torch.int32, device=device)
    cu_d = c["cu"].to(device)
    out = torch.empty(NQ, cu_d.shape[0] - 1, device=device)
    opts = _lib.make_options(normalize=True, stream=_lib.cuda_stream_of(Q), max_seqlen_q=LQ)
    from lik import _autograd

    def run():
        _autograd._call(_lib.lib.lik_maxsim_varlen, (Q, Dx, cu_q, cu_d, None, None), opts, (out, None))
        return out

    return run


def lik_kernels(c):
    from late_interaction_kernels.plaid import maxsim_residual_varlen

    rev = torch.tensor([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=torch.uint8, device="cuda")
    res = rev[c["res"].cuda().long()]  # colbert bytes -> the seed's bit order
    codes, cu, cent, w, Q = (c[k].cuda() for k in ("codes", "cu", "cent", "w", "Q"))
    ld = int((c["cu"][1:] - c["cu"][:-1]).max())
    return lambda: maxsim_residual_varlen(Q, codes, res, cu, cent, w, c["nbits"], max_seqlen_d=ld, normalize=True)


def time_cpu(fns, reps):
    """Median ms of each function, the calls interleaved (a shared machine's
    load then weighs on all of them alike)."""
    ts = [[] for _ in fns]
    for f in fns:
        f()
    for _ in range(reps):
        for f, t in zip(fns, ts):
            t0 = time.perf_counter()
            f()
            t.append(time.perf_counter() - t0)
    return [statistics.median(t) * 1e3 for t in ts]


def time_gpu(fn, reps, inner=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / inner)
    return statistics.median(ts)


def row(cells):
    print("| " + " | ".join(cells) + " |", flush=True)


def run_cpu(shapes, reps):
    print(f"\n## CPU ({os.cpu_count()} cores, lik {lik.__version__}, path {lik.cpu_isa()})\n")
    row(["corpus", "C", "lik residual ms", "lik dense fp16 ms", "speed-up", "max |diff|", "MB compressed / fp16"])
    row(["---"] * 7)
    for name in shapes:
        nd, ld, nbits = SHAPES[name]
        c = corpus(nd, ld, nbits)
        f_res, f_dense = lik_residual(c, "cpu"), lik_dense(c, torch.float16, "cpu")
        diff = (f_res() - f_dense()).abs().max().item()
        t_res, t_dense = time_cpu((f_res, f_dense), reps)
        mb = (c["res"].numel() + 4 * c["T"]) / 2**20, c["T"] * D * 2 / 2**20
        row([name, str(c["C"]), f"{t_res:.1f}", f"{t_dense:.1f}", f"{t_dense / t_res:.2f}x", f"{diff:.1e}",
             f"{mb[0]:.0f} / {mb[1]:.0f}"])


def run_gpu(shapes, reps):
    print(f"\n## GPU ({torch.cuda.get_device_name()}, lik {lik.__version__})\n")
    row(["corpus", "C", "lik residual us", "lik-kernels 0.4.5 us", "lik dense bf16 us", "vs lik-kernels",
         "vs dense", "max |diff| lik / lik-kernels vs dense"])
    row(["---"] * 8)
    for name in shapes:
        nd, ld, nbits = SHAPES[name]
        c = corpus(nd, ld, nbits)
        f_res, f_dense = lik_residual(c, "cuda"), lik_dense(c, torch.bfloat16, "cuda")
        ref = f_dense().clone()
        d_res = (f_res() - ref).abs().max().item()
        t_res, t_dense = time_gpu(f_res, reps) * 1e3, time_gpu(f_dense, reps) * 1e3
        try:
            f_seed = lik_kernels(c)
            d_seed = (f_seed() - ref).abs().max().item()
            t_seed = time_gpu(f_seed, reps) * 1e3
            seed_cells = [f"{t_seed:.1f}", f"{t_seed / t_res:.2f}x", f"{d_seed:.1e}"]
        except Exception as e:  # the peer's failure is reported, not fatal
            seed_cells = [f"failed: {type(e).__name__}", "-", "-"]
        row([name, str(c["C"]), f"{t_res:.1f}", seed_cells[0], f"{t_dense:.1f}", seed_cells[1],
             f"{t_dense / t_res:.2f}x", f"{d_res:.1e} / {seed_cells[2]}"])
        del f_res, f_dense
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="all", choices=("cpu", "gpu", "all"))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--q-dtype", default="fp32", choices=("fp32", "fp16", "bf16"))
    ap.add_argument("--nq", type=int, default=1, help="queries per call (Lq = 32 each)")
    a = ap.parse_args()
    global Q_DTYPE, NQ
    NQ = a.nq
    Q_DTYPE = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[a.q_dtype]
    shapes = a.shapes.split(",")
    print(f"# bench/residual.py  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  torch {torch.__version__}  "
          f"Q {a.q_dtype}")
    if a.device in ("cpu", "all"):
        run_cpu(shapes, a.reps)
    if a.device in ("gpu", "all") and torch.cuda.is_available():
        run_gpu(shapes, a.reps)


if __name__ == "__main__":
    main()
