"""The private argmax forward (the training path's hook), every CPU ISA path
(LIK_CPU_ISA in a subprocess), long queries, package metadata."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lik
from lik import _api
from _reference import assert_scores, f64, maxsim_ref, maxsim_ref_einsum

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def rand(rng, shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def check_argmax(am, Q, D, qm, dm, normalize=False):
    """am [Nq, Nd, Lq] (cross) against float64 similarities."""
    Qf, Df = f64(Q), f64(D)
    if normalize:
        from _reference import l2n

        Qf, Df = l2n(Qf), l2n(Df)
    Nq, Lq, _ = Qf.shape
    Nd, Ld, _ = Df.shape
    qm = np.ones((Nq, Lq), bool) if qm is None else np.asarray(qm) != 0
    dm = np.ones((Nd, Ld), bool) if dm is None else np.asarray(dm) != 0
    am = np.asarray(am)
    assert am.shape == (Nq, Nd, Lq) and am.dtype == np.int32
    for i in range(Nq):
        for j in range(Nd):
            valid = np.nonzero(dm[j])[0]
            for s in range(Lq):
                a = am[i, j, s]
                if not qm[i, s] or valid.size == 0:
                    assert a == -1, (i, j, s, a)
                    continue
                assert dm[j, a], (i, j, s, a)
                sims = Df[j, valid] @ Qf[i, s]
                scale = (np.abs(Df[j, valid]) @ np.abs(Qf[i, s])).max()
                best = sims.max()
                got = Df[j, a] @ Qf[i, s]
                assert got >= best - 1e-5 * scale, (i, j, s, a)
                order = np.sort(sims)[::-1]
                if order.size == 1 or order[0] - order[1] > 1e-4 * scale:
                    assert a == valid[np.argmax(sims)], (i, j, s, a)


@pytest.mark.parametrize("d", [1, 17, 128])
@pytest.mark.parametrize("normalize", [False, True])
def test_argmax_cross(rng, d, normalize):
    Q = rand(rng, (3, 7, d))
    D = rand(rng, (4, 33, d))
    qm = rng.random((3, 7)) < 0.7
    dm = rng.random((4, 33)) < 0.6
    dm[2] = False
    scores, am = _api._forward(Q, D, qm, dm, normalize=normalize, with_argmax=True)
    np.testing.assert_array_equal(scores, lik.maxsim(Q, D, qm, dm, normalize=normalize))
    check_argmax(am, Q, D, qm, dm, normalize)
    assert np.all(am[:, 2] == -1)


def test_argmax_ties_lowest_index(rng):
    tok = rand(rng, (1, 17))
    D = rand(rng, (1, 9, 17))
    D[0, [2, 5, 7]] = tok * 100.0  # three identical, winning tokens
    Q = np.repeat(tok[None], 2, axis=1)  # [1, 2, 17]
    _, am = _api._forward(Q, D, with_argmax=True)
    np.testing.assert_array_equal(am, [[[2, 2]]])
    dm = np.ones((1, 9), bool)
    dm[0, 2] = False
    _, am = _api._forward(Q, D, None, dm, with_argmax=True)
    np.testing.assert_array_equal(am, [[[5, 5]]])


def test_argmax_kd_pairs_and_2d(rng):
    Q = rand(rng, (2, 5, 17))
    D = rand(rng, (2, 3, 33, 17))
    s, am = _api._forward(Q, D, with_argmax=True)
    assert am.shape == (2, 3, 5)
    for i in range(2):
        check_argmax(am[i][None], Q[i][None], D[i], None, None)
    P = rand(rng, (2, 33, 17))
    s, am = _api._forward(Q, P, pairs=True, with_argmax=True)
    assert am.shape == (2, 5)
    for b in range(2):
        check_argmax(am[b][None, None], Q[b][None], P[b][None], None, None)
    s, am = _api._forward(Q[0], P[0], with_argmax=True)
    assert s.shape == () and am.shape == (5,)
    check_argmax(am[None, None], Q[0][None], P[0][None], None, None)


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_argmax_torch(rng):
    Q = torch.from_numpy(rand(rng, (2, 5, 17))).to(torch.bfloat16)
    D = torch.from_numpy(rand(rng, (3, 33, 17))).to(torch.bfloat16)
    s, am = _api._forward(Q, D, with_argmax=True)
    assert am.dtype == torch.int32 and am.shape == (2, 3, 5)
    check_argmax(am.numpy(), Q, D, None, None)


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_argmax_torch_float64(rng):
    """float64 torch inputs: the argmax forward returns float64 scores (the
    fp64 sums, not fp32 ones), as lik.maxsim does."""
    Q = rng.standard_normal((2, 5, 17)) * 1e3
    D = rng.standard_normal((3, 33, 17)) * 1e3
    dm = rng.random((3, 33)) < 0.7
    s, am = _api._forward(torch.from_numpy(Q), torch.from_numpy(D), None, torch.from_numpy(dm), with_argmax=True)
    assert s.dtype == torch.float64 and am.dtype == torch.int32
    sims = np.einsum("isd,jtd->ijst", Q, D)
    ref = np.where(dm[None, :, None, :], sims, -np.inf).max(-1).sum(-1)
    np.testing.assert_allclose(s.numpy(), ref, rtol=1e-12)
    assert not np.array_equal(s.numpy(), ref.astype(np.float32).astype(np.float64))
    check_argmax(am.numpy(), Q, D, None, dm)


@pytest.mark.parametrize("Lq", [513, 700])
def test_long_queries(rng, Lq):
    # beyond the seed's long-query chunking threshold (Lq > 512)
    Q = rand(rng, (2, Lq, 17))
    D = rand(rng, (3, 33, 17))
    qm = rng.random((2, Lq)) < 0.9
    out = lik.maxsim(Q, D, qm)
    ref, sc = maxsim_ref_einsum(Q, D, qm)
    assert_scores(out, ref, sc)


_ISA_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import lik
    rng = np.random.default_rng(int(sys.argv[1]))
    out = {"isa": lik.cpu_isa(), "cases": []}
    for dtype in ("float32", "float16", "float64"):
        for d, Lq, Ld in ((1, 1, 1), (3, 7, 33), (17, 33, 7), (48, 5, 301), (128, 9, 65), (1000, 3, 17)):
            Q = rng.standard_normal((3, Lq, d)).astype(dtype)
            D = rng.standard_normal((5, Ld, d)).astype(dtype)
            qm = rng.random((3, Lq)) < 0.8
            dm = rng.random((5, Ld)) < 0.7
            for normalize in (False, True):
                s = lik.maxsim(Q, D, qm, dm, normalize=normalize)
                p = lik.maxsim_pairs(Q[:3], D[:3], qm, dm[:3], normalize=normalize)
                r = lik.retrieve(Q, D, 3, qm, dm, normalize=normalize)
                out["cases"].append({
                    "dtype": dtype, "normalize": normalize,
                    "Q": Q.astype(np.float64).tolist(), "D": D.astype(np.float64).tolist(),
                    "qm": qm.tolist(), "dm": dm.tolist(),
                    "s": s.tolist(), "p": p.tolist(),
                    "rs": r[0].tolist(), "ri": r[1].tolist()})
    json.dump(out, sys.stdout)
    """
)


