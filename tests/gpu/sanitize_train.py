"""Small representative backward calls for compute-sanitizer:
    compute-sanitizer --tool memcheck  python3 tests/gpu/sanitize_train.py
    compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_train.py
    compute-sanitizer --tool synccheck python3 tests/gpu/sanitize_train.py
Covers the CUDA backward (src/cuda/backward.cu) on every layout: padded cross
product (bf16 / f16 / f32 / f64, masks, normalize, d tails: 48, 100 scalar,
1000 in 8 column chunks, d = 1), 2-D Q / D, KD, pairs, long query (Lq 600 in
several tiles), strided views, packed varlen and packed pair lists (the CUB
grouping of the pairs), an empty document and an empty packed sequence, and
packed calls whose max_seqlen_q is shorter than a query (unchecked)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import torch  # noqa: E402
import lik  # noqa: E402

g = torch.Generator(device="cuda")
g.manual_seed(1)


def r(shape, dt):
    return torch.randn(shape, device="cuda", generator=g).to(dt).requires_grad_(True)


def m(shape):
    return torch.rand(shape, device="cuda", generator=g) < 0.8


bf, hf, f32, f64 = torch.bfloat16, torch.float16, torch.float32, torch.float64
for dt, Nq, Nd, Lq, Ld, d in [(bf, 2, 3, 32, 150, 128), (hf, 2, 3, 20, 70, 48), (bf, 1, 2, 20, 33, 100),
                              (f32, 2, 2, 33, 65, 40), (f64, 1, 2, 5, 9, 16), (bf, 1, 2, 9, 20, 1000),
                              (bf, 2, 2, 600, 30, 64), (f32, 3, 2, 7, 9, 1)]:
    for normalize in (False, True):
        Q, D = r((Nq, Lq, d), dt), r((Nd, Ld, d), dt)
        dm = m((Nd, Ld))
        dm[-1] = False  # an empty document
        lik.maxsim(Q, D, m((Nq, Lq)), dm, normalize=normalize).sum().backward()
Q, D = r((2, 32, 128), bf), r((2, 3, 50, 128), bf)
lik.maxsim(Q, D, m((2, 32)), m((2, 3, 50)), normalize=True).sum().backward()  # KD
Q, D = r((3, 32, 64), bf), r((3, 40, 64), bf)
lik.maxsim_pairs(Q, D, normalize=True).sum().backward()  # pairs
Q, D = r((20, 64), hf), r((4, 30, 64), hf)
lik.maxsim(Q, D).sum().backward()  # 2-D Q
Qb = torch.randn(3, 20, 2, 64, device="cuda", generator=g).to(bf)
Qs = Qb[:, :, 1, :].requires_grad_(True)  # strided view
lik.maxsim(Qs, r((30, 64), bf), normalize=True).sum().backward()  # 2-D D
cq = torch.tensor([0, 5, 37, 37, 38], device="cuda", dtype=torch.int32)
cd = torch.tensor([0, 10, 80, 80, 95], device="cuda")
Qp, Dp = r((38, 64), bf), r((95, 64), bf)
lik.maxsim_varlen(Qp, Dp, cq, cd, q_mask=m((38,)), d_mask=m((95,)), normalize=True).sum().backward()
pq = torch.tensor([0, 2, 2, 3, 1, 0], device="cuda")
pd = torch.tensor([1, 0, 0, 3, 3, 2], device="cuda", dtype=torch.int32)
lik.score_pairs_packed(Qp, Dp, cq, cd, pq, pd, normalize=True).sum().backward()
# a max_seqlen_q shorter than the longest query (32), unchecked: memory-safe (lik.h)
lik.maxsim_varlen(Qp, Dp, cq, cd, max_seqlen_q=8, q_mask=m((38,)), normalize=True,
                  validate=False).sum().backward()
lik.score_pairs_packed(Qp, Dp, cq, cd, pq, pd, max_seqlen_q=8, validate=False).sum().backward()
torch.cuda.synchronize()
print("sanitize_train: ok")
