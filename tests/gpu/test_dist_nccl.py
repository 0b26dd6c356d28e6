"""lik.distributed over NCCL on one GPU (a one-rank group in this process):
the collectives take CUDA tensors (candidates gathered on the device,
broadcast_object_list of the codec through the GPU).  retrieve against
lik.retrieve on CUDA inputs, ShardedIndex against one lik.plaid.Index, both
bitwise.  Several GPUs: not testable on the lent machines (one H200)."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def nccl_group(tmp_path_factory):
    import torch.distributed as dist

    if not torch.cuda.is_available() or not dist.is_nccl_available():
        pytest.skip("NCCL on CUDA is not available")
    torch.cuda.set_device(0)
    init = "file://" + os.path.join(str(tmp_path_factory.mktemp("nccl")), "rendezvous")
    dist.init_process_group("nccl", init_method=init, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_retrieve_nccl(nccl_group):
    import lik
    import lik.distributed as ld

    rng = np.random.default_rng(7)
    Q = torch.from_numpy(rng.standard_normal((4, 9, 48)).astype(np.float32)).cuda().to(torch.bfloat16)
    D = torch.from_numpy(rng.standard_normal((37, 13, 48)).astype(np.float32)).cuda().to(torch.bfloat16)
    s, i = ld.retrieve(Q, D, 7)
    ws, wi = lik.retrieve(Q, D, 7)
    assert s.is_cuda and i.is_cuda
    assert torch.equal(i.cpu(), wi.cpu())
    assert s.cpu().numpy().tobytes() == ws.cpu().numpy().tobytes()


def test_sharded_index_nccl(nccl_group, tmp_path):
    import lik.distributed as ld
    from lik import plaid

    rng = np.random.default_rng(11)
    centers = rng.standard_normal((10, 36))
    docs = [(centers[rng.integers(0, 10, L)] + 0.3 * rng.standard_normal((L, 36))).astype(np.float32)
            for L in rng.integers(1, 20, 45)]
    Q = (centers[rng.integers(0, 10, (3, 7))] + 0.4 * rng.standard_normal((3, 7, 36))).astype(np.float32)
    sample = np.concatenate(docs[::3])
    ix = ld.ShardedIndex.build(docs, tmp_path / "ix", sample=sample, num_centroids=16)
    one = plaid.Index.train(sample, num_centroids=16, total_tokens=sum(len(x) for x in docs))
    one.add(docs)
    for k in (5, 60):  # 60 > N: ids -1 at the end
        s, i = ix.search(Q, k, n_ivf_probe=2)
        ws, wi = one.search(Q, k, n_ivf_probe=2)
        np.testing.assert_array_equal(i, wi)
        assert s.tobytes() == ws.tobytes()
    back = ld.ShardedIndex.load(tmp_path / "ix")
    np.testing.assert_array_equal(back.search(Q, 5)[1], one.search(Q, 5)[1])
