#!/usr/bin/env python3
"""End-to-end training tables on a GPU: PyLate and colpali-engine, vanilla vs lik.

The seed's end-to-end tables (shared/seeds, benchmarks page: "End-to-end PyLate
training (GTE-ModernColBERT-v1)", "End-to-end ColQwen2 / ColPali training",
"Explicit-negative MaxSim isolation"), rebuilt for lik: each recipe runs once
with the package's own code and once after ``lik.integrations.patch_pylate()``
/ ``patch_colpali_engine()`` (no other change), over a sweep of batch sizes,
until a variant runs out of memory.

Recipes (--recipes, comma-separated):

* ``pylate-contrastive``: a full PyLate training step (``losses.Contrastive``,
  one hard negative: N = 2 document slots; encoder forward + loss + backward
  + fused AdamW step) of a **randomly initialised** ColBERT of
  GTE-ModernColBERT-v1's sizes (ModernBERT-base: 22 layers, hidden 768,
  149 M parameters; PyLate's 768 -> 128 projection), query_length 32
  (expansion), document_length 300 (documents of 150..300 random word
  pieces, padded as PyLate's collator pads), bf16 autocast, gradient
  checkpointing (the seed's "--grad-checkpoint" regime, where the B^2 score
  term binds; --no-grad-ckpt for the other).  No weights can be downloaded
  on the device: the model is random, which changes no shape, no FLOP and no
  byte, so the timings and memory are the trained model's.
* ``pylate-cached``: the same with ``losses.CachedContrastive``
  (mini_batch_size 32).
* ``colpali-inbatch`` / ``colpali-pairwise`` / ``colpali-negative``:
  colpali-engine's loss heads ``ColbertLoss``, ``ColbertPairwiseCELoss``,
  ``ColbertNegativeCELoss`` (2 explicit negatives, in_batch_term_weight 0.5)
  on ColQwen2-shaped embeddings that require grad (no encoder: the 2 B
  tower cannot be built at random here in reasonable time; the seed's own
  isolation table does the same): queries of 10..32 tokens, pages of
  700..1030 visual tokens, d = 128, zero-padded (colpali-engine's models
  multiply by the attention mask), unit norm, bf16; forward + backward.

Per (recipe, variant, B), one cell:
  * step time: median of --steps timed steps after one warm-up, synchronised;
  * peak: ``torch.cuda.max_memory_allocated`` over the warm-up and the timed
    steps (reset before), GiB;
  * for the PyLate recipes also the MaxSim op alone (``ColBERTScores`` on
    fp32 leaves of the step's shapes -- fp32 as the embeddings reach the
    loss under autocast --, cross-entropy, backward): its peak above its
    inputs, MiB (flat-in-B check: linear for lik, quadratic for vanilla);
  * OOM (``torch.OutOfMemoryError``) ends the variant's sweep.
Each (recipe, variant) runs in a fresh process (one model build, the batch
sizes ascending); cells are printed as they finish, so a process that hits
the time limit still leaves its rows.

On the device (torch 2.11 + transformers + sentence-transformers there, PyLate
and colpali-engine not): carry the wheels listed by --wheels-help in .whl/,
then

    python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl
    LIK_LIBRARY=$PWD/.gpubin/liblik.so PYTHONPATH=/tmp/site:$PWD/python \\
        python3 bench/e2e_train_gpu.py --out bench/e2e_h200.json

(a ``python3 -m venv --system-site-packages`` there does not see the image's
torch, which lives in a venv of its own).  --check prints what is missing
first.  --tiny runs every code path on the CPU with tiny sizes (the test of
this script).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ["pylate-contrastive", "pylate-cached", "colpali-inbatch", "colpali-pairwise", "colpali-negative"]
BATCHES = [16, 32, 64, 128, 256, 512, 1024, 2048]

WHEELS = """\
Wheels for .whl/ (the device: Python 3.12, manylinux x86_64), fetched on a
machine with PyPI by

  pip download --no-deps --only-binary=:all: --python-version 3.12 \\
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \\
      --platform manylinux_2_17_x86_64 -d .whl \\
      pylate==1.6.0 colpali-engine==0.3.18 sentence-transformers==5.3.0 \\
      transformers==5.3.0 tokenizers==0.22.2 huggingface-hub==1.33.0 accelerate==1.15.0

  pylate==1.6.0                 0.2 MB
  colpali-engine==0.3.18        0.1 MB
  sentence-transformers==5.3.0  0.5 MB  (pylate pins it)
  transformers==5.3.0          10.7 MB  (pylate: <= 5.3.0; colpali-engine: >= 5.3.0)
  tokenizers==0.22.2            3.3 MB  (transformers 5.3.0's range)
  huggingface-hub==1.33.0       0.8 MB  (transformers 5.3.0: >= 1.3)
  accelerate==1.15.0            0.4 MB  (PyLate imports it through sentence-transformers' trainer)
  total                        ~16 MB   (the carry limit is 64 MiB)
Not needed for this script: PyLate's index / k-means packages (fast-plaid,
fastkmeans, usearch, numkong, ujson) and colpali-engine's peft (both packages
are installed --no-deps).  PyLate imports `datasets` (for its KD data helpers,
unused here): if the device lacks it this script puts a stand-in module in its
place (datasets + pyarrow would be ~56 MB).  --check lists what is missing.
"""


# ---- environment ------------------------------------------------------------------------------


def stand_in_datasets():
    """PyLate imports ``datasets`` at import time (KD data processing, unused
    here).  Where it is not installed, a module whose every attribute is a
    dummy class stands in for it."""
    try:
        import datasets  # noqa: F401

        return False
    except ImportError:
        pass

    class _StandIn(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (), {})

    m = _StandIn("datasets")
    m.__version__ = "0 (stand-in)"
    m.__path__ = []
    m.__spec__ = importlib.machinery.ModuleSpec("datasets", None, is_package=True)
    sys.modules["datasets"] = m
    return True


def check():
    rows = []
    for name in ("torch", "transformers", "sentence_transformers", "tokenizers", "huggingface_hub",
                 "accelerate", "datasets", "pylate", "colpali_engine", "lik"):
        try:
            mod = __import__(name)
            rows.append(f"{name:24s} {getattr(mod, '__version__', '?')}")
        except Exception as e:  # noqa: BLE001 - report anything
            rows.append(f"{name:24s} MISSING ({type(e).__name__}: {e})")
    print("\n".join(rows))
    import torch

    print("cuda:", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")


# ---- sizes ----------------------------------------------------------------------------------------


def sizes(tiny: bool) -> dict:
    if tiny:
        return dict(hidden=32, layers=2, heads=2, inter=64, vocab=600, dim=16, lq=8, ld=24, ld_min=12,
                    cp_lq=6, cp_lq_min=3, cp_ld=20, cp_ld_min=12, mini=2, n_neg=2)
    return dict(hidden=768, layers=22, heads=12, inter=1152, vocab=50368, dim=128, lq=32, ld=300, ld_min=150,
                cp_lq=32, cp_lq_min=10, cp_ld=1030, cp_ld_min=700, mini=32, n_neg=2)


# ---- PyLate: a random ModernBERT-base ColBERT ---------------------------------------------------


def build_pylate_model(sz, device, grad_ckpt):
    import torch
    from pylate import models
    from transformers import BertTokenizerFast, ModernBertConfig, ModernBertModel

    tmp = Path(tempfile.mkdtemp(prefix="lik-e2e-"))
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "?", "!"]
    words = [f"w{i}" for i in range(sz["vocab"] - len(special))]
    (tmp / "vocab.txt").write_text("\n".join(special + words) + "\n")
    BertTokenizerFast(vocab_file=str(tmp / "vocab.txt"), do_lower_case=True).save_pretrained(tmp)
    cfg = ModernBertConfig(vocab_size=sz["vocab"], hidden_size=sz["hidden"], num_hidden_layers=sz["layers"],
                           num_attention_heads=sz["heads"], intermediate_size=sz["inter"],
                           max_position_embeddings=1024, pad_token_id=0, cls_token_id=2, sep_token_id=3,
                           bos_token_id=2, eos_token_id=3)
    torch.manual_seed(0)
    ModernBertModel(cfg).save_pretrained(tmp)  # random weights
    model = models.ColBERT(model_name_or_path=str(tmp), device=device, embedding_size=sz["dim"],
                           query_length=sz["lq"], document_length=sz["ld"])
    if grad_ckpt:
        model[0].auto_model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model, words


def pylate_features(model, words, B, sz, seed):
    import random

    rng = random.Random(seed)

    def texts(n, lo, hi):
        return [" ".join(rng.choice(words) for _ in range(rng.randint(lo, hi))) for _ in range(n)]

    q = model.tokenize(texts(B, 4, sz["lq"] - 2), is_query=True, pad=True)
    pos = model.tokenize(texts(B, sz["ld_min"], sz["ld"]), is_query=False, pad=True)
    neg = model.tokenize(texts(B, sz["ld_min"], sz["ld"]), is_query=False, pad=True)
    dev = model.device
    return [{k: v.to(dev) for k, v in f.items()} for f in (q, pos, neg)]


def op_peak_mib(B, sz, device):
    """ColBERTScores (the patched or the original) fwd + bwd on fp32 leaves of
    the step's shapes: its peak above its inputs, MiB."""
    import torch
    import torch.nn.functional as F  # noqa: N812
    from pylate.scores import ColBERTScores

    g = torch.Generator(device=device).manual_seed(B)
    Q = F.normalize(torch.randn(B, sz["lq"], sz["dim"], device=device, generator=g), dim=-1).requires_grad_()
    D = F.normalize(torch.randn(B, 2, sz["ld"], sz["dim"], device=device, generator=g), dim=-1).requires_grad_()
    lens = torch.randint(sz["ld_min"], sz["ld"] + 1, (B, 2), device=device, generator=g)
    dm = torch.arange(sz["ld"], device=device) < lens[..., None]
    labels = torch.arange(B, device=device) * 2
    if device != "cuda":
        F.cross_entropy(ColBERTScores()(Q, D, documents_mask=dm), labels).backward()
        return None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    F.cross_entropy(ColBERTScores()(Q, D, documents_mask=dm), labels).backward()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def run_pylate(recipe, args, sz, device, emit):
    import torch
    from pylate import losses

    model, words = build_pylate_model(sz, device, not args.no_grad_ckpt)
    if recipe == "pylate-contrastive":
        loss_fn = losses.Contrastive(model=model)
    else:
        loss_fn = losses.CachedContrastive(model=model, mini_batch_size=sz["mini"])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=(device == "cuda"))

    def step(feats):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=not args.tiny):
            loss = loss_fn(feats)
        loss.backward()
        opt.step()
        return float(loss.detach())

    for B in args.batches:
        cell = {"B": B}
        try:
            cell["op_peak_mib"] = op_peak_mib(B, sz, device)
            feats = pylate_features(model, words, B, sz, seed=B)
            cell.update(time_steps(lambda: step(feats), args, device))
        except torch.OutOfMemoryError as e:
            cell["oom"] = str(e).split("\n")[0][:200]
        emit(cell)
        free(device)
        if "oom" in cell:
            break


