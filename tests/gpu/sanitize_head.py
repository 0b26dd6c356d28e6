"""Small fused-head calls (lik.maxsim_from_hidden forward + backward) for
compute-sanitizer:
    compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_head.py
Covers bf16 / fp16 / fp32, cross and KD, masks, d_out tails (17, 96) and the widest
tile (256), Ld tails (not a multiple of 64), strided H_d, empty Ld; the sm_90a kernel
split over CTAs (few documents) and not (140 documents, 256 query rows)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import torch  # noqa: E402
import lik  # noqa: E402

g = torch.Generator(device="cuda")
g.manual_seed(1)
bf, hf, f32 = torch.bfloat16, torch.float16, torch.float32
for dt, nq, nd, kd, lq, ld, dm, do in [(bf, 2, 3, 0, 32, 150, 96, 17), (hf, 2, 0, 3, 9, 70, 40, 96),
                                       (bf, 1, 2, 0, 5, 65, 17, 256), (hf, 3, 2, 0, 4, 0, 8, 16),
                                       (f32, 2, 0, 3, 9, 70, 40, 96), (f32, 1, 2, 0, 5, 65, 17, 256),
                                       (bf, 8, 140, 0, 32, 130, 64, 128)]:
    shape = (nq, kd, ld, dm) if kd else (nd, 2 * ld, dm)
    H = torch.randn(shape, device="cuda", generator=g).to(dt)
    if not kd:
        H = H[:, ::2]  # strided tokens
    Q = torch.randn(nq, lq, do, device="cuda", generator=g).to(dt).requires_grad_(True)
    W = torch.randn(do, dm, device="cuda", generator=g).to(dt).requires_grad_(True)
    b = torch.randn(do, device="cuda", generator=g).to(dt).requires_grad_(True)
    H = H.detach().requires_grad_(True)
    dmask = torch.rand(H.shape[:-1], device="cuda", generator=g) < 0.8
    qmask = torch.rand(nq, lq, device="cuda", generator=g) < 0.8
    s = lik.maxsim_from_hidden(Q, H, W, b, d_mask=dmask, q_mask=qmask)
    s.sum().backward()
    torch.cuda.synchronize()
print("sanitize_head: done")
