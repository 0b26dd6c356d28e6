#!/usr/bin/env python3
"""Sharded exact retrieval: queries/s of lik.distributed.retrieve on N ranks
(with --plaid: of lik.distributed.ShardedIndex.search, a PLAID index split
over the ranks).

    # N GPUs of one host (NCCL), a 10^8-token bf16 corpus:
    torchrun --nproc_per_node=N bench/distributed_retrieve.py --tokens 1e8 --dtype bfloat16
    # N CPU processes (gloo):
    torchrun --nproc_per_node=N bench/distributed_retrieve.py --tokens 2.5e5 --dtype float32 --threads 1
    # the table of the runs appended to a JSON-lines file, speed-ups against 1 rank:
    python bench/distributed_retrieve.py --table results.jsonl

Strong scaling: one corpus of --tokens tokens (Nd = tokens / Ld documents of
Ld tokens, d dims, unit-norm random tokens) is split into N contiguous shards
of Nd // N (+1) documents.  Every rank makes its shard from one seed per
block of documents, so the corpus is the same for every N (and --check can
compare runs).  The backend is NCCL on CUDA devices (rank r uses cuda:r of
its host), gloo otherwise (--backend to choose).

Each repetition: barrier, then every batch of --batch queries (all Nq queries
replicated on every rank) through lik.distributed.retrieve (normalize=True,
top --k), device sync, barrier; rank 0's wall clock, so the slowest rank
counts through the collectives.  queries/s = Nq / median repetition.  The same
is timed for lik.retrieve on the local shard alone ("local"): total - local is
what sharding adds (two all-gathers and the merge).  --check: rank 0 also runs
lik.retrieve on the whole corpus and compares ids and scores bitwise (small
corpora only).  --json FILE appends one JSON line per run.

--plaid: every rank indexes its shard (ShardedIndex.build: rank 0 trains
the codec on the documents drawn by fast-plaid's rule from all ranks, --nbits,
--num-centroids) and the time of search(top --k, --n-ivf-probe,
--n-full-scores) is measured as above ("local": this rank's Index.search
alone); the corpus's tokens are --clusters random unit directions plus noise
(normalised; float32, --dtype is not read); the queries are tokens of other
documents over the same directions plus noise.  --check: rank 0 builds one
lik.plaid.Index over the whole corpus on the same sample and compares: "equal" (ids and score bits), or ">=" (binding candidate cuts:
every position's score at least the single index's), else False.

    torchrun --nproc_per_node=N bench/distributed_retrieve.py --plaid --tokens 1e7

LIK_LIBRARY=path/to/liblik.so selects a build (else the installed package).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if os.environ.get("LIK_LIBRARY"):
    sys.path.insert(0, str(ROOT / "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

BLOCK = 1024  # documents per generator seed


def _dtype(name: str):
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def make_docs(j0: int, j1: int, Ld: int, d: int, dtype, device, seed: int):
    """Documents [j0, j1) of the corpus: unit-norm random tokens, the same for
    any sharding (one generator seed per block of BLOCK documents)."""
    parts = []
    for b in range(j0 // BLOCK, (j1 + BLOCK - 1) // BLOCK if j1 > j0 else j0 // BLOCK):
        g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + b)
        x = torch.randn(BLOCK, Ld, d, generator=g, device=device)
        x = torch.nn.functional.normalize(x, dim=-1).to(dtype)
        lo, hi = max(j0 - b * BLOCK, 0), min(j1 - b * BLOCK, BLOCK)
        parts.append(x[lo:hi])
    if not parts:
        return torch.empty(0, Ld, d, dtype=dtype, device=device)
    return torch.cat(parts)


def make_clustered(j0: int, j1: int, Ld: int, d: int, clusters: int, seed: int):
    """Documents [j0, j1) of a clustered corpus (float32, CPU): each token a
    random one of ``clusters`` unit directions (the same for every seed) plus
    noise of norm ~0.75, normalised; the same for any sharding (one generator
    seed per block)."""
    dirs = torch.nn.functional.normalize(torch.randn(clusters, d, generator=torch.Generator().manual_seed(0)), dim=-1)
    parts = []
    for b in range(j0 // BLOCK, (j1 + BLOCK - 1) // BLOCK if j1 > j0 else j0 // BLOCK):
        g = torch.Generator().manual_seed(seed * 1_000_003 + b)
        x = dirs[torch.randint(0, clusters, (BLOCK, Ld), generator=g)]
        x = torch.nn.functional.normalize(x + 0.75 / d**0.5 * torch.randn(BLOCK, Ld, d, generator=g), dim=-1)
        lo, hi = max(j0 - b * BLOCK, 0), min(j1 - b * BLOCK, BLOCK)
        parts.append(x[lo:hi])
    return torch.cat(parts) if parts else torch.empty(0, Ld, d)


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_reps(fn, reps: int, device) -> tuple[float, float]:
    """Median wall-clock seconds of fn between barriers (rank 0 reports it)
    and median CPU seconds of this process in fn (all its threads)."""
    fn()  # warm-up
    wall, cpu = [], []
    for _ in range(reps):
        _sync(device)
        dist.barrier()
        t, c = time.perf_counter(), time.process_time()
        fn()
        _sync(device)
        c = time.process_time() - c
        dist.barrier()
        wall.append(time.perf_counter() - t)
        cpu.append(c)
    return statistics.median(wall), statistics.median(cpu)


def run(args) -> None:
    import lik
    import lik.distributed as ld

    use_cuda = args.backend == "nccl" or (args.backend == "auto" and torch.cuda.is_available())
    backend = "nccl" if use_cuda else "gloo"
    dist.init_process_group(backend, timeout=_dt.timedelta(seconds=600))
    rank, world = dist.get_rank(), dist.get_world_size()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
        if args.threads:
            torch.set_num_threads(args.threads)
            lik.set_num_threads(args.threads)
    dtype = _dtype(args.dtype)
    Nd = int(float(args.tokens)) // args.Ld
    j0, j1 = rank * Nd // world, (rank + 1) * Nd // world
    build_s = None
    if args.plaid:  # the index runs on the CPU; the collectives on the backend's device
        D = make_clustered(j0, j1, args.Ld, args.d, args.clusters, seed=1)
        g = torch.Generator().manual_seed(2)
        src = make_clustered(0, args.Nq, args.Ld, args.d, args.clusters, seed=3)[:, : args.Lq]
        Q = torch.nn.functional.normalize(src + 0.5 / args.d**0.5 * torch.randn(src.shape, generator=g), dim=-1)
        dist.barrier()
        t = time.perf_counter()
        index = ld.ShardedIndex.build(D, nbits=args.nbits, num_centroids=args.num_centroids or None)
        dist.barrier()
        build_s = time.perf_counter() - t
        kw = dict(n_ivf_probe=args.n_ivf_probe, n_full_scores=args.n_full_scores)
    else:
        D = make_docs(j0, j1, args.Ld, args.d, dtype, device, seed=1)
        g = torch.Generator(device=device).manual_seed(2)
        Q = torch.nn.functional.normalize(torch.randn(args.Nq, args.Lq, args.d, generator=g, device=device), dim=-1).to(dtype)
    batches = [Q[i:i + args.batch] for i in range(0, args.Nq, args.batch)]

    def distributed():
        if args.plaid:
            return [index.search(q, args.k, **kw) for q in batches]
        return [ld.retrieve(q, D, args.k) for q in batches]

    def local():
        if args.plaid:
            return [index.local.search(q, args.k, **kw) for q in batches]
        return [lik.retrieve(q, D, args.k) for q in batches]

    med, cpu_total = time_reps(distributed, args.reps, device)
    loc, cpu_local = time_reps(local, args.reps, device)
    cpus = [None] * world
    dist.all_gather_object(cpus, (cpu_total, cpu_local))
    check = None
    if args.check:
        res = distributed()
        if rank == 0 and args.plaid:
            check = plaid_check(res, batches, Nd, args, kw)
        elif rank == 0:
            full = make_docs(0, Nd, args.Ld, args.d, dtype, device, seed=1)
            ref = [lik.retrieve(q, full, args.k) for q in batches]
            check = all(torch.equal(a[1], b[1]) and torch.equal(a[0].view(torch.int32), b[0].view(torch.int32))
                        for a, b in zip(res, ref))
    if rank == 0:
        row = dict(
            date=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            ranks=world, backend=backend,
            device=torch.cuda.get_device_name(device) if use_cuda else f"cpu, {args.threads or 'default'} thread(s)/rank",
            tokens=Nd * args.Ld, Nd=Nd, Ld=args.Ld, d=args.d, dtype="float32" if args.plaid else args.dtype, Nq=args.Nq, Lq=args.Lq,
            batch=args.batch, k=args.k, reps=args.reps, total_s=med, local_s=loc, build_s=build_s,
            plaid=(f"nbits {args.nbits}, K {index.num_centroids}, n_ivf_probe {args.n_ivf_probe}, "
                   f"n_full_scores {args.n_full_scores}" if args.plaid else None),
            qps=args.Nq / med, overhead_ms_per_batch=1e3 * (med - loc) / len(batches),
            cpu_s=max(c[0] for c in cpus), cpu_local_s=max(c[1] for c in cpus),
            check=check, lik=lik.__version__, torch=torch.__version__,
            command=(f"torchrun --nproc_per_node={world} " if "LOCAL_WORLD_SIZE" in os.environ else "python ")
            + " ".join(sys.argv),
        )
        row["load"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def plaid_check(res, batches, Nd: int, args, kw):
    """One lik.plaid.Index over the whole corpus, trained on the sample
    ShardedIndex.build draws: "equal", ">=" or False (see the module doc)."""
    from lik import plaid

    full = make_clustered(0, Nd, args.Ld, args.d, args.clusters, seed=1)
    S = min(Nd, 1 + int(16 * (120 * Nd) ** 0.5))
    picks = np.sort(np.random.default_rng(42).choice(Nd, S, replace=False))
    one = plaid.Index.train(full[torch.from_numpy(picks)].reshape(-1, args.d), nbits=args.nbits,
                            total_tokens=Nd * args.Ld, num_centroids=args.num_centroids or None)
    one.add(full)
    pairs = [(r, one.search(q, args.k, **kw)) for r, q in zip(res, batches)]
    if all(torch.equal(a[1], b[1]) and torch.equal(a[0].view(torch.int32), b[0].view(torch.int32)) for a, b in pairs):
        return "equal"
    return ">=" if all(bool((a[0] >= b[0]).all()) for a, b in pairs) else False


def table(path: str) -> None:
    """Markdown table of a JSON-lines file; speed-ups against the median of the
    1-rank runs of the same corpus, backend and threads per rank."""
    rows = [json.loads(line) for line in open(path) if line.strip()]
    print("| ranks | backend, device | corpus | queries | queries/s | speed-up | CPU s, slowest rank (local part) | CPU-time speed-up | check | load | date |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        def key(x):
            return (x["tokens"], x["d"], x["dtype"], x["backend"], x["device"], x["Nq"], x["k"], x["batch"], x.get("plaid"))

        base = [b for b in rows if b["ranks"] == 1 and key(b) == key(r)]
        bq = statistics.median(b["qps"] for b in base) if base else None
        bc = statistics.median(b["cpu_s"] for b in base) if base and all(b.get("cpu_s") for b in base) else None
        sp = f"{r['qps'] / bq:.2f}×" if bq else "—"
        csp = f"{bc / r['cpu_s']:.2f}×" if bc and r.get("cpu_s") else "—"
        cpu = f"{r['cpu_s']:.3f} ({r['cpu_local_s']:.3f})" if r.get("cpu_s") else "—"
        what = f"PLAID ({r['plaid']}), build {r['build_s']:.1f} s" if r.get("plaid") else r["dtype"]
        print(f"| {r['ranks']} | {r['backend']}, {r['device']} | {r['tokens']:.3g} tokens ({r['Nd']} × {r['Ld']}, d={r['d']}, {what}) "
              f"| {r['Nq']} × {r['Lq']}, batch {r['batch']}, k={r['k']} | {r['qps']:.1f} | {sp} | {cpu} "
              f"| {csp} | {r['check']} | {r.get('load') or 0:.1f} | {r['date']} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", default="1e8", help="corpus tokens (Nd = tokens // Ld), default 1e8")
    p.add_argument("--Ld", type=int, default=128, help="tokens per document (default 128)")
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--Nq", type=int, default=256, help="queries (replicated on every rank)")
    p.add_argument("--Lq", type=int, default=32)
    p.add_argument("--batch", type=int, default=32, help="queries per retrieve call")
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="CPU threads per rank (0: lik's default)")
    p.add_argument("--backend", default="auto", choices=["auto", "nccl", "gloo"])
    p.add_argument("--check", action="store_true", help="compare with lik.retrieve on the whole corpus (rank 0)")
    p.add_argument("--plaid", action="store_true", help="a sharded PLAID index instead of exact retrieval")
    p.add_argument("--nbits", type=int, default=2, help="--plaid: residual bits")
    p.add_argument("--num-centroids", type=int, default=0, help="--plaid: K (0: fast-plaid's rule)")
    p.add_argument("--n-ivf-probe", type=int, default=8)
    p.add_argument("--n-full-scores", type=int, default=4096)
    p.add_argument("--clusters", type=int, default=2000, help="--plaid: directions of the clustered corpus")
    p.add_argument("--json", help="append a JSON line per run to this file")
    p.add_argument("--table", help="print the markdown table of a JSON-lines file and exit")
    args = p.parse_args()
    if args.table:
        table(args.table)
        return
    if "RANK" not in os.environ:  # plain `python`: one rank
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    run(args)


if __name__ == "__main__":
    main()
