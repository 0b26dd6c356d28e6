#!/usr/bin/env python3
"""scripts/arm_mca.py — the modelled throughput of the aarch64 kernels, without
ARM hardware: compiles src/cpu/kernels_neon.c, kernels_sve.c, quant_dotprod.c,
quant_sve.c, backward_neon.c, backward_sve.c and residual_neon.c (and, to
compare, the portable backward.c and residual.c) with the cross compiler and the flags of a Release build
(-std=gnu11 -O3: GNU C contracts a * b + c into FMAs, as the build does; and
each file's own flags, CMakeLists.txt), takes each kernel's hot loop (the
innermost loop with the most multiply-adds, FMLA, FMADD or SDOT: a tile's k
loop, the backward's gathered-row axpy, the residual norm's decode loop; for
the codec's decode, which has none, the loop with the most FADDs) from the
assembly and runs llvm-mca on it for each CPU model.  Prints, per kernel
and model, the multiply-adds of one loop iteration, its modelled cycles, the
multiply-adds per cycle, and the lanes (fp32 / fp64 elements, or int8 products
for SDOT) they update per cycle (- for SVE, whose lanes are the vector length's).
docs/kernels.md ("ARM", "Modelled throughput") has the numbers and how to read
them.

    scripts/arm_mca.py                      # aarch64-linux-gnu-gcc, llvm-mca-19
    CC=... MCA=... scripts/arm_mca.py       # another compiler / llvm-mca

Needs Debian's gcc-aarch64-linux-gnu and llvm-19 (llvm-mca-19: LLVM 18 has the
first Neoverse V2 scheduling model; LLVM 14's llvm-mca has none).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CC = os.environ.get("CC", "aarch64-linux-gnu-gcc")
MCA = os.environ.get("MCA", "llvm-mca-19")
MAC = re.compile(r"\t(fmla|fmad|fmadd|sdot)\t")
FADD = re.compile(r"\tfadd\t")
# file, its flags (CMakeLists.txt), its tiles, the CPU models (Apple M1 has no
# SVE), and the instruction a loop is chosen and counted by (default: MAC)
FILES = [
    ("kernels_neon.c", ["-fno-schedule-insns"], ["lik_tile_neon_5x16", "lik_tile_neon_5x8"],
     ["neoverse-v2", "neoverse-v1", "apple-m1"]),
    ("kernels_sve.c", ["-march=armv8.2-a+sve"], ["lik_tile_sve_10x2v"],
     ["neoverse-v2", "neoverse-v1", "a64fx"]),
    ("quant_dotprod.c", ["-march=armv8.2-a+dotprod"], ["i8_tile_sdot"],
     ["neoverse-v2", "neoverse-v1", "apple-m1"]),
    ("quant_sve.c", ["-march=armv8.2-a+sve"], ["i8_tile_sve"], ["neoverse-v2", "neoverse-v1", "a64fx"]),
    # the backward's gathered-row axpy (one function per source dtype); the
    # portable instance's, for comparison, is the one loop of its query item
    ("backward_neon.c", [], ["bw_neon_axpy_f32", "bw_neon_axpy_f16", "bw_neon_axpy_bf16",
                             "bw_neon_axpy_scaled_f16", "bw_neon_axpy_f64"],
     ["neoverse-v2", "neoverse-v1", "a64fx", "apple-m1"]),
    ("backward.c", [], ["bw_port_f32_query_item"], ["neoverse-v2", "apple-m1"]),
    # the same axpy in SVE (the sve path): one predicated vector per iteration
    ("backward_sve.c", ["-march=armv8.2-a+sve", "--param=aarch64-autovec-preference=1"],
     ["bw_sve_axpy_f32", "bw_sve_axpy_f16", "bw_sve_axpy_bf16", "bw_sve_axpy_scaled_f16",
      "bw_sve_axpy_f64"], ["neoverse-v2", "neoverse-v1", "a64fx"]),
    # the residual token norm: 8 dimensions decoded per iteration, per nbits;
    # the portable kernel's loop (one dimension) for comparison
    ("residual_neon.c", [], ["res_neon_norm_nb1", "res_neon_norm_nb2", "res_neon_norm_nb4",
                             "res_neon_norm_nb8"], ["neoverse-v2", "apple-m1"]),
    ("residual.c", [], ["res_portable_inv_norm"], ["neoverse-v2", "apple-m1"]),
    # the codec's decode (lik_codec_decompress): 8 dimensions per iteration,
    # per nbits, counted in FADDs; the portable one (lik_res_decode) to compare
    ("residual_neon.c", [], ["res_neon_decode_nb1", "res_neon_decode_nb2", "res_neon_decode_nb4",
                             "res_neon_decode_nb8"], ["neoverse-v2", "apple-m1"], FADD),
    ("residual.c", [], ["res_portable_decode"], ["neoverse-v2", "apple-m1"], FADD),
]
LANES = {"4s": 4, "2d": 2, "2s": 2}


def lanes(ins):
    """The elements one multiply-add (or FADD) instruction updates (SDOT: its
    int8 products); None for SVE (vector-length agnostic)."""
    ops = ins.split("\t")[2]
    if re.search(r"\bz\d+\.", ops):
        return None
    m = re.match(r"v\d+\.(\w+)", ops)
    if not m:
        return 1  # scalar FMADD
    return LANES.get(m.group(1), 1) * (4 if "\tsdot\t" in ins else 1)


def hot_loop(asm, fn, op):
    """The instructions of fn's innermost loop (label, straight code, branch back
    to the label) with the most op instructions (multiply-adds: MAC)."""
    # a static function GCC specialised keeps its name with a suffix (.constprop.0)
    body = re.split(rf"\n{re.escape(fn)}(?:\.\w+\.\d+)?:\n", asm, maxsplit=1)[1]
    body = body.split("\t.size", 1)[0].splitlines()
    best = []
    for i, line in enumerate(body):
        m = re.match(r"(\.L\w+):", line)
        if not m:
            continue
        for j in range(i + 1, len(body)):
            if re.match(r"\.L\w+:", body[j]):
                break
            if re.search(r"\t(b\.?\w*|cbn?z|tbn?z)\t(.*, )?" + re.escape(m.group(1)) + r"$", body[j]):
                loop = [s for s in body[i + 1:j + 1] if s.startswith("\t") and not s.startswith("\t.")]
                if sum(map(bool, map(op.search, loop))) > sum(map(bool, map(op.search, best))):
                    best = loop
                break
    return best


def main():
    print(f"{'kernel':24} {'model':12} {'MAC/iter':>8} {'cycles/iter':>11} {'MAC/cycle':>9} "
          f"{'lanes/cycle':>11}")
    for src, flags, tiles, cpus, *op in FILES:
        op = op[0] if op else MAC
        asm = subprocess.run(
            [CC, "-O3", "-std=gnu11", *flags, "-I", f"{ROOT}/include", "-I", f"{ROOT}/src", "-S", "-o", "-",
             f"{ROOT}/src/cpu/{src}"], check=True, capture_output=True, text=True).stdout
        for fn in tiles:
            loop = hot_loop(asm, fn, op)
            macs = sum(map(bool, map(op.search, loop)))
            ln = [lanes(i) for i in loop if op.search(i)]
            nlanes = None if None in ln else sum(ln)
            for cpu in cpus:
                run = subprocess.run([MCA, "-mtriple=aarch64", f"-mcpu={cpu}", "-iterations=1000"],
                                     input="\n".join(loop) + "\n", capture_output=True, text=True)
                if run.returncode:
                    sys.exit(f"arm_mca: {MCA} -mcpu={cpu} failed on {fn}'s loop:\n{run.stderr}")
                out = run.stdout
                cycles = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / 1000
                per = "-" if nlanes is None else f"{nlanes / cycles:.2f}"
                print(f"{fn:24} {cpu:12} {macs:8d} {cycles:11.2f} {macs / cycles:9.2f} {per:>11}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
