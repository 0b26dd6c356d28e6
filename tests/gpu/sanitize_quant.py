"""Small low-bit MaxSim calls for compute-sanitizer (int8, fp8, int8 x bits,
bits x bits; odd d, tails, masks, strided documents; several int8 / fp8
queries with 64 < d <= 128 on sm_90a's tile_ws_kernel, one and two m-tiles a
warpgroup, (9, 300, 16, 130, 128) with CTAs walking documents of two tiles
through the stages more than once; one query (up to 32 rows) on
doc_ws_kernel, (1, 300, 32, 300, 128) walking documents of three tiles
through its 8 stages, (4, 5, 8, 130, 96) four queries of 8 tokens; sign-bit documents with
64 < d <= 128 on sm_90a's signs_doc_kernel (up to 32 query rows) and
signs_tile_kernel (more; Lq up to 128), 16-byte and narrower bit rows,
documents strided, feature bytes and query values of stride 2):

    compute-sanitizer --tool memcheck  python3 tests/gpu/sanitize_quant.py
    compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_quant.py
    compute-sanitizer --tool synccheck python3 tests/gpu/sanitize_quant.py

The production shapes of the sign kernels run with a small Nd (8: a block per
document, every tile of a document: (16, 8, 32, 300, 128) on signs_tile_kernel
with two m-tiles and 5 tiles, (3, 8, 20, 130, 100) with one m-tile and byte
loads, (1, 8, 32, 130, 128) on signs_doc_kernel, (2, 8, 32, 130, 128) with one
m-tile and 8-byte words), document 0 fully masked, 1
valid only in its last tile, 2 only in tile 0.  With --walk they also run
with Nd = 3 blocks' worth of documents per block of the persistent grid (from
the device's SM count), so each block walks about 3 documents (the
double-buffered row / column maxima and the sums one tile later); racecheck
and synccheck take minutes there:

    compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_quant.py --walk
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import torch  # noqa: E402

import lik  # noqa: E402


def strided_last(x, step=2):
    """x as a view whose last dimension has stride `step` (elements)."""
    wide = torch.zeros(*x.shape[:-1], x.shape[-1] * step, dtype=x.dtype, device=x.device)
    wide[..., ::step] = x
    return wide[..., ::step]


g = torch.Generator().manual_seed(0)
for nq, nd, lq, ld, d in [(2, 3, 7, 33, 17), (1, 2, 33, 9, 130), (1, 2, 3, 5, 1), (5, 3, 32, 65, 128),
                          (9, 2, 20, 33, 256), (3, 2, 5, 70, 160), (1, 3, 32, 70, 128), (3, 130, 20, 65, 100),
                          (2, 5, 128, 9, 72), (2, 40, 16, 70, 100), (4, 30, 32, 300, 112),
                          (9, 300, 16, 130, 128), (1, 300, 32, 300, 128), (4, 5, 8, 130, 96)]:
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

# the sign kernels' production shapes
sms = torch.cuda.get_device_properties(0).multi_processor_count
for nq, nd, lq, ld, d in [(16, 8, 32, 300, 128), (3, 8, 20, 130, 100), (1, 8, 32, 130, 128), (2, 8, 32, 130, 128)]:
    groups = -(-nq // ((64 if nq * lq <= 64 else 128) // lq))
    nblk = -(-8 * sms // groups)  # launch_signs' persistent grid
    for n in [nd] + ([3 * nblk] if "--walk" in sys.argv else []):
        Q = torch.randn(nq, lq, d, generator=g)
        D = torch.randn(n, ld, d, generator=g)
        dm = torch.rand(n, ld, generator=g) < 0.7
        last = (ld - 1) // 64 * 64
        dm[0] = False
        dm[1, :last] = False
        dm[1, last] = True
        dm[2, 64:] = False
        dm[2, 0] = True
        dm = dm.cuda()
        qi, sq = lik.quantize_int8(Q)
        qi, sq = qi.cuda(), sq.cuda()
        qbits = lik.quantize_binary(Q).cuda()
        bits = lik.quantize_binary(D).cuda()
        for b in (bits, strided_last(bits)):
            lik.maxsim_inference_binary(qi, b, d=d, scale_Q=sq, d_mask=dm)
            lik.maxsim_inference_binary(qbits, b, d=d, d_mask=dm)
        lik.maxsim_inference_binary(strided_last(qi), bits, d=d, scale_Q=sq, d_mask=dm)
        lik.maxsim_inference_binary(strided_last(qbits), bits, d=d, d_mask=dm)
        # no d_mask: the bits through the kernels' cp.async ring
        lik.maxsim_inference_binary(qi, bits, d=d, scale_Q=sq)
        lik.maxsim_inference_binary(qbits, bits, d=d)
torch.cuda.synchronize()
print("sanitize_quant: ok")
