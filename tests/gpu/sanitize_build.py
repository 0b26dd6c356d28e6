"""Small representative calls of the codec's compress on CUDA and the PLAID
build on a device, for compute-sanitizer:
    compute-sanitizer --tool memcheck  python3 tests/gpu/sanitize_build.py
    compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_build.py
    compute-sanitizer --tool synccheck python3 tests/gpu/sanitize_build.py
Covers src/cuda/codec.cu: compress of CUDA tensors (fp32 / fp16 / bf16 / fp64
tokens, strided X, d tails 1, 17, 100 — not a multiple of the 8-dimension
step —, token tails, centroids split over CTAs (few tokens, many centroids)
and not (many tokens), codes only and with residuals, nbits 1 / 2 / 8, a NaN
token: code -1); the host-staged build (k-means with resident points, the
held-out tokens, coding in chunks) through lik.plaid.Index.build / train /
add with device="cuda"."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from lik import _lib, plaid  # noqa: E402

g = torch.Generator(device="cuda")
g.manual_seed(1)


def r(shape, dt=torch.float32):
    return torch.randn(shape, device="cuda", generator=g).to(dt)


for dt, T, K, d, nbits in [(torch.float32, 1, 5, 1, 8), (torch.float16, 130, 300, 17, 8),
                           (torch.bfloat16, 257, 4097, 128, 2), (torch.float64, 40, 64, 100, 2),
                           (torch.float32, 5000, 200, 48, 1)]:
    X, C = r((T, d), dt), r((K, d), torch.float16)
    cut = torch.linspace(-1, 1, 2 ** nbits - 1, device="cuda")
    plaid.compress(X, C, cut, nbits)
W = r((300, 64))
X = W[:, ::2]  # strided tokens
X[7, 3] = float("nan")
codes = torch.empty(300, dtype=torch.int32, device="cuda")
res = torch.empty(300, 8, dtype=torch.uint8, device="cuda")
_lib.call_codec_compress(X, r((50, 32)), torch.tensor([-0.5, 0.0, 0.5], device="cuda"), 2, "lik", codes, res)
torch.cuda.synchronize()
assert int(codes[7]) == -1

rng = np.random.default_rng(0)
docs = [rng.standard_normal((int(n), 48)).astype(np.float32) for n in rng.integers(0, 40, 300)]
plaid.Index.build(docs, nbits=2, num_centroids=64, device="cuda").close()
plaid.Index.build(docs, nbits=4, num_centroids=32, max_points_per_centroid=16, sample_docs=100,
                  device="cuda").close()
ix = plaid.Index.train(np.concatenate(docs[:100]), nbits=2, num_centroids=40, device="cuda")
ix.add(docs[100:200])
ix.add([x.astype(np.float16) for x in docs[200:]])
ix.close()
torch.cuda.synchronize()
print("sanitize_build: done")