# ---- colpali-engine loss heads ----------------------------------------------------------------


def colpali_inputs(B, sz, device, dtype, n_neg):
    import torch
    import torch.nn.functional as F  # noqa: N812

    g = torch.Generator(device=device).manual_seed(B)

    def tokens(shape, lo, hi):
        x = F.normalize(torch.randn(*shape, device=device, generator=g), dim=-1)
        lens = torch.randint(lo, hi + 1, shape[:-2], device=device, generator=g)
        mask = torch.arange(shape[-2], device=device) < lens[..., None]
        return (x * mask[..., None]).to(dtype).requires_grad_()

    q = tokens((B, sz["cp_lq"], sz["dim"]), sz["cp_lq_min"], sz["cp_lq"])
    d = tokens((B, sz["cp_ld"], sz["dim"]), sz["cp_ld_min"], sz["cp_ld"])
    neg = tokens((B, n_neg, sz["cp_ld"], sz["dim"]), sz["cp_ld_min"], sz["cp_ld"]) if n_neg else None
    return q, d, neg


def run_colpali(recipe, args, sz, device, emit):
    import torch
    from colpali_engine.loss import ColbertLoss, ColbertNegativeCELoss, ColbertPairwiseCELoss

    dtype = torch.float32 if args.tiny else getattr(torch, args.colpali_dtype)
    if recipe == "colpali-inbatch":
        loss_fn, n_neg = ColbertLoss(max_batch_size=max(args.batches)), 0
    elif recipe == "colpali-pairwise":
        loss_fn, n_neg = ColbertPairwiseCELoss(max_batch_size=max(args.batches)), 0
    else:
        loss_fn, n_neg = ColbertNegativeCELoss(max_batch_size=max(args.batches)), sz["n_neg"]
    loss_fn = loss_fn.to(device)
    for B in args.batches:
        cell = {"B": B}
        try:
            q, d, neg = colpali_inputs(B, sz, device, dtype, n_neg)

            def step():
                for x in (q, d, neg):
                    if x is not None:
                        x.grad = None
                loss = loss_fn(q, d, neg) if neg is not None else loss_fn(q, d)
                loss.backward()
                return float(loss.detach())

            cell.update(time_steps(step, args, device))
        except torch.OutOfMemoryError as e:
            cell["oom"] = str(e).split("\n")[0][:200]
        emit(cell)
        q = d = neg = None
        free(device)
        if "oom" in cell:
            break


