"""An independent numpy implementation of the ColBERTv2 residual codec for the
tests (never calls lik), written from the facts of ColBERT's
``colbert/indexing/codecs/residual.py`` and fast-plaid's
``rust/index/create.rs``:

* train: cutoffs / weights = quantiles of all residual values at i / 2^b and
  (i + 0.5) / 2^b (linear interpolation);
* compress: code = argmax of <x, c>; bucket = torch.bucketize(r, cutoffs)
  (right=False), i.e. numpy.searchsorted(side="left"); each dimension's bucket
  written least-significant bit first into one bit stream, packed with
  numpy.packbits (most-significant bit first) — the "colbert" layout; the
  seed's "lik" layout is the same stream packed with bitorder="little";
* decompress: centroid + weights[bucket], L2-normalised.
"""

from __future__ import annotations

import numpy as np


def train(residuals: np.ndarray, nbits: int):
    v = np.asarray(residuals, dtype=np.float64).reshape(-1)
    n = 1 << nbits
    cutoffs = np.quantile(v, np.arange(1, n) / n)
    weights = np.quantile(v, (np.arange(n) + 0.5) / n)
    return cutoffs.astype(np.float32), weights.astype(np.float32)


def bucketize(r: np.ndarray, cutoffs: np.ndarray) -> np.ndarray:
    return np.searchsorted(cutoffs.astype(np.float32), r.astype(np.float32), side="left")


def pack(buckets: np.ndarray, nbits: int, layout: str) -> np.ndarray:
    """[T, d] bucket indices -> [T, d*nbits/8] bytes."""
    T = buckets.shape[0]
    bits = ((buckets[..., None].astype(np.int64) >> np.arange(nbits)) & 1).astype(np.uint8).reshape(T, -1)
    return np.packbits(bits, axis=-1, bitorder="big" if layout == "colbert" else "little")


def unpack(res: np.ndarray, nbits: int, d: int, layout: str) -> np.ndarray:
    """[T, d*nbits/8] bytes -> [T, d] bucket indices."""
    T = res.shape[0]
    bits = np.unpackbits(res, axis=-1, bitorder="big" if layout == "colbert" else "little")
    bits = bits.reshape(T, d, nbits).astype(np.int64)
    return (bits << np.arange(nbits)).sum(-1)


def compress(X, centroids, cutoffs, nbits: int, layout: str = "colbert"):
    X = np.asarray(X, dtype=np.float32)
    C = np.asarray(centroids, dtype=np.float32)
    codes = np.argmax(X.astype(np.float64) @ C.T.astype(np.float64), axis=1).astype(np.int32)
    r = X - C[codes]
    return codes, pack(bucketize(r, cutoffs), nbits, layout)


def decompress(codes, res, centroids, weights, nbits: int, layout: str = "colbert", normalize: bool = True):
    C = np.asarray(centroids, dtype=np.float64)
    d = C.shape[1]
    x = C[np.asarray(codes)] + np.asarray(weights, dtype=np.float64)[unpack(np.asarray(res), nbits, d, layout)]
    if normalize:
        x = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    return x


def maxsim(Q, docs, normalize: bool = True) -> np.ndarray:
    """Q [Nq, Lq, d], docs: list of [L_j, d] float64 -> [Nq, Nd] (empty doc: 0)."""
    Q = np.asarray(Q, dtype=np.float64)
    if normalize:
        Q = Q / np.maximum(np.linalg.norm(Q, axis=-1, keepdims=True), 1e-12)
    out = np.zeros((Q.shape[0], len(docs)))
    for j, D in enumerate(docs):
        if len(D):
            out[:, j] = (Q @ D.T).max(-1).sum(-1)
    return out
