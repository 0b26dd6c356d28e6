#!/usr/bin/env python3
"""Fused D-side head benchmark: lik.maxsim_from_hidden vs the unfused
pipeline vs late-interaction-kernels 0.4.5's maxsim_from_hidden.

    LIK_LIBRARY=build/gpu/liblik.so python3 bench/fused_head.py [--device cuda|cpu]
        [--shapes name,...] [--out results.json]

Methods (same inputs, one training step = scores = f(Q, H_d, W, b);
scores.backward(G) with Q, H_d, W, b requiring grad, grads set to None first):
* fused    lik.maxsim_from_hidden (C: lik_maxsim_from_hidden + its backward).
* fused_portable  the same in a context with cuda_off=["wgmma"] (CUDA only): the
           portable forward kernel (head_fwd.cuh) where the sm_90a one
           (head_wg.cuh) would run; the backward is the same.
* unfused  D = F.normalize(F.linear(H_d, W, b), dim=-1); lik.maxsim(Q, D).
* lik045   late_interaction_kernels.maxsim_from_hidden (wheel in .whl/; CUDA only).
"fwd" times the inference call (no grad: no argmax kept), "train" the step.

Shapes: the seed's fused-head table (benchmarks page, "Fused D-side head"):
LateOn Nd 16 / 32, Ld 300 / 1024, d_model 768; LateOn-Code Nd 128 ... 1024, Ld
1024 / 2048; LateOn-Code-edge Nd 256, Ld 4096, d_model 384, d_out 96; Lq 32,
d_out 128 unless stated.  The seed does not state Nq; these use Nq = 1 (its
kernel re-projects the documents once per query, so Nq = 1 is its best case)
plus one Nq = 8 row.  CUDA: bf16; CPU: float32, smaller shapes.

Correctness first: fused scores and gradients against the unfused pipeline's
(relative error ||a - b|| / ||b||; both bf16 on CUDA, so ~1e-3 is expected).
Time: CUDA triton.testing.do_bench median (it flushes L2 between calls); CPU
median of 5 wall-clock runs after one warm-up.  Peak: torch.cuda
max_memory_allocated during one step, inputs included, MB (1e6 bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("LIK_LIBRARY"):
    os.environ["LIK_LIBRARY"] = str(ROOT / "build/gpu/liblik.so")
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import lik  # noqa: E402

# name: (Nq, Nd, Lq, Ld, d_model, d_out)
CUDA_SHAPES = {
    "lateon-nd16-ld300": (1, 16, 32, 300, 768, 128),
    "lateon-nd32-ld1024": (1, 32, 32, 1024, 768, 128),
    "code-nd128-ld1024": (1, 128, 32, 1024, 768, 128),
    "code-nd256-ld1024": (1, 256, 32, 1024, 768, 128),
    "code-nd512-ld2048": (1, 512, 32, 2048, 768, 128),
    "code-nd1024-ld2048": (1, 1024, 32, 2048, 768, 128),
    "edge-nd256-ld4096": (1, 256, 32, 4096, 384, 96),
    "code-nq8-nd256-ld1024": (8, 256, 32, 1024, 768, 128),
}
CPU_SHAPES = {
    "lateon-nd16-ld300": (1, 16, 32, 300, 768, 128),
    "code-nd64-ld512": (1, 64, 32, 512, 768, 128),
    "edge-nq4-nd32-ld512": (4, 32, 32, 512, 384, 96),
}


def make_inputs(shape, device, dtype, seed=0):
    nq, nd, lq, ld, d_model, d_out = shape
    g = torch.Generator(device="cpu").manual_seed(seed)
    t = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    Q = F.normalize(t(nq, lq, d_out), dim=-1)
    H = t(nd, ld, d_model)
    W = t(d_out, d_model) / d_model**0.5
    b = t(d_out) * 0.1
    G = t(nq, nd)
    return [x.to(device=device, dtype=dtype) for x in (Q, H, W, b)], G.to(device)


def methods(device):
    out = {
        "fused": lambda Q, H, W, b: lik.maxsim_from_hidden(Q, H, W, b),
        "unfused": lambda Q, H, W, b: lik.maxsim(Q, F.normalize(F.linear(H, W, b), dim=-1)),
    }
    if device == "cuda":

        def portable(Q, H, W, b):
            with lik.Context(cuda_off=["wgmma"]):
                return lik.maxsim_from_hidden(Q, H, W, b)

        out["fused_portable"] = portable
        try:
            from late_interaction_kernels.fused_head import maxsim_from_hidden as lik045_head

            out["lik045"] = lambda Q, H, W, b: lik045_head(Q, H, W, b)
        except ImportError as exc:
            print(f"late-interaction-kernels not importable ({exc}); lik045 column skipped")
    return out


def timer(device):
    if device == "cuda":
        import triton.testing

        return lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")

    def cpu(fn):
        fn()
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)

    return cpu


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def bench_shape(name, shape, device, dtype, fns, time_fn):
    xs, G = make_inputs(shape, device, dtype)
    leaves = [x.clone().requires_grad_(True) for x in xs]

    def step(fn):
        for x in leaves:
            x.grad = None
        fn(*leaves).backward(G)

    row = {"shape": name, "dims": dict(zip(("Nq", "Nd", "Lq", "Ld", "d_model", "d_out"), shape))}
    ref = None
    for m, fn in fns.items():
        try:
            step(fn)
            with torch.no_grad():
                s = fn(*xs).float()
            got = [s] + [x.grad.clone() for x in leaves]
            if ref is None:
                ref = got
            else:
                row[f"{m}_rel_err_vs_fused"] = [rel(g, r) for g, r in zip(got, ref)]
            with torch.no_grad():
                row[f"{m}_fwd_ms"] = time_fn(lambda: fn(*xs))
            row[f"{m}_train_ms"] = time_fn(lambda: step(fn))
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                step(fn)
                torch.cuda.synchronize()
                row[f"{m}_peak_mb"] = torch.cuda.max_memory_allocated() / 1e6
        except Exception as exc:  # a peer failing one shape stays in the table
            row[f"{m}_error"] = f"{type(exc).__name__}: {exc}"[:300]
        for x in leaves:
            x.grad = None
        if device == "cuda":
            torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shapes", default="")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    table = CUDA_SHAPES if args.device == "cuda" else CPU_SHAPES
    names = args.shapes.split(",") if args.shapes else list(table)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    fns, time_fn = methods(args.device), timer(args.device)
    print(f"{'shape':24} {'method':8} {'fwd ms':>8} {'train ms':>9} {'peak MB':>8} {'fused x':>8}  "
          "rel err vs fused (s, gQ, gH, gW, gb)", flush=True)
    rows = []
    for n in names:
        r = bench_shape(n, table[n], args.device, dtype, fns, time_fn)
        rows.append(r)
        for m in fns:
            if f"{m}_error" in r:
                print(f"{r['shape']:24} {m:8} {r[m + '_error']}", flush=True)
                continue
            sp = r[f"{m}_train_ms"] / r["fused_train_ms"] if "fused_train_ms" in r else float("nan")
            errs = " ".join(f"{e:.1e}" for e in r.get(f"{m}_rel_err_vs_fused", []))
            print(f"{r['shape']:24} {m:8} {r[m + '_fwd_ms']:8.3f} {r[m + '_train_ms']:9.3f} "
                  f"{r.get(m + '_peak_mb', float('nan')):8.0f} {sp:7.2f}x  {errs}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"device": args.device, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
