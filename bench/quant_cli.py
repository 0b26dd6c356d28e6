"""The command's low-bit options on Cranfield (issue 20): `lik --precision
int8|binary [--rescore C]` against the exact run — top-10 overlap with exact,
identical lists, documents scored per query, queries/s (median of --reps runs,
configurations interleaved), and nDCG@10 / recall@100 with the bundled qrels.

    python bench/quant_cli.py [--lik build/dev/programs/lik/lik] [--reps 3] [--device cpu]

--device is the command's (default here: cpu, the device of the published
figures; the command's own default, auto, takes a GPU where there is one).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "cranfield"
TOP10 = [[], ["--precision", "int8"], ["--precision", "binary"], ["--precision", "binary", "--rescore", "5"],
         ["--precision", "binary", "--rescore", "10"], ["--precision", "binary", "--rescore", "20"],
         ["--precision", "int8", "--rescore", "2"]]
QRELS = [[], ["--precision", "int8"], ["--precision", "binary"], ["--precision", "binary", "--rescore", "2"],
         ["--precision", "binary", "--rescore", "10"], ["--precision", "int8", "--rescore", "2"]]


def runs(cli, configs, extra, reps):
    out = {i: [] for i in range(len(configs))}
    for _ in range(reps):
        for i, c in enumerate(configs):
            p = subprocess.run([cli, "--json", *c, *extra], capture_output=True, text=True, check=True)
            out[i].append(json.loads(p.stdout))
    return out


def name(c):
    return f"`{' '.join(c)}`" if c else "(exact, as stored)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lik", default=str(ROOT / "build/dev/programs/lik/lik"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cpu", help="the command's --device (cpu, cuda, auto)")
    a = ap.parse_args()
    print(f"lik: {a.lik} --device {a.device}; load average {os.getloadavg()}\n")
    files = [str(DATA / "queries.safetensors"), str(DATA / "docs.safetensors"), "-k", "10"]
    res = runs(a.lik, TOP10, files + ["--device", a.device], a.reps)
    exact = res[0][0]["results"]
    print("| command options | top-10 overlap with exact | identical top-10 lists | pairs / query | queries/s |")
    print("|---|---|---|---|---|")
    for i, c in enumerate(TOP10):
        o = res[i][0]
        ov = sum(len(set(x["doc_ids"]) & set(y["doc_ids"])) for x, y in zip(o["results"], exact)) / (10 * len(exact))
        same = sum(x["doc_ids"] == y["doc_ids"] for x, y in zip(o["results"], exact))
        qps = statistics.median(r["queries_per_s"] for r in res[i])
        print(f"| {name(c)} | {ov:.4f} | {same} / {len(exact)} | {o['pairs_scored'] / len(exact):.0f} | {qps:.1f} |")
    res = runs(a.lik, QRELS, ["--device", a.device], a.reps)
    print("\n| command options (bundled data, top 100) | nDCG@10 | recall@100 | queries/s |")
    print("|---|---|---|---|")
    for i, c in enumerate(QRELS):
        o = res[i][0]
        qps = statistics.median(r["queries_per_s"] for r in res[i])
        print(f"| {name(c)} | {o['ndcg@10']:.4f} | {o['recall@100']:.4f} | {qps:.1f} |")
    print(f"\nload average {os.getloadavg()}")


if __name__ == "__main__":
    main()
