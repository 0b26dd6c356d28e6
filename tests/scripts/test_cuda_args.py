"""scripts/cuda_args.sh, the one rule setup.sh and test.sh build the CUDA
backend by, on fake ``nvidia-smi`` / ``ccache`` commands."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def cmake_args(tmp_path, gpus=None, ccache=False, **env):
    """lik_cmake_args' lines with ``gpus`` (compute capabilities, "" for a
    driver without GPU; None: no nvidia-smi at all) visible."""
    bin_dir = Path(tempfile.mkdtemp(dir=tmp_path))
    if gpus is not None:
        listing = "".join(f"GPU {i}: NVIDIA\\n" for i in range(len(gpus)))
        caps = "".join(f"{c}\\n" for c in gpus)
        (bin_dir / "nvidia-smi").write_text(
            "#!/bin/sh\n"
            f'case "$1" in -L) printf "{listing}"; [ -n "{listing}" ] ;; *) printf "{caps}" ;; esac\n')
        (bin_dir / "nvidia-smi").chmod(0o755)
    if ccache:
        (bin_dir / "ccache").write_text("#!/bin/sh\n")
        (bin_dir / "ccache").chmod(0o755)
    # only the fakes and the tools the rule runs: a real ccache (or nvidia-smi)
    # of the machine running the tests stays out of sight
    for tool in ("sort",):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    run_env = {"PATH": str(bin_dir), **env}
    out = subprocess.run([shutil.which("bash"), "-c", "source scripts/cuda_args.sh && lik_cmake_args"], cwd=ROOT,
                         env=run_env, capture_output=True, text=True, check=True)
    return out.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_rule(tmp_path):
    assert cmake_args(tmp_path) == ["-DLIK_CUDA=OFF"]  # no nvidia-smi: no GPU, nvcc or not
    assert cmake_args(tmp_path, gpus=[]) == ["-DLIK_CUDA=OFF"]  # nvidia-smi -L lists nothing
    # a GPU: CMake's default (ON where it finds nvcc), for the GPU's architecture; Hopper as sm_90a
    assert cmake_args(tmp_path, gpus=["9.0"]) == ["-DLIK_CUDA_ARCHITECTURES=90a-real"]
    assert cmake_args(tmp_path, gpus=["8.0", "9.0", "8.0"]) == ["-DLIK_CUDA_ARCHITECTURES=80-real;90a-real"]
    assert cmake_args(tmp_path, gpus=["12.0"]) == ["-DLIK_CUDA_ARCHITECTURES=120-real"]
    # asked for: ON without a GPU builds the full list; "all" is the full list on a GPU machine (wheels)
    assert cmake_args(tmp_path, LIK_CUDA="ON") == ["-DLIK_CUDA=ON"]
    assert cmake_args(tmp_path, gpus=["9.0"], LIK_CUDA_ARCHITECTURES="all") == []
    assert cmake_args(tmp_path, gpus=["9.0"], LIK_CUDA="OFF") == ["-DLIK_CUDA=OFF"]
    assert cmake_args(tmp_path, LIK_CUDA="auto", LIK_CUDA_ARCHITECTURES="90a-real") == [
        "-DLIK_CUDA_ARCHITECTURES=90a-real"]  # test.sh's compile check without a GPU
    assert cmake_args(tmp_path, ccache=True) == ["-DLIK_CUDA=OFF", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
    assert cmake_args(tmp_path, gpus=["9.0"], ccache=True) == [
        "-DLIK_CUDA_ARCHITECTURES=90a-real", "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
        "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"]
