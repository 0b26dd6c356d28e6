"""Every error path: the exception type and a message naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

import lik

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


def z(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def test_version_and_isa():
    assert lik.__version__ == "0.2.0"
    assert lik.cpu_isa() in ("avx512", "avx2", "sve", "neon", "portable")
    from lik import _lib

    assert _lib.version_number() == 200


def test_d_mismatch_names_both_sizes():
    with pytest.raises(ValueError, match=r"(?=.*\b96\b)(?=.*\b128\b)"):
        lik.maxsim(z(2, 3, 128), z(4, 5, 96))
    with pytest.raises(ValueError, match=r"(?=.*\b96\b)(?=.*\b128\b)"):
        lik.maxsim_pairs(z(2, 3, 128), z(2, 5, 96))
    with pytest.raises(ValueError, match=r"(?=.*\b96\b)(?=.*\b128\b)"):
        lik.retrieve(z(2, 3, 128), z(4, 5, 96), 2)
    with pytest.raises(ValueError, match=r"(?=.*\b96\b)(?=.*\b128\b)"):
        lik.maxsim(z(2, 3, 128), z(2, 4, 5, 96))


@pytest.mark.parametrize(
    "qm,dm,name",
    [
        (z(2, 4, dtype=bool), None, "q_mask"),
        (z(3, 3, dtype=bool), None, "q_mask"),
        (z(2, 3, 1, dtype=bool), None, "q_mask"),
        (z(6, dtype=bool), None, "q_mask"),
        (None, z(4, 6, dtype=bool), "d_mask"),
        (None, z(5, 5, dtype=bool), "d_mask"),
        (None, z(20, dtype=bool), "d_mask"),
    ],
)
def test_mask_shape(qm, dm, name):
    with pytest.raises(ValueError, match=name):
        lik.maxsim(z(2, 3, 8), z(4, 5, 8), qm, dm)


def test_mask_shape_kd_pairs_retrieve():
    with pytest.raises(ValueError, match="d_mask"):
        lik.maxsim(z(2, 3, 8), z(2, 4, 5, 8), None, z(2, 5, dtype=bool))
    with pytest.raises(ValueError, match="d_mask"):
        lik.maxsim_pairs(z(2, 3, 8), z(2, 5, 8), None, z(2, 4, dtype=bool))
    with pytest.raises(ValueError, match="q_mask"):
        lik.retrieve(z(2, 3, 8), z(4, 5, 8), 2, z(3, 2, dtype=bool))


def test_d_zero_is_an_error():
    with pytest.raises(ValueError, match="d=0"):
        lik.maxsim(z(1, 1, 0), z(1, 1, 0))
    with pytest.raises(ValueError, match="d=0"):
        lik.retrieve(z(1, 1, 0), z(3, 1, 0), 2)


def test_retrieve_flags_are_bools():
    Q, D = np.ones((2, 3, 4), np.float32), np.ones((3, 5, 4), np.float32)
    with pytest.raises(TypeError, match="largest: expected a bool, got str"):
        lik.retrieve(Q, D, 2, largest="False")  # a truthy string must not mean largest=True
    with pytest.raises(TypeError, match="sorted: expected a bool, got NoneType"):
        lik.retrieve(Q, D, 2, sorted=None)
    assert lik.retrieve(Q, D, 2, largest=np.bool_(False))[1].shape == (2, 2)


@pytest.mark.parametrize("call", ["maxsim", "maxsim_pairs", "retrieve", "quantize_int8", "scorer"])
def test_normalize_is_a_bool(call):
    """normalize="False" is truthy: every entry point refuses a non-bool."""
    rng = np.random.default_rng()
    Q, D = rng.standard_normal((2, 3, 4), np.float32), rng.standard_normal((2, 5, 4), np.float32)
    Q, D = Q / np.linalg.norm(Q, axis=-1, keepdims=True), D / np.linalg.norm(D, axis=-1, keepdims=True)
    run = {"maxsim": lambda n: lik.maxsim(Q, D, normalize=n),
           "maxsim_pairs": lambda n: lik.maxsim_pairs(Q, D, normalize=n),
           "retrieve": lambda n: lik.retrieve(Q, D, 1, normalize=n),
           "quantize_int8": lambda n: lik.quantize_int8(Q, normalize=n),
           "scorer": lambda n: lik.MaxSimScorer(normalize=n)(Q, D)}[call]
    for bad in ("False", None, 1, 0.0):
        with pytest.raises(TypeError, match=f"normalize: expected a bool, got {type(bad).__name__}"):
            run(bad)
    run(np.bool_(True))
    run(False)


def test_top_k_beyond_int64_returns_every_document():
    Q, D = np.ones((2, 3, 4), np.float32), np.ones((3, 5, 4), np.float32)
    for top_k in (2**63, 2**64 + 2):
        scores, idx = lik.retrieve(Q, D, top_k)
        assert idx.shape == (2, 3) and sorted(idx[0]) == [0, 1, 2]


def test_dtype_mismatch():
    with pytest.raises(TypeError, match="D"):
        lik.maxsim(z(2, 3, 8), z(4, 5, 8, dtype=np.float16))
    with pytest.raises(TypeError, match="D"):
        lik.maxsim_pairs(z(2, 3, 8, dtype=np.float64), z(2, 5, 8))
    with pytest.raises(TypeError, match="D"):
        lik.retrieve(z(2, 3, 8), z(4, 5, 8, dtype=np.float64), 1)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.float16])
def test_mask_dtype(dtype):
    with pytest.raises(TypeError, match="q_mask"):
        lik.maxsim(z(2, 3, 8), z(4, 5, 8), z(2, 3, dtype=dtype))
    with pytest.raises(TypeError, match="d_mask"):
        lik.maxsim(z(2, 3, 8), z(4, 5, 8), None, z(4, 5, dtype=dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_])
def test_embedding_dtype_not_float(dtype):
    with pytest.raises(TypeError, match="Q"):
        lik.maxsim(z(2, 3, 8, dtype=dtype), z(4, 5, 8, dtype=dtype))


@pytest.mark.parametrize("dtype", [np.int16, np.complex64, np.int8, np.uint16, object])
def test_dtype_without_lik_code(dtype):
    with pytest.raises(TypeError, match="Q"):
        lik.maxsim(np.zeros((2, 3, 8), dtype), z(4, 5, 8))
    with pytest.raises(TypeError, match="d_mask"):
        lik.maxsim(z(2, 3, 8), z(4, 5, 8), None, np.zeros((4, 5), dtype))


@pytest.mark.parametrize(
    "qs,ds,name",
    [
        ((8,), (4, 5, 8), "Q"),
        ((), (4, 5, 8), "Q"),
        ((1, 2, 3, 8), (4, 5, 8), "Q"),
        ((2, 3, 8), (8,), "D"),
        ((2, 3, 8), (), "D"),
        ((3, 8), (2, 4, 5, 8), "D"),  # KD needs 3-D Q
        ((2, 3, 8), (3, 4, 5, 8), "Nq"),  # KD batch mismatch
    ],
)
def test_wrong_ndim(qs, ds, name):
    with pytest.raises(ValueError, match=name):
        lik.maxsim(np.zeros(qs, np.float32), np.zeros(ds, np.float32))


def test_too_many_dims():
    with pytest.raises(ValueError, match="ndim=5"):
        lik.maxsim(z(1, 1, 2, 3, 8), z(4, 5, 8))


def test_pairs_errors():
    with pytest.raises(ValueError):
        lik.maxsim_pairs(z(3, 8), z(3, 8))
    with pytest.raises(ValueError, match=r"(?=.*\b2\b)(?=.*\b3\b)"):
        lik.maxsim_pairs(z(2, 3, 8), z(3, 5, 8))
    with pytest.raises(ValueError):
        lik.maxsim_pairs(z(2, 3, 8), z(2, 1, 5, 8))


@pytest.mark.parametrize("bad", [[[[0.0]]], 1.0, "Q", None])
def test_not_an_array(bad):
    with pytest.raises(TypeError, match="Q"):
        lik.maxsim(bad, z(4, 5, 8))
    with pytest.raises(TypeError, match="D"):
        lik.maxsim_pairs(z(2, 3, 8), bad)
    with pytest.raises(TypeError, match="Q"):
        lik.retrieve(bad, z(4, 5, 8), 1)


def test_mask_not_an_array():
    with pytest.raises(TypeError, match="q_mask"):
        lik.maxsim(z(2, 3, 8), z(4, 5, 8), [[True] * 3] * 2)


@needs_torch
def test_torch_errors():
    Q = torch.zeros(2, 3, 8)
    with pytest.raises(TypeError, match="D"):
        lik.maxsim(Q, torch.zeros(4, 5, 8, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="q_mask"):
        lik.maxsim(Q, torch.zeros(4, 5, 8), torch.zeros(2, 3))
    with pytest.raises(TypeError, match=r"Q: dtype int16 is not supported \(float32, .*int32 / int64 for lengths"):
        lik.maxsim(torch.zeros(2, 3, 8, dtype=torch.int16), torch.zeros(4, 5, 8))
    with pytest.raises(ValueError, match=r"(?=.*\b8\b)(?=.*\b7\b)"):
        lik.maxsim(Q, torch.zeros(4, 5, 7))
    with pytest.raises(ValueError, match="device"):
        lik.maxsim(Q.to("meta"), torch.zeros(4, 5, 8))


@needs_torch
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_nested_tensors_are_refused():
    nt = torch.nested.nested_tensor([torch.zeros(3, 8), torch.zeros(2, 8)])
    for args, name in (((nt, torch.zeros(4, 5, 8)), "Q"), ((torch.zeros(2, 3, 8), nt), "D")):
        with pytest.raises(TypeError, match=f"{name}: nested tensors are not supported"):
            lik.maxsim(*args)
    with pytest.raises(TypeError, match="D: nested tensors are not supported"):
        lik.retrieve(torch.zeros(2, 3, 8), nt, 1)


def test_scorer_token_ids_must_be_arrays():
    scorer = lik.MaxSimScorer(mask_pad_token=0)
    with pytest.raises(TypeError, match="q_ids: expected a numpy array or torch tensor, got list"):
        scorer.forward_with_ids(z(2, 3, 8), z(4, 5, 8), [[1, 2, 0], [1, 0, 0]], np.ones((4, 5), np.int64))


def test_errors_leave_library_usable():
    with pytest.raises(ValueError):
        lik.maxsim(z(2, 3, 8), z(4, 5, 9))
    out = lik.maxsim(np.ones((1, 2, 3), np.float32), np.ones((1, 1, 3), np.float32))
    assert out[0, 0] == 6.0


def test_context_cuda_off_names():
    """Every LIK_CUDA_NO_* name maps to a bit the C library accepts (all of
    them at once is LIK_CUDA_NO_ALL); an unknown name is a ValueError."""
    names = ["wgmma", "split", "bulk", "bw_sparse", "bw_buckets", "pool", "bw_ranges"]
    for name in names:
        with lik.Context(cuda_off=[name]):
            assert lik.maxsim(np.ones((1, 2, 3), np.float32), np.ones((1, 1, 3), np.float32))[0, 0] == 6.0
    lik.Context(cuda_off=names)
    with pytest.raises(ValueError, match="sparse"):
        lik.Context(cuda_off=["sparse"])


# ---- integer arguments: checked in their C type's range, never wrapped (issue 27 B, item 5) ----


def test_integer_arguments_never_wrap(tmp_path):
    from lik import plaid

    rng = np.random.default_rng(11)
    docs = [rng.standard_normal((int(n), 16)).astype(np.float32) for n in rng.integers(3, 9, 30)]
    ix = plaid.Index.build(docs, tmp_path / "ix", num_centroids=8)
    Q = rng.standard_normal((2, 4, 16)).astype(np.float32)
    I64 = r"\[1, 9223372036854775807\]"
    cases = [
        # ctypes stored these modulo 2**64: n_ivf_probe=2**64+1 ran with 1
        (lambda: ix.search(Q, n_ivf_probe=2**64 + 1), rf"n_ivf_probe: 18446744073709551617 is outside {I64}"),
        (lambda: ix.search(Q, n_full_scores=2**64 + 4096), rf"n_full_scores: \d+ is outside {I64}"),
        # numpy's MemoryError before the library's documented limit
        (lambda: ix.search(Q, top_k=2**40 + 1), r"top_k: 1099511627777 is outside \[1, 1099511627776\]"),
        (lambda: ix.search(Q, top_k=np.int64(0)), r"top_k: 0 is outside \[1, 1099511627776\]"),
        (lambda: lik.Context(num_threads=2**32), r"Context: num_threads: 4294967296 is outside \[0, 2147483647\]"),
        (lambda: lik.Context(num_threads=-1), r"Context: num_threads: -1 is outside"),
        (lambda: plaid.Index.build(docs, seed=2**64), r"seed: 18446744073709551616 is outside \[0, 18446744073709551615\]"),
        (lambda: plaid.compress(np.concatenate(docs), np.ones((4, 16), np.float32), np.zeros(3, np.float32),
                                2**32 + 2), r"nbits: 4294967298 is outside \[-2147483648, 2147483647\]"),
        (lambda: lik.maxsim_inference_binary(np.zeros((2, 8), np.int8), np.zeros((3, 1), np.uint8), d=2**64),
         r"d: 18446744073709551616 is outside"),
        (lambda: lik.retrieve_binary(Q, Q, lik.quantize_binary(Q), 2**63), rf"top_k: 9223372036854775808 is outside {I64}"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg):
            call()
    for bad in (True, 1.0, "3"):
        with pytest.raises(TypeError, match="n_ivf_probe: expected an int"):
            ix.search(Q, n_ivf_probe=bad)
    ix.search(Q, top_k=np.int32(3), n_ivf_probe=np.uint64(2))  # numpy integers are ints
