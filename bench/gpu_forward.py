#!/usr/bin/env python3
"""GPU forward benchmark of lik on the H200: builds, checks, times.

    python3 bench/gpu_forward.py [--build] [--peers eager,bf16mm,compile,flash,lik045]
                                 [--shapes name,...] [--dtype bf16|f16|f32] [--out results.json]
    python3 bench/gpu_forward.py --users all|row,... [--peers ...] [--out users.json]

* builds liblik.so with CMake (build/) if --build or it is missing, and
  points the Python package at it (LIK_LIBRARY);
* checks every method against torch eager fp32 before timing (relative
  error of the scores);
* times with CUDA events around CUDA-graph replays of R back-to-back calls
  that rotate over enough input sets to exceed the 60 MB L2 (so every call
  streams its documents from HBM), median of the replays / R; random
  normal data, never zeros;
* floor = max(bytes / 4.27 TB/s, FLOPs / 702 TFLOP/s) (ceilings measured on
  the lent H200, the FLOP one for bf16 tensor cores), bytes = Q + D (+ masks)
  + scores, FLOPs = 2 Nq Nd Lq Ld d;
* --dtype runs every shape in one dtype instead of its own (f32: what fp32
  embeddings cost; the Triton peers compute them in TF32);
* peak memory = torch.cuda.max_memory_allocated during one call, above the
  inputs;
* first-call latency: a fresh process per method (text-short), wall time of
  the first call including module load / JIT / autotune, synchronised.

--users times the calls users make (USERS: padding as a prefix d_mask, as
d_lengths and as a random mask; KD; pairs; packed varlen; fp32 under both
torch matmul precisions; short documents), each method under CUDA-graph
replay and eagerly (back-to-back calls, host cost included); a method that
cannot express a row (flash-maxsim: boolean masks, pairs) is left out.

Peers: torch eager fp32 einsum (the seed's reference), a torch bf16 matmul
path (einsum in the input dtype, fp32 max/sum), torch.compile of the eager
body, flash-maxsim 0.3.0 and late-interaction-kernels 0.4.5 (wheels carried
in .whl/ and installed offline).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BW, FL = 4.27e12, 702e12

# name: (Nq, Nd, Lq, Ld, d, dtype)
SHAPES = {
    "text-short": (1, 1000, 32, 300, 128, "bf16"),
    "text-long": (1, 1000, 32, 1024, 128, "bf16"),
    "colpali": (1, 1000, 128, 1024, 128, "bf16"),
    "corpus-5k": (1, 5000, 32, 300, 128, "bf16"),
    "corpus-10k": (1, 10000, 32, 300, 128, "bf16"),
    "train-batch-32": (32, 32, 32, 300, 128, "bf16"),
    "train-batch-128": (128, 128, 32, 300, 128, "bf16"),
    "large-d-512": (1, 1000, 32, 300, 512, "bf16"),
    "large-d-1024": (1, 500, 32, 300, 1024, "bf16"),
    "lateon-edge-d48": (1, 1000, 32, 2048, 48, "f16"),
    "lateon-edge-big-d48": (1, 4000, 32, 2048, 48, "f16"),
    "mxbai-edge-d64": (1, 1000, 32, 300, 64, "f16"),
    "mxbai-edge-10k-d64": (1, 10000, 32, 300, 64, "f16"),
    "longq-16x768x512": (16, 16, 768, 512, 128, "bf16"),
    "longq-64x768x512": (64, 64, 768, 512, 128, "bf16"),
    "longq-32x1024x1024": (32, 32, 1024, 1024, 128, "bf16"),
    "long-docs-64x4096": (1, 64, 32, 4096, 128, "bf16"),
    "rerank-100k": (1, 100000, 32, 300, 128, "bf16"),
}


def build(force: bool) -> Path:
    env = os.environ.get("LIK_LIBRARY")
    lib = Path(env) if env and not force else ROOT / "build" / "liblik.so"
    if force or not lib.is_file():
        t = time.time()
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(ROOT / "build"), "-DLIK_CUDA=ON",
                        "-DLIK_BUILD_TESTS=OFF", "-DLIK_BUILD_PROGRAMS=OFF",
                        "-DCMAKE_BUILD_TYPE=Release"], check=True)
        subprocess.run(["cmake", "--build", str(ROOT / "build"), "-j", str(os.cpu_count() or 8)],
                       check=True)
        print(f"built {lib} in {time.time() - t:.0f} s", flush=True)
    os.environ["LIK_LIBRARY"] = str(lib)
    sys.path.insert(0, str(ROOT / "python"))
    return lib


def floor_us(Nq, Nd, Lq, Ld, d, esz):
    byts = (Nq * Lq * d + Nd * Ld * d) * esz + Nq * Nd * 4
    flops = 2.0 * Nq * Nd * Lq * Ld * d
    return max(byts / BW, flops / FL) * 1e6, byts, flops


def methods(names):
    import torch

    out = {}

    def eager(Q, D):
        S = torch.einsum("ild,jtd->ijlt", Q.float(), D.float())
        return S.max(-1).values.sum(-1)

    if "lik" in names:
        from lik import _api

        out["lik"] = lambda Q, D: _api.maxsim(Q, D)
    if "eager" in names:
        out["eager"] = eager
    if "bf16mm" in names:
        out["bf16mm"] = lambda Q, D: torch.einsum("ild,jtd->ijlt", Q, D).amax(-1).float().sum(-1)
    if "compile" in names:
        out["compile"] = torch.compile(eager, dynamic=False)
    if "flash" in names:
        import flash_maxsim

        out["flash"] = lambda Q, D: flash_maxsim.flash_maxsim_batched(Q, D)
    if "lik045" in names:
        from late_interaction_kernels.forward import maxsim_forward

        def lik045(Q, D):
            r = maxsim_forward(Q, D)
            return r[0] if isinstance(r, tuple) else r

        out["lik045"] = lik045
    return out


def time_method(fn, sets, reps=8, iters=15):
    """Median µs per call over CUDA-graph replays of `reps` calls (rotating)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for k in range(2):
            fn(*sets[k % len(sets)])
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            for k in range(reps):
                fn(*sets[k % len(sets)])
        run = g.replay
    except Exception as e:  # not capturable: time eagerly
        print(f"    (graph capture failed: {type(e).__name__}; timing eager calls)")
        torch.cuda.synchronize()

        def run():
            for k in range(reps):
                fn(*sets[k % len(sets)])
    run()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0 / reps)
    return statistics.median(ts), (max(ts) - min(ts))


