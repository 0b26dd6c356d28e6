"""Runs a function on N gloo ranks (CPU processes) for the distributed tests.

Workers are forked from a forkserver that has imported torch once (fast and
free of the pytest process's threads); the process group meets through a
file (no port to pick).  Every wait is bounded: a hang fails the test with
the ranks' state instead of blocking CI.
"""

from __future__ import annotations

import datetime
import os
import queue
import tempfile
import time
import traceback

import torch.multiprocessing as mp

_CTX = None


def _context():
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
        _CTX.set_forkserver_preload(["numpy", "torch", "torch.distributed", "torch.nn.parallel", "torch._dynamo", "lik.distributed"])
    return _CTX


def _entry(fn, rank, world, init, env, results, args):
    try:
        os.environ.update(env)
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        import lik

        lik.set_num_threads(1)
        out = fn(rank, world, *args)
        dist.barrier()
        dist.destroy_process_group()
        results.put((rank, True, out))
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put((rank, False, traceback.format_exc()))


def raised(fn):
    """What fn() raised, as (type name, message): a value a rank can return to
    the parent for comparison; None when fn returned."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - compared by the parent
        return type(exc).__name__, str(exc)
    return None


def run_ranks(fn, world: int, *args, timeout: float = 120.0) -> list:
    """fn(rank, world, *args) on `world` gloo ranks; returns the ranks' return
    values in rank order.  Raises AssertionError with every failing rank's
    traceback, or on timeout."""
    ctx = _context()
    env = {k: v for k, v in os.environ.items() if k.startswith("LIK_")}
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + os.path.join(tmp, "rendezvous")
        results = ctx.Queue()
        procs = [ctx.Process(target=_entry, args=(fn, r, world, init, env, results, args), daemon=True)
                 for r in range(world)]
        for p in procs:
            p.start()
        got, deadline = {}, time.monotonic() + timeout
        try:
            while len(got) < world:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"distributed test timed out after {timeout:.0f} s; ranks done: {sorted(got)}")
                try:
                    rank, ok, out = results.get(timeout=min(left, 1.0))
                    got[rank] = (ok, out)
                except queue.Empty:
                    dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in got]
                    if dead:
                        raise AssertionError(f"rank(s) {dead} died (exit codes {[procs[r].exitcode for r in dead]})")
            for p in procs:
                p.join(timeout=max(deadline - time.monotonic(), 1.0))
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join(5)
    failed = {r: out for r, (ok, out) in got.items() if not ok}
    if failed:
        raise AssertionError("\n".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(failed.items())))
    return [got[r][1] for r in range(world)]
