"""GPU suite of the `lik` command's --device (issue 33 item 2, issue 29 item
4): the command run with --device cuda and with --device cpu on the bundled
Cranfield data, the JSON reports compared.

The command is found as tests/cli finds it: $LIK_CLI, then `lik` on PATH,
then build*/programs/lik/lik; it must be a build with the CUDA backend
(`lik --version` says "CUDA: N device(s)"), else the suite skips; a command
that does not run fails it.  No torch:
the command is the whole system under test.

How results are compared.
* --precision int8 and --precision binary (their first stage): int8 and
  bits MaxSim are bitwise identical on the CPU and the GPU
  (lik_experimental.h), so the reports' ids and scores must be equal.
* exact (F16 inputs, fp32 sums on both devices, in another order), fp16,
  --rerank, --rescore's exact stage: per query, with
  tol(s) = RTOL |s| + ATOL_PER_TOKEN Lq (Lq: the query's tokens), a
  document both return has scores within tol; the lists agree up to
  near-ties: the documents both return are in the same order unless their
  CPU scores are within 2 tol, and a document only one side returns scores
  within 2 tol of the other side's last score.
* `lik search` (PLAID): the GPU's exact stage runs on fp16 tensor cores, so
  tol is tests/gpu/test_plaid_gpu.py's (2e-3 |s| + 2e-3 Lq), in the exact
  setting (every cell probed, every document scored) with no query allowed
  beyond near-ties, and at the default parameters with a few (a centroid
  score at a probe / n_full_scores boundary within rounding).

Marked ``gpu``.  Well under a minute on an H200.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "cranfield"
RTOL, ATOL_PER_TOKEN = 1e-5, 2e-5  # fp32 sums of the same products in another order
PLAID_RTOL, PLAID_ATOL_PER_TOKEN = 2e-3, 2e-3  # test_plaid_gpu.py's: fp16 tensor cores
NQ = 100  # queries of the exact-job runs


sys.path.insert(0, str(ROOT / "tests" / "cli"))
from test_cli import CLI  # noqa: E402  (the command as tests/cli finds it)


def _cuda_devices():
    """(why the suite skips, why it fails): a command that does not run (a
    missing shared library, say) fails every test instead of skipping."""
    if CLI is None:
        return "the lik command is not built (set LIK_CLI)", None
    p = subprocess.run([CLI, "--version"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return None, f"{CLI} --version failed ({p.returncode}): {p.stderr.strip()}"
    if not re.search(r"CUDA: [1-9][0-9]* devices?\)", p.stdout):
        return f"needs a lik built with CUDA on a machine with a CUDA device: {p.stdout.strip()}", None
    return None, None


_SKIP, _BROKEN = _cuda_devices()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]


@pytest.fixture(autouse=True)
def _command_runs():
    if _BROKEN:
        pytest.fail(_BROKEN)


def run(*args, check=True):
    env = {k: v for k, v in os.environ.items() if k != "LIK_DEVICE"}
    p = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=600, env=env)
    if check and p.returncode != 0:
        raise AssertionError(f"lik {args} failed ({p.returncode}):\n{p.stderr}")
    return p


def _with(opts, args):
    """args with opts inserted after the subcommand (search / index), if any."""
    sub = 1 if args and args[0] in ("search", "index") else 0
    return (*args[:sub], *opts, *args[sub:])


def run_json(*args):
    return json.loads(run(*_with(("--json",), args)).stdout)


def both(*args):
    """The JSON reports of the same run on cuda:0 and on the CPU."""
    g = run_json(*_with(("--device", "cuda"), args))
    c = run_json(*_with(("--device", "cpu"), args))
    assert g["device"] == "cuda:0" and g["device_name"] and c["device"] == "cpu", (g["device"], c["device"])
    return g, c


def query_lengths():
    """Query id -> its tokens, from queries.safetensors's cu_seqlens and ids (I64)."""
    raw = (DATA / "queries.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])

    def tensor(name):
        a, b = header[name]["data_offsets"]
        assert header[name]["dtype"] == "I64"
        return np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.int64)

    cu, ids = tensor("cu_seqlens"), tensor("ids")
    return {int(q): int(cu[i + 1] - cu[i]) for i, q in enumerate(ids)}


@pytest.fixture(scope="module")
def lq():
    if not (DATA / "docs.safetensors").is_file():
        pytest.skip("data/cranfield not present")
    return query_lengths()