def peak_mem(fn, Q, D):
    import torch

    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    r = fn(Q, D)
    torch.cuda.synchronize()
    pk = torch.cuda.max_memory_allocated() - base
    del r
    return pk


FIRST_CALL = r"""
import os, sys, time, torch
sys.path.insert(0, {py!r})
torch.cuda.init(); torch.empty(1, device='cuda')
Q = torch.randn(1, 32, 128, device='cuda').bfloat16(); D = torch.randn(1000, 300, 128, device='cuda').bfloat16()
torch.cuda.synchronize()
m = {m!r}
t = time.perf_counter()
if m == 'lik':
    import lik._api as a; r = a.maxsim(Q, D)
elif m == 'flash':
    import flash_maxsim; r = flash_maxsim.flash_maxsim_batched(Q, D)
else:
    from late_interaction_kernels.forward import maxsim_forward; r = maxsim_forward(Q, D)
torch.cuda.synchronize()
print('FIRST', (time.perf_counter() - t) * 1e3)
"""


def first_call(m):
    try:
        r = subprocess.run([sys.executable, "-c", FIRST_CALL.format(py=str(ROOT / "python"), m=m)],
                           capture_output=True, text=True, timeout=300, env=os.environ)
        for line in r.stdout.splitlines():
            if line.startswith("FIRST"):
                return float(line.split()[1])
        print(r.stderr[-2000:])
    except Exception as e:
        print("first call failed:", e)
    return None


