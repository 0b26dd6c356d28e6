#!/usr/bin/env python3
"""Host cost per call: what a small, eager call costs before any kernel work.

    python3 bench/host_cost.py [--calls 500] [--peers flash,lik045]

Problem: one query against one document, Lq = Ld = 16, d = 16 (the kernel
itself takes a few µs), bf16 on CUDA, float32 on the CPU.  Each row is the
host time of N back-to-back calls divided by N (median of 7 rounds; the GPU
synchronised between rounds, outside the timed span).

Rows:
* ``C API`` — ``lik_maxsim`` through ctypes with views and options built once
  (the C library's own host cost plus one ctypes call, ~0.5 µs, reported as
  ``ctypes call``: a trivial C function through the same path);
* ``lik.maxsim`` — the Python function on torch tensors (no grad), and with
  ``requires_grad`` inputs (the forward that saves the argmax);
* peers (CUDA): late-interaction-kernels 0.4.5 ``maxsim``, flash-maxsim 0.3.0
  ``flash_maxsim_batched``;
* CPU: the C API (``lik_maxsim``; ``lik_retrieve``, top 4 of 16 such
  documents; ``lik_maxsim_backward``, both gradients), ``lik.maxsim`` on numpy
  arrays and on torch tensors, one thread (the fixed cost of a call:
  validation, scratch, the thread runner).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))  # lik from the tree


def per_call_us(fn, calls: int, sync=lambda: None, rounds: int = 7) -> float:
    """Median over rounds of (host time of `calls` back-to-back calls) / calls.
    The GPU is synchronised before each round and after it, outside the
    timed span, so a GPU slower than the host cannot inflate the figure (at
    most ~1000 launches can be queued: keep calls below that)."""
    fn()
    sync()
    out = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        sync()
    return statistics.median(out)


def c_call(_lib, fn, *args):
    """A closure calling the C function fn with its views and options made once:
    an array or tensor becomes a lik_tensor view, options (a ctypes Structure)
    are passed by reference, None (NULL) and ctypes scalars as they are."""
    keep, cargs = [], []
    for a in args:
        if a is None or isinstance(a, ctypes._SimpleCData):
            cargs.append(a)
        elif isinstance(a, ctypes.Structure):
            keep.append(a)
            cargs.append(ctypes.byref(a))
        else:
            owner, t = _lib.view(a)
            keep.append((owner, t))
            cargs.append(ctypes.byref(t))

    def call():
        if fn(*cargs):
            raise RuntimeError(_lib.lib.lik_last_error().decode())

    call.keep = keep
    return call


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--peers", default="flash,lik045")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import numpy as np
    import torch

    import lik
    from lik import _lib

    rows = {}
    N = args.calls
    lib = _lib.lib
    rows["ctypes call (lik_version_number)"] = per_call_us(lib.lik_version_number, N)

    # ---- CPU ------------------------------------------------------------
    lik.set_num_threads(1)
    Qn = np.random.randn(1, 16, 16).astype(np.float32)
    Dn = np.random.randn(1, 16, 16).astype(np.float32)
    Sn = np.empty((1, 1), np.float32)
    opts = _lib.make_options()
    rows["CPU: C API lik_maxsim"] = per_call_us(
        c_call(_lib, lib.lik_maxsim, Qn, Dn, None, None, opts, Sn, None), N)
    # retrieve (top 4 of 16 documents) and backward (both gradients) of the same shapes
    D16 = np.random.randn(16, 16, 16).astype(np.float32)
    rows["CPU: C API lik_retrieve (16 documents, top 4)"] = per_call_us(
        c_call(_lib, lib.lik_retrieve, Qn, D16, None, None, ctypes.c_int64(4), opts,
               np.empty((1, 4), np.float32), np.empty((1, 4), np.int64)), N)
    An = np.empty((1, 1, 16), np.int32)
    c_call(_lib, lib.lik_maxsim, Qn, Dn, None, None, opts, Sn, An)()
    rows["CPU: C API lik_maxsim_backward (grad_Q and grad_D)"] = per_call_us(
        c_call(_lib, lib.lik_maxsim_backward, Qn, Dn, None, None, An, np.ones((1, 1), np.float32),
               opts, np.empty_like(Qn), np.empty_like(Dn)), N)
    rows["CPU: lik.maxsim (numpy)"] = per_call_us(lambda: lik.maxsim(Qn, Dn), N)
    Qt, Dt = torch.from_numpy(Qn), torch.from_numpy(Dn)
    rows["CPU: lik.maxsim (torch)"] = per_call_us(lambda: lik.maxsim(Qt, Dt), N)
    lik.set_num_threads(0)

    # ---- CUDA -----------------------------------------------------------
    if torch.cuda.is_available():
        dev = torch.device("cuda")
        sync = torch.cuda.synchronize
        Q = torch.randn(1, 16, 16, device=dev, dtype=torch.bfloat16)
        D = torch.randn(1, 16, 16, device=dev, dtype=torch.bfloat16)
        S = torch.empty(1, 1, device=dev, dtype=torch.float32)
        opts = _lib.make_options(stream=_lib.cuda_stream_of(Q))
        rows["CUDA: C API lik_maxsim"] = per_call_us(
            c_call(_lib, lib.lik_maxsim, Q, D, None, None, opts, S, None), N, sync)
        with torch.no_grad():
            rows["CUDA: lik.maxsim"] = per_call_us(lambda: lik.maxsim(Q, D), N, sync)
        Qg, Dg = Q.clone().requires_grad_(), D.clone().requires_grad_()
        rows["CUDA: lik.maxsim, requires_grad (forward)"] = per_call_us(
            lambda: lik.maxsim(Qg, Dg), N, sync)
        peers = set(args.peers.split(",")) if args.peers else set()
        if "lik045" in peers:
            try:
                import late_interaction_kernels as lk

                with torch.no_grad():
                    rows["CUDA: late-interaction-kernels 0.4.5 maxsim"] = per_call_us(
                        lambda: lk.maxsim(Q, D), N, sync)
            except ImportError as e:
                print("skip late-interaction-kernels:", e)
        if "flash" in peers:
            try:
                import flash_maxsim

                with torch.no_grad():
                    rows["CUDA: flash-maxsim 0.3.0 flash_maxsim_batched"] = per_call_us(
                        lambda: flash_maxsim.flash_maxsim_batched(Q, D), N, sync)
            except ImportError as e:
                print("skip flash-maxsim:", e)

    width = max(len(k) for k in rows)
    for k, v in rows.items():
        print(f"{k:<{width}}  {v:8.2f} µs/call")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
