#!/usr/bin/env python3
"""GPU top-k benchmark of lik.retrieve on the H200: the cost of the selection.

    LIK_LIBRARY=path/to/liblik.so python3 bench/gpu_retrieve.py

For each case, times ``maxsim`` and ``retrieve`` (both normalize=True, the
seed's retrieve default) on the same inputs with CUDA events around CUDA-graph
replays (bench/gpu_forward.py's ``time_method``), and prints the extra time
retrieve spends on top-k selection over scoring alone.  Run it against two
builds (LIK_LIBRARY) to compare selection designs side by side.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

import gpu_forward  # noqa: E402
from lik import _api  # noqa: E402

# (Nq, Nd, Lq, Ld, d, k)
CASES = [(1, 100000, 32, 300, 128, 100), (1, 1000000, 32, 32, 128, 100),
         (1, 1000000, 32, 32, 128, 1000), (16, 200000, 32, 32, 128, 100)]


def main():
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    print("| Nq × Nd, Lq × Ld, d | k | maxsim µs | retrieve µs | selection µs |")
    print("|---|---|---|---|---|")
    for Nq, Nd, Lq, Ld, d, k in CASES:
        Q = torch.randn(Nq, Lq, d, device="cuda", generator=g).bfloat16()
        D = torch.randn(Nd, Ld, d, device="cuda", generator=g).bfloat16()
        t_f, _ = gpu_forward.time_method(lambda Q, D: _api.maxsim(Q, D, normalize=True), [(Q, D)], reps=4, iters=7)
        t_r, _ = gpu_forward.time_method(lambda Q, D: _api.retrieve(Q, D, k), [(Q, D)], reps=4, iters=7)
        print(f"| {Nq} × {Nd}, {Lq} × {Ld}, {d} | {k} | {t_f:.1f} | {t_r:.1f} | {t_r - t_f:.1f} |", flush=True)
        del Q, D
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