# ---- the calls users make (--users): masks, lengths, KD, pairs, varlen, fp32, short documents ----
#
# name: (kind, Nq or B, Nd or K, Lq, Ld, d, dtype, padding); kind: cross | kd | pairs | varlen;
# padding: None, "prefix" (the last 10-30 % of each document masked, as d_mask),
# "lengths" (the same as d_lengths), "random" (a non-prefix d_mask, 80 % valid),
# or for fp32 rows the torch precision ("highest" / "high").
USERS = {
    "text-short": ("cross", 1, 1000, 32, 300, 128, "bf16", None),
    "text-short+prefix": ("cross", 1, 1000, 32, 300, 128, "bf16", "prefix"),
    "text-short+lengths": ("cross", 1, 1000, 32, 300, 128, "bf16", "lengths"),
    "text-short+random": ("cross", 1, 1000, 32, 300, 128, "bf16", "random"),
    "colpali": ("cross", 1, 1000, 128, 1024, 128, "bf16", None),
    "colpali+prefix": ("cross", 1, 1000, 128, 1024, 128, "bf16", "prefix"),
    "colpali+random": ("cross", 1, 1000, 128, 1024, 128, "bf16", "random"),
    "corpus-10k": ("cross", 1, 10000, 32, 300, 128, "bf16", None),
    "corpus-10k+prefix": ("cross", 1, 10000, 32, 300, 128, "bf16", "prefix"),
    "train-128": ("cross", 128, 128, 32, 300, 128, "bf16", None),
    "train-128+prefix": ("cross", 128, 128, 32, 300, 128, "bf16", "prefix"),
    "train-128+random": ("cross", 128, 128, 32, 300, 128, "bf16", "random"),
    "kd-64x1": ("kd", 64, 1, 32, 300, 128, "bf16", None),
    "kd-64x16": ("kd", 64, 16, 32, 300, 128, "bf16", None),
    "kd-64x32+prefix": ("kd", 64, 32, 32, 300, 128, "bf16", "prefix"),
    "kd-16x8-colpali": ("kd", 16, 8, 128, 1030, 128, "bf16", None),
    "pairs-64": ("pairs", 64, 1, 32, 300, 128, "bf16", None),
    "pairs-512": ("pairs", 512, 1, 32, 300, 128, "bf16", None),
    "pairs-4096": ("pairs", 4096, 1, 32, 300, 128, "bf16", None),
    "pairs-512-Ld1030+prefix": ("pairs", 512, 1, 32, 1030, 128, "bf16", "prefix"),
    "varlen-32x1000": ("varlen", 32, 1000, 32, 300, 128, "bf16", "lengths"),
    "fp32-text-short-highest": ("cross", 1, 1000, 32, 300, 128, "f32", "highest"),
    "fp32-text-short-high": ("cross", 1, 1000, 32, 300, 128, "f32", "high"),
    "fp32-train-128-high": ("cross", 128, 128, 32, 300, 128, "f32", "high"),
    "short-docs-100k-Ld32": ("cross", 1, 100000, 32, 32, 128, "bf16", None),
    "short-docs-1M-Ld32": ("cross", 1, 1000000, 32, 32, 128, "bf16", None),
    "short-docs-100k-Ld64+prefix": ("cross", 1, 100000, 32, 64, 128, "bf16", "prefix"),
}


