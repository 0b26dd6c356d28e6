#!/usr/bin/env python3
"""Device time of each CUDA kernel behind a few lik calls (torch.profiler's
CUDA events, mean over --reps calls after one warm-up call): what a change to
one kernel moved, without the host or the peers.  Run it once per library
build (LIK_LIBRARY=...) in one device call to compare builds.

Parts (--parts, comma-separated):
  short   one query (32 tokens, bf16, d = 128) against 10^5 documents of 32 or
          64 tokens: unmasked, with a prefix d_mask (70-90 % of each document
          valid) and with the same d_lengths (short_docs_kernel, prefix_kernel)
  binary  1 and 16 int8 queries (32 tokens) against 10^5 x 300 sign-bit
          documents, d = 128 (signs_doc_kernel / signs_tile_kernel)
  masks   text-short (1 x 1000, Lq 32, Ld 300), colpali (1 x 1000, Lq 128,
          Ld 1024) and train-128 (128 x 128, Lq 32, Ld 300), bf16, without and
          with a random d_mask (80 % valid): prefix_kernel + the forward

Prints one line per (case, kernel): mean µs per call and launches per call.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))


def kernel_times(tag, fn, reps):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    ev = {}
    for e in p.events():
        if e.device_type.name == "CUDA":
            ev.setdefault(e.name[:100], []).append(e.device_time_total)
    print(f"-- {tag}")
    for name, v in sorted(ev.items(), key=lambda kv: -sum(kv[1])):
        print(f"   {sum(v) / reps:9.1f} us/call  x{len(v) // reps}  {name}", flush=True)


def part_short(g, reps):
    import lik

    Q = torch.randn(1, 32, 128, device="cuda", generator=g).bfloat16()
    for Ld in (32, 64):
        D = torch.randn(100000, Ld, 128, device="cuda", generator=g).bfloat16()
        lens = (Ld * (0.7 + 0.2 * torch.rand(100000, device="cuda", generator=g))).round().to(torch.int32)
        m = torch.arange(Ld, device="cuda") < lens[:, None]
        kernel_times(f"short docs 1e5 x {Ld}, unmasked", lambda: lik.maxsim(Q, D), reps)
        kernel_times(f"short docs 1e5 x {Ld}, prefix d_mask", lambda: lik.maxsim(Q, D, None, m), reps)
        kernel_times(f"short docs 1e5 x {Ld}, d_lengths", lambda: lik.maxsim(Q, D, d_lengths=lens), reps)
        del D


def part_binary(g, reps):
    import lik
    import quant_gpu

    D = torch.nn.functional.normalize(torch.randn(100000, 300, 128, device="cuda", generator=g), dim=-1)
    bits = quant_gpu.quantize_cuda(D)[2]
    del D
    torch.cuda.empty_cache()
    for nq in (1, 16):
        Qb = torch.nn.functional.normalize(torch.randn(nq, 32, 128, device="cuda", generator=g), dim=-1)
        qi, sq = (x.cuda() for x in lik.quantize_int8(Qb.bfloat16().cpu(), normalize=False))
        kernel_times(f"binary {nq} queries x 1e5 x 300", lambda: lik.maxsim_inference_binary(qi, bits, d=128, scale_Q=sq), reps)


def part_masks(g, reps):
    import lik

    for name, (nq, nd, lq, ld) in {"text-short": (1, 1000, 32, 300), "colpali": (1, 1000, 128, 1024),
                                   "train-128": (128, 128, 32, 300)}.items():
        Q = torch.randn(nq, lq, 128, device="cuda", generator=g).bfloat16()
        D = torch.randn(nd, ld, 128, device="cuda", generator=g).bfloat16()
        m = torch.rand(nd, ld, device="cuda", generator=g) < 0.8
        kernel_times(f"{name}, unmasked", lambda: lik.maxsim(Q, D), reps)
        kernel_times(f"{name}, random d_mask", lambda: lik.maxsim(Q, D, None, m), reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="short,binary,masks")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    parts = {"short": part_short, "binary": part_binary, "masks": part_masks}
    g = torch.Generator(device="cuda").manual_seed(0)
    for p in args.parts.split(","):
        if p not in parts:
            raise SystemExit(f"--parts: unknown part {p!r} (short, binary, masks)")
        parts[p](g, args.reps)


if __name__ == "__main__":
    main()