# ---- timing ------------------------------------------------------------------------------------------


def free(device):
    import gc

    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def time_steps(step, args, device):
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sync()
    losses, times = [], []
    for _ in range(args.steps + 1):
        t = time.perf_counter()
        losses.append(step())
        sync()
        times.append(time.perf_counter() - t)
    out = {"step_s": statistics.median(times[1:]), "first_step_s": times[0], "loss": losses[-1]}
    if device == "cuda":
        out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


# ---- driver ----------------------------------------------------------------------------------------------


def worker(args):
    import torch

    device = "cpu" if args.tiny else "cuda"
    standin = stand_in_datasets()
    sz = sizes(args.tiny)
    recipe, variant = args.worker.split(":")
    if variant == "lik":
        import lik.integrations as li

        li.patch_pylate() if recipe.startswith("pylate") else li.patch_colpali_engine()

    def emit(cell):
        cell.update(recipe=recipe, variant=variant)
        print("CELL " + json.dumps(cell), flush=True)
        print(f"  {recipe} {variant} B={cell['B']}: " + ("OOM" if "oom" in cell else
              f"{cell['step_s'] * 1e3:.1f} ms" + (f", peak {cell['peak_gib']:.2f} GiB" if "peak_gib" in cell else "")),
              file=sys.stderr, flush=True)

    print(f"[{recipe} {variant}] torch {torch.__version__}, datasets stand-in: {standin}", file=sys.stderr)
    (run_pylate if recipe.startswith("pylate") else run_colpali)(recipe, args, sz, device, emit)