def check_equal(what, gpu, cpu):
    """Bitwise: the same ids and scores for every query."""
    assert len(gpu["results"]) == len(cpu["results"]) > 0, what
    for g, c in zip(gpu["results"], cpu["results"]):
        assert g["query_id"] == c["query_id"], what
        assert g["doc_ids"] == c["doc_ids"] and g["scores"] == c["scores"], (
            f"{what}: query {g['query_id']}\n  cuda ids {g['doc_ids']}\n  cpu  ids {c['doc_ids']}\n"
            f"  cuda scores {g['scores']}\n  cpu  scores {c['scores']}")


def check_close(what, gpu, cpu, lq, rtol=RTOL, atol_per_token=ATOL_PER_TOKEN, budget=0):
    """The module docstring's rules; budget: queries allowed to differ beyond near-ties."""
    assert len(gpu["results"]) == len(cpu["results"]) > 0, what
    strict, loose = [], []
    for g, c in zip(gpu["results"], cpu["results"]):
        q = g["query_id"]
        assert q == c["query_id"], what
        atol = atol_per_token * max(lq[q], 1)

        def tol(s):
            return rtol * abs(s) + atol

        gi, gs, ci, cs = g["doc_ids"], g["scores"], c["doc_ids"], c["scores"]
        show = f"\n  cuda ids {gi}\n  cpu  ids {ci}\n  cuda scores {gs}\n  cpu  scores {cs}"
        if len(gi) != len(ci):
            strict.append(f"query {q}: {len(gi)} results on cuda, {len(ci)} on the CPU{show}")
            continue
        if not gi:
            continue
        gsc, csc = dict(zip(gi, gs)), dict(zip(ci, cs))
        both_ids = [d for d in gi if d in csc]
        for d in both_ids:
            if abs(gsc[d] - csc[d]) > tol(csc[d]):
                strict.append(f"query {q}: document {d}: cuda {gsc[d]!r}, CPU {csc[d]!r}, more than "
                              f"{tol(csc[d]):.3g} apart{show}")
        why = []
        seq = [csc[d] for d in both_ids]  # CPU scores in the GPU's order
        low = seq[0]
        for d, s in zip(both_ids[1:], seq[1:]):
            if s - low > 2 * tol(s):
                why.append(f"document {d} (CPU score {s!r}) is ranked below one scoring {low!r}")
            low = min(low, s)
        for d in gi:
            if d not in csc and gsc[d] - cs[-1] > 2 * tol(gsc[d]):
                why.append(f"document {d} only on cuda scores {gsc[d]!r}, the CPU's last {cs[-1]!r}")
        for d in ci:
            if d not in gsc and csc[d] - gs[-1] > 2 * tol(csc[d]):
                why.append(f"document {d} only on the CPU scores {csc[d]!r}, cuda's last {gs[-1]!r}")
        if why:
            loose.append(f"query {q}: " + "; ".join(why) + show)
    assert not strict, f"{what}:\n" + "\n".join(strict[:6])
    assert len(loose) <= budget, (f"{what}: {len(loose)} queries differ beyond near-ties ({budget} "
                                  "allowed):\n" + "\n".join(loose[:6]))


# ---- the exact job -----------------------------------------------------------------------------


def test_exact(lq):
    g, c = both("-n", NQ, "-k", 20)
    check_close("exact", g, c, lq)
    assert g["dtype"] == c["dtype"] == "F16" and g["num_queries"] == NQ
    assert abs(g["ndcg@10"] - c["ndcg@10"]) < 1e-3 and abs(g["recall@100"] - c["recall@100"]) < 1e-3
    # small blocks: many copies to the device, one result
    small = run_json("--device", "cuda", "-n", NQ, "-k", 20, "--block-tokens", 20000)
    check_close("exact, --block-tokens 20000", small, c, lq)


def test_fp16_and_auto(lq):
    g, c = both("-n", NQ, "-k", 10, "--precision", "fp16")
    check_close("--precision fp16", g, c, lq)
    auto = run_json("--device", "auto", "-n", 4, "-k", 10)
    assert auto["device"] == "cuda:0"
    text = run("--device", "cuda", "-n", 2, "-p", 1).stdout
    assert text.splitlines()[0].startswith("lik ") and " on cuda:0 (" in text.splitlines()[0]


def test_int8_is_bitwise():
    g, c = both("-n", NQ, "-k", 20, "--precision", "int8")
    assert g["dtype"] == c["dtype"] == "int8"
    check_equal("--precision int8", g, c)


def test_binary_and_rescore(lq):
    g, c = both("-n", NQ, "-k", 20, "--precision", "binary")
    check_equal("--precision binary", g, c)
    # the binary top 40 are the same; their exact rescoring agrees to fp32
    g, c = both("-n", NQ, "-k", 20, "--precision", "binary", "--rescore", 2)
    assert g["rescore"] == 2 and g["rescored_as"] == "F16"
    check_close("--precision binary --rescore 2", g, c, lq)


