"""Small representative calls for compute-sanitizer (memcheck / racecheck):
    compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_small.py
Covers: bf16 cross + masks + normalize + argmax (Q in registers), long query
(150 rows; 300 rows over 300 documents: the next query block loads under
the current one's tiles), stacked queries (9 x 20 rows), 128 x 128 tiles (Lq 100) — the
last three on the wgmma kernel with TMA tiles on a Hopper GPU —, d tails
(48, also one query by bulk copies on sm_90+; 100 scalar loader, 520 / 2000
K-streamed, deep / shallow pipeline, 520 / 1000 K-streamed in 40-token warp
tiles),
fp16, fp32 on tensor cores (3xTF32: d 40, 17, 300 K-streamed), fp64
CUDA-core kernel, KD, pairs, retrieve, a packed
(cu_seqlens) scores-only call with short queries; on sm_90+ the scores-only
calls of the few-document one-query cases run the Ld split (clusters); padding
as a prefix d_mask, lengths, a mixed mask, KD lengths; fp32 as TF32; short
documents on sm_90a (several documents to a tile; a random mask, lengths,
two queries, more tiles per CTA than stages)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import torch  # noqa: E402
import lik  # noqa: E402
from lik import _api  # noqa: E402

g = torch.Generator(device="cuda")
g.manual_seed(1)


def r(shape, dt):
    return torch.randn(shape, device="cuda", generator=g).to(dt)


def m(shape):
    return torch.rand(shape, device="cuda", generator=g) < 0.8


bf, hf = torch.bfloat16, torch.float16
for dt, Nq, Nd, Lq, Ld, d in [(bf, 2, 3, 32, 150, 128), (bf, 1, 2, 150, 70, 128), (hf, 2, 3, 40, 65, 48),
                              (hf, 2, 3, 20, 129, 48), (bf, 1, 300, 300, 20, 128),
                              (bf, 1, 2, 20, 33, 100), (hf, 1, 2, 30, 40, 520), (torch.float32, 2, 2, 33, 65, 40),
                              (bf, 9, 2, 20, 70, 128), (bf, 1, 2, 100, 140, 128), (hf, 1, 1, 8, 20, 2000),
                              (torch.float64, 1, 2, 5, 9, 16), (torch.float32, 1, 2, 100, 70, 300),
                              (torch.float32, 3, 2, 20, 33, 17), (bf, 2, 2, 20, 150, 520),
                              (hf, 1, 2, 9, 300, 1000)]:
    Q, D = r((Nq, Lq, d), dt), r((Nd, Ld, d), dt)
    _api._forward(Q, D, m((Nq, Lq)), m((Nd, Ld)), normalize=True, with_argmax=True)
    _api.maxsim(Q, D)
Q, D = r((2, 32, 128), bf), r((2, 3, 50, 128), bf)
_api._forward(Q, D, m((2, 32)), m((2, 3, 50)), with_argmax=True)
_api._forward(r((3, 32, 64), bf), r((3, 40, 64), bf), pairs=True, with_argmax=True)
_api.retrieve(r((2, 32, 64), bf), r((700, 30, 64), bf), 5, normalize=True)
cq = torch.tensor([0, 5, 37, 38], device="cuda", dtype=torch.int32)
lik.maxsim_varlen(r((38, 64), bf), r((80, 64), bf), cq, torch.tensor([0, 10, 80], device="cuda"))
# padding: a prefix d_mask (detected on the device), lengths, a mixed mask, KD
n = torch.tensor([0, 7, 150, 99], device="cuda", dtype=torch.int32)
pm = torch.arange(150, device="cuda") < n[:, None]
Q, D = r((3, 32, 128), bf), r((4, 150, 128), bf)
_api._forward(Q, D, None, pm, with_argmax=True)
_api.maxsim(Q, D, q_lengths=torch.tensor([32, 0, 5], device="cuda", dtype=torch.int32), d_lengths=n)
pm[2, 3] = False
_api.maxsim(r((1, 20, 48), hf), r((4, 150, 48), hf), None, pm)
_api.maxsim(Q[:2], r((2, 2, 150, 128), bf), d_lengths=n.reshape(2, 2))
torch.set_float32_matmul_precision("high")  # fp32 as TF32
_api.maxsim(r((2, 20, 64), torch.float32), r((3, 70, 64), torch.float32))
torch.cuda.synchronize()
print("sanitize_small: ok")
# short documents (forward/short_docs.cuh on sm_90a): a random mask and
# lengths, two queries, 40 tiles per CTA (the stage ring wraps)
Q, D = r((2, 20, 96), hf), r((20000, 24, 96), hf)
_api.maxsim(Q, D, m((2, 20)), m((20000, 24)))
_api.maxsim(Q[:1], D, d_lengths=torch.randint(0, 25, (20000,), device="cuda", generator=g))
_api.maxsim(r((1, 32, 128), bf), r((30000, 32, 128), bf))
