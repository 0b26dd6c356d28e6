#!/usr/bin/env python3
"""GPU training benchmark (forward + backward) of lik on the H200.

    LIK_LIBRARY=build/liblik.so python3 bench/gpu_train.py [--shapes name,...]
        [--methods lik,lik045-auto,lik045-unified,lik045-lowmem,flash,eager] [--masks 0,1]
        [--dtype bf16|fp32] [--precision highest|high] [--split] [--out results.json]

One training step = scores = maxsim(Q, D, d_mask=...) ; scores.backward(G), bf16
inputs (--dtype fp32: float32, under --precision highest | high, torch's
float32 matmul precision: "high" lets lik and the peers use TF32) that require
grad, grads set to None before each step (so each step
allocates and writes its gradients, as a training loop does).

* Correctness first: lik's gradients against the float64 gradient of its own
  argmax (the scores re-summed in float64 from the forward's argmax and
  differentiated by torch: tests/train/train_ref.py's rescore_padded), relative error
  ||got - ref|| / ||ref||; every peer's gradients against lik's (relative error;
  a tie may pick another token); lik's gradients bitwise equal over two steps.
* Time: triton.testing.do_bench median (it flushes the L2 between calls),
  eagerly, and of one CUDA-graph replay of the captured step ("graph").
* Peak: torch.cuda.max_memory_allocated during one eager step above what was
  allocated before it (the inputs), in MB (1e6 bytes).

Methods: lik (backward="auto"; on CUDA every strategy is the same
deterministic kernel), late-interaction-kernels 0.4.5 (`maxsim`,
backward="auto" | "unified" | "lowmem"; wheel in .whl/), flash-maxsim 0.3.0
(`flash_maxsim_batched_train`, the padding as its doc_lengths), and torch eager with
fp32 accumulation (einsum of fp32 copies, masked max, sum: the seed's
reference formula).

Shapes (the issue's): pylate-text 256x256 queries/documents, Lq 32, Ld 300;
colpali 128x128, Lq 32, Ld 1030; colpali-neg KD Q [128, 32], D [128, 8, 1030];
colpali-neg-b256 Q [256, 32], D [256, 16, 1030]; longq 64x64, Lq = Ld = 1030;
cached-ld2048 / cached-ld4096 / cached-ld8192: one tile of PyLate's
CachedContrastive (32 x 32, Lq 128, Ld 2048 / 4096 / 8192); d = 128.  --masks 1 adds a d_mask padding each document's tail by 10-30 %.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name: (Nq, Nd or K, Lq, Ld, d, kd)
SHAPES = {
    "pylate-text": (256, 256, 32, 300, 128, False),
    "colpali": (128, 128, 32, 1030, 128, False),
    "colpali-neg": (128, 8, 32, 1030, 128, True),
    "colpali-neg-b256": (256, 16, 32, 1030, 128, True),
    "longq": (64, 64, 1030, 1030, 128, False),
    # one MaxSim tile of PyLate's CachedContrastive (mini-batch 32, Lq 128)
    "cached-ld2048": (32, 32, 128, 2048, 128, False),
    "cached-ld4096": (32, 32, 128, 4096, 128, False),
    "cached-ld8192": (32, 32, 128, 8192, 128, False),
}


def setup_path():
    if not os.environ.get("LIK_LIBRARY"):
        for cand in ("build/gpu/liblik.so", "build/liblik.so"):
            if (ROOT / cand).is_file():
                os.environ["LIK_LIBRARY"] = str(ROOT / cand)
                break
    sys.path.insert(0, str(ROOT / "python"))


def make_methods(names):
    import torch

    out = {}
    if "lik" in names:
        import lik

        out["lik"] = lambda Q, D, dm: lik.maxsim(Q, D, None, dm)
    for strat in ("auto", "unified", "lowmem"):
        if f"lik045-{strat}" in names:
            import late_interaction_kernels as lk

            out[f"lik045-{strat}"] = (lambda s: lambda Q, D, dm: lk.maxsim(Q, D, None, dm, backward=s))(strat)
    if "flash" in names:
        import flash_maxsim as fm

        lengths = {}  # a padding mask as flash-maxsim's doc_lengths, made once per mask (outside the step)

        def flash(Q, D, dm):
            lens = None
            if dm is not None:
                key = dm.data_ptr()
                if key not in lengths:
                    lengths[key] = dm.sum(-1).reshape(-1).to(torch.int32)
                lens = lengths[key]
            return fm.flash_maxsim_batched_train(Q, D, shared_docs=D.dim() == 3, doc_lengths=lens)

        out["flash"] = flash
    if "eager" in names:

        def eager(Q, D, dm):
            if D.dim() == 4:
                S = torch.einsum("ild,iktd->iklt", Q.float(), D.float())
                if dm is not None:
                    S = S.masked_fill(~dm[:, :, None, :], float("-inf"))
            else:
                S = torch.einsum("ild,jtd->ijlt", Q.float(), D.float())
                if dm is not None:
                    S = S.masked_fill(~dm[None, :, None, :], float("-inf"))
            return S.max(-1).values.sum(-1)

        out["eager"] = eager
    return out


def inputs(shape, masked, seed=0, dtype="bf16"):
    import torch

    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]

    Nq, Nd, Lq, Ld, d, kd = shape
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    Q = torch.randn(Nq, Lq, d, device="cuda", generator=g).to(dt).requires_grad_(True)
    dshape = (Nq, Nd, Ld, d) if kd else (Nd, Ld, d)
    D = torch.randn(dshape, device="cuda", generator=g).to(dt).requires_grad_(True)
    dm = None
    if masked:
        frac = 0.7 + 0.2 * torch.rand(dshape[:-2], device="cuda", generator=g)  # keep 70-90 %
        lens = (frac * Ld).long().clamp_min(1)
        dm = torch.arange(Ld, device="cuda") < lens[..., None]
    G = torch.randn(Nq, Nd, device="cuda", generator=g)
    return Q, D, dm, G


def step_fn(fn, Q, D, dm, G):
    def step():
        Q.grad = None
        D.grad = None
        fn(Q, D, dm).backward(G)

    return step


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def reference_grads(Q, D, dm, G):
    """float64 gradients of lik's own argmax (see the module doc)."""
    import torch

    sys.path.insert(0, str(ROOT / "tests" / "train"))
    from train_ref import rescore_padded

    with torch.no_grad():
        _, am = torch.ops.lik.maxsim_fwd(Q.detach(), D.detach(), None, dm, False, 0, "auto", True)
    Qr = Q.detach().double().requires_grad_(True)
    Dr = D.detach().double().requires_grad_(True)
    rescore_padded(Qr, Dr, am, 0, False).backward(G.double())
    return Qr.grad, Dr.grad