def test_rerank(tmp_path, lq):
    first = run_json("--device", "cpu", "-n", 30, "-k", 50)
    lines = [f"{r['query_id']} Q0 {d} {k + 1} 0.0 t" for r in first["results"]
             for k, d in enumerate(r["doc_ids"][::-1])]
    (tmp_path / "run.trec").write_text("\n".join(lines) + "\n")
    g, c = both("-n", 30, "-k", 10, "--rerank", tmp_path / "run.trec")
    assert g["rerank"] and g["pairs_scored"] == c["pairs_scored"] == 30 * 50
    check_close("--rerank", g, c, lq)
    g, c = both("-n", 30, "-k", 10, "--rerank", tmp_path / "run.trec", "--precision", "int8")
    check_equal("--rerank --precision int8", g, c)
    g, c = both("-n", 30, "-k", 10, "--rerank", tmp_path / "run.trec", "--precision", "binary",
                "--rescore", 2)
    check_close("--rerank --precision binary --rescore 2", g, c, lq)


def test_bad_ordinal():
    p = run("--device", "cuda:4096", "-n", 1, check=False)
    assert p.returncode == 1 and "lik: error: --device cuda:4096: no such device" in p.stderr


# ---- lik index + lik search --------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    """The Cranfield documents with K = 256 centroids (the CUDA search probes
    at most 512 cells: every cell fits); built on the CPU (`lik index`)."""
    if not (DATA / "docs.safetensors").is_file():
        pytest.skip("data/cranfield not present")
    out = tmp_path_factory.mktemp("cran") / "ix"
    rep = json.loads(run("index", "--json", "--centroids", 256, "--kmeans-iters", 2, out).stdout)
    assert rep["num_docs"] == 1400 and rep["num_centroids"] == 256
    return out


def test_search_exact_setting(small_index, lq):
    g, c = both("search", "-k", 10, "--n-ivf-probe", 256, "--n-full-scores", 4 * 1400, small_index)
    assert g["to_device_seconds"] >= 0 and g["device_bytes"] > 0 and "to_device_seconds" not in c
    assert g["num_queries"] == 225
    check_close("search, every cell probed, every document scored", g, c, lq, rtol=PLAID_RTOL,
                atol_per_token=PLAID_ATOL_PER_TOKEN)


def test_search_default_parameters(small_index, lq):
    g, c = both("search", "-k", 10, small_index)
    check_close("search, default parameters", g, c, lq, rtol=PLAID_RTOL,
                atol_per_token=PLAID_ATOL_PER_TOKEN, budget=len(c["results"]) // 20)
    assert abs(g["ndcg@10"] - c["ndcg@10"]) < 0.01
    auto = run_json("search", "--device", "auto", "-n", 3, small_index)
    assert auto["device"] == "cuda:0"
    # what the CUDA search does not do stays on the CPU under auto
    assert run_json("search", "--device", "auto", "-n", 3, "--n-ivf-probe", 600, small_index)["device"] == "cpu"
    text = run("search", "--device", "cuda", "-n", 2, small_index).stdout
    assert "PLAID search on cuda:0 (" in text and "copied to cuda:0 in" in text


def test_index_on_the_gpu_same_files(tmp_path):
    """`lik index --device cuda` (k-means' assignment and the coding on the
    GPU) writes the files `--device cpu` writes, byte for byte; --add too."""
    if not (DATA / "docs.safetensors").is_file():
        pytest.skip("data/cranfield not present")
    reps = {}
    for dev in ("cpu", "cuda"):
        reps[dev] = json.loads(run("index", "--json", "--device", dev, "--centroids", 512, tmp_path / dev).stdout)
    assert reps["cuda"]["device"] == "cuda:0" and reps["cpu"]["device"] == "cpu"
    rng = np.random.default_rng(5)
    X = rng.standard_normal((301, 64)).astype(np.float16)  # the bundled Cranfield index's d
    np.save(tmp_path / "add.npy", X)
    np.save(tmp_path / "cu.npy", np.array([0, 100, 101, 301], dtype=np.int64))
    for dev in ("cpu", "cuda"):
        run("index", "--add", "--device", dev, "--doc-cu-seqlens", tmp_path / "cu.npy", tmp_path / "add.npy",
            tmp_path / dev)
    names = sorted(p.name for p in (tmp_path / "cpu").iterdir() if p.is_file())
    assert names == sorted(p.name for p in (tmp_path / "cuda").iterdir() if p.is_file())
    for n in names:
        assert (tmp_path / "cpu" / n).read_bytes() == (tmp_path / "cuda" / n).read_bytes(), n
