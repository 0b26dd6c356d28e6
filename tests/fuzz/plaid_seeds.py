"""Seeds of fuzz_plaid_index (corpus/fuzz_plaid_index/): small index folders
written by lik (merged layout) and in fast-plaid's older per-chunk layout,
packed in the target's input format (fuzz_plaid_index.c); and of
fuzz_plaid_commit (corpus/fuzz_plaid_commit/): the same folders, plain, with
a committed change not yet applied and with a stale staging folder, followed
by tokens to add (fuzz_plaid_commit.c).  The files are
committed; rerun after changing the format:  python3 tests/fuzz/plaid_seeds.py
(needs the lik package: python/ + a built liblik.so, e.g. LIK_LIBRARY=...)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))

from lik import plaid  # noqa: E402

SEP = b"|LIKSEP|"
FILES = ["metadata.json", "centroids.npy", "bucket_cutoffs.npy", "bucket_weights.npy", "ivf.npy",
         "ivf_lengths.npy", "doclens.0.json", "merged_codes.npy", "merged_residuals.npy", "doclens.1.json",
         "1.codes.npy", "1.residuals.npy", "avg_residual.npy", "cluster_threshold.npy", "doc_ids.npy",
         "deleted.npy", "next_id.npy"]


def pack(folder: Path, flags: int) -> bytes:
    parts = [(folder / f).read_bytes() if (folder / f).is_file() else b"" for f in FILES]
    return bytes([flags]) + SEP.join(parts)


def main() -> None:
    out = HERE / "corpus" / "fuzz_plaid_index"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(18)
    with tempfile.TemporaryDirectory() as tmp:
        for n, (d, nbits, chunk) in enumerate([(8, 2, 4), (16, 4, 100), (8, 8, 3), (16, 1, 5)]):
            docs = [rng.standard_normal((int(rng.integers(0, 6)), d)).astype(np.float32) for _ in range(7)]
            docs[0] = rng.standard_normal((3, d)).astype(np.float32)
            folder = Path(tmp) / f"ix{n}"
            plaid.Index.build(docs, folder, nbits=nbits, num_centroids=4, chunk_docs=chunk)
            (out / f"seed_{n}_merged").write_bytes(pack(folder, n & 7))
            # fast-plaid's older layout: chunk 1 as its own files
            if (folder / "doclens.1.json").is_file():
                import json

                lens0 = sum(json.loads((folder / "doclens.0.json").read_text()))
                lens1 = sum(json.loads((folder / "doclens.1.json").read_text()))
                codes = np.load(folder / "merged_codes.npy")[lens0:lens0 + lens1]
                res = np.load(folder / "merged_residuals.npy")[lens0:lens0 + lens1]
                np.save(folder / "1.codes.npy", codes)
                np.save(folder / "1.residuals.npy", res)
                (out / f"seed_{n}_chunkfiles").write_bytes(pack(folder, 1))
        # a living index: deletions, an update (an id map with -1), its own rng
        lrng = np.random.default_rng(34)
        docs = [lrng.standard_normal((int(lrng.integers(1, 6)), 8)).astype(np.float32) for _ in range(9)]
        ix = plaid.Index.build(docs, Path(tmp) / "live", nbits=2, num_centroids=4, chunk_docs=4)
        ix.delete([1, 6])
        ix.update([4], docs[:1])
        ix.save(Path(tmp) / "live")
        (out / "seed_living").write_bytes(pack(Path(tmp) / "live", 0))
        # the highest ids compacted away: next_id.npy (ids 7, 8 not given again)
        ix.delete([7, 8])
        ix.compact()
        ix.save(Path(tmp) / "live")
        assert (Path(tmp) / "live" / "next_id.npy").is_file()
        (out / "seed_living_next_id").write_bytes(pack(Path(tmp) / "live", 1))
    commit_seeds(out, HERE / "corpus" / "fuzz_plaid_commit", rng)


def commit_seeds(index_corpus: Path, out: Path, rng) -> None:
    """fuzz_plaid_commit's input: fuzz_plaid_index's, then .lik-commit/metadata.json,
    .lik-commit/ivf.npy, .lik-commit/.remove, .lik-new/metadata.json, then float32 tokens
    (or none, with a delete)."""
    out.mkdir(parents=True, exist_ok=True)
    for seed in sorted(index_corpus.iterdir()):
        data = seed.read_bytes()
        meta = data[1:].split(SEP)[0]
        tokens = rng.standard_normal(16 * 12).astype(np.float32).tobytes()
        for name, staged in [("plain", [b"", b"", b"", b""]),
                             ("committed", [meta, b"", b"doc_ids.npy\n", b""]),
                             ("staging", [b"", b"", b"", b"{not json"])]:
            flags = data[0] | (4 * len(name) % 32)
            (out / f"{seed.name}_{name}").write_bytes(bytes([flags]) + data[1:] + SEP + SEP.join(staged) + SEP + tokens)
        # a delete alone (no tokens): the save writes deleted.npy and metadata.json only
        (out / f"{seed.name}_delete").write_bytes(bytes([data[0] | 32]) + data[1:] + SEP + SEP.join([b""] * 4) + SEP)


if __name__ == "__main__":
    main()
