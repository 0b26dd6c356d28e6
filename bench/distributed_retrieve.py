#!/usr/bin/env python3
"""Sharded exact retrieval: queries/s of lik.distributed.retrieve on N ranks.

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
    D = make_docs(j0, j1, args.Ld, args.d, dtype, device, seed=1)
    g = torch.Generator(device=device).manual_seed(2)
    Q = torch.nn.functional.normalize(torch.randn(args.Nq, args.Lq, args.d, generator=g, device=device), dim=-1).to(dtype)
    batches = [Q[i:i + args.batch] for i in range(0, args.Nq, args.batch)]

    def distributed():
        return [ld.retrieve(q, D, args.k) for q in batches]

    def local():
        return [lik.retrieve(q, D, args.k) for q in batches]

    med, cpu_total = time_reps(distributed, args.reps, device)
    loc, cpu_local = time_reps(local, args.reps, device)
    cpus = [None] * world
    dist.all_gather_object(cpus, (cpu_total, cpu_local))
    check = None
    if args.check:
        res = distributed()
        if rank == 0:
            full = make_docs(0, Nd, args.Ld, args.d, dtype, device, seed=1)
            ref = [lik.retrieve(q, full, args.k) for q in batches]
            check = all(torch.equal(a[1], b[1]) and torch.equal(a[0].view(torch.int32), b[0].view(torch.int32))
                        for a, b in zip(res, ref))
    if rank == 0:
        row = dict(
            date=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            ranks=world, backend=backend,
            device=torch.cuda.get_device_name(device) if use_cuda else f"cpu, {args.threads or 'default'} thread(s)/rank",
            tokens=Nd * args.Ld, Nd=Nd, Ld=args.Ld, d=args.d, dtype=args.dtype, Nq=args.Nq, Lq=args.Lq,
            batch=args.batch, k=args.k, reps=args.reps, total_s=med, local_s=loc,
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


def table(path: str) -> None:
    """Markdown table of a JSON-lines file; speed-ups against the median of the
    1-rank runs of the same corpus, backend and threads per rank."""
    rows = [json.loads(line) for line in open(path) if line.strip()]
    print("| ranks | backend, device | corpus | queries | queries/s | speed-up | CPU s, slowest rank (local part) | CPU-time speed-up | check | load | date |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        key = (r["tokens"], r["d"], r["dtype"], r["backend"], r["device"], r["Nq"], r["k"], r["batch"])
        base = [b for b in rows if b["ranks"] == 1 and
                (b["tokens"], b["d"], b["dtype"], b["backend"], b["device"], b["Nq"], b["k"], b["batch"]) == key]
        bq = statistics.median(b["qps"] for b in base) if base else None
        bc = statistics.median(b["cpu_s"] for b in base) if base and all(b.get("cpu_s") for b in base) else None
        sp = f"{r['qps'] / bq:.2f}×" if bq else "—"
        csp = f"{bc / r['cpu_s']:.2f}×" if bc and r.get("cpu_s") else "—"
        cpu = f"{r['cpu_s']:.3f} ({r['cpu_local_s']:.3f})" if r.get("cpu_s") else "—"
        print(f"| {r['ranks']} | {r['backend']}, {r['device']} | {r['tokens']:.3g} tokens ({r['Nd']} × {r['Ld']}, d={r['d']}, {r['dtype']}) "
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