@pytest.mark.parametrize("isa", ["portable", "avx2", "avx512"])
def test_every_cpu_isa(rng, isa, tmp_path):
    seed = int(rng.integers(2**31))
    script = tmp_path / "isa.py"
    script.write_text(_ISA_SCRIPT)
    env = dict(os.environ, LIK_CPU_ISA=isa)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    res = subprocess.run([sys.executable, str(script), str(seed)], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    if out["isa"] != isa:
        pytest.skip(f"this CPU cannot run {isa} (lik chose {out['isa']})")
    for c in out["cases"]:
        Q, D = np.array(c["Q"]), np.array(c["D"])
        qm, dm = np.array(c["qm"], bool), np.array(c["dm"], bool)
        dtype = c["dtype"]
        what = f"{isa} {dtype} d={Q.shape[-1]} normalize={c['normalize']}"
        ref, sc = maxsim_ref_einsum(Q, D, qm, dm, normalize=c["normalize"])
        tol_dtype = "float32" if dtype == "float64" else dtype
        assert_scores(np.array(c["s"]), ref, sc, dtype=tol_dtype, what=what)
        assert_scores(np.array(c["p"]), np.diag(ref[:, :3]), np.diag(sc[:, :3]), dtype=tol_dtype, what=what)
        ri = np.array(c["ri"])
        for q in range(ref.shape[0]):
            assert_scores(np.array(c["rs"])[q], ref[q, ri[q]], sc[q, ri[q]], dtype=tol_dtype, what=what)


_NO_TORCH_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.modules["torch"] = None  # as if torch were not installed (pip install . has no torch)
    import numpy as np
    import lik

    rng = np.random.default_rng(int(sys.argv[1]))
    Q, D = rng.standard_normal((2, 3, 8)).astype(np.float32), rng.standard_normal((4, 5, 8)).astype(np.float32)
    s = lik.maxsim(Q, D, normalize=True)
    r = lik.retrieve(Q, D, 2)
    assert s.shape == (2, 4) and r[1].shape == (2, 2), (s.shape, r[1].shape)
    for name in ("maxsim_from_hidden", "maxsim_varlen", "maxsim_padded"):
        try:
            getattr(lik, name)(Q, D, D, None)
        except ImportError as exc:
            assert "needs torch" in str(exc), exc
        else:
            raise AssertionError(name + " ran without torch")
    print("ok")
    """
)


def test_import_without_torch(rng, tmp_path):
    # torch is an optional extra: the numpy API and the README's first example work without it
    script = tmp_path / "no_torch.py"
    script.write_text(_NO_TORCH_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), LIK_SUPPRESS_NORM_WARN="1")
    res = subprocess.run([sys.executable, str(script), str(int(rng.integers(2**31)))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


def test_package_metadata():
    from importlib import metadata

    try:
        v = metadata.version("lik")
    except metadata.PackageNotFoundError:
        pytest.skip("lik is not installed (running from the source tree)")
    assert v == lik.__version__