def table(cells, recipe):
    rows = {}
    for c in cells:
        if c["recipe"] == recipe:
            rows.setdefault(c["B"], {})[c["variant"]] = c

    def fmt(c):
        if c is None:
            return "—", "—"
        if "oom" in c:
            return "OOM", "OOM"
        peak = f"{c['peak_gib']:.2f} GiB" if "peak_gib" in c else "—"
        return f"{c['step_s'] * 1e3:.1f} ms", peak

    pyl = recipe.startswith("pylate")
    head = "| B | vanilla step | vanilla peak | lik step | lik peak | speedup |"
    if pyl:
        head += " op peak vanilla | op peak lik |"
    lines = [f"**{recipe}**", "", head, "|" + "---|" * (head.count("|") - 1)]
    for B in sorted(rows):
        v, lk = rows[B].get("vanilla"), rows[B].get("lik")
        vs, vp = fmt(v)
        ls, lp = fmt(lk)
        sp = (f"{v['step_s'] / lk['step_s']:.2f}x" if v and lk and "step_s" in v and "step_s" in lk else "—")
        line = f"| {B} | {vs} | {vp} | {ls} | {lp} | {sp} |"
        if pyl:
            def op(c):
                return f"{c['op_peak_mib']:.0f} MiB" if c and c.get("op_peak_mib") is not None else "—"
            line += f" {op(v)} | {op(lk)} |"
        lines.append(line)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipes", default=",".join(RECIPES))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--variants", default="vanilla,lik")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-grad-ckpt", action="store_true")
    ap.add_argument("--colpali-dtype", default="bfloat16")
    ap.add_argument("--timeout", type=int, default=540, help="seconds per (recipe, variant) process")
    ap.add_argument("--tiny", action="store_true", help="CPU, tiny sizes: tests every code path")
    ap.add_argument("--out", help="JSON file for the cells")
    ap.add_argument("--check", action="store_true", help="list the packages this needs and what is missing")
    ap.add_argument("--wheels-help", action="store_true", help="the wheels to carry to the device")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.batches = [int(b) for b in args.batches.split(",")]
    if args.wheels_help:
        print(WHEELS)
        return
    if args.check:
        stand_in_datasets()
        check()
        return
    if args.worker:
        worker(args)
        return

    cells = []
    for recipe in args.recipes.split(","):
        for variant in args.variants.split(","):
            cmd = [sys.executable, __file__, "--worker", f"{recipe}:{variant}", "--batches",
                   ",".join(map(str, args.batches)), "--steps", str(args.steps), "--colpali-dtype",
                   args.colpali_dtype] + (["--tiny"] if args.tiny else []) + \
                  (["--no-grad-ckpt"] if args.no_grad_ckpt else [])
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, timeout=args.timeout)
                out, status = r.stdout, f"exit {r.returncode}"
            except subprocess.TimeoutExpired as e:
                out, status = e.stdout or b"", "timeout"
            got = [json.loads(line[5:]) for line in out.decode().splitlines() if line.startswith("CELL ")]
            if status != "exit 0":
                print(f"[{recipe} {variant}] {status} after {len(got)} cells", file=sys.stderr)
            cells += got
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "tiny": args.tiny,
            "grad_ckpt": not args.no_grad_ckpt, "steps": args.steps, "colpali_dtype": args.colpali_dtype}
    try:
        import torch

        if torch.cuda.is_available():
            meta["device"] = torch.cuda.get_device_name(0)
        meta["torch"] = torch.__version__
    except ImportError:
        pass
    if args.out:
        Path(args.out).write_text(json.dumps({"meta": meta, "cells": cells}, indent=1) + "\n")
    print(json.dumps(meta))
    for recipe in args.recipes.split(","):
        print()
        print(table(cells, recipe))


if __name__ == "__main__":
    main()
