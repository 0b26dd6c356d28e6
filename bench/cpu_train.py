"""CPU training step: lik (forward + backward) vs PyLate's torch-eager formula.

The seed's PyLate contrastive shapes scaled to a small CPU: B queries scored
against the B * (1 + negs) documents of the batch (in-batch negatives plus
hard negatives), Lq = 32, document lengths drawn from [180, 300] and padded to
the longest with a mask, d = 128, float32, L2-normalised inputs.

Step = scores -> cross-entropy (positives on the diagonal blocks) ->
backward to Q and D (both leaves, as the encoder outputs would be).

  eager:  PyLate's colbert_scores formula with torch autograd:
              S = einsum("ash,bth->abst", Q, D) * d_mask[None, :, None, :]
              scores = S.max(-1).values.sum(-1)
  lik:    lik.maxsim(Q, D, None, d_mask, backward=...)

Time: median of --reps steps after one warm-up (torch and lik use every core).
Peak memory: each (implementation, shape) runs in a fresh subprocess; peak =
max RSS during one step minus RSS just before it (inputs already allocated,
libraries loaded and warmed up on a tiny batch), i.e. the step's transient
memory including the gradients it returns.

  python bench/cpu_train.py                 # the table (markdown) on stdout
  python bench/cpu_train.py --reps 5 --backward lowmem
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

SHAPES = [(32, 1), (32, 3), (64, 1), (64, 2), (64, 3)]  # (batch, negatives)
LQ, LD_MIN, LD_MAX, DIM = 32, 180, 300, 128


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _inputs(B, negs, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    Nd = B * (1 + negs)
    lens = torch.randint(LD_MIN, LD_MAX + 1, (Nd,), generator=g)
    Ld = int(lens.max())
    Q = torch.nn.functional.normalize(torch.randn(B, LQ, DIM, generator=g), dim=-1)
    D = torch.nn.functional.normalize(torch.randn(Nd, Ld, DIM, generator=g), dim=-1)
    d_mask = torch.arange(Ld)[None, :] < lens[:, None]
    D = D * d_mask[..., None]  # padding rows are zero, as a padded encoder batch
    return Q, D, d_mask


def _eager_scores(Q, D, d_mask):
    import torch

    S = torch.einsum("ash,bth->abst", Q, D)
    S = S * d_mask[None, :, None, :]
    return S.max(-1).values.sum(-1)


def _step(impl, Q, D, d_mask, backward):
    import torch

    import lik

    Q = Q.detach().requires_grad_(True)
    D = D.detach().requires_grad_(True)
    if impl == "eager":
        scores = _eager_scores(Q, D, d_mask)
    else:
        scores = lik.maxsim(Q, D, None, d_mask, backward=backward)
    labels = torch.arange(Q.shape[0])  # query b's positive is document b
    loss = torch.nn.functional.cross_entropy(scores / 0.02, labels)
    loss.backward()
    return scores.detach(), Q.grad, D.grad


def _child(impl, B, negs, reps, backward):
    import torch

    tiny = _inputs(2, 1, seed=1)
    _step(impl, *tiny, backward)  # load and warm up libraries
    Q, D, d_mask = _inputs(B, negs)
    base = _rss_bytes()
    _step(impl, Q, D, d_mask, backward)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        _step(impl, Q, D, d_mask, backward)
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"ms": 1000 * times[len(times) // 2], "peak_mb": max(peak, 0) / 2**20,
            "threads": torch.get_num_threads()}


def _parity(B, negs, backward):
    import torch

    Q, D, d_mask = _inputs(B, negs, seed=3)
    se, gqe, gde = _step("eager", Q, D, d_mask, backward)
    sl, gql, gdl = _step("lik", Q, D, d_mask, backward)
    torch.testing.assert_close(sl, se, atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(gql, gqe, atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(gdl, gde, atol=1e-3, rtol=1e-3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--backward", default="auto", choices=["auto", "unified", "lowmem"])
    ap.add_argument("--child", nargs=3, metavar=("IMPL", "B", "NEGS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        impl, B, negs = a.child[0], int(a.child[1]), int(a.child[2])
        print(json.dumps(_child(impl, B, negs, a.reps, a.backward)))
        return
    import torch

    import lik

    _parity(8, 1, a.backward)  # lik matches eager (scores and both gradients) before timing
    print(f"lik {lik.__version__}, torch {torch.__version__}, cpu_isa {lik.cpu_isa()}, "
          f"{os.cpu_count()} cores, backward={a.backward}, median of {a.reps} steps\n")
    print("| batch x negs | Nq x Nd | eager step | lik step | speedup | eager peak | lik peak | memory ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for B, negs in SHAPES:
        res = {}
        for impl in ("eager", "lik"):
            out = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--child", impl, str(B), str(negs),
                 "--reps", str(a.reps), "--backward", a.backward],
                check=True, capture_output=True, text=True,
            )
            res[impl] = json.loads(out.stdout.strip().splitlines()[-1])
        e, l_ = res["eager"], res["lik"]
        print(f"| {B} x {negs} | {B} x {B * (1 + negs)} | {e['ms']:.1f} ms | {l_['ms']:.1f} ms | "
              f"{e['ms'] / l_['ms']:.1f}x | {e['peak_mb']:.0f} MB | {l_['peak_mb']:.1f} MB | "
              f"{e['peak_mb'] / max(l_['peak_mb'], 0.1):.0f}x |", flush=True)


if __name__ == "__main__":
    main()
