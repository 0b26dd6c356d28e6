"""lik.distributed.ShardedIndex under hostile use (issue 27 B, item 6), on 2
gloo ranks: a rank whose index is closed fails its search / save while the
others raise RuntimeError naming it (no rank waits in a collective until the
timeout), and a malformed shards.json is a ValueError naming the file."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from _launch import raised, run_ranks  # noqa: E402

BAD_SHARDS_JSON = {
    "not_json": b"{world_size: 2",
    "a_list": b"[2]",
    "world_size_str": b'{"world_size": "2"}',
    "world_size_bool": b'{"world_size": true}',
    "world_size_zero": b'{"world_size": 0}',
    "num_docs_short": b'{"world_size": 2, "num_docs": [3]}',
    "num_docs_negative": b'{"world_size": 2, "num_docs": [3, -1]}',
}


def _worker(rank: int, world: int, tmp):
    import lik.distributed as ld

    rng = np.random.default_rng(4)
    docs = [rng.standard_normal((int(n), 16)).astype(np.float32) for n in rng.integers(3, 9, 20)]
    Q = rng.standard_normal((2, 4, 16)).astype(np.float32)
    mine = docs[rank * 10:(rank + 1) * 10]
    ix = ld.ShardedIndex.build(mine, os.path.join(tmp, "ix"), sample=np.concatenate(docs) if rank == 0 else None,
                               num_centroids=8)

    out = {"ok": ix.search(Q, 3)[1]}
    for name, data in BAD_SHARDS_JSON.items():
        torch.distributed.barrier()
        if rank == 0:
            with open(os.path.join(tmp, "ix", "shards.json"), "wb") as f:
                f.write(data)
        torch.distributed.barrier()
        out[name] = raised(lambda: ld.ShardedIndex.load(os.path.join(tmp, "ix")))
    if rank == world - 1:
        ix.local.close()  # this rank's shard is closed: the others must not wait for it
    out["closed_search"] = raised(lambda: ix.search(Q, 3))
    out["closed_save"] = raised(lambda: ix.save(os.path.join(tmp, "again")))
    return out


def test_closed_shard_and_malformed_shards_json(tmp_path):
    world = 2
    results = run_ranks(_worker, world, str(tmp_path), timeout=50)  # below gloo's 60 s collective timeout
    assert (results[0]["ok"] == results[1]["ok"]).all()
    info = os.path.join(str(tmp_path), "ix", "shards.json")
    for rank, res in enumerate(results):
        for name in BAD_SHARDS_JSON:
            got = res[name]  # every rank reads the file (one file system here)
            assert got[0] == "ValueError" and f"{info} is not a valid shards.json" in got[1], (name, got)
        for what in ("closed_search", "closed_save"):
            kind, msg = res[what]
            if rank == world - 1:
                assert kind == "ValueError" and "index: is closed" in msg, (what, msg)
            else:
                assert kind == "RuntimeError" and f"rank(s) [{world - 1}]" in msg, (what, msg)
