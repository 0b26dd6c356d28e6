#!/usr/bin/env python3
"""scripts/arm_mca.py — the modelled throughput of the aarch64 tiles, without
ARM hardware: compiles src/cpu/kernels_neon.c, kernels_sve.c and
quant_dotprod.c with the cross compiler and the flags of a Release build (-O3
and each file's own flags, CMakeLists.txt), takes each tile's hot loop (the
innermost loop with the most multiply-adds, FMLA or SDOT: the k loop) from the
assembly and runs llvm-mca on it for each CPU model.  Prints, per tile and
model, the multiply-adds of one loop iteration, its modelled cycles, and the
multiply-adds per cycle.  docs/kernels.md ("ARM", "Modelled throughput") has the
numbers and how to read them.

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
# file, its flags (CMakeLists.txt), its tiles, the CPU models: Apple M1 has no SVE
FILES = [
    ("kernels_neon.c", ["-fno-schedule-insns"], ["lik_tile_neon_5x16", "lik_tile_neon_5x8"],
     ["neoverse-v2", "neoverse-v1", "apple-m1"]),
    ("kernels_sve.c", ["-march=armv8.2-a+sve"], ["lik_tile_sve_10x2v"],
     ["neoverse-v2", "neoverse-v1", "a64fx"]),
    ("quant_dotprod.c", ["-march=armv8.2-a+dotprod"], ["i8_tile_sdot"],
     ["neoverse-v2", "neoverse-v1", "apple-m1"]),
]
MAC = re.compile(r"\t(fmla|fmad|sdot)\t")


def hot_loop(asm, fn):
    """The instructions of fn's innermost loop (label, straight code, branch back
    to the label) with the most multiply-adds."""
    body = asm.split(f"\n{fn}:\n", 1)[1].split("\t.size", 1)[0].splitlines()
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
                if sum(map(bool, map(MAC.search, loop))) > sum(map(bool, map(MAC.search, best))):
                    best = loop
                break
    return best


def main():
    print(f"{'tile':22} {'model':12} {'MAC/iter':>8} {'cycles/iter':>11} {'MAC/cycle':>9}")
    for src, flags, tiles, cpus in FILES:
        asm = subprocess.run(
            [CC, "-O3", "-std=c11", *flags, "-I", f"{ROOT}/include", "-I", f"{ROOT}/src", "-S", "-o", "-",
             f"{ROOT}/src/cpu/{src}"], check=True, capture_output=True, text=True).stdout
        for fn in tiles:
            loop = hot_loop(asm, fn)
            macs = sum(map(bool, map(MAC.search, loop)))
            for cpu in cpus:
                run = subprocess.run([MCA, "-mtriple=aarch64", f"-mcpu={cpu}", "-iterations=1000"],
                                     input="\n".join(loop) + "\n", capture_output=True, text=True)
                if run.returncode:
                    sys.exit(f"arm_mca: {MCA} -mcpu={cpu} failed on {fn}'s loop:\n{run.stderr}")
                out = run.stdout
                cycles = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / 1000
                print(f"{fn:22} {cpu:12} {macs:8d} {cycles:11.2f} {macs / cycles:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
