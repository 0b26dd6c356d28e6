"""``import lik`` then ``lik.<submodule>``: the public submodules load on
first attribute access (PEP 562 ``__getattr__``), ``dir(lik)`` lists them,
and ``import lik`` itself loads none of the lazy ones.  Each case runs in a
fresh interpreter (a submodule imported by another test would hide the
lazy path)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def _run(code: str, tmp_path, *, timeout: int = 300) -> str:
    script = tmp_path / "case.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), LIK_SUPPRESS_NORM_WARN="1")
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=timeout,
                         cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout.strip()


LAZY = ("compat", "distributed", "integrations")


def test_import_lik_loads_no_lazy_submodule(tmp_path):
    out = _run(f"""
        import sys
        import lik
        print(sorted(m for m in {LAZY!r} if "lik." + m in sys.modules))
        """, tmp_path)
    assert out == "[]"


def test_submodules_by_attribute(tmp_path):
    pytest.importorskip("torch")
    out = _run("""
        import types
        import numpy as np
        import lik

        assert callable(lik.distributed.retrieve) and callable(lik.distributed.topk_merge)
        assert callable(lik.integrations.patch_pylate) and callable(lik.integrations.unpatch_all)
        assert callable(lik.compat.maxsim) and lik.compat.__version__
        assert callable(lik.quant.quantize_int8) and callable(lik.head.maxsim_from_hidden)
        assert callable(lik.padded.pack_padded) and callable(lik.index.Index) and callable(lik.plaid.compress)
        import lik.distributed
        assert lik.distributed is __import__("sys").modules["lik.distributed"]
        for name in ("compat", "distributed", "head", "index", "integrations", "padded", "plaid", "quant"):
            assert name in dir(lik), name
            assert isinstance(getattr(lik, name), types.ModuleType), name
        assert set(lik.__all__) <= set(dir(lik))
        for name in lik.__all__:
            getattr(lik, name)
        for bad in ("nope", "_lib2", "reference"):
            assert not hasattr(lik, bad), bad
        try:
            lik.nope
        except AttributeError as exc:
            assert "module 'lik' has no attribute 'nope'" in str(exc), exc
        print("ok")
        """, tmp_path)
    assert out == "ok"


def test_distributed_retrieve_after_plain_import(tmp_path):
    """The brief's call: ``import lik`` then ``lik.distributed.retrieve`` on a
    one-rank gloo group (a file store in tmp_path: no network)."""
    pytest.importorskip("torch")
    out = _run(f"""
        import numpy as np
        import torch.distributed as dist
        import lik

        dist.init_process_group("gloo", init_method="file://{tmp_path / 'store'}", rank=0, world_size=1)
        try:
            rng = np.random.default_rng(0)
            Q = rng.standard_normal((2, 3, 8)).astype(np.float32)
            D = rng.standard_normal((5, 4, 8)).astype(np.float32)
            s, i = lik.distributed.retrieve(Q, D, 3)
            s0, i0 = lik.retrieve(Q, D, 3)
            assert np.array_equal(i, i0) and np.array_equal(s, s0), (i, i0)
        finally:
            dist.destroy_process_group()
        print("ok")
        """, tmp_path)
    assert out == "ok"


def test_patch_pylate_after_plain_import(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("pylate")
    out = _run("""
        import lik

        where = lik.integrations.patch_pylate()
        assert where, where
        lik.integrations.unpatch_pylate()
        print("ok")
        """, tmp_path, timeout=600)
    assert out == "ok"


def test_submodules_without_torch(tmp_path):
    """Without torch the numpy submodules still load lazily; a torch-only one
    raises ImportError (not AttributeError) on access."""
    out = _run("""
        import sys
        sys.modules["torch"] = None  # as if torch were not installed
        import numpy as np
        import lik

        s, i = lik.distributed.topk_merge(np.array([[[3.0, 1.0]], [[2.0, 0.0]]], np.float32),
                                          np.array([[[0, 1]], [[2, 3]]]), 2)
        assert i.tolist() == [[0, 2]], i
        assert callable(lik.integrations.patch_pylate)
        try:
            lik.head
        except ImportError:
            pass
        else:
            raise AssertionError("lik.head loaded without torch")
        print("ok")
        """, tmp_path)
    assert out == "ok"


# ---- imports go one way (docs/architecture.md) -------------------------------------------------

SRC = Path(__file__).resolve().parents[2] / "python" / "lik"


def _module_level_imports(body):
    """Import statements run at import time: the module's body, its try /
    if blocks, not function bodies (a call-time import is no circle)."""
    for n in body:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            yield n
        elif isinstance(n, ast.Try):
            for b in (n.body, n.orelse, n.finalbody, *[h.body for h in n.handlers]):
                yield from _module_level_imports(b)
        elif isinstance(n, ast.If):
            yield from _module_level_imports(n.body)
            yield from _module_level_imports(n.orelse)


def _import_graph() -> dict:
    mods = {}
    for f in SRC.rglob("*.py"):
        parts = list(f.relative_to(SRC.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
    graph = {}
    for name, (f, is_pkg) in mods.items():
        pkg = name if is_pkg else name.rpartition(".")[0]
        deps = set()
        for n in _module_level_imports(ast.parse(f.read_text()).body):
            if isinstance(n, ast.Import):
                deps.update(a.name for a in n.names)
                continue
            base = pkg.split(".")[: len(pkg.split(".")) - n.level + 1] if n.level else []
            mod = ".".join(base + ([n.module] if n.module else []))
            for a in n.names:  # `from pkg import sub` imports the submodule, `from pkg import name` pkg
                deps.add(f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def test_module_imports_go_one_way():
    """No import circle among the package's modules (distributed.py and
    _sharded_index.py had one, lik.compat and lik.compat.autograd another)."""
    graph = _import_graph()
    assert "lik._collective" in graph and "lik.distributed" in graph  # the walk found the package
    state, path = {}, []

    def visit(m):
        state[m] = 1
        path.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(d):] + [d]))
            if d not in state:
                visit(d)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