def user_inputs(spec, g):
    """One input set: dict of tensors for the row's kind (random normal, never zeros)."""
    import torch

    kind, A, B, Lq, Ld, d, dt, pad = spec
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dt]
    Q = torch.randn(A, Lq, d, device="cuda", generator=g).to(tdt)
    dshape = {"cross": (B, Ld, d), "kd": (A, B, Ld, d), "pairs": (A, Ld, d), "varlen": (B, Ld, d)}[kind]
    D = torch.empty(dshape, device="cuda", dtype=tdt)
    flat = D.view(-1, Ld, d)
    step = max(1, int(2e9 // (Ld * d * 4)))
    for c in range(0, flat.shape[0], step):
        flat[c:c + step] = torch.randn(min(step, flat.shape[0] - c), Ld, d, device="cuda", generator=g).to(tdt)
    x = {"Q": Q, "D": D}
    if pad in ("prefix", "lengths", "random"):
        n = dshape[:-2]
        lens = (Ld * (0.7 + 0.2 * torch.rand(n, device="cuda", generator=g))).round().to(torch.int32)
        x["d_lengths"] = lens
        if pad == "random":
            x["d_mask"] = torch.rand(n + (Ld,), device="cuda", generator=g) < 0.8
        else:
            x["d_mask"] = torch.arange(Ld, device="cuda") < lens[..., None]
    if kind == "varlen":  # packed documents of the lengths above, full queries
        x["Dp"] = D[x["d_mask"]]
        x["cu_d"] = torch.nn.functional.pad(x["d_lengths"].cumsum(0), (1, 0)).to(torch.int32)
        x["Qp"] = Q.reshape(-1, d)
        x["cu_q"] = torch.arange(0, A * Lq + 1, Lq, device="cuda", dtype=torch.int32)
    return x


def user_methods(spec, names):
    """name -> fn(x) for the methods that can make this call (a peer without the
    feature is left out: e.g. flash-maxsim has no boolean masks or pairs)."""
    import torch

    kind, A, B, Lq, Ld, d, dt, pad = spec
    lengths_only = pad == "lengths"
    masked = pad in ("prefix", "random")
    out = {}

    def dm(x):
        return x.get("d_mask") if masked or lengths_only else None

    def torch_ref(x, dtype):
        Q, D, m = x["Q"].to(dtype), x["D"].to(dtype), dm(x)
        if kind == "pairs":
            S = torch.einsum("bsd,btd->bst", Q, D)
            m = None if m is None else m[:, None, :]
        elif kind == "kd":
            S = torch.einsum("isd,iktd->ikst", Q, D)
            m = None if m is None else m[:, :, None, :]
        else:
            S = torch.einsum("isd,jtd->ijst", Q, D)
            m = None if m is None else m[None, :, None, :]
        if m is not None:
            S = S.masked_fill(~m, float("-inf"))
        return S.amax(-1).float().sum(-1)

    if "lik" in names:
        import lik

        if kind == "varlen":
            out["lik"] = lambda x: lik.maxsim_varlen(x["Qp"], x["Dp"], x["cu_q"], x["cu_d"], max_seqlen_q=Lq,
                                                     max_seqlen_d=Ld)
        elif lengths_only:
            lf = lik.maxsim_pairs if kind == "pairs" else lik.maxsim
            out["lik"] = lambda x: lf(x["Q"], x["D"], d_lengths=x["d_lengths"])
        else:
            lf = lik.maxsim_pairs if kind == "pairs" else lik.maxsim
            out["lik"] = lambda x: lf(x["Q"], x["D"], None, dm(x))
    if "lik045" in names:
        import late_interaction_kernels as lk

        if kind == "varlen":
            out["lik045"] = lambda x: lk.maxsim_varlen(x["Qp"], x["Dp"], x["cu_q"], x["cu_d"], Lq, Ld)
        else:
            pf = lk.maxsim_pairs if kind == "pairs" else lk.maxsim
            out["lik045"] = lambda x: pf(x["Q"], x["D"], None, dm(x))
    if "flash" in names and kind in ("cross", "kd") and pad != "random":
        import flash_maxsim

        if masked or lengths_only:
            out["flash"] = lambda x: flash_maxsim.flash_maxsim_batched(
                x["Q"], x["D"], doc_lengths=x["d_lengths"].reshape(-1), shared_docs=kind == "cross")
        else:
            out["flash"] = lambda x: flash_maxsim.flash_maxsim_batched(x["Q"], x["D"], shared_docs=kind == "cross")
    small = A * B * Lq * Ld < 3e9
    if "eager" in names and kind != "varlen" and small:
        out["eager"] = lambda x: torch_ref(x, torch.float32)
    if "bf16mm" in names and kind != "varlen" and small and dt != "f32":
        out["bf16mm"] = lambda x: torch_ref(x, x["Q"].dtype)
    return out


def time_eager(fn, sets, reps=20, iters=9):
    """Median µs per call of `reps` back-to-back eager calls (host cost included:
    the GPU waits for the host when the host is the slower)."""
    import torch

    for k in range(3):
        fn(sets[k % len(sets)])
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for k in range(reps):
            fn(sets[k % len(sets)])
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0 / reps)
    return statistics.median(ts)


def users_table(names, only, out_path):
    """The --users table: graph-replay and eager µs per call for every method."""
    import torch

    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    rows = []
    for name in (only or list(USERS)):
        spec = USERS[name]
        kind, A, B, Lq, Ld, d, dt, pad = spec
        prec = pad if dt == "f32" else None
        torch.set_float32_matmul_precision(prec or "highest")
        esz = 4 if dt == "f32" else 2
        nd = A * B if kind == "kd" else A if kind == "pairs" else B
        byts = (A * Lq * d + nd * Ld * d) * esz + A * (1 if kind == "pairs" else B) * 4
        pairs_qd = A * B if kind in ("cross", "kd", "varlen") else A
        fl = max(byts / BW, 2.0 * pairs_qd * Lq * Ld * d / FL) * 1e6
        nsets = max(1, min(8, int(-(-256e6 // byts))))
        sets = [user_inputs(spec, g) for _ in range(nsets)]
        fns = user_methods(spec, names)
        ref = fns["eager"](sets[0]).double() if "eager" in fns else None
        row = {"row": name, "spec": list(spec), "floor_us": fl, "graph_us": {}, "eager_us": {}, "err": {}}
        for m, fn in fns.items():
            try:
                o = fn(sets[0])
                torch.cuda.synchronize()
                if ref is not None:
                    row["err"][m] = ((o.double().reshape(ref.shape) - ref).norm() / ref.norm()).item()
                row["eager_us"][m] = time_eager(fn, sets)
                row["graph_us"][m] = time_method(lambda *x: fn(x[0]), [(s,) for s in sets])[0]
            except Exception as e:  # a peer failing is recorded, not fatal
                row["err"][m] = f"{type(e).__name__}: {str(e)[:100]}"
            torch.cuda.empty_cache()
        rows.append(row)
        ge, ee = row["graph_us"], row["eager_us"]
        cells = " ".join(f"{m}={ge.get(m) or 0:.1f}/{ee.get(m) or 0:.1f}" for m in fns)
        print(f"{name:28s} floor {fl:7.1f}  graph/eager µs: {cells}", flush=True)
        if out_path:
            Path(out_path).write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1))
        del sets
        torch.cuda.empty_cache()
    torch.set_float32_matmul_precision("highest")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--peers", default="eager,bf16mm,compile,flash,lik045")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--out", default=None)
    ap.add_argument("--compile-shapes", default="text-short,colpali,train-batch-128,rerank-100k")
    ap.add_argument("--no-first-call", action="store_true")
    ap.add_argument("--dtype", choices=["bf16", "f16", "f32"], default=None,
                    help="every shape in this dtype (default: the shape's own)")
    ap.add_argument("--users", default=None,
                    help="the users' calls table instead (masks, lengths, KD, pairs, varlen, fp32, short "
                         "documents; graph and eager columns): 'all' or row names")
    args = ap.parse_args()
    build(args.build)
    import torch

    names = ["lik"] + [p for p in args.peers.split(",") if p]
    if args.users:
        users_table(names, None if args.users == "all" else args.users.split(","), args.out)
        return
    fns = methods(names)
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}", flush=True)
    rows = []
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    for name in args.shapes.split(","):
        Nq, Nd, Lq, Ld, d, dt = SHAPES[name]
        dt = args.dtype or dt
        tdt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dt]
        fl, byts, flops = floor_us(Nq, Nd, Lq, Ld, d, 4 if dt == "f32" else 2)
        nsets = max(1, min(8, int(-(-256e6 // byts))))
        sets = []
        for _ in range(nsets):
            Q = torch.randn(Nq, Lq, d, device="cuda", generator=g).to(tdt)
            D = torch.empty(Nd, Ld, d, device="cuda", dtype=tdt)
            step = max(1, int(2e9 // (Ld * d * 4)))
            for c in range(0, Nd, step):
                D[c:c + step] = torch.randn(min(step, Nd - c), Ld, d, device="cuda", generator=g).to(tdt)
            sets.append((Q, D))
        row = {"shape": name, "Nq": Nq, "Nd": Nd, "Lq": Lq, "Ld": Ld, "d": d, "dtype": dt,
               "floor_us": fl, "bytes": byts, "flops": flops, "us": {}, "spread_us": {},
               "err": {}, "peak_MB": {}}
        Q0, D0 = sets[0]
        ref = None
        try:
            S = torch.einsum("ild,jtd->ijlt", Q0.double(), D0.double()) if Nq * Nd * Lq * Ld < 2e8 else None
            ref = S.max(-1).values.sum(-1) if S is not None else None
            del S
        except torch.OutOfMemoryError:
            ref = None
        if ref is None:  # chunked fp64 reference over documents
            ref = torch.empty(Nq, Nd, dtype=torch.float64, device="cuda")
            step = max(1, int(1e8 // (Nq * Lq * Ld)))
            for c in range(0, Nd, step):
                ref[:, c:c + step] = torch.einsum("ild,jtd->ijlt", Q0.double(), D0[c:c + step].double()).max(-1).values.sum(-1)
        torch.cuda.empty_cache()
        for m, fn in fns.items():
            if m == "compile" and name not in args.compile_shapes.split(","):
                continue
            try:
                out = fn(Q0, D0)
                torch.cuda.synchronize()
                err = ((out.double().reshape(ref.shape) - ref).norm() / ref.norm()).item()
                row["err"][m] = err
                del out
                if not (err < 5e-2):
                    print(f"  {name} {m}: WRONG (rel err {err:.3g})", flush=True)
                    row["us"][m] = None
                    continue
                us, spread = time_method(fn, sets)
                row["us"][m] = us
                row["spread_us"][m] = spread
                row["peak_MB"][m] = peak_mem(fn, Q0, D0) / 1e6
            except torch.OutOfMemoryError:
                row["us"][m] = None
                row["err"][m] = "OOM"
                print(f"  {name} {m}: OOM", flush=True)
            except Exception as e:  # a peer failing is recorded, not fatal
                row["us"][m] = None
                row["err"][m] = f"{type(e).__name__}: {str(e)[:120]}"
                print(f"  {name} {m}: {row['err'][m]}", flush=True)
            torch.cuda.empty_cache()
        rows.append(row)
        if args.out:  # written after every shape: a run cut short keeps what it measured
            Path(args.out).write_text(json.dumps({"device": dev.name, "torch": torch.__version__,
                                                  "command": " ".join(sys.argv), "rows": rows}, indent=1))
        u = row["us"]
        lk = u.get("lik")
        extra = " ".join(f"{m}={u[m]:.1f}" for m in u if m != "lik" and u[m])
        print(f"{name:22s} floor {fl:8.1f} us  lik {lk if lk is None else round(lk, 1)} us "
              f"({'-' if not lk else f'{lk / fl:.2f}x floor'}) err {row['err'].get('lik')}  {extra}", flush=True)
        del sets, ref
        torch.cuda.empty_cache()
    first = {}
    if not args.no_first_call:
        for m in ["lik"] + [p for p in ("flash", "lik045") if p in fns]:
            first[m] = first_call(m)
            print(f"first call {m}: {first[m]} ms", flush=True)
    res = {"device": dev.name, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "command": " ".join(sys.argv), "rows": rows, "first_call_ms": first}
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    # table
    peers = [m for m in fns if m != "lik"]
    hdr = "| shape | floor µs | lik µs | ×floor | target | " + " | ".join(f"{p} µs" for p in peers) + " | " + \
          " | ".join(f"vs {p}" for p in peers) + " | lik peak MB |"
    print(hdr)
    for r in rows:
        u = r["us"]
        lk = u.get("lik")
        fl = r["floor_us"]
        tgt = (lk is not None) and (lk <= 1.5 * fl if fl >= 50 else lk <= fl + 10)
        cells = [f"{u[p]:.1f}" if u.get(p) else "—" for p in peers]
        sp = [f"{u[p] / lk:.2f}×" if (u.get(p) and lk) else "—" for p in peers]
        print(f"| {r['shape']} | {fl:.1f} | {lk if lk is None else f'{lk:.1f}'} | "
              f"{'—' if not lk else f'{lk / fl:.2f}'} | {'met' if tgt else 'MISSED'} | " + " | ".join(cells) +
              " | " + " | ".join(sp) + f" | {r['peak_MB'].get('lik', float('nan')):.2f} |")


if __name__ == "__main__":
    main()