def split(Q, D, dm, G, tt):
    """lik's forward (with argmax) and backward alone, grad_D alone through each of its paths
    (the default, the buckets: cuda_off "bw_ranges", the tiles: cuda_off "bw_buckets"; the
    same bits), and the kernels of a step."""
    import torch

    import lik

    Qd, Dd = Q.detach(), D.detach()
    fwd = lambda: torch.ops.lik.maxsim_fwd(Qd, Dd, None, dm, False, 0, "auto", True)  # noqa: E731
    fwd_s = lambda: torch.ops.lik.maxsim_fwd(Qd, Dd, None, dm, False, 0, "auto", False)  # noqa: E731
    _, am = fwd()
    bwd = lambda: torch.ops.lik.maxsim_bwd(G, Qd, Dd, None, dm, am, False, 0, "auto", True, True)  # noqa: E731
    bq = lambda: torch.ops.lik.maxsim_bwd(G, Qd, Dd, None, dm, am, False, 0, "auto", True, False)  # noqa: E731
    bd = lambda: torch.ops.lik.maxsim_bwd(G, Qd, Dd, None, dm, am, False, 0, "auto", False, True)  # noqa: E731
    r = {k: tt.do_bench(f, warmup=10, rep=50, return_mode="median")
         for k, f in (("fwd", fwd), ("fwd_scores_only", fwd_s), ("bwd", bwd), ("bwd_q", bq), ("bwd_d", bd))}
    for k, off in (("bwd_d_buckets", ("bw_ranges",)), ("bwd_d_tiles", ("bw_buckets",))):
        with lik.Context(cuda_off=off):
            r[k] = tt.do_bench(bd, warmup=10, rep=50, return_mode="median")
    print("    split ms:", json.dumps({k: round(v, 4) for k, v in r.items()}), flush=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            Q.grad = D.grad = None
            torch.ops.lik.maxsim_fwd(Qd, Dd, None, dm, False, 0, "auto", True)
            bwd()
        torch.cuda.synchronize()
    for ev in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:6]:
        print(f"      {ev.device_time_total / 3 / 1000:8.3f} ms/step  {ev.key[:90]}", flush=True)


