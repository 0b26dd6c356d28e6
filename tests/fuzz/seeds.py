"""Writes the fuzz targets' seed corpus (corpus/<target>/) and the regression
inputs of past findings (crashes/<target>/, issue 22) in each target's input
format (see the header comment of each fuzz_*.c).  The files are committed;
rerun after changing a format:  python3 tests/fuzz/seeds.py
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEP = b"|LIKSEP|"
RNG = np.random.default_rng(22)


def npy(arr: np.ndarray, descr: str | None = None, version: int = 1) -> bytes:
    """A .npy file without its 6-byte magic (fuzz_emb.c prepends it)."""
    d = descr or arr.dtype.str
    h = f"{{'descr': '{d}', 'fortran_order': False, 'shape': {tuple(arr.shape)}, }}".encode()
    size = struct.pack("<H", len(h)) if version == 1 else struct.pack("<I", len(h))
    return bytes([version, 0]) + size + h + np.ascontiguousarray(arr).tobytes()


def npy_header(descr: str, shape: tuple) -> bytes:
    h = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    return bytes([1, 0]) + struct.pack("<H", len(h)) + h


def safetensors(tensors: dict, metadata: dict | None = None) -> bytes:
    """name -> ndarray or (dtype string, ndarray of raw bits)."""
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.float64): "F64",
             np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8",
             np.dtype(np.bool_): "BOOL"}
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        dt, arr = t if isinstance(t, tuple) else (names[t.dtype], t)
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    return raw_safetensors(header, b"".join(blobs))


def raw_safetensors(header: dict, data: bytes = b"") -> bytes:
    h = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


def emb_input(flags: int, *files: bytes) -> bytes:
    return bytes([flags]) + SEP.join(files)


# ---- fuzz_api: header + 12 records + data ---------------------------------------------------

F32, F16, BF16, F64, BOOL, U8, I32, I64 = range(8)
SLOTS = ("Q", "D", "q_mask", "d_mask", "cu_q", "cu_d", "pair_q", "pair_d", "argmax", "grad_scores",
         "out0", "out1")
# the residual, codec and merge calls' names of the same slots
ALIAS = {"X": "Q", "centroids": "D", "cutoffs": "q_mask", "weights": "d_mask", "codes": "cu_q",
         "residuals": "cu_d", "lengths": "pair_q", "indices": "cu_q"}


def api_input(op: int, tensors: dict, *, opts: int = 0, top_k: int = 0, max_seqlen_q: int = 0) -> bytes:
    """tensors: slot name -> dict(dtype, shape, strides=None, device=0, alias=None,
    offset=0, fill=0)."""
    b = struct.pack("<BBqq", op, opts, top_k, max_seqlen_q)
    tensors = {ALIAS.get(k, k): v for k, v in tensors.items()}
    for name in SLOTS:
        t = tensors.get(name)
        if t is None:
            b += bytes(72)
            continue
        shape = list(t["shape"]) + [0] * (4 - len(t["shape"]))
        strides = list(t.get("strides") or []) + [0] * (4 - len(t.get("strides") or []))
        alias = ALIAS.get(t.get("alias"), t.get("alias"))
        layout = (1 if t.get("strides") is not None else 0) | ((SLOTS.index(alias) + 1) << 4 if alias else 0)
        b += struct.pack("<BBbB4q4qBHB", 1, t["dtype"], len(t["shape"]), t.get("device", 0), *shape,
                         *strides, layout, t.get("offset", 0), t.get("fill", 0))
    return b + RNG.uniform(-1, 1, 64).astype(np.float32).tobytes()


def T(dtype, *shape, **kw):
    return dict(dtype=dtype, shape=shape, **kw)


def api_corpus():
    out = {}
    for dt, name in ((F32, "f32"), (F16, "f16"), (BF16, "bf16"), (F64, "f64")):
        out[f"maxsim_{name}"] = api_input(0, dict(
            Q=T(dt, 2, 3, 8), D=T(dt, 4, 5, 8), q_mask=T(BOOL, 2, 3), d_mask=T(U8, 4, 5, fill=0),
            out0=T(F32, 2, 4), out1=T(I32, 2, 4, 3)), opts=2)
    out["maxsim_kd"] = api_input(0, dict(Q=T(F32, 2, 3, 8), D=T(F32, 2, 3, 5, 8), out0=T(F32, 2, 3)))
    out["maxsim_2d_strided"] = api_input(0, dict(
        Q=T(F32, 3, 8, strides=[1, 3]), D=T(F32, 5, 8, strides=[-8, 1], fill=0), out0=T(F32)), opts=1)
    out["pairs"] = api_input(1, dict(Q=T(F16, 3, 2, 8), D=T(F16, 3, 4, 8), out0=T(F32, 3),
                                     out1=T(I32, 3, 2)))
    out["retrieve"] = api_input(2, dict(Q=T(F32, 2, 3, 8), D=T(F32, 6, 5, 8), out0=T(F32, 2, 2),
                                        out1=T(I64, 2, 2)), top_k=2, opts=2)
    packed = dict(Q=T(F32, 6, 8), D=T(F32, 9, 8), cu_q=T(I64, 3, fill=2), cu_d=T(I32, 4, fill=2))
    out["varlen"] = api_input(3, dict(packed, out0=T(F32, 2, 3), out1=T(I32, 2, 3, 4)))
    out["pairs_packed"] = api_input(4, dict(packed, pair_q=T(I64, 5, fill=3), pair_d=T(I32, 5, fill=3),
                                            out0=T(F32, 5), out1=T(I32, 5, 4)))
    out["backward"] = api_input(5, dict(
        Q=T(F32, 2, 3, 8), D=T(F32, 4, 5, 8), argmax=T(I32, 2, 4, 3, fill=4), grad_scores=T(F32, 2, 4),
        out0=T(F32, 2, 3, 8), out1=T(F32, 4, 5, 8)), opts=2 | 1 << 4)
    out["backward_f64_lowmem"] = api_input(5, dict(
        Q=T(F64, 2, 3, 8), D=T(F64, 4, 5, 8), argmax=T(I32, 2, 4, 3, fill=4), grad_scores=T(F64, 2, 4),
        out0=T(F64, 2, 3, 8)), opts=2 << 4)
    out["pairs_backward"] = api_input(6, dict(
        Q=T(BF16, 3, 2, 8), D=T(BF16, 3, 4, 8), argmax=T(I32, 3, 2, fill=4), grad_scores=T(F32, 3),
        out1=T(BF16, 3, 4, 8)))
    out["varlen_backward"] = api_input(7, dict(packed, argmax=T(I32, 2, 3, 3, fill=1),
                                               grad_scores=T(F32, 2, 3), out0=T(F32, 6, 8),
                                               out1=T(F32, 9, 8)))
    out["pairs_packed_backward"] = api_input(8, dict(
        packed, pair_q=T(I64, 5, fill=3), pair_d=T(I64, 5, fill=3), argmax=T(I32, 5, 3, fill=1),
        grad_scores=T(F32, 5), out0=T(F32, 6, 8)))
    # residual scoring and the codec: d = 8, nbits = 2 (max_seqlen_q byte 0), 6 centroids
    codec = dict(centroids=T(F32, 6, 8), weights=T(F32, 4))
    out["residual"] = api_input(9, dict(
        codec, X=T(F32, 2, 3, 8), codes=T(I64, 4, 5, fill=3), residuals=T(U8, 4, 5, 2),
        lengths=T(I64, 4, fill=5), out0=T(F32, 2, 4), out1=T(I32, 2, 4, 3)), opts=2, max_seqlen_q=2)
    out["residual_varlen_lik_layout"] = api_input(10, dict(
        codec, X=T(BF16, 3, 8), codes=T(I32, 9, fill=3), residuals=T(U8, 9, 2),
        lengths=T(I64, 4, fill=2), out0=T(F32, 3), out1=T(I32, 3, 3)), max_seqlen_q=2 | 1 << 8)
    out["plaid_approx"] = api_input(11, dict(
        X=T(F32, 2, 3, 6), codes=T(I64, 9, fill=3), lengths=T(I32, 4, fill=2), out0=T(F32, 2, 3)))
    out["codec_train"] = api_input(12, dict(X=T(F32, 50), out0=T(F32, 3), out1=T(F32, 4)),
                                   max_seqlen_q=2)
    out["codec_compress"] = api_input(13, dict(
        centroids=T(F32, 6, 8), cutoffs=T(F32, 3), X=T(F32, 7, 8), out0=T(I64, 7),
        out1=T(U8, 7, 2)), max_seqlen_q=2)
    out["codec_decompress"] = api_input(14, dict(
        codec, codes=T(I64, 7, fill=3), residuals=T(U8, 7, 2), out0=T(F32, 7, 8)), opts=2,
        max_seqlen_q=2)
    merge = dict(X=T(F32, 2, 3, 4, fill=6), indices=T(I64, 2, 3, 4, fill=6), out0=T(F32, 3, 5),
                 out1=T(I64, 3, 5))
    out["topk_merge"] = api_input(15, merge, top_k=5)
    out["topk_merge_lengths"] = api_input(15, dict(merge, lengths=T(I64, 2, 3, fill=5), out0=T(F32, 3, 1),
                                                   out1=T(I64, 3, 1)), top_k=1)
    return out


def api_crashes():
    big = 2**31 + 3
    return {
        # issue 22, finding 3: float64 with Ld = 2^31 + 3 (stride 0) returned OK
        "f64_long_document": api_input(0, dict(
            Q=T(F64, 1, 2, 4, strides=[0, 0, 1]), D=T(F64, 1, big, 4, strides=[0, 0, 1]),
            out0=T(F32, 1, 1), out1=T(I32, 1, 1, 2))),
        "f64_lq_ld_2_31": api_input(1, dict(
            Q=T(F64, 1, 2**31, 4, strides=[0, 0, 1]), D=T(F64, 1, 2**31, 4, strides=[0, 0, 1]),
            out0=T(F32, 1))),
        # finding 9: grad_Q aliasing Q (must be refused)
        "grad_q_aliases_q": api_input(5, dict(
            Q=T(F32, 2, 3, 8), D=T(F32, 4, 5, 8), argmax=T(I32, 2, 4, 3, fill=4),
            grad_scores=T(F32, 2, 4), out0=T(F32, 2, 3, 8, alias="Q"))),
        "scores_inside_q": api_input(0, dict(
            Q=T(F32, 2, 3, 8), D=T(F32, 4, 5, 8), out0=T(F32, 2, 4, alias="Q", offset=40))),
        "decompress_out_inside_centroids": api_input(14, dict(
            centroids=T(F32, 6, 8), weights=T(F32, 4), codes=T(I64, 5, fill=3),
            residuals=T(U8, 5, 2), out0=T(F32, 5, 8, alias="centroids")), max_seqlen_q=2),
        "strides_beyond_int64": api_input(0, dict(
            Q=T(F32, 2, 3, 8, strides=[2**62, 8, 1]), D=T(F32, 4, 5, 8), out0=T(F32, 2, 4))),
    }


# ---- the file targets ------------------------------------------------------------------------

def emb_corpus():
    f32 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    ragged = RNG.standard_normal((5, 4)).astype(np.float32)
    cu = np.array([0, 2, 2, 5], np.int64)
    ids = np.array([7, 3, 9], np.int64)
    bf16 = (RNG.standard_normal((2, 2, 8)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    npy_files = {
        "padded_f32": emb_input(0, npy(f32)),
        "padded_f16_lengths": emb_input(1 | 0x10, npy(f32.astype(np.float16)), npy(np.array([3, 1], np.int64))),
        "ragged_cu_ids": emb_input(2 | 4 | 8, npy(ragged), npy(cu.astype(np.int32)), npy(ids)),
        "bf16_v2_f64": emb_input(0x20, npy(bf16, descr="<V2", version=2)),
        "f64_u8_lengths": emb_input(1, npy(f32.astype(np.float64)), npy(np.array([0, 3], np.uint8))),
    }
    mask = np.array([[1, 1, 0], [1, 0, 0]], np.bool_)
    st_files = {
        "ragged_ids": emb_input(0, safetensors({"embeddings": ragged, "cu_seqlens": cu, "ids": ids})),
        "padded_f16_mask": emb_input(8, safetensors({"embeddings": f32.astype(np.float16), "mask": mask},
                                                    {"format": "pt"})),
        "padded_bf16_lengths": emb_input(0x10, safetensors({"embeddings": ("BF16", bf16),
                                                            "lengths": np.array([2, 1], np.int64)})),
        "padded_attention_mask_i64": emb_input(0x20, safetensors(
            {"embeddings": f32, "attention_mask": mask.astype(np.int64)})),
        "npy_with_companions": emb_input(1, b"\x93NUMPY" + npy(f32), npy(np.array([1, 2], np.int32))),
    }
    return npy_files, st_files


def emb_crashes():
    n0 = npy_header("<f4", (2305843009213693953, 0, 4))
    st0 = raw_safetensors({"embeddings": {"dtype": "F32", "shape": [1073741824, 0, 4], "data_offsets": [0, 0]}})
    emb = np.zeros((4, 8), np.float32).tobytes()
    overlap = raw_safetensors({"embeddings": {"dtype": "F32", "shape": [4, 8], "data_offsets": [0, 128]},
                               "cu_seqlens": {"dtype": "I64", "shape": [2], "data_offsets": [112, 128]}}, emb)
    return (
        {"n_sequences_of_0_tokens_queries": emb_input(0, n0),  # finding 1: heap overflow
         "n_sequences_of_0_tokens_docs": emb_input(8, n0),
         "ids_count_beyond_file": emb_input(4, npy(np.zeros((2, 0, 4), np.float32)),
                                            npy_header("<i8", (10**15,)))},
        {"n_sequences_of_0_tokens": emb_input(0, st0),  # finding 2: 16.8 GB allocated
         "overlapping_data_offsets": emb_input(0, overlap)},  # finding 9
    )


def qrels_corpus():
    return {
        "qrels_3col": b"1 184 2\n1 29 1\n2 12 0\n# comment\n\n3 5 -1\n",
        "qrels_trec": b"1 0 184 2\n1 0 29 1\n2 0 12 1\n",
        "run_trec": b"1 Q0 184 1 12.5 run\n1 Q0 29 2 11.0 run\n2 Q0 12 1 3.0 run\n",
        "pairs": b"1 184\n1 29\n2 12\n1 184\n",
    }


def qrels_crashes():
    return {
        "duplicated_line": b"0 1 1\n0 1 1\n1 2 2\n",  # finding 8: counted twice
        "conflicting_gains": b"0 1 1\n0 1 2\n",
        "long_line": b"1 2 " + b"9" * 2000 + b"\n",
        "huge_ids": b"9223372036854775807 -9223372036854775808 9223372036854775807\n",
    }


def write(folder: str, target: str, files: dict) -> None:
    d = HERE / folder / target
    d.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (d / name).write_bytes(data)


def main() -> None:
    npy_files, st_files = emb_corpus()
    npy_crash, st_crash = emb_crashes()
    for target, corpus, crashes in (
        ("fuzz_npy", npy_files, npy_crash),
        ("fuzz_safetensors", st_files, st_crash),
        ("fuzz_qrels", qrels_corpus(), qrels_crashes()),
        ("fuzz_api", api_corpus(), api_crashes()),
    ):
        write("corpus", target, corpus)
        write("crashes", target, crashes)


if __name__ == "__main__":
    main()
