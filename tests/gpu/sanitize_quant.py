"""Small low-bit MaxSim calls for compute-sanitizer memcheck (int8, fp8, int8 x
bits, bits x bits; odd d, tails, masks, strided documents; sign-bit documents
with 64 < d <= 128 on sm_90a's signs_doc_kernel (up to 32 query rows) and
signs_tile_kernel (more; Lq up to 128), 16-byte and narrower bit rows,
documents strided)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import torch  # noqa: E402

import lik  # noqa: E402

g = torch.Generator().manual_seed(0)
for nq, nd, lq, ld, d in [(2, 3, 7, 33, 17), (1, 2, 33, 9, 130), (1, 2, 3, 5, 1), (5, 3, 32, 65, 128),
                          (9, 2, 20, 33, 256), (3, 2, 5, 70, 160), (1, 3, 32, 70, 128), (3, 130, 20, 65, 100),
                          (2, 5, 128, 9, 72), (2, 40, 16, 70, 100)]:
    Q = torch.randn(nq, lq, d, generator=g)
    D = torch.randn(nd, ld, d, generator=g)
    dm = (torch.rand(nd, ld, generator=g) < 0.7).cuda()
    qi, sq = lik.quantize_int8(Q)
    di, sd = lik.quantize_int8(D)
    qi, sq, di, sd = qi.cuda(), sq.cuda(), di.cuda(), sd.cuda()
    lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd, d_mask=dm)
    lik.maxsim_inference_int8(qi, di[::2], scale_Q=sq, scale_D=sd[::2])
    bits = lik.quantize_binary(D).cuda()
    lik.maxsim_inference_binary(qi, bits, scale_Q=sq, d_mask=dm)
    lik.maxsim_inference_binary(qi, bits[::2], scale_Q=sq)
    lik.maxsim_inference_binary(lik.quantize_binary(Q).cuda(), bits, d=d, d_mask=dm)
    q8, d8 = Q.to(torch.float8_e4m3fn).cuda(), D.to(torch.float8_e4m3fn).cuda()
    lik.maxsim_inference_fp8(q8, d8, scale_Q=torch.tensor(1.0).cuda(), scale_D=sd, d_mask=dm)
torch.cuda.synchronize()
print("sanitize_quant: ok")
