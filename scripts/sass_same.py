#!/usr/bin/env python3
"""scripts/sass_same.py — the proof of a refactor of CUDA code that cannot
run on a GPU here: every kernel's SASS in two builds of liblik.so is the same.

    scripts/sass_same.py BEFORE/liblik.so AFTER/liblik.so

Runs `cuobjdump -sass` (with nvdisasm on PATH; a toolkit without them gets
both from PyPI: `pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm`, their
bin/ folders on PATH) on both libraries, splits the
output per kernel ("Function : <mangled name>", per architecture) and compares
each kernel's instructions and encodings.  Only what a source move may change
is ignored: the fatbin headers (their file names, and the blank lines and
"Fatbin elf code:" header that open each translation unit's fatbin and
would otherwise end the kernel before it: moving kernels to other files
moves these boundaries), the hashes of the source
path in anonymous-namespace names (_GLOBAL__N__<hash>_<file>_<hash>: two
checkouts in two folders), the numbering of branch labels (.L_x_N,
renumbered per kernel in order of appearance) and the padding between
columns (cuobjdump aligns them to the longest line of the file).  Prints the
kernel count and every kernel that differs or exists in one build only;
exits 1 if any does.
"""
import re
import subprocess
import sys


def kernels(lib):
    out = subprocess.run(["cuobjdump", "-sass", lib], check=True, capture_output=True, text=True).stdout
    found, arch, name, body = {}, "", None, []

    def close():
        if name is not None:
            labels = {}
            text = "\n".join(body).rstrip()
            text = re.sub(r"\.L_x_\d+", lambda m: labels.setdefault(m.group(0), f".L{len(labels)}"), text)
            text = re.sub(r"[ \t]+", " ", text)  # cuobjdump pads columns to the file's longest line
            found[(arch, name)] = text

    out = re.sub(r"_GLOBAL__N__[0-9a-f]{8}_(\d+_\w+?_)[0-9a-f]{8}", r"_GLOBAL__N__\1", out)
    for line in out.splitlines():
        m = re.match(r"\s*arch = (\S+)", line)
        if line.startswith("Fatbin "):  # the next fatbin's header
            close()
            name, body = None, []
        elif m:
            close()
            arch, name, body = m.group(1), None, []
        elif line.strip().startswith("Function : "):
            close()
            name, body = line.strip()[len("Function : "):], []
        elif name is not None and "identifier = " not in line:
            body.append(line.rstrip())
    close()
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = kernels(sys.argv[1]), kernels(sys.argv[2])
    bad = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    for arch, name in bad:
        print(f"DIFFERS {arch} {name}" if arch and (arch, name) in a and (arch, name) in b
              else f"ONLY IN {'BEFORE' if (arch, name) in a else 'AFTER'} {arch} {name}")
    print(f"{len(a)} kernels before, {len(b)} after, {len(bad)} differ")
    sys.exit(1 if bad or not a else 0)


if __name__ == "__main__":
    main()
