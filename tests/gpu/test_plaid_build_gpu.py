"""GPU suite of the PLAID index's build on a device (issue 29: "build faster
than fast-plaid's"): k-means' assignment passes and the coding of every
document on the GPU (src/cuda/codec.cu) must give the CPU build's index,
file for file and byte for byte, for the same seed -- the device computes the
CPU's fp32 FMA chains (ascending k from +0, the lowest centroid of the highest
score, NaN never winning) and the CPU's bucket / byte rules.  Also the codec's
compress on CUDA tensors against the CPU's.

The CPU side must run an FMA path (AVX2, AVX-512, NEON, SVE: every x86-64
host with AVX2); LIK_CPU_ISA=portable rounds mul + add and may differ.

Marked ``gpu``; skipped without torch + CUDA.  LIK_TEST_SEED replays a run.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

import lik  # noqa: E402
from lik import plaid  # noqa: E402

SEED = int(os.environ.get("LIK_TEST_SEED", int.from_bytes(os.urandom(4), "little")))


def corpus(rng, n, d, lmax=60, clusters=12, odd=True):
    """n documents of 0..lmax tokens around `clusters` directions, unit-norm
    float32; the total token count odd when `odd`."""
    dirs = rng.standard_normal((clusters, d))
    lens = rng.integers(0, lmax + 1, n)
    if odd and lens.sum() % 2 == 0:
        lens[0] += 1
    docs = []
    for L in lens:
        x = dirs[rng.integers(0, clusters, L)] + 0.5 * rng.standard_normal((L, d))
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-6)
        docs.append(x.astype(np.float32))
    return docs


def as_dtype(docs, dtype):
    if dtype == "float32":
        return docs
    if dtype == "float16":
        return [x.astype(np.float16) for x in docs]
    return [torch.from_numpy(x).to(torch.bfloat16) for x in docs]  # bfloat16: torch CPU tensors


def same_files(a: Path, b: Path, what: str):
    fa = sorted(p.name for p in a.iterdir() if p.is_file())
    fb = sorted(p.name for p in b.iterdir() if p.is_file())
    assert fa == fb, f"{what}: the folders hold other files: {fa} vs {fb} (seed {SEED})"
    for name in fa:
        x, y = (a / name).read_bytes(), (b / name).read_bytes()
        if x != y:
            n = min(len(x), len(y))
            first = next((i for i in range(n) if x[i] != y[i]), n)
            pytest.fail(f"{what}: {name} differs (sizes {len(x)} / {len(y)}, first byte {first}; "
                        f"seed {SEED})")


# (d, nbits, dtype, documents, K (None: the rule))
CASES = [
    (1, 8, "float32", 120, 8),
    (3, 8, "float16", 150, 16),
    (17, 8, "bfloat16", 200, 32),
    (48, 1, "float32", 300, 64),
    (48, 2, "bfloat16", 250, 48),
    (96, 4, "float16", 300, 128),
    (128, 2, "float32", 500, None),
    (128, 8, "float16", 200, 200),
    (128, 2, "bfloat16", 400, 256),
    (128, 1, "float32", 200, 1000),  # more centroids than a tile's tokens: the split merge
]


@pytest.mark.parametrize("d,nbits,dtype,n,K", CASES, ids=[f"d{c[0]}-nb{c[1]}-{c[2]}-K{c[4]}" for c in CASES])
def test_build_files_equal(tmp_path, d, nbits, dtype, n, K):
    rng = np.random.default_rng(SEED + d * 131 + nbits)
    docs = as_dtype(corpus(rng, n, d), dtype)
    kw = dict(nbits=nbits, num_centroids=K, seed=SEED % 1000, chunk_docs=97)
    cpu = plaid.Index.build(docs, tmp_path / "cpu", **kw)
    gpu = plaid.Index.build(docs, tmp_path / "gpu", device="cuda", **kw)
    assert gpu.device.startswith("cuda")
    same_files(tmp_path / "cpu", tmp_path / "gpu", f"d={d} nbits={nbits} {dtype} K={K}")
    cpu.close()
    gpu.close()


def test_build_sampled_kmeans_cap(tmp_path):
    """Sampled documents and a k-means cap below the sample (max_points_per_centroid):
    the resident points of the assignment passes, the held-out codec tokens."""
    rng = np.random.default_rng(SEED + 7)
    docs = corpus(rng, 3000, 64, lmax=40)
    kw = dict(nbits=2, num_centroids=128, max_points_per_centroid=20, sample_docs=700, seed=3)
    plaid.Index.build(docs, tmp_path / "cpu", **kw).close()
    plaid.Index.build(docs, tmp_path / "gpu", device="cuda", **kw).close()
    same_files(tmp_path / "cpu", tmp_path / "gpu", "sampled build")


def test_train_add_in_parts(tmp_path):
    """train on the GPU + add in parts (each add codes on the index's device)
    == the same on the CPU, file for file."""
    rng = np.random.default_rng(SEED + 11)
    d = 96
    docs = corpus(rng, 600, d)
    sample = np.concatenate([x for x in docs[::3] if len(x)])
    outs = {}
    for dev in ("cpu", "cuda"):
        ix = plaid.Index.train(sample, nbits=4, num_centroids=96, seed=5, chunk_docs=70,
                               device=None if dev == "cpu" else dev)
        for a, b in ((0, 150), (150, 151), (151, 420), (420, 600)):
            ix.add(as_dtype(docs[a:b], "float16" if a == 150 else "float32"))
        ix.save(tmp_path / dev)
        outs[dev] = ix
    same_files(tmp_path / "cpu", tmp_path / "cuda", "train + add in parts")
    for ix in outs.values():
        ix.close()


def test_nan_token_same_error():
    """A token with a NaN: the same error, word for word, from both builds (a
    sampled token at training; a coded token of an add)."""
    rng = np.random.default_rng(SEED + 13)
    d = 32
    docs = corpus(rng, 60, d)
    bad = [x.copy() for x in docs]
    j = next(i for i, x in enumerate(bad) if len(x) > 3)
    bad[j][2, 5] = np.nan
    msgs = []
    for dev in (None, "cuda"):
        with pytest.raises(ValueError) as e:
            plaid.Index.build(bad, nbits=2, num_centroids=16, sample_docs=60, device=dev)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "NaN" in msgs[0]
    sample = np.concatenate([x for x in docs if len(x)])
    msgs = []
    for dev in (None, "cuda"):
        ix = plaid.Index.train(sample, nbits=2, num_centroids=16, device=dev)
        with pytest.raises(ValueError) as e:
            ix.add(bad)
        msgs.append(str(e.value))
        assert ix.num_docs == 0  # nothing added
        ix.close()
    assert msgs[0] == msgs[1] and "no finite inner product" in msgs[0], msgs


# ---- the codec's compress on CUDA tensors -----------------------------------------------


def compress_both(X, C, cut, nbits, layout="colbert", Xg=None):
    """(CPU codes, residuals), (GPU codes, residuals) as numpy; Xg: X's CUDA
    view (default X.cuda())."""
    hc, hr = plaid.compress(X.cpu(), C.cpu(), cut.cpu(), nbits, layout=layout)
    gc, gr = plaid.compress(X.cuda() if Xg is None else Xg, C.cuda(), cut.cuda(), nbits, layout=layout)
    assert gc.is_cuda and gr.is_cuda and gc.dtype == torch.int32
    return (np.asarray(hc), np.asarray(hr)), (gc.cpu().numpy(), gr.cpu().numpy())


@pytest.mark.parametrize("d,nbits", [(1, 8), (3, 8), (17, 8), (48, 1), (48, 2), (96, 4), (128, 2), (128, 8)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("T,K", [(1, 5), (129, 300), (2001, 64), (37, 4097)])
def test_compress_cuda_equals_cpu(d, nbits, dtype, T, K):
    g = torch.Generator().manual_seed(SEED + d + 7 * nbits + T)
    X = torch.randn(T, d, generator=g).to(dtype)
    C = torch.nn.functional.normalize(torch.randn(K, d, generator=g), dim=1).to(torch.float16)
    r = (X.float()[:, None, :] - C.float()[None, :4, :]).flatten()
    q = torch.arange(1, 2 ** nbits, dtype=torch.float64) / 2 ** nbits
    cut = torch.quantile(r.double(), q).float()
    for layout in ("colbert", "lik"):
        (hc, hr), (gc, gr) = compress_both(X, C, cut, nbits, layout)
        np.testing.assert_array_equal(gc, hc, err_msg=f"codes, seed {SEED}")
        np.testing.assert_array_equal(gr, hr, err_msg=f"residuals, seed {SEED}")


def test_compress_ties_lowest_index():
    """Duplicate centroids and integer data (exact, tied scores): the lowest
    index wins, on both sides; fp32 centroids."""
    g = torch.Generator().manual_seed(SEED)
    d, K = 24, 700
    base = torch.randint(-2, 3, (40, d), generator=g).float()
    C = base[torch.randint(0, 40, (K,), generator=g)]  # many duplicates, spread over the tiles and splits
    X = torch.randint(-2, 3, (999, d), generator=g).float()
    cut = torch.tensor([-0.5, 0.0, 0.5])
    (hc, hr), (gc, gr) = compress_both(X, C, cut, 2)
    np.testing.assert_array_equal(gc, hc)
    np.testing.assert_array_equal(gr, hr)
    S = X @ C.T  # exact in fp32 (small integers)
    best = S.max(dim=1, keepdim=True).values
    first = (S == best).float().argmax(dim=1).numpy()  # first maximum
    np.testing.assert_array_equal(gc, first)


def test_compress_strided_inf_and_nan():
    """Strided X (a column slice), +-inf values (a token of +inf scores is coded),
    and a NaN token: ValueError naming the lowest such token, on both sides."""
    g = torch.Generator().manual_seed(SEED + 1)
    d, K = 32, 50
    W = torch.randn(300, 2 * d, generator=g)
    X = W[:, ::2]  # sk = 2, on both sides
    C = torch.randn(K, d, generator=g)
    cut = torch.tensor([-1.0, 0.0, 1.0])
    X[5, 3] = float("inf")
    X[6, :] = 0.0
    X[6, 0] = float("-inf")
    Xg = W.cuda()[:, ::2]
    assert Xg.stride() == (2 * d, 2)
    (hc, hr), (gc, gr) = compress_both(X, C, cut, 2, Xg=Xg)
    np.testing.assert_array_equal(gc, hc)
    np.testing.assert_array_equal(gr, hr)
    X[17, 4] = float("nan")
    X[250, :] = float("nan")
    msgs = []
    for x in (X, W.cuda()[:, ::2]):
        with pytest.raises(ValueError) as e:
            plaid.compress(x, C.to(x.device), cut.to(x.device), 2)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1] and "token 17 " in msgs[0], msgs


def test_compress_cuda_stream_and_no_host_sync():
    """compress on a side stream: the results are there after the stream's work."""
    g = torch.Generator().manual_seed(SEED + 2)
    X = torch.randn(5000, 128, generator=g).cuda()
    C = torch.randn(1024, 128, generator=g).cuda()
    cut = torch.tensor([-0.5, 0.0, 0.5]).cuda()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        codes = torch.empty(5000, dtype=torch.int32, device="cuda")
        res = torch.empty(5000, 32, dtype=torch.uint8, device="cuda")
        lik._lib.call_codec_compress(X, C, cut, 2, "colbert", codes, res)
    s.synchronize()
    hc, hr = plaid.compress(X.cpu(), C.cpu(), cut.cpu(), 2)
    np.testing.assert_array_equal(codes.cpu().numpy(), np.asarray(hc))
    np.testing.assert_array_equal(res.cpu().numpy(), np.asarray(hr))