def peak_mb(step):
    """Peak MB of one step above what was allocated before it: torch's
    allocator plus lik's CUDA scratch, taken for this step from the device's
    default stream-ordered pool (a context with cuda_off "pool": the same
    sizes as from lik's own pool, which no driver call reads), whose
    high-water mark bench/cuda_pool.py reads (an upper bound: the two peaks
    need not coincide)."""
    import torch
    from cuda_pool import pool_high, pool_reset

    import lik

    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    pool_reset()
    with lik.Context(cuda_off=("pool",)):
        step()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base + pool_high()) / 1e6


def warm_clocks(seconds=1.0):
    """Busy the GPU for a while before the first cell: an idle GPU's clocks ramp up over the
    first timed calls (the first cell of a run measured 1.20 ms eager against 1.00-1.03 in
    later runs of the same step, 2026-12-06)."""
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()


def graph_of(step):
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    return g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--methods", default="lik,lik045-auto,lik045-unified,lik045-lowmem,flash,eager")
    ap.add_argument("--masks", default="0,1")
    ap.add_argument("--no-graph", action="store_true")
    ap.add_argument("--rep", type=int, default=200, help="do_bench rep (ms)")
    ap.add_argument("--split", action="store_true", help="lik: forward / backward times, grad_D through each path, and kernels")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"), help="Q and D dtype")
    ap.add_argument("--precision", default="highest", choices=("highest", "high"),
                    help="torch.set_float32_matmul_precision for fp32 (high: TF32 tensor cores)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    setup_path()
    import torch
    import triton.testing as tt

    torch.set_float32_matmul_precision(args.precision)

    names = args.methods.split(",")
    meths = make_methods(names)
    rows = []
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
          flush=True)
    warm_clocks()
    for sname in args.shapes.split(","):
        shape = SHAPES[sname]
        for masked in [int(x) for x in args.masks.split(",")]:
            Q, D, dm, G = inputs(shape, masked, dtype=args.dtype)
            torch.cuda.synchronize()
            # correctness: lik vs float64 reference of its argmax; determinism
            lik_grads = None
            if "lik" in meths:
                st = step_fn(meths["lik"], Q, D, dm, G)
                st()
                g1 = (Q.grad.clone(), D.grad.clone())
                st()
                det = torch.equal(g1[0], Q.grad) and torch.equal(g1[1], D.grad)
                rQ, rD = reference_grads(Q, D, dm, G)
                eq, ed = rel(g1[0], rQ), rel(g1[1], rD)
                del rQ, rD
                lik_grads = g1
                print(f"{sname} mask={masked}: lik vs float64 reference: grad_Q {eq:.2e}, grad_D {ed:.2e}; "
                      f"bitwise deterministic: {det}", flush=True)
                if args.split:
                    split(Q, D, dm, G, tt)
                Q.grad = D.grad = None
                torch.cuda.empty_cache()
            for mname, fn in meths.items():
                rec = {"shape": sname, "masked": masked, "method": mname, "dtype": args.dtype}
                if args.dtype == "fp32":
                    rec["precision"] = args.precision
                step = step_fn(fn, Q, D, dm, G)
                try:
                    step()  # warm up (Triton autotune, module load)
                    torch.cuda.synchronize()
                    if lik_grads is not None and mname != "lik":
                        rec["err_vs_lik"] = [rel(Q.grad, lik_grads[0]), rel(D.grad, lik_grads[1])]
                    Q.grad = D.grad = None
                    torch.cuda.empty_cache()
                    rec["peak_mb"] = peak_mb(step)
                    rec["eager_ms"] = tt.do_bench(step, warmup=25, rep=args.rep, return_mode="median")
                except Exception as e:  # noqa: BLE001
                    rec["error"] = f"{type(e).__name__}: {str(e)[:200]}"
                Q.grad = D.grad = None
                torch.cuda.empty_cache()
                if not args.no_graph and "error" not in rec and rec.get("peak_mb", 0) < 20e3:
                    try:
                        gr = graph_of(step)
                        rec["graph_ms"] = tt.do_bench(gr.replay, warmup=25, rep=args.rep, return_mode="median")
                        del gr
                    except Exception as e:  # noqa: BLE001
                        rec["graph_error"] = f"{type(e).__name__}: {str(e)[:120]}"
                    Q.grad = D.grad = None
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
                rows.append(rec)
                print("   ", json.dumps(rec), flush=True)
                if args.out:  # after every row: a run stopped by its time limit keeps what it measured
                    Path(args.out).write_text(json.dumps(rows, indent=1))
            del Q, D, dm, G, lik_grads
            torch.cuda.empty_cache()

    # summary table
    print("\n| shape | d_mask | method | step ms (eager) | step ms (graph) | peak MB | rel. err vs lik (gQ, gD) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        e = r.get("err_vs_lik")
        err = f"{e[0]:.1e}, {e[1]:.1e}" if e else ""
        em = f"{r['eager_ms']:.3f}" if "eager_ms" in r else r.get("error", "—")[:40]
        gm = f"{r['graph_ms']:.3f}" if "graph_ms" in r else r.get("graph_error", "—")[:40]
        pk = f"{r['peak_mb']:.0f}" if "peak_mb" in r else "—"
        print(f"| {r['shape']} | {'10-30 %' if r['masked'] else 'none'} | {r['method']} | {em} | {gm} | {pk} | {err} |")
    print("\nratios (the fastest peer method: lik045 unified / lowmem / auto, flash; over lik):")
    for sname in args.shapes.split(","):
        for masked in (0, 1):
            rs = {r["method"]: r for r in rows if r["shape"] == sname and r["masked"] == masked}
            if "lik" not in rs or "eager_ms" not in rs["lik"]:
                continue
            for mode in ("eager_ms", "graph_ms"):
                peers = [rs[m][mode] for m in rs if m != "lik" and m != "eager" and mode in rs[m]
                         and "err_vs_lik" in rs[m] and max(rs[m]["err_vs_lik"]) < 0.1]  # a wrong peer is no peer
                if peers and mode in rs["lik"]:
                    lm = rs.get("lik045-lowmem", {}).get("peak_mb")
                    print(f"  {sname} mask={masked} {mode[:-3]}: {min(peers) / rs['lik'][mode]:.2f}x "
                          f"(lik {rs['lik'][mode]:.3f} ms vs {min(peers):.3f}); peak lik "
                          f"{rs['lik'].get('peak_mb', 0):.0f} MB vs lowmem {lm if lm is None else round(lm)} MB")


if __name__ == "__main__":
    main()
