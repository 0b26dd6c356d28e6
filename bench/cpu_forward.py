"""CPU MaxSim forward, side by side in one run (issue "lik 0.1", section 8).

Peers, each on the same inputs:
  lik          lik.maxsim (fused C kernel, fp32 accumulation)
  eager        PyLate's formula in torch eager: einsum -> max -> sum, fp32
  matmul       a torch matmul path: one GEMM per query, [Nd*Ld, Lq] fp32 tile
  maxsim-cpu   maxsim_cpu 0.1.0 from PyPI (fp32 only, one query per call)

Every (peer, shape, dtype) runs in a fresh subprocess so that its peak RSS is
its own: "extra MB" is the peak RSS (VmHWM, reset once the inputs exist)
minus the RSS at that point, i.e. the memory the call itself needs.
Also measures this machine's fp32 FMA peak (bench/fma_peak.c) to report
%-of-peak. Usage:  python bench/cpu_forward.py [--reps N] [--threads T]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent

SHAPES = [  # name, Nq, Nd, Lq, Ld, d
    ("rerank-300", 1, 1000, 32, 300, 128),
    ("rerank-1024", 1, 1000, 32, 1024, 128),
    ("in-batch-32", 32, 32, 32, 300, 128),
    ("edge-d48", 1, 1000, 32, 300, 48),
    ("edge-d64", 1, 1000, 32, 300, 64),
    ("edge-d96", 1, 1000, 32, 300, 96),
]
PEERS = ["lik", "eager", "matmul", "maxsim-cpu"]


def vm_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def inputs(nq, nd, lq, ld, d, dtype):
    import numpy as np

    rng = np.random.default_rng(0)
    q = rng.standard_normal((nq, lq, d), dtype=np.float32)
    D = rng.standard_normal((nd, ld, d), dtype=np.float32)
    q /= np.linalg.norm(q, axis=-1, keepdims=True)  # maxsim-cpu expects unit vectors
    D /= np.linalg.norm(D, axis=-1, keepdims=True)
    return q.astype(dtype), D.astype(dtype)


def make_runner(peer, q, D):
    import numpy as np

    if peer == "lik":
        import lik

        return lambda: lik.maxsim(q, D)
    if peer == "maxsim-cpu":
        import maxsim_cpu

        if q.dtype != np.float32:
            return None  # fp32 only
        return lambda: np.stack([maxsim_cpu.maxsim_scores(qi, D) for qi in q])
    import torch

    tq, tD = torch.from_numpy(q), torch.from_numpy(D)
    if peer == "eager":
        def eager():
            s = torch.einsum("ild,jtd->ijlt", tq.float(), tD.float())
            return s.max(-1).values.sum(-1)

        return eager

    def matmul():  # [Nd*Ld, d] @ [d, Lq] per query, then max over Ld, sum over Lq
        flat = tD.float().reshape(-1, tD.shape[-1])
        out = []
        for qi in tq.float():
            s = (flat @ qi.T).view(tD.shape[0], tD.shape[1], -1)
            out.append(s.max(1).values.sum(-1))
        return torch.stack(out)

    return matmul


def one(peer, shape, dtype, reps, threads):
    import numpy as np

    os.environ["LIK_NUM_THREADS"] = str(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if peer in ("eager", "matmul"):
        import torch

        torch.set_num_threads(threads)
    _, nq, nd, lq, ld, d = shape
    q, D = inputs(nq, nd, lq, ld, d, np.dtype(dtype))
    fn = make_runner(peer, q, D)
    if fn is None:
        return None
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    base = vm_kib("VmRSS")
    out = np.asarray(fn())
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"ms": 1e3 * times[len(times) // 2], "extra_mb": (vm_kib("VmHWM") - base) / 1024,
            "inputs_mb": (q.nbytes + D.nbytes) / 2**20, "checksum": float(out.sum())}


def fma_peak(threads):
    with tempfile.TemporaryDirectory() as tmp:
        peaks = {}
        for name, flags in (("avx2", ["-mavx2", "-mfma"]), ("avx512", ["-mavx512f", "-DWIDTH=16"])):
            exe = os.path.join(tmp, name)
            try:
                subprocess.run(["cc", "-O3", "-pthread", *flags, str(HERE / "fma_peak.c"), "-o", exe],
                               check=True, capture_output=True)
                peaks[name] = max(float(subprocess.run([exe, str(threads)], capture_output=True,
                                                       text=True, check=True).stdout) for _ in range(3))
            except (subprocess.CalledProcessError, ValueError):
                pass  # the compiler or the CPU lacks this ISA
        return peaks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--one", nargs=3, metavar=("PEER", "SHAPE", "DTYPE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        peer, name, dtype = args.one
        shape = next(s for s in SHAPES if s[0] == name)
        print(json.dumps(one(peer, shape, dtype, args.reps, args.threads)))
        return

    import lik

    peaks = fma_peak(args.threads)
    peak = max(peaks.values())
    print(f"# lik {lik.__version__}, CPU path {lik.cpu_isa()}, {args.threads} threads, "
          f"median of {args.reps}; fp32 FMA peak (GFLOP/s): "
          + ", ".join(f"{k} {v:.1f}" for k, v in peaks.items()))
    print("| shape | dtype | lik ms | GFLOP/s | % peak | eager ms | matmul ms | maxsim-cpu ms "
          "| vs eager | vs matmul | vs maxsim-cpu | extra MB lik / eager / matmul / maxsim-cpu | inputs MB |")
    print("|" + "---|" * 13)
    for shape in SHAPES:
        name, nq, nd, lq, ld, d = shape
        flop = 2.0 * nq * nd * lq * ld * d
        for dtype in ("float32", "float16"):
            res = {}
            for peer in PEERS:
                p = subprocess.run([sys.executable, __file__, "--one", peer, name, dtype,
                                    "--reps", str(args.reps), "--threads", str(args.threads)],
                                   capture_output=True, text=True)
                res[peer] = json.loads(p.stdout) if p.returncode == 0 else None
                if p.returncode:
                    print(f"# {peer} {name} {dtype} failed: {p.stderr.strip()[-300:]}", file=sys.stderr)
            lk = res["lik"]
            gf = flop / (lk["ms"] * 1e-3) * 1e-9

            def ms(p):
                return f"{res[p]['ms']:.2f}" if res[p] else "—"

            def ratio(p):
                return f"{res[p]['ms'] / lk['ms']:.1f}×" if res[p] else "—"

            mem = " / ".join(f"{res[p]['extra_mb']:.0f}" if res[p] else "—" for p in PEERS)
            print(f"| {name} ({nq}×{nd}, {lq}×{ld}, d={d}) | {dtype} | {lk['ms']:.2f} | {gf:.0f} | "
                  f"{100 * gf / peak:.0f}% | {ms('eager')} | {ms('matmul')} | {ms('maxsim-cpu')} | "
                  f"{ratio('eager')} | {ratio('matmul')} | {ratio('maxsim-cpu')} | {mem} | "
                  f"{lk['inputs_mb']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
